import type { z } from 'zod';
import { BadRequestError, MAX_ID, ValidationFailed, fieldErrors, type FieldError } from '../errors.js';
import { decodeJson, type JsonTextProblem } from '../json/decode.js';
import { instantDate, parseInstant, timeRangeMessage, type Instant } from '../time.js';

/**
 * Request decoding and validation shared by every route: path ids, query strings and JSON bodies,
 * mapped onto the contract's error types and field codes.
 */

export function isFieldError(value: unknown): value is FieldError {
  return typeof value === 'object' && value !== null && 'code' in value && 'field' in value && 'message' in value;
}

/** An integer id of the wire (path, query or body): 1..2147483647. */
/**
 * Path parameters that are text, not a surrogate id: an alert's id `<rule>-<asset>-<n>` (docs/api.md
 * "Alerts"). Passed to the handler as sent; one that names nothing, malformed or not, is its 404.
 */
export const TEXT_PATH_PARAMS: ReadonlySet<string> = new Set(['alert_id']);

/** A path parameter: a text one as sent, else an id 1..2147483647. */
export function parsePathParam(field: string, raw: string): number | string | FieldError {
  return TEXT_PATH_PARAMS.has(field) ? raw : parseId(field, raw);
}

export function parseId(field: string, raw: string): number | FieldError {
  if (!/^[+-]?\d+$/.test(raw.trim()) || raw.trim() !== raw) {
    return fieldErrors.invalidValue(field, `${field} must be an integer between 1 and ${MAX_ID}`);
  }
  const value = BigInt(raw);
  if (value > BigInt(MAX_ID)) return fieldErrors.tooLarge(field, MAX_ID);
  if (value < 1n) return fieldErrors.tooSmall(field, 1);
  return Number(value);
}

/** A query parameter: how to parse one raw value, and how to describe it in OpenAPI. */
export interface QueryParam<T = unknown> {
  parse(raw: string, field: string): T | FieldError;
  repeatable?: boolean;
  /** JSON Schema of one value, for the OpenAPI document. */
  jsonSchema: Record<string, unknown>;
  description?: string;
  /** Absent is refused with `required` (and the document marks it required). */
  required?: boolean;
}

export type QuerySpec = Record<string, QueryParam>;

type ParsedValue<P> = P extends QueryParam<infer T> ? (P extends { repeatable: true } ? T[] : T) : never;

export type ParsedQuery<S extends QuerySpec> = {
  [K in keyof S as S[K] extends { required: true } ? K : never]-?: ParsedValue<S[K]>;
} & {
  [K in keyof S as S[K] extends { required: true } ? never : K]?: ParsedValue<S[K]>;
};

