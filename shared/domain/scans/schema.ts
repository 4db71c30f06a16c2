import { z } from 'zod';
import { bodyId, externalKey, identifier } from '../fields.js';
import { instantMicros, parseInstant, timeRangeMessage } from '../../time.js';
import type { LocationRef } from './decider.js';
import { tagTypeField, tagValueField } from '../tags/schema.js';

/**
 * The handheld submission body (docs/scan-ingestion.md "Handheld submissions"), decoded once: each
 * read's `observed_at` to microseconds since the epoch, the location to one LocationRef.
 */

/** How far ahead of the server clock an observed time may be. */
export const MAX_CLOCK_SKEW_MS = 5 * 60_000;
export const MAX_READS = 1000;

const observedAt = z
  .string()
  .meta({ format: 'date-time', description: 'RFC 3339; microseconds are kept. Default: the time of receipt.' })
  .transform((value, ctx) => {
    const instant = parseInstant(value);
    if (!instant.ok) {
      ctx.addIssue({ code: 'custom', message: instant.problem === 'range' ? timeRangeMessage('observed_at') : 'observed_at must be an RFC 3339 timestamp' });
      return z.NEVER;
    }
    if (instant.ms > Date.now() + MAX_CLOCK_SKEW_MS) {
      ctx.addIssue({ code: 'custom', message: 'observed_at must not be more than 5 minutes ahead of the server clock' });
      return z.NEVER;
    }
    return instantMicros(instant);
  });

export const handheldReadSchema = z.strictObject({
  tag_type: tagTypeField,
  value: tagValueField,
  observed_at: observedAt.optional(),
  rssi: z.number().optional(),
});

const tagRef = z.strictObject({ tag_type: tagTypeField, value: tagValueField });

export const handheldLocationSchema = z
  .strictObject({
    external_key: externalKey('location.external_key').optional(),
    id: bodyId.optional(),
    tag: tagRef.optional(),
  })
  .superRefine((location, ctx) => {
    const given = (['external_key', 'id', 'tag'] as const).filter((k) => location[k] !== undefined);
    if (given.length > 1) {
      for (const key of given) {
        ctx.addIssue({ code: 'custom', path: [key], message: `Supply only one of ${given.map((k) => `location.${k}`).join(' or ')}`, params: { code: 'ambiguous_fields' } });
      }
    } else if (given.length === 0) {
      ctx.addIssue({ code: 'custom', message: 'location must have one of external_key, id or tag', params: { code: 'required' } });
    }
  })
  // The document states what the refinement checks: the object is closed, so one property is one
  // form (found by Schemathesis, which sent `{}` as schema-valid).
  .meta({ minProperties: 1, maxProperties: 1, description: 'Exactly one of external_key, id or tag.' })
  // Runs once the refinement passed, so exactly one form is given: the one value handlers receive.
  .transform((location): LocationRef => {
    if (location.id !== undefined) return { by: 'id', id: location.id };
    if (location.tag !== undefined) return { by: 'tag', tag: location.tag };
    return { by: 'external_key', externalKey: location.external_key! };
  });

export const handheldSubmissionSchema = z.strictObject({
  submission_id: identifier('submission_id', 255),
  device_id: identifier('device_id', 255),
  location: handheldLocationSchema,
  reads: z.array(handheldReadSchema).min(1).max(MAX_READS),
});

export type HandheldSubmissionBody = z.output<typeof handheldSubmissionSchema>;

export const HANDHELD_FIELD_ORDER = ['submission_id', 'device_id', 'location', 'reads'] as const;

/** The 202 answer. */
export const handheldAnswerSchema = z.object({
  data: z.object({
    accepted: z.number().int().min(0).describe('Reads that placed an asset.'),
    unknown: z.number().int().min(0).describe('Reads that placed nothing (unknown or retired tag, a location tag).'),
    duplicate: z.boolean().describe('This submission_id was already received: nothing changed.'),
  }),
});
