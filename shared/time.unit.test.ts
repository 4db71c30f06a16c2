import { describe, expect, it } from 'vitest';
import { seededRandom } from './random.js';
import { decodeReads, encodeReads, readsInExactSpans } from './domain/scans/read-codec.js';
import { instantMicros, isMicrosOfRange, microsToTimestamp, parseInstant, timeRangeMessage } from './time.js';

/** The microseconds of a timestamp the parser accepts (the edge decodes each once this way). */
function acceptedTimestampMicros(text: string): number {
  const instant = parseInstant(text);
  if (!instant.ok) throw new Error(`not an accepted timestamp: ${text}`);
  return instantMicros(instant);
}

/** The instant of the components, computed by Date (setUTCFullYear takes years 0..99 as they are). */
function reference(year: number, month: number, day: number, hour: number, minute: number, second: number, ms: number, offsetMinutes: number): number {
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, ms);
  return date.getTime() - offsetMinutes * 60_000;
}

const pad = (n: number, width = 2) => String(n).padStart(width, '0');
const DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const leap = (y: number) => y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
const daysIn = (y: number, m: number) => (m === 2 && leap(y) ? 29 : DAYS[m - 1]!);

describe('parseInstant', () => {
  it('agrees with Date on 20,000 random existing instants of every year, with offsets and fractions', () => {
    const random = seededRandom(20261126);
    const int = (min: number, max: number) => min + Math.floor(random() * (max - min + 1));
    for (let i = 0; i < 20_000; i++) {
      const year = random() < 0.1 ? int(1, 3) : random() < 0.1 ? int(9997, 9999) : int(1, 9999);
      const month = int(1, 12);
      const day = int(1, daysIn(year, month));
      const [hour, minute, second] = [int(0, 23), int(0, 59), int(0, 59)];
      const digits = int(0, 9);
      const fraction = Array.from({ length: digits }, () => int(0, 9)).join('');
      const offset = random() < 0.3 ? 0 : (random() < 0.5 ? -1 : 1) * (int(0, 23) * 60 + int(0, 59));
      const zone = offset === 0 && random() < 0.5 ? (random() < 0.5 ? 'Z' : 'z') : `${offset < 0 ? '-' : '+'}${pad(Math.floor(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`;
      const text = `${pad(year, 4)}-${pad(month)}-${pad(day)}${random() < 0.5 ? 'T' : 't'}${pad(hour)}:${pad(minute)}:${pad(second)}${digits ? `.${fraction}` : ''}${zone}`;
      const micros = Number(fraction.slice(0, 6).padEnd(6, '0'));
      const expectedMs = reference(year, month, day, hour, minute, second, Math.floor(micros / 1000), zone.startsWith('+') || zone.startsWith('-') ? offset : 0);
      const parsed = parseInstant(text);
      const inRange = expectedMs >= reference(1, 1, 1, 0, 0, 0, 0, 0) && expectedMs <= reference(9999, 12, 31, 23, 59, 59, 999, 0);
      if (!inRange) {
        expect(parsed, text).toEqual({ ok: false, problem: 'range' });
        continue;
      }
      expect(parsed, text).toEqual({ ok: true, ms: expectedMs, microsOfMs: micros % 1000 });
      // Within the exact range of a double, the microseconds are exact.
      if (Math.abs(expectedMs) < 8e12) expect(instantMicros(parsed as { ok: true; ms: number; microsOfMs: number }), text).toBe(expectedMs * 1000 + (micros % 1000));
    }
  });

  it('refuses dates and times that do not exist, and forms that are not RFC 3339', () => {
    for (const text of [
      '2026-02-29T00:00:00Z', '1900-02-29T00:00:00Z', '2026-02-30T00:00:00Z', '2026-04-31T00:00:00Z', '2026-06-31T00:00:00Z', '2026-09-31T00:00:00Z', '2026-11-31T00:00:00Z',
      '2026-13-01T00:00:00Z', '2026-00-01T00:00:00Z', '2026-01-00T00:00:00Z', '2026-01-32T00:00:00Z',
      '2026-01-01T24:00:00Z', '2026-01-01T23:60:00Z', '2026-01-01T23:59:60Z', '2026-01-01T00:00:00+24:00', '2026-01-01T00:00:00-00:60',
      '2026-01-01T00:00:00', '2026-01-01 00:00:00Z', '2026-01-01T00:00Z', '2026-01-01T00:00:00.Z', '10000-01-01T00:00:00Z', '-0001-01-01T00:00:00Z', '+2026-01-01T00:00:00Z',
      '2026-1-01T00:00:00Z', '２０２６-01-01T00:00:00Z', ' 2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z\n', '',
    ]) {
      expect(parseInstant(text), JSON.stringify(text)).toEqual({ ok: false, problem: 'format' });
    }
    for (const text of ['2024-02-29T00:00:00Z', '2000-02-29T00:00:00Z', '0004-02-29T00:00:00Z', '2026-01-01T00:00:00-00:00']) expect(parseInstant(text).ok, text).toBe(true);
  });

  it('the range: its ends are in, one microsecond past either end (in UTC) is out', () => {
    expect(parseInstant('0001-01-01T00:00:00Z')).toEqual({ ok: true, ms: -62135596800000, microsOfMs: 0 });
    expect(parseInstant('9999-12-31T23:59:59.999999Z')).toEqual({ ok: true, ms: 253402300799999, microsOfMs: 999 });
    expect(parseInstant('9999-12-31T23:59:59.9999999Z')).toEqual({ ok: true, ms: 253402300799999, microsOfMs: 999 });
    for (const text of ['0000-12-31T23:59:59.999999Z', '0001-01-01T00:00:00+00:01', '0001-01-01T00:59:59.999999+01:00', '9999-12-31T23:59:59.999999-00:01', '9999-12-31T23:00:00-01:00', '0000-01-01T00:00:00Z']) {
      expect(parseInstant(text), text).toEqual({ ok: false, problem: 'range' });
    }
    expect(timeRangeMessage('valid_from')).toBe('valid_from must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z');
  });
});

