/**
 * Instants on the wire: the one parser of RFC 3339 timestamps and the one range every input path
 * accepts (docs/api.md, "Time range"). The log, every read model and every adapter can represent
 * any instant in that range, so an event the edge accepts can always be applied.
 *
 * The parser is strict where `Date` is lenient: the date must exist (no 02-30), hours are 00-23,
 * minutes and seconds 00-59 (no leap second, no 24:00), the offset's hours 00-23. Digits past the
 * microsecond are dropped.
 */

export const TIME_RANGE_MIN = '0001-01-01T00:00:00Z';
export const TIME_RANGE_MAX = '9999-12-31T23:59:59.999999Z';

/** Days from 1970-01-01 to a date of the proleptic Gregorian calendar (H. Hinnant's days_from_civil). */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5) + day - 1;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146097 + dayOfEra - 719468;
}

const MS_PER_DAY = 86_400_000;
/** 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z in milliseconds since the epoch. */
const MIN_MS = daysFromCivil(1, 1, 1) * MS_PER_DAY;
const MAX_MS = daysFromCivil(9999, 12, 31) * MS_PER_DAY + MS_PER_DAY - 1;

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

/** The pattern the OpenAPI documents could show; the parser checks more (real dates, the range). */
export const RFC3339_PATTERN = RFC3339.source;

/** A parsed instant: milliseconds since the epoch, and the microseconds within that millisecond. */
export interface Instant {
  /** Whole milliseconds since the epoch (floored). */
  ms: number;
  /** 0..999 */
  microsOfMs: number;
}

export type ParsedInstant = ({ ok: true } & Instant) | { ok: false; problem: 'format' | 'range' };

/**
 * An RFC 3339 timestamp (a `Z` or a numeric offset is required): its instant, or why it is refused:
 * `format` for anything that is not an existing date and time, `range` for an instant outside
 * 0001-01-01T00:00:00Z..9999-12-31T23:59:59.999999Z once converted to UTC.
 */
export function parseInstant(text: string): ParsedInstant {
  const match = RFC3339.exec(text);
  if (!match) return { ok: false, problem: 'format' };
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return { ok: false, problem: 'format' };
  if (hour > 23 || minute > 59 || second > 59) return { ok: false, problem: 'format' };
  let offsetMinutes = 0;
  if (match[8] !== undefined) {
    const offsetHours = Number(match[9]);
    const offsetMins = Number(match[10]);
    if (offsetHours > 23 || offsetMins > 59) return { ok: false, problem: 'format' };
    offsetMinutes = (match[8] === '-' ? -1 : 1) * (offsetHours * 60 + offsetMins);
  }
  const fraction = (match[7] ?? '').slice(0, 6).padEnd(6, '0');
  const micros = Number(fraction);
  const ms =
    daysFromCivil(year, month, day) * MS_PER_DAY + ((hour * 60 + minute - offsetMinutes) * 60 + second) * 1000 + Math.floor(micros / 1000);
  if (ms < MIN_MS || ms > MAX_MS) return { ok: false, problem: 'range' };
  return { ok: true, ms, microsOfMs: micros % 1000 };
}

/**
 * The last double below 10000-01-01T00:00:00Z in microseconds: past 2^53 a double holds every
 * 32nd microsecond only, and rounding to the nearest must not carry the range's last instant
 * over its end.
 */
const MAX_MICROS = (MAX_MS + 1) * 1000 - 32;

/**
 * Microseconds since the epoch: exact within about 285 years of 1970 (1685 to 2255), beyond that
 * the nearest double (within 32 microseconds), never outside the range.
 */
export function instantMicros(instant: Instant): number {
  return Math.min(instant.ms * 1000 + instant.microsOfMs, MAX_MICROS);
}

/** Whether a number is a whole number of microseconds since the epoch naming an instant of the range. */
export function isMicrosOfRange(us: number): boolean {
  return Number.isInteger(us) && us >= MIN_MS * 1000 && us <= MAX_MICROS;
}

/** The instant as a Date, to the millisecond (the precision of the master data's timestamps). */
export function instantDate(instant: Instant): Date {
  return new Date(instant.ms);
}

/** The message of an instant outside the range, on any path (`invalid_value`, a CLI usage error, a dead letter's reason). */
export function timeRangeMessage(field: string): string {
  return `${field} must be between ${TIME_RANGE_MIN} and ${TIME_RANGE_MAX}`;
}

/**
 * Microseconds since the epoch as a Postgres timestamptz literal (UTC, full precision). Past the
 * exact range of a double the arithmetic is done on a bigint, so any instant of the range prints.
 */
export function microsToTimestamp(us: number): string {
  let ms: number;
  let micros: number;
  if (Number.isSafeInteger(us)) {
    ms = Math.floor(us / 1000);
    micros = us - ms * 1000;
  } else {
    const big = BigInt(us);
    const bigMs = big / 1000n - (big % 1000n < 0n ? 1n : 0n);
    ms = Number(bigMs);
    micros = Number(big - bigMs * 1000n);
  }
  return instantTimestamp({ ms, microsOfMs: micros });
}

/**
 * The contract's form (RFC 3339 in UTC with milliseconds and `Z`, as Date#toISOString) of the
 * instant `us`, as the SQL function `rfc3339` prints it (migration read-model/230): truncated to
 * the millisecond. Past 2^53 the instant is the double's exact value, as Postgres takes a
 * parameter in `timestamptz 'epoch' + us * interval '1 microsecond'` (a float8 product).
 */
export function microsToRfc3339(us: number): string {
  if (Number.isSafeInteger(us)) return new Date(Math.floor(us / 1000)).toISOString();
  const big = BigInt(us);
  return new Date(Number(big / 1000n - (big % 1000n < 0n ? 1n : 0n))).toISOString();
}

/** An instant as a Postgres timestamptz literal (UTC, to the microsecond, exactly, anywhere in the range). */
export function instantTimestamp(instant: Instant): string {
  const iso = new Date(instant.ms).toISOString(); // …T14:38:11.176Z
  return `${iso.slice(0, -1)}${String(instant.microsOfMs).padStart(3, '0')}Z`;
}
