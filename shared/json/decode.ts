/**
 * JSON decoding for request bodies, with the rules on what the service accepts checked in the
 * same single pass (docs/api.md "What text the service accepts"):
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

const PLAIN_RUN = /[^"\\\u0000-\u001f]*/y;
const ESCAPE_OR_CONTROL = /[\\\u0000-\u001f]/;
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
  return new Decoder(text, maxNesting).decode();
}

/** One decoding: its state lives in fields and its steps are methods, so a call creates no closures. */
class Decoder {
  private readonly problems = new Map<string, JsonTextProblem>();
  // Built containers, outermost first; containers nested beyond the limit are only tracked by
  // kind (`skipped`), so a megabyte of `[` costs a small array, not a megabyte of objects.
  private readonly frames: Frame[] = [];
  private readonly skipped: Kind[] = [];
  /** The member of the top-level object being read: where problems are reported. */
  private field: string | null = null;
  private root: unknown = undefined;
  private pos = 0;
  private readonly end: number;

  constructor(
    private readonly text: string,
    private readonly maxNesting: number,
  ) {
    this.end = text.length;
  }

  decode(): DecodedJson {
    const text = this.text;
    let expect = Expect.Value;
    for (;;) {
      this.skipWhitespace();
      if (expect === Expect.CommaOrEnd && this.frames.length === 0 && this.skipped.length === 0) break; // the top-level value is complete
      if (this.pos >= this.end) this.fail();
      const c = text.charCodeAt(this.pos);
      switch (expect) {
        case Expect.ValueOrEnd:
          if (c === 0x5d) {
            this.pos++;
            this.close();
            expect = Expect.CommaOrEnd;
            continue;
          }
        // falls through: the array's first value
        case Expect.Value:
          if (c === 0x7b || c === 0x5b) {
            this.pos++;
            this.open(c === 0x7b ? OBJECT : ARRAY);
            expect = c === 0x7b ? Expect.KeyOrEnd : Expect.ValueOrEnd;
          } else {
            this.attach(this.readScalar(c));
            expect = Expect.CommaOrEnd;
          }
          continue;
        case Expect.KeyOrEnd:
          if (c === 0x7d) {
            this.pos++;
            this.close();
            expect = Expect.CommaOrEnd;
            continue;
          }
        // falls through: the object's first key
        case Expect.Key:
          if (c !== 0x22) this.fail();
          this.readKey();
          this.skipWhitespace();
          if (text.charCodeAt(this.pos) !== 0x3a) this.fail();
          this.pos++;
          expect = Expect.Value;
          continue;
        case Expect.CommaOrEnd: {
          const kind = this.innermost();
          if (c === 0x2c) {
            this.pos++;
            expect = kind === OBJECT ? Expect.Key : Expect.Value;
          } else if ((kind === OBJECT && c === 0x7d) || (kind === ARRAY && c === 0x5d)) {
            this.pos++;
            this.close();
          } else {
            this.fail();
          }
          continue;
        }
      }
    }
    if (this.pos !== this.end) this.fail();
    return { value: this.root, problems: this.problems };
  }

  private fail(): never {
    throw new JsonSyntaxError(this.pos);
  }

  private note(problem: JsonTextProblem): void {
    if (this.field !== null && !this.problems.has(this.field)) this.problems.set(this.field, problem);
  }