describe('microseconds', () => {
  it('print as the instant they name, to the microsecond, across the exact range of a double', () => {
    const random = seededRandom(7);
    for (let i = 0; i < 5_000; i++) {
      const us = Math.floor((random() - 0.5) * 2 * 9e15);
      const text = microsToTimestamp(us);
      const parsed = parseInstant(text);
      expect(parsed.ok, text).toBe(true);
      expect(instantMicros(parsed as { ok: true; ms: number; microsOfMs: number }), text).toBe(us);
    }
  });

  it('the range\'s ends print as themselves, never past them', () => {
    const first = acceptedTimestampMicros('0001-01-01T00:00:00Z');
    const last = acceptedTimestampMicros('9999-12-31T23:59:59.999999Z');
    expect(microsToTimestamp(first)).toBe('0001-01-01T00:00:00.000000Z');
    expect(microsToTimestamp(last).startsWith('9999-12-31T23:59:59.999')).toBe(true);
    expect(isMicrosOfRange(first) && isMicrosOfRange(last)).toBe(true);
    expect(isMicrosOfRange(first - 8)).toBe(false);
    expect(isMicrosOfRange(last + 32)).toBe(false);
    expect(isMicrosOfRange(0.5)).toBe(false);
    expect(isMicrosOfRange(Number.NaN)).toBe(false);
    expect(isMicrosOfRange(Number.POSITIVE_INFINITY)).toBe(false);
  });

  it('reads anywhere in the range, centuries apart in one batch, survive the event codec: the decoded times are the encoded ones', () => {
    const times = ['0001-01-01T00:00:00Z', '0001-01-01T00:00:00.000008Z', '1970-01-01T00:00:00Z', '9999-12-31T23:59:59.999999Z', '9999-12-31T23:59:58Z'];
    const random = seededRandom(11);
    const ends = times.map((t) => acceptedTimestampMicros(t));
    for (let round = 0; round < 200; round++) {
      const count = 1 + Math.floor(random() * 12);
      const reads = Array.from({ length: count }, (_, i) => {
        const pick = random();
        const observedUs = pick < 0.5 ? ends[Math.floor(random() * ends.length)]! + (pick < 0.25 ? 0 : Math.floor(random() * 1e6)) : Math.floor((random() - 0.2) * 3e17);
        return { tag_type: 'rfid', value: `E${i}`, observedUs: Math.min(Math.max(observedUs, ends[0]!), ends[3]!), rssi: null };
      });
      const groups = readsInExactSpans(reads);
      expect(groups.flat().length).toBe(reads.length);
      const decoded = groups.flatMap((group) => {
        const encoded = encodeReads(group, () => ({ assetId: null, cause: 'unknown_tag' }));
        expect(isMicrosOfRange(encoded.base_us)).toBe(true);
        return decodeReads({ org_id: 1, location_id: 1, source: { kind: 'handheld', submission_id: 's', device_id: 'd' }, tags: encoded.tags, base_us: encoded.base_us, reads: encoded.reads, at: '2026-01-01T00:00:00Z' } as never);
      });
      expect(decoded.map((r) => [r.value, r.observedUs]).sort()).toEqual(reads.map((r) => [r.value, r.observedUs]).sort());
    }
  });
});
