import { describe, expect, it } from 'vitest';
import { decodeJson, isExactDouble, JsonSyntaxError, MAX_NESTING } from '../../shared/json/decode.js';

/**
 * The request-body JSON decoder accepts exactly what JSON.parse accepts and builds the same
 * values (so replacing JSON.parse changed nothing for valid bodies), while reporting the text
 * rules of docs/api.md "What text the service accepts" per body field.
 */

function outcome(parse: () => unknown): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: parse() };
  } catch {
    return { ok: false };
  }
}

/** Same values: -0 apart from 0, own keys in the same order, the same prototypes. */
function identical(a: unknown, b: unknown): boolean {
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) return Object.is(a, b);
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  const ak = Reflect.ownKeys(a);
  const bk = Reflect.ownKeys(b);
  return (
    ak.length === bk.length &&
    ak.every((k, i) => k === bk[i] && identical((a as Record<PropertyKey, unknown>)[k], (b as Record<PropertyKey, unknown>)[k]))
  );
}

function expectSameAsJsonParse(text: string): void {
  const expected = outcome(() => JSON.parse(text));
  const actual = outcome(() => decodeJson(text).value);
  expect(actual.ok, text).toBe(expected.ok);
  if (expected.ok && actual.ok) expect(identical(actual.value, expected.value), text).toBe(true);
}

const VALID = [
  '{}',
  '[]',
  ' \t\r\n{ "a" : [ 1 , -2.5e-3 , 0 , 1E+2 , true , false , null , "x" ] } \n',
  '"just a string"',
  '0',
  '-0',
  '1e400',
  '123456789012345678901234567890',
  '"\\u00e9\\n\\t\\"\\\\\\/\\b\\f\\r"',
  '"\\ud83d\\ude00 and 😀"',
  '{"a":1,"a":2,"b":{"a":3}}',
  '{"__proto__":{"polluted":true},"constructor":1,"toString":"x"}',
  '[[[[[]]]],{"":""}]',
  '{"k":"\\ud800"}',
  '{"k":"\\u0000"}',
];

const INVALID = [
  '',
  ' ',
  '{',
  '}',
  '[1,]',
  '{"a":1,}',
  '{"a" 1}',
  '{a:1}',
  "{'a':1}",
  '01',
  '1.',
  '.5',
  '+1',
  '-',
  '1e',
  '0x10',
  'NaN',
  'Infinity',
  'tru',
  'nul',
  'truex',
  '"\\x"',
  '"\\u12"',
  '"\\u12G4"',
  '"unterminated',
  '"raw\u0001control"',
  '"raw\nnewline"',
  '[1 2]',
  '{} {}',
  '\ufeff{}',
  '[' + ']'.repeat(2),
];

// A small deterministic generator, so a failure reproduces.
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