  private skipWhitespace(): void {
    const text = this.text;
    while (this.pos < this.end) {
      const c = text.charCodeAt(this.pos);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) this.pos++;
      else break;
    }
  }

  private innermost(): Kind | null {
    if (this.skipped.length > 0) return this.skipped[this.skipped.length - 1]!;
    return this.frames.length > 0 ? this.frames[this.frames.length - 1]!.kind : null;
  }

  private attach(value: unknown): void {
    if (this.skipped.length > 0) return;
    const parent = this.frames[this.frames.length - 1];
    if (!parent) this.root = value;
    else if (parent.kind === ARRAY) (parent.value as unknown[]).push(value);
    // As JSON.parse: every key is an own data property, `__proto__` too (an assignment would set
    // the prototype; every other inherited property is writable data, so assignment makes it own).
    else if (parent.key === '__proto__') Object.defineProperty(parent.value, parent.key, { value, writable: true, enumerable: true, configurable: true });
    else (parent.value as Record<string, unknown>)[parent.key] = value;
  }

  private open(kind: Kind): void {
    // The top-level value is level 0, a body field's value level 1.
    const level = this.frames.length + this.skipped.length;
    if (this.skipped.length > 0 || level > this.maxNesting) {
      if (this.skipped.length === 0) this.note({ kind: 'too_deep', maxNesting: this.maxNesting });
      this.skipped.push(kind);
    } else {
      this.frames.push({ kind, value: kind === OBJECT ? {} : [], key: '' });
    }
  }

  private close(): void {
    if (this.skipped.length > 0) {
      this.skipped.pop();
      this.attach(null);
    } else {
      this.attach(this.frames.pop()!.value);
    }
  }

  private readKey(): void {
    const topLevel = this.frames.length === 1 && this.skipped.length === 0;
    // A problem in a top-level key belongs to the field it names.
    if (topLevel) this.field = null;
    const key = this.readString();
    if (topLevel) {
      this.field = key;
      if (!key.isWellFormed()) this.note({ kind: 'malformed_text' });
      else if (key.includes('\u0000')) this.note({ kind: 'nul' });
    }
    if (this.skipped.length === 0) this.frames[this.frames.length - 1]!.key = key;
  }

  private readString(): string {
    const text = this.text;
    this.pos++; // the opening quote
    // Most strings hold no escape and no control character: one slice up to the closing quote.
    const close = text.indexOf('"', this.pos);
    if (close >= 0) {
      const plain = text.slice(this.pos, close);
      if (!ESCAPE_OR_CONTROL.test(plain)) {
        this.pos = close + 1;
        return plain;
      }
    }
    let out = '';
    let escaped = false;
    for (;;) {
      PLAIN_RUN.lastIndex = this.pos;
      PLAIN_RUN.exec(text);
      if (PLAIN_RUN.lastIndex > this.pos) out += text.slice(this.pos, PLAIN_RUN.lastIndex);
      this.pos = PLAIN_RUN.lastIndex;
      if (this.pos >= this.end) this.fail();
      const c = text.charCodeAt(this.pos);
      if (c === 0x22) {
        this.pos++;
        break;
      }
      if (c !== 0x5c) this.fail(); // a raw control character
      const e = text[this.pos + 1];
      if (e === 'u') {
        const hex = text.slice(this.pos + 2, this.pos + 6);
        if (!HEX4.test(hex)) this.fail();
        out += String.fromCharCode(parseInt(hex, 16));
        this.pos += 6;
        escaped = true;
      } else {
        const char = e === undefined ? undefined : ESCAPES.get(e);
        if (char === undefined) this.fail();
        out += char;
        this.pos += 2;
      }
    }
    // Only an escape can produce a lone surrogate or a NUL (raw ones are not valid text / JSON).
    if (escaped) {
      if (!out.isWellFormed()) this.note({ kind: 'malformed_text' });
      else if (out.includes('\u0000')) this.note({ kind: 'nul' });
    }
    return out;
  }

  private readScalar(c: number): unknown {
    const text = this.text;
    if (c === 0x22) return this.readString();
    if (c === 0x74 && text.startsWith('true', this.pos)) {
      this.pos += 4;
      return true;
    }
    if (c === 0x66 && text.startsWith('false', this.pos)) {
      this.pos += 5;
      return false;
    }
    if (c === 0x6e && text.startsWith('null', this.pos)) {
      this.pos += 4;
      return null;
    }
    const number = text.slice(this.pos, this.numberEnd());
    this.pos += number.length;
    const value = Number(number);
    if (!isExactDouble(number, value)) this.note({ kind: 'inexact_number', number });
    return value;
  }

  /** Where the JSON number at `pos` ends: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
  private numberEnd(): number {
    const text = this.text;
    let at = this.pos;
    if (text.charCodeAt(at) === 0x2d) at++;
    if (text.charCodeAt(at) === 0x30) at++;
    else {
      const after = this.digitsFrom(at);
      if (after === at) this.fail();
      at = after;
    }
    if (text.charCodeAt(at) === 0x2e) {
      const after = this.digitsFrom(at + 1);
      if (after === at + 1) this.fail();
      at = after;
    }
    const e = text.charCodeAt(at);
    if (e === 0x65 || e === 0x45) {
      at++;
      const sign = text.charCodeAt(at);
      if (sign === 0x2b || sign === 0x2d) at++;
      const after = this.digitsFrom(at);
      if (after === at) this.fail();
      at = after;
    }
    return at;
  }

  private digitsFrom(from: number): number {
    let i = from;
    while (i < this.end) {
      const c = this.text.charCodeAt(i);
      if (c < 0x30 || c > 0x39) break;
      i++;
    }
    return i;
  }
}

/**
 * Whether `text`, a JSON number, means exactly the value of `value` (= Number(text)) as the
 * service will write it back (the shortest text that reads as that double): same sign, same
 * significant digits, same power of ten. `1.0`, `1e2` and `0.1` do; `1e309`, `-0`, `1e-400` and
 * `9007199254740993` do not.
 */
export function isExactDouble(text: string, value: number): boolean {
  if (!Number.isFinite(value) || Object.is(value, -0)) return false;
  // The common cases: written as the shortest form already (1.5, 0.1, 42), or an integer of up to
  // 15 digits (always exact).
  if (String(value) === text || (text.length <= 16 && /^-?\d{1,15}$/.test(text))) return true;
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
