import fc from 'fast-check';
import { z } from 'zod';

/**
 * fast-check arbitraries derived from zod 4 schemas, through their JSON Schema
 * (`z.toJSONSchema(schema, { io: 'input' })`): whatever the schema declares (types, required and
 * optional keys, lengths, bounds, patterns, `format: date-time`, enums in `.meta()`) shapes the
 * values, so a new field or rule is generated without touching this file. Generation is biased to
 * the edges (boundary years and offsets, fractional seconds past the microsecond, impossible dates,
 * ±0, huge numbers, max lengths and one past them, control characters, lone surrogates); values the
 * schema refuses are expected, and the caller keeps what the edge accepts. Refinements that the
 * JSON Schema cannot show (superRefine) are left to the caller's safeParse.
 */

export interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  prefixItems?: JsonSchema[];
  minItems?: number;
  maxItems?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  enum?: unknown[];
  const?: unknown;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
}

/** The JSON Schema of what a zod schema takes in (a transform's input side; refinements dropped). */
export function inputJsonSchema(schema: z.ZodType): JsonSchema {
  return z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
}

/** An arbitrary of JSON values (as JSON.parse would give them) shaped by a zod schema. */
export function arbitraryOf(schema: z.ZodType): fc.Arbitrary<unknown> {
  return fromJsonSchema(inputJsonSchema(schema));
}

// ---------------------------------------------------------------------------------------------
// Edge values

const pad = (n: number, width: number) => String(n).padStart(width, '0');

/** RFC 3339-shaped timestamps, mostly well formed, often at or past an edge. */
export const timestampArb: fc.Arbitrary<string> = (() => {
  const year = fc.oneof(
    { weight: 12, arbitrary: fc.constantFrom('0000', '0001', '0002', '1582', '1899', '1969', '1970', '2000', '2026', '2038', '9998', '9999') },
    { weight: 12, arbitrary: fc.integer({ min: 1900, max: 2030 }).map((y) => pad(y, 4)) },
    { weight: 6, arbitrary: fc.integer({ min: 0, max: 9999 }).map((y) => pad(y, 4)) },
    { weight: 1, arbitrary: fc.constantFrom('10000', '+10000', '-0001', '275760', '999') },
  );
  const inRange = (lo: number, hi: number, edges: string[]) =>
    fc.oneof({ weight: 40, arbitrary: fc.integer({ min: lo, max: hi }).map((n) => pad(n, 2)) }, { weight: 1, arbitrary: fc.constantFrom(...edges) });
  const month = inRange(1, 12, ['01', '02', '12', '00', '13']);
  const day = inRange(1, 28, ['01', '28', '29', '30', '31', '00', '32']);
  const hour = inRange(0, 23, ['00', '23', '24']);
  const minute = inRange(0, 59, ['00', '59', '60']);
  const second = inRange(0, 59, ['00', '59', '60']);
  const fraction = fc.oneof(
    { weight: 3, arbitrary: fc.constant('') },
    { weight: 3, arbitrary: fc.stringMatching(/^[0-9]{1,9}$/).map((d) => `.${d}`) },
    { weight: 1, arbitrary: fc.constantFrom('.0', '.000000001', '.999', '.999999', '.9999995', '.999999999', '.123456789012') },
  );
  const separator = fc.oneof({ weight: 30, arbitrary: fc.constant('T') }, { weight: 1, arbitrary: fc.constantFrom('t', ' ') });
  const offset = fc.oneof(
    { weight: 4, arbitrary: fc.constant('Z') },
    { weight: 3, arbitrary: fc.constantFrom('z', '+00:00', '-00:00', '+01:00', '-01:00', '+00:01', '-00:01', '+14:00', '-12:00', '+23:59', '-23:59', '+24:00', '+05:30') },
  );
  const composed = fc
    .tuple(year, month, day, separator, hour, minute, second, fraction, offset)
    .map(([y, mo, d, sep, h, mi, s, f, o]) => `${y}-${mo}-${d}${sep}${h}:${mi}:${s}${f}${o}`);
  // Every instant a JS Date can hold, as toISOString writes it (extended years for the far ones).
  const instant = fc.date({ min: new Date(-8.64e15), max: new Date(8.64e15), noInvalidDate: true }).map((d) => d.toISOString());
  return fc.oneof({ weight: 20, arbitrary: composed }, { weight: 1, arbitrary: instant });
})();