function randomValue(next: () => number, depth: number): unknown {
  const pick = Math.floor(next() * (depth > 4 ? 5 : 7));
  const strings = ['', 'a', 'é', '😀', '"quoted"', 'back\\slash', 'line\nbreak', '__proto__', 'constructor', '\u0000', '\ud800'];
  const numbers = [0, -0, 1, -1, 0.1, 1e21, 5e-324, 1.7976931348623157e308, 123456789, -2.5e-7];
  switch (pick) {
    case 0:
      return strings[Math.floor(next() * strings.length)];
    case 1:
      return numbers[Math.floor(next() * numbers.length)];
    case 2:
      return next() < 0.5;
    case 3:
      return null;
    case 4:
      return strings[Math.floor(next() * strings.length)]!.repeat(3);
    case 5:
      return Array.from({ length: Math.floor(next() * 4) }, () => randomValue(next, depth + 1));
    default: {
      const out: Record<string, unknown> = {};
      for (let i = Math.floor(next() * 4); i > 0; i--) {
        Object.defineProperty(out, strings[Math.floor(next() * strings.length)]!, {
          value: randomValue(next, depth + 1),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return out;
    }
  }
}

describe('decodeJson accepts exactly what JSON.parse accepts, with the same values', () => {
  it('on a corpus of valid and invalid texts', () => {
    for (const text of [...VALID, ...INVALID]) expectSameAsJsonParse(text);
    for (const text of INVALID) expect(() => decodeJson(text), text).toThrow(JsonSyntaxError);
  });

  it('on random documents and random mutations of them', () => {
    const next = random(9);
    const significant = ['{', '}', '[', ']', ',', ':', '"', '\\', 'e', '-', '.', '0', '1', ' ', 'u', 'n', 't'];
    for (let i = 0; i < 3000; i++) {
      const text = JSON.stringify(randomValue(next, 0), null, next() < 0.3 ? 1 : undefined) ?? 'null';
      expectSameAsJsonParse(text);
      let mutated = text;
      for (let edits = 1 + Math.floor(next() * 3); edits > 0; edits--) {
        const at = Math.floor(next() * (mutated.length + 1));
        const op = next();
        const char = significant[Math.floor(next() * significant.length)]!;
        if (op < 0.33) mutated = mutated.slice(0, at) + mutated.slice(at + 1);
        else if (op < 0.66) mutated = mutated.slice(0, at) + char + mutated.slice(at);
        else mutated = mutated.slice(0, at) + char + mutated.slice(at + 1);
      }
      expectSameAsJsonParse(mutated);
    }
  });

  it('keeps __proto__ as an own key, as JSON.parse does', () => {
    const value = decodeJson('{"__proto__":{"polluted":true}}').value as Record<string, unknown>;
    expect(Object.keys(value)).toEqual(['__proto__']);
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe('the text rules, reported per body field', () => {
  const problems = (text: string) => Object.fromEntries(decodeJson(text).problems);

  it('lone surrogates and NUL, in keys and values at any depth', () => {
    expect(problems('{"a":"\\ud800","b":{"x":["\\udc00"]},"c":{"\\udbff":1},"d":"\\ud83d\\ude00","e":"\\u0000","f":[{"\\u0000":0}]}')).toEqual({
      a: { kind: 'malformed_text' },
      b: { kind: 'malformed_text' },
      c: { kind: 'malformed_text' },
      e: { kind: 'nul' },
      f: { kind: 'nul' },
    });
    // A malformed top-level key is reported under that key.
    expect(problems('{"\\ud800":1}')).toEqual({ '\ud800': { kind: 'malformed_text' } });
    // Nothing is reported for a top-level value that is not an object (the caller refuses it).
    expect(problems('["\\ud800"]')).toEqual({});
  });

  it('numbers that a double does not keep exactly', () => {
    expect(problems('{"a":1e309,"b":{"c":[123456789012345678901234567890]},"d":-0,"e":1.5,"f":[9007199254740993],"g":1e-400,"h":-0.0e5}')).toEqual({
      a: { kind: 'inexact_number', number: '1e309' },
      b: { kind: 'inexact_number', number: '123456789012345678901234567890' },
      d: { kind: 'inexact_number', number: '-0' },
      f: { kind: 'inexact_number', number: '9007199254740993' },
      g: { kind: 'inexact_number', number: '1e-400' },
      h: { kind: 'inexact_number', number: '-0.0e5' },
    });
  });

  it(`nesting beyond ${MAX_NESTING} levels inside a field, without building what lies beyond`, () => {
    const nested = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
    expect(problems(`{"ok":${nested(MAX_NESTING)},"deep":${nested(MAX_NESTING + 1)}}`)).toEqual({ deep: { kind: 'too_deep', maxNesting: MAX_NESTING } });
    const huge = decodeJson(`{"deep":${nested(400_000)}}`);
    expect(huge.problems.get('deep')).toEqual({ kind: 'too_deep', maxNesting: MAX_NESTING });
    // The top-level value of a deep array body is decoded (and refused by its caller for its type).
    expect(Array.isArray(decodeJson(nested(400_000)).value)).toBe(true);
    expect(() => decodeJson('['.repeat(400_000))).toThrow(JsonSyntaxError);
  });
});

describe('isExactDouble', () => {
  it('is true when the number means the double it reads as, false otherwise', () => {
    const exact = ['0', '1', '-1', '1.0', '1e2', '1E+2', '0.1', '0.30000000000000004', '9007199254740992', '-9007199254740992', '1e21', '123456789012345680000000000000', '1.7976931348623157e308', '5e-324', '2.2250738585072014e-308', '0.000', '100e-2'];
    const inexact = ['1e309', '-1e309', '123456789012345678901234567890', '9007199254740993', '-0', '-0.0', '0.1000000000000000055511151231257827', '1e-400', '2.5e-324', '1.00000000000000001'];
    for (const text of exact) expect(isExactDouble(text, Number(text)), text).toBe(true);
    for (const text of inexact) expect(isExactDouble(text, Number(text)), text).toBe(false);
  });
});
