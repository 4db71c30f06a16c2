import { z } from 'zod';
import { fieldErrors, type FieldError } from '../errors.js';
import { instantDate, parseInstant, timeRangeMessage } from '../time.js';

/**
 * Field schemas shared by the asset and location bodies. Wrong JSON types fail as zod
 * `invalid_type` (mapped to `bad_request` naming the field); rule violations fail as the
 * contract's codes through validateBody.
 */

// C0 controls other than tab, newline and carriage return, and DEL.
const FORBIDDEN_CONTROLS = /[\x00-\x08\x0B\x0C\x0E-\x1F\x7F]/;
/** The same rule as the pattern the OpenAPI document shows for a tag value (docs/api.md "What text the service accepts"). */
export const TEXT_PATTERN = /^[^\x00-\x08\x0B\x0C\x0E-\x1F\x7F]*$/;

export const EXTERNAL_KEY_PATTERN = /^[A-Za-z0-9-]+$/;

/** No C0 control at all, and no DEL: identifiers a device or a reader sends (docs/scan-ingestion.md). */
export const NO_CONTROLS_PATTERN = /^[^\x00-\x1F\x7F]*$/;

/** A length-bearing free-text field: empty → too_short, over → too_long, controls → invalid_value. */
export function text(field: string, maxLength: number) {
  return z
    .string()
    .min(1)
    .max(maxLength)
    .meta({ pattern: TEXT_PATTERN.source })
    .refine((v) => !FORBIDDEN_CONTROLS.test(v), {
      message: `${field} must not contain control characters other than tab, newline and carriage return`,
    });
}

/** An identifier of a device or a submission: 1..maxLength, no control character (not even tab) → invalid_value. */
export function identifier(field: string, maxLength: number) {
  return z
    .string()
    .min(1)
    .max(maxLength)
    .meta({ pattern: NO_CONTROLS_PATTERN.source })
    .refine((v) => NO_CONTROLS_PATTERN.test(v), { message: `${field} must not contain control characters` });
}

export const name = text('name', 255);
export const description = text('description', 1024);

/** external_key: blank → too_short; pattern → invalid_value; 1..255. */
export function externalKey(field = 'external_key') {
  return z
    .string()
    .max(255)
    .meta({ pattern: EXTERNAL_KEY_PATTERN.source, minLength: 1 })
    .superRefine((value, ctx) => {
      if (value.trim().length === 0) {
        ctx.addIssue({
          code: 'custom',
          message: `${field} must be at least 1 character long`,
          params: { code: 'too_short', params: { min_length: 1 } },
        });
      } else if (!EXTERNAL_KEY_PATTERN.test(value)) {
        ctx.addIssue({ code: 'custom', message: `${field} must match ^[A-Za-z0-9-]+$` });
      }
    });
}

/**
 * An RFC 3339 timestamp string of the time range, parsed to a Date; any other string →
 * invalid_value (docs/api.md, "Time range").
 */
export function timestamp(field: string) {
  return z.string().meta({ format: 'date-time' }).transform((value, ctx) => {
    const instant = parseInstant(value);
    if (instant.ok) return instantDate(instant);
    ctx.addIssue({ code: 'custom', message: instant.problem === 'range' ? timeRangeMessage(field) : `${field} must be an RFC 3339 timestamp` });
    return z.NEVER;
  });
}

/** metadata: any JSON object; a scalar, array, boolean or null is invalid_value (not bad_request). */
export const metadata = z
  .unknown()
  .superRefine((value, ctx) => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      ctx.addIssue({ code: 'custom', message: 'metadata must be a JSON object' });
    }
  })
  .meta({ type: 'object', additionalProperties: true, description: 'Any JSON object, stored opaquely; PATCH replaces it whole.' }) as unknown as z.ZodType<
  Record<string, unknown>
>;

/**
 * Id fields in bodies: integers 1..2147483647 (too_large with params.max above). The range comes
 * before `int()`, whose own safe-integer bound would otherwise be the first too_large reported
 * for an id past 2^53 (params.max 9007199254740991 instead of the contract's 2147483647).
 */
export const bodyId = z
  .number()
  .min(1)
  .max(2_147_483_647)
  .int()
  // docs/api.md "Ids": wire type int64; body id fields carry no maximum in the document (it leaves
  // the maximum out of every int64 integer), the server checks them.
  .meta({ format: 'int64' });

/**
 * The fields of the views (responses), as the document describes them: ids int64 (the runtime
 * gives out 1..2147483647; widening would be additive, so no maximum), timestamps RFC 3339, keys
 * in their pattern. These schemas type the views and feed the OpenAPI document; they never parse.
 */
export const viewFields = {
  id: z.number().int().min(1).meta({ format: 'int64' }),
  timestamp: z.string().meta({ format: 'date-time' }),
  externalKey: z.string().min(1).max(255).meta({ pattern: EXTERNAL_KEY_PATTERN.source }),
} as const;

/** Currently effective: (valid_from null or <= now) and (valid_to null or > now). */
export function isEffective(validFrom: Date | null, validTo: Date | null, now = new Date()): boolean {
  return (validFrom === null || validFrom <= now) && (validTo === null || validTo > now);
}

/**
 * docs/api.md "Currently effective": when both are set, valid_to must be later than valid_from
 * (`invalid_value` on valid_to). Bodies check it on their own values (`refineValidWindow`); PATCH
 * decisions check it on the merged values, the stored ones where the body leaves them out.
 */
export function validWindowError(validFrom: Date | string | null, validTo: Date | string | null): FieldError | null {
  if (validFrom === null || validTo === null || new Date(validTo).getTime() > new Date(validFrom).getTime()) return null;
  return fieldErrors.invalidValue('valid_to', 'valid_to must be later than valid_from');
}

/** The same rule as a refinement of a body schema, reported with the body's other field errors. */
export function refineValidWindow(body: { valid_from?: Date | null; valid_to?: Date | null }, ctx: z.RefinementCtx): void {
  // Only two parsed timestamps compare; a field that failed its own check has its own error.
  if (!(body.valid_from instanceof Date) || !(body.valid_to instanceof Date)) return;
  const error = validWindowError(body.valid_from, body.valid_to);
  if (error) ctx.addIssue({ code: 'custom', path: [error.field], message: error.message });
}
