/**
 * JSON decoding for request bodies, with the rules on what the service accepts checked in the
 * same single pass (README "What text the service accepts"):
 *
 * - every string, keys included, is well-formed Unicode: a `\ud800` escape without its pair
 *   cannot be stored by Postgres (and is not text);
 * - no string holds U+0000, which no Postgres text or jsonb value can hold;
 * - every number means exactly the value a double keeps: `1e309` (Infinity),
 *   `123456789012345678901234567890` (rounded) and `-0` (which numeric storage turns into 0)
 *   would be stored as something other than what was sent;
 * - containers nest at most MAX_NESTING levels inside a member of the top-level object.
 *
 * The parser is iterative, so no depth of nesting can overflow the stack, and it does not build
 * containers beyond the limit at all. Otherwise it accepts exactly what JSON.parse accepts and
 * builds the same values (`__proto__` included, as an own key). A problem is reported per member
 * of the top-level object (the body field), the first one found in it.
 */

/** Levels of objects and arrays in a body field's value, the value itself being the first. */
export const MAX_NESTING = 32;

export type JsonTextProblem =
  | { kind: 'malformed_text' }
  | { kind: 'nul' }
  | { kind: 'inexact_number'; number: string }
  | { kind: 'too_deep'; maxNesting: number };

export interface DecodedJson {
  value: unknown;
  /** By member of a top-level object, in body order: the first problem in that member. */
  problems: Map<string, JsonTextProblem>;
}

export class JsonSyntaxError extends Error {
  constructor(position: number) {
    super(`invalid JSON at position ${position}`);
    this.name = 'JsonSyntaxError';
  }
}

const OBJECT = 0;
const ARRAY = 1;
type Kind = typeof OBJECT | typeof ARRAY;