/** Single characters (or pairs) that are interesting in text: controls, separators, surrogates. */
const EDGE_CHARS = [
  '\u0000', '\u0001', '\u0008', '\t', '\n', '\u000b', '\r', '\u001f', '\u007f', '\u0080', '\u009f', '\u00a0',
  '\u2028', '\u2029', '\ufeff', '\ufffd', '\uffff', '\ud83d\ude00', '\ud800', '\udfff', ' ', '"', "'", '\\', '%', '_', ';', ',',
];
const PLAIN_CHARS = [...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-'];

function lengthArb(min: number, max: number | undefined, spread = 12): fc.Arbitrary<number> {
  const hi = max ?? Math.max(min + 24, 24);
  const options: Array<fc.WeightedArbitrary<number>> = [{ weight: 16, arbitrary: fc.integer({ min, max: Math.min(hi, min + spread) }) }];
  if (max !== undefined) options.push({ weight: 1, arbitrary: fc.constantFrom(max, max + 1) });
  if (min > 0) options.push({ weight: 1, arbitrary: fc.constant(min - 1) });
  return fc.oneof(...options);
}

/** Text of a length biased to the bounds (UTF-16 code units, as zod counts), mostly plain. */
function textArb(min: number, max: number | undefined): fc.Arbitrary<string> {
  const char = fc.oneof({ weight: 30, arbitrary: fc.constantFrom(...PLAIN_CHARS) }, { weight: 1, arbitrary: fc.constantFrom(...EDGE_CHARS) });
  return lengthArb(min, max).chain((n) => fc.array(char, { minLength: n, maxLength: n }).map((chars) => chars.join('').slice(0, n)));
}

function stringArb(s: JsonSchema): fc.Arbitrary<string> {
  if (s.format === 'date-time') return fc.oneof({ weight: 12, arbitrary: timestampArb }, { weight: 1, arbitrary: textArb(0, 40) });
  const min = s.minLength ?? 0;
  const options: Array<fc.WeightedArbitrary<string>> = [{ weight: 2, arbitrary: textArb(min, s.maxLength) }];
  if (s.enum) options.push({ weight: 12, arbitrary: fc.constantFrom(...s.enum.filter((v): v is string => typeof v === 'string')) });
  if (s.pattern) {
    const max = s.maxLength;
    // A pattern that takes RFC 3339 timestamps (a hand-written one, where `format` is not set)
    // gets the timestamp generator too.
    if (new RegExp(s.pattern).test('2026-01-01T00:00:00Z') && !new RegExp(s.pattern).test('text')) options.push({ weight: 60, arbitrary: timestampArb });
    const matching = fc.stringMatching(new RegExp(s.pattern)).map((v) => (max !== undefined && v.length > max ? v.slice(0, max) : v));
    options.push({ weight: 4, arbitrary: matching });
    // A long match: near and at the maximum length.
    if (max !== undefined && max > 8) {
      options.push({ weight: 1, arbitrary: fc.array(matching, { minLength: 8, maxLength: 8 }).map((parts) => parts.join('').slice(0, max)).filter((v) => new RegExp(s.pattern!).test(v)) });
    }
  }
  return fc.oneof(...options);
}

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/** Numbers at and around the bounds, ±0, fractions, huge ones, and timestamps in microseconds. */
function numberArb(s: JsonSchema, integer: boolean): fc.Arbitrary<number> {
  const lo = s.minimum ?? (s.exclusiveMinimum !== undefined ? s.exclusiveMinimum + 1 : -MAX_SAFE);
  const hi = s.maximum ?? (s.exclusiveMaximum !== undefined ? s.exclusiveMaximum - 1 : MAX_SAFE);
  const edges = [
    lo, hi, lo - 1, hi + 1, lo + 1, hi - 1, 0, -0, 1, -1, 0.5, -60.5, 2 ** 31 - 1, 2 ** 31, MAX_SAFE, MAX_SAFE + 2, -MAX_SAFE,
    1e21, -1e21, 1e-7, 5e-324, 1.7976931348623157e308, -1.7976931348623157e308,
    // Microseconds since the epoch of the edge instants (years 1, 1970, 2026, 2255, 9999).
    Date.UTC(1, 0, 1) * 1000, Date.UTC(2026, 0, 1) * 1000, Date.UTC(2255, 0, 1) * 1000, Date.UTC(9999, 11, 31) * 1000,
  ];
  const inRange = fc.bigInt({ min: BigInt(Math.ceil(Math.max(lo, -MAX_SAFE))), max: BigInt(Math.floor(Math.min(hi, MAX_SAFE))) }).map(Number);
  const options: Array<fc.WeightedArbitrary<number>> = [
    { weight: 6, arbitrary: inRange },
    { weight: 2, arbitrary: fc.constantFrom(...edges) },
  ];
  if (!integer) options.push({ weight: 3, arbitrary: fc.double() });
  return fc.oneof(...options);
}

/** Any JSON value, with edge strings and numbers, a few levels deep. */
export const jsonValueArb: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    numberArb({}, false),
    textArb(0, 12),
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(textArb(0, 6), tie('value'), { maxKeys: 3 }),
  ),
})).value;