export const queryParams = {
  int(options: { min?: number; max?: number } = {}): QueryParam<number> {
    const min = options.min ?? 1;
    const max = options.max ?? MAX_ID;
    return {
      jsonSchema: { type: 'integer', minimum: min, maximum: max },
      parse(raw, field) {
        if (!/^[+-]?\d+$/.test(raw)) return fieldErrors.invalidValue(field, `${field} must be an integer`);
        const value = BigInt(raw);
        if (value > BigInt(max)) return fieldErrors.tooLarge(field, max);
        if (value < BigInt(min)) return fieldErrors.tooSmall(field, min);
        return Number(value);
      },
    };
  },
  /** A surrogate id: wire type int64, runtime 1..2147483647 (the document shows that maximum, docs/api.md "Ids"). */
  id(): QueryParam<number> {
    const int = queryParams.int({ min: 1, max: MAX_ID });
    return { ...int, jsonSchema: { ...int.jsonSchema, format: 'int64' } };
  },
  ids(): QueryParam<number> {
    return { ...queryParams.id(), repeatable: true };
  },
  bool(): QueryParam<boolean> {
    return {
      jsonSchema: { type: 'boolean' },
      parse(raw, field) {
        if (raw === 'true') return true;
        if (raw === 'false') return false;
        return fieldErrors.invalidValue(field, `${field} must be true or false`, { allowed_values: ['true', 'false'] });
      },
    };
  },
  /** One of a fixed set of words (`invalid_value` with `params.allowed_values` otherwise). */
  oneOf<const T extends string>(values: readonly T[]): QueryParam<T> {
    return {
      jsonSchema: { type: 'string', enum: [...values] },
      parse(raw, field) {
        if ((values as readonly string[]).includes(raw)) return raw as T;
        return fieldErrors.invalidValue(field, `${field} must be one of ${values.join(', ')}`, { allowed_values: [...values] });
      },
    };
  },
  externalKey(options: { repeatable?: boolean } = {}): QueryParam<string> {
    return {
      repeatable: options.repeatable,
      jsonSchema: { type: 'string', pattern: '^[A-Za-z0-9-]+$', minLength: 1, maxLength: 255 },
      parse(raw, field) {
        if (raw.trim().length === 0) return fieldErrors.tooShort(field, 1);
        if (raw.length > 255) return fieldErrors.tooLong(field, 255);
        if (!/^[A-Za-z0-9-]+$/.test(raw)) {
          return fieldErrors.invalidValue(field, `${field} must match ^[A-Za-z0-9-]+$`);
        }
        return raw;
      },
    };
  },
  text(options: { maxLength?: number } = {}): QueryParam<string> {
    const maxLength = options.maxLength ?? 255;
    return {
      jsonSchema: { type: 'string', maxLength },
      parse(raw, field) {
        if (raw.length > maxLength) return fieldErrors.tooLong(field, maxLength);
        return raw;
      },
    };
  },
  /** An RFC 3339 instant to the millisecond (the precision of the master data's timestamps). */
  timestamp(): QueryParam<Date> {
    const instant = queryParams.instant();
    return {
      jsonSchema: instant.jsonSchema,
      parse(raw, field) {
        const parsed = instant.parse(raw, field);
        return isFieldError(parsed) ? parsed : instantDate(parsed);
      },
    };
  },
  /** An RFC 3339 instant to the microsecond (the precision of observed times). */
  instant(): QueryParam<Instant> {
    return {
      jsonSchema: { type: 'string', format: 'date-time' },
      parse(raw, field) {
        const instant = parseInstant(raw);
        if (instant.ok) return { ms: instant.ms, microsOfMs: instant.microsOfMs };
        if (instant.problem === 'range') return fieldErrors.invalidValue(field, timeRangeMessage(field));
        return fieldErrors.invalidValue(field, `Invalid '${field}' timestamp; expected RFC 3339`);
      },
    };
  },
  /** `sort=-updated_at,name`; returns [{field, descending}]. */
  sort(fields: readonly string[]): QueryParam<Array<{ field: string; descending: boolean }>> {
    const item = `-?(?:${fields.map((f) => f.replace(/[^A-Za-z0-9_]/g, '\\$&')).join('|')})`;
    return {
      jsonSchema: { type: 'string', pattern: `^${item}(?:,${item})*$`, description: `comma list of ${fields.join(', ')}; prefix - for descending` },
      parse(raw, field) {
        const parts = raw.split(',');
        const result: Array<{ field: string; descending: boolean }> = [];
        for (const part of parts) {
          const descending = part.startsWith('-');
          const name = descending ? part.slice(1) : part;
          if (!fields.includes(name)) return fieldErrors.invalidValue(field, `unknown sort field: ${name}`);
          result.push({ field: name, descending });
        }
        return result;
      },
    };
  },
};

/** The text rules for a query value (docs/api.md "What text the service accepts"), or null when it keeps them. */
function queryTextError(field: string, value: string): FieldError | null {
  if (!value.isWellFormed()) return fieldErrors.malformedText(field);
  if (value.includes('\u0000')) return fieldErrors.nulCharacter(field);
  return null;
}

/** Parses a query string object (repeated keys arrive as arrays). Throws ValidationFailed with every problem. */
export function parseQuery<S extends QuerySpec>(raw: Record<string, string | string[] | undefined>, spec: S): ParsedQuery<S> {
  const errors: FieldError[] = [];
  // Keys are the client's: only the entries of `spec` itself count (never `constructor` or `__proto__`
  // found on a prototype), and the result has no prototype to write through.
  const result: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const [key, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    const param = Object.hasOwn(spec, key) ? spec[key] : undefined;
    if (!param) {
      errors.push(fieldErrors.unknownField(key));
      continue;
    }
    const values = Array.isArray(value) ? value : [value];
    if (values.length > 1 && !param.repeatable) {
      errors.push(fieldErrors.invalidValue(key, `${key} must not be repeated`));
      continue;
    }
    const parsed: unknown[] = [];
    for (const one of values) {
      const outcome = queryTextError(key, one) ?? param.parse(one, key);
      if (isFieldError(outcome)) {
        errors.push(outcome);
        break;
      }
      parsed.push(outcome);
    }
    if (parsed.length === values.length) result[key] = param.repeatable ? parsed : parsed[0];
  }
  for (const [key, param] of Object.entries(spec)) {
    if (param.required && raw[key] === undefined) errors.push(fieldErrors.required(key));
  }
  if (errors.length > 0) throw new ValidationFailed(errors);
  return result as ParsedQuery<S>;
}

// JSON text is UTF-8 (RFC 8259): bytes that are not are refused, never replaced by U+FFFD.
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export interface DecodedBody {
  value: Record<string, unknown>;
  /** Fields that break the text rules (shared/json/decode.ts), one entry each, in body order. */
  textErrors: FieldError[];
}

function textError(field: string, problem: JsonTextProblem): FieldError {
  switch (problem.kind) {
    case 'malformed_text':
      return fieldErrors.malformedText(field);
    case 'nul':
      return fieldErrors.nulCharacter(field);
    case 'inexact_number':
      return fieldErrors.inexactNumber(field, problem.number);
    case 'too_deep':
      return fieldErrors.tooDeep(field, problem.maxNesting);
  }
}