interface Frame {
  kind: Kind;
  value: Record<string, unknown> | unknown[];
  /** The key whose value is being read (objects). */
  key: string;
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const PLAIN_RUN = /[^"\\\u0000-\u001f]*/y;
const HEX4 = /^[0-9a-fA-F]{4}$/;
const ESCAPES = new Map([
  ['"', '"'],
  ['\\', '\\'],
  ['/', '/'],
  ['b', '\b'],
  ['f', '\f'],
  ['n', '\n'],
  ['r', '\r'],
  ['t', '\t'],
]);

const enum Expect {
  Value,
  ValueOrEnd,
  Key,
  KeyOrEnd,
  CommaOrEnd,
}

export function decodeJson(text: string, maxNesting = MAX_NESTING): DecodedJson {
  const problems = new Map<string, JsonTextProblem>();
  // Built containers, outermost first; containers nested beyond the limit are only tracked by
  // kind (`skipped`), so a megabyte of `[` costs a small array, not a megabyte of objects.
  const frames: Frame[] = [];
  const skipped: Kind[] = [];
  let field: string | null = null;
  let root: unknown = undefined;
  let pos = 0;
  const end = text.length;

  const fail = (): never => {
    throw new JsonSyntaxError(pos);
  };
  const note = (problem: JsonTextProblem) => {
    if (field !== null && !problems.has(field)) problems.set(field, problem);
  };
  const skipWhitespace = () => {
    while (pos < end) {
      const c = text.charCodeAt(pos);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) pos++;
      else break;
    }
  };
  const innermost = (): Kind | null => (skipped.length > 0 ? skipped[skipped.length - 1]! : frames.length > 0 ? frames[frames.length - 1]!.kind : null);

  const attach = (value: unknown) => {
    if (skipped.length > 0) return;
    const parent = frames[frames.length - 1];
    if (!parent) root = value;
    else if (parent.kind === ARRAY) (parent.value as unknown[]).push(value);
    // As JSON.parse: every key is an own data property, `__proto__` too.
    else Object.defineProperty(parent.value, parent.key, { value, writable: true, enumerable: true, configurable: true });
  };

  const open = (kind: Kind) => {
    // The top-level value is level 0, a body field's value level 1.
    const level = frames.length + skipped.length;
    if (skipped.length > 0 || level > maxNesting) {
      if (skipped.length === 0) note({ kind: 'too_deep', maxNesting });
      skipped.push(kind);
    } else {
      frames.push({ kind, value: kind === OBJECT ? {} : [], key: '' });
    }
  };

  const close = () => {
    if (skipped.length > 0) {
      skipped.pop();
      attach(null);
    } else {
      attach(frames.pop()!.value);
    }
  };

  const readString = (): string => {
    pos++; // the opening quote
    let out = '';
    let escaped = false;
    for (;;) {
      PLAIN_RUN.lastIndex = pos;
      PLAIN_RUN.exec(text);
      out += text.slice(pos, PLAIN_RUN.lastIndex);
      pos = PLAIN_RUN.lastIndex;
      if (pos >= end) fail();
      const c = text.charCodeAt(pos);
      if (c === 0x22) {
        pos++;
        break;
      }
      if (c !== 0x5c) fail(); // a raw control character
      const e = text[pos + 1];
      if (e === 'u') {
        const hex = text.slice(pos + 2, pos + 6);
        if (!HEX4.test(hex)) fail();
        out += String.fromCharCode(parseInt(hex, 16));
        pos += 6;
        escaped = true;
      } else {
        const char = e === undefined ? undefined : ESCAPES.get(e);
        if (char === undefined) fail();
        out += char;
        pos += 2;
      }
    }
    // Only an escape can produce a lone surrogate or a NUL (raw ones are not valid text / JSON).
    if (escaped) {
      if (!out.isWellFormed()) note({ kind: 'malformed_text' });
      else if (out.includes('\u0000')) note({ kind: 'nul' });
    }
    return out;
  };

  const readScalar = (): unknown => {
    const c = text.charCodeAt(pos);
    if (c === 0x22) return readString();
    if (text.startsWith('true', pos)) {
      pos += 4;
      return true;
    }
    if (text.startsWith('false', pos)) {
      pos += 5;
      return false;
    }
    if (text.startsWith('null', pos)) {
      pos += 4;
      return null;
    }
    NUMBER.lastIndex = pos;
    const match = NUMBER.exec(text);
    if (!match) return fail();
    pos = NUMBER.lastIndex;
    const value = Number(match[0]);
    if (!isExactDouble(match[0], value)) note({ kind: 'inexact_number', number: match[0] });
    return value;
  };

  let expect = Expect.Value;
  for (;;) {
    skipWhitespace();
    if (expect === Expect.CommaOrEnd && frames.length === 0 && skipped.length === 0) break; // the top-level value is complete
    if (pos >= end) fail();
    const c = text.charCodeAt(pos);
    switch (expect) {
      case Expect.ValueOrEnd:
        if (c === 0x5d) {
          pos++;
          close();
          expect = Expect.CommaOrEnd;
          continue;
        }
      // falls through: the array's first value
      case Expect.Value:
        if (c === 0x7b || c === 0x5b) {
          pos++;
          open(c === 0x7b ? OBJECT : ARRAY);
          expect = c === 0x7b ? Expect.KeyOrEnd : Expect.ValueOrEnd;
        } else {
          attach(readScalar());
          expect = Expect.CommaOrEnd;
        }
        continue;
      case Expect.KeyOrEnd:
        if (c === 0x7d) {
          pos++;
          close();
          expect = Expect.CommaOrEnd;
          continue;
        }
      // falls through: the object's first key
      case Expect.Key: {
        if (c !== 0x22) fail();
        const topLevel = frames.length === 1 && skipped.length === 0;
        if (topLevel) field = null; // a problem in the key itself belongs to the key's own field
        const key = readString();
        if (topLevel) {
          field = key;
          // Problems found while reading the key were noted under no field: check it again.
          if (!key.isWellFormed()) note({ kind: 'malformed_text' });
          else if (key.includes('\u0000')) note({ kind: 'nul' });
        }
        if (skipped.length === 0) frames[frames.length - 1]!.key = key;
        skipWhitespace();
        if (text.charCodeAt(pos) !== 0x3a) fail();
        pos++;
        expect = Expect.Value;
        continue;
      }
      case Expect.CommaOrEnd: {
        const kind = innermost();
        if (c === 0x2c) {
          pos++;
          expect = kind === OBJECT ? Expect.Key : Expect.Value;
        } else if ((kind === OBJECT && c === 0x7d) || (kind === ARRAY && c === 0x5d)) {
          pos++;
          close();
        } else {
          fail();
        }
        continue;
      }
    }
  }
  if (pos !== end) fail();
  return { value: root, problems };
}

/**
 * Whether `text`, a JSON number, means exactly the value of `value` (= Number(text)) as the
 * service will write it back (the shortest text that reads as that double): same sign, same
 * significant digits, same power of ten. `1.0`, `1e2` and `0.1` do; `1e309`, `-0`, `1e-400` and
 * `9007199254740993` do not.
 */
export function isExactDouble(text: string, value: number): boolean {
  if (!Number.isFinite(value) || Object.is(value, -0)) return false;
  // Integers of up to 15 digits are always exact.
  if (text.length <= 16 && /^-?\d{1,15}$/.test(text)) return true;
  const sent = decimal(text);
  const kept = decimal(String(value));
  return sent.negative === kept.negative && sent.digits === kept.digits && sent.exponent === kept.exponent;
}

/** A decimal number as sign, significant digits without leading or trailing zeros, and the power of ten of the last digit. */
function decimal(text: string): { negative: boolean; digits: string; exponent: number } {
  const match = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text)!;
  const fraction = match[3] ?? '';
  let digits = (match[2]! + fraction).replace(/^0+/, '');
  if (digits === '') return { negative: false, digits: '', exponent: 0 };
  const trimmed = digits.replace(/0+$/, '');
  // The exponent of a finite non-zero double is small; Number parses any length of digits.
  const exponent = Number(match[4] ?? '0') - fraction.length + (digits.length - trimmed.length);
  digits = trimmed;
  return { negative: match[1] === '-', digits, exponent };
}