/** An arbitrary of values for a JSON Schema (the subset z.toJSONSchema writes). */
export function fromJsonSchema(s: JsonSchema): fc.Arbitrary<unknown> {
  const alternatives = s.anyOf ?? s.oneOf;
  if (alternatives) return fc.oneof(...alternatives.map(fromJsonSchema));
  if (s.allOf && s.allOf.length > 0) return fromJsonSchema(Object.assign({}, ...s.allOf) as JsonSchema);
  if (s.const !== undefined) return fc.constant(s.const);
  const type = Array.isArray(s.type) ? s.type : s.type === undefined ? [] : [s.type];
  if (type.length > 1) return fc.oneof(...type.map((t) => fromJsonSchema({ ...s, type: t })));
  switch (type[0]) {
    case 'null':
      return fc.constant(null);
    case 'boolean':
      return fc.boolean();
    case 'integer':
      return numberArb(s, true);
    case 'number':
      return numberArb(s, false);
    case 'string':
      return stringArb(s);
    case 'array': {
      if (s.prefixItems) return fc.tuple(...s.prefixItems.map(fromJsonSchema));
      const items = s.items ? fromJsonSchema(s.items) : jsonValueArb;
      return lengthArb(s.minItems ?? 0, s.maxItems === undefined ? undefined : Math.min(s.maxItems, 1000), 3).chain((n) =>
        fc.array(items, { minLength: Math.max(0, n), maxLength: Math.max(0, n) }),
      );
    }
    case 'object': {
      const properties = s.properties ?? {};
      if (Object.keys(properties).length === 0 && s.additionalProperties !== false) {
        return fc.dictionary(textArb(0, 8), jsonValueArb, { maxKeys: 4 });
      }
      // Optional keys are sent half the time; keys the schema says nothing about (read-only
      // fields compared with the stored value, fields refused whatever their value) one time in eight.
      const required = new Set(s.required ?? []);
      const entries = Object.entries(properties).map(([key, sub]) => {
        const value = fromJsonSchema(sub);
        if (required.has(key)) return value.map((v) => [key, v] as const);
        const untyped = sub.type === undefined && !sub.anyOf && !sub.oneOf && !sub.enum;
        const absent = { weight: untyped ? 7 : 1, arbitrary: fc.constant(null) };
        return fc.oneof(absent, { weight: 1, arbitrary: value.map((v) => [key, v] as const) });
      });
      return fc.tuple(...entries).map((pairs) => Object.fromEntries(pairs.filter((p) => p !== null)));
    }
    default:
      if (s.enum) return fc.constantFrom(...s.enum);
      return jsonValueArb;
  }
}

/**
 * JSON text as a client would send it: like JSON.stringify, except that -0 is written `-0` (which
 * JSON.parse reads back as -0); NaN and ±Infinity become null, as JSON.stringify writes them.
 */
export function wireJson(value: unknown): string {
  if (typeof value === 'number') return Object.is(value, -0) ? '-0' : JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : wireJson(v))).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const parts = Object.entries(value).filter(([, v]) => v !== undefined).map(([k, v]) => `${JSON.stringify(k)}:${wireJson(v)}`);
    return `{${parts.join(',')}}`;
  }
  return JSON.stringify(value);
}