/**
 * Decodes a JSON body: bytes that are not UTF-8, bad JSON and a wrong top-level type are
 * `bad_request`; the text rules are checked in the same pass and reported with the schema's
 * errors by validateBody.
 */
export function decodeJsonObject(body: Buffer | undefined, method: string): DecodedBody {
  let decoded;
  try {
    decoded = decodeJson(UTF8.decode(body ?? new Uint8Array()));
  } catch {
    throw new BadRequestError('Request body is not valid JSON');
  }
  const value = decoded.value;
  if (value === null && method === 'PATCH') throw new BadRequestError('Request body must be a JSON object (RFC 7396)');
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new BadRequestError('Request body could not be decoded as the expected type');
  }
  return { value: value as Record<string, unknown>, textErrors: [...decoded.problems].map(([field, problem]) => textError(field, problem)) };
}

function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out;
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let current: unknown = input;
  for (const part of path) {
    if (current === null || typeof current !== 'object' || !Object.hasOwn(current, part)) return undefined;
    current = (current as Record<PropertyKey, unknown>)[part];
  }
  return current;
}

/** The body field a field error is about (`tags[0].value` → `tags`). */
function topField(field: string): string {
  return field.split(/[.[]/)[0]!;
}

/**
 * Validates a decoded body with a zod schema. A JSON value of the wrong type is `bad_request`
 * naming the field; everything else is one `validation_error` with an entry per field, ordered
 * by the schema's field order (unknown keys last, in body order). `textErrors` (decodeJsonObject)
 * count for the fields the schema found nothing wrong with: a field's own rule speaks first
 * (an id of 1e20 stays `too_large`).
 * A refinement can choose its code with `params: { code, params }` on a custom issue.
 */
export function validateBody<S extends z.ZodType>(
  schema: S,
  input: Record<string, unknown>,
  order: readonly string[] = [],
  textErrors: readonly FieldError[] = [],
): z.output<S> {
  const parsed = schema.safeParse(input);
  if (parsed.success && textErrors.length === 0) return parsed.data;
  const errors: FieldError[] = [];
  for (const issue of parsed.success ? [] : parsed.error.issues) {
    const field = formatPath(issue.path);
    switch (issue.code) {
      case 'unrecognized_keys':
        for (const key of issue.keys) errors.push(fieldErrors.unknownField(formatPath([...issue.path, key])));
        break;
      case 'invalid_type': {
        const value = valueAt(input, issue.path);
        if (value === undefined) errors.push(fieldErrors.required(field));
        else if (value === null) errors.push(fieldErrors.invalidValue(field, `${field} must not be null`));
        else throw new BadRequestError(`Body field "${field}" could not be decoded as the expected type`);
        break;
      }
      case 'too_small':
        if (issue.origin === 'string') errors.push(fieldErrors.tooShort(field, Number(issue.minimum)));
        else if (issue.origin === 'array') errors.push({ ...fieldErrors.tooShort(field, Number(issue.minimum)), message: `${field} must have at least ${issue.minimum} items` });
        else errors.push(fieldErrors.tooSmall(field, Number(issue.minimum)));
        break;
      case 'too_big':
        if (issue.origin === 'string') errors.push(fieldErrors.tooLong(field, Number(issue.maximum)));
        else if (issue.origin === 'array') errors.push({ field, code: 'too_long', message: `${field} must have at most ${issue.maximum} items`, params: { max_length: Number(issue.maximum) } });
        else errors.push(fieldErrors.tooLarge(field, Number(issue.maximum)));
        break;
      case 'invalid_value':
        errors.push(fieldErrors.invalidValue(field, `${field} must be one of ${issue.values.map(String).join(', ')}`, { allowed_values: issue.values }));
        break;
      case 'custom': {
        const params = (issue.params ?? {}) as { code?: FieldError['code']; params?: Record<string, unknown> };
        errors.push({ field, code: params.code ?? 'invalid_value', message: issue.message, ...(params.params ? { params: params.params } : {}) });
        break;
      }
      default:
        errors.push(fieldErrors.invalidValue(field, issue.message || `${field} is invalid`));
    }
  }
  const flagged = new Set(errors.map((e) => topField(e.field)));
  errors.push(...textErrors.filter((e) => !flagged.has(e.field)));
  const bodyOrder = Object.keys(input);
  const rank = (field: string) => {
    const top = topField(field);
    const i = order.indexOf(top);
    return i >= 0 ? i : order.length + Math.max(bodyOrder.indexOf(top), 0);
  };
  errors.sort((a, b) => rank(a.field) - rank(b.field) || (a.field < b.field ? -1 : a.field > b.field ? 1 : 0));
  throw new ValidationFailed(dedupe(errors));
}

function dedupe(errors: FieldError[]): FieldError[] {
  const seen = new Set<string>();
  return errors.filter((e) => {
    const key = `${e.field}\u0000${e.code}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
