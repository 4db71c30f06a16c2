import crypto from 'node:crypto';
import type { ScanSource, ScansRecordedData, UnknownCause } from './events.js';

/**
 * Reads as scan events carry them: a dictionary of the batch's distinct tags (with what each
 * resolved to) and one compact entry per read, `<tag>,<delta>[,<rssi>][,<point>]` separated by
 * `;`, where `tag` and `point` are indexes (base 36) into the tag and capture-point lists and
 * `delta` is the read's observed time in microseconds after the event's `base_us` (base 36). A
 * parked tag read dozens of times a minute then costs a few bytes a read, not a whole event.
 */

/** A read as a reader or a handheld reports it. */
export interface RawRead {
  tag_type: string;
  value: string;
  /** Microseconds since the Unix epoch. */
  observedUs: number;
  rssi: number | null;
  /** Fixed readers only. */
  capturePoint?: string | null;
}

export interface TagResolution {
  assetId: number | null;
  cause: UnknownCause | null;
}

/** A read as the projection sees it: raw, resolved, and with the key that makes it count once. */
export interface DecodedRead extends RawRead, TagResolution {
  readKey: string;
}

/** RFID EPCs match case-insensitively (and keep leading zeros): the form they are compared in. */
export function matchValue(tagType: string, value: string): string {
  return tagType === 'rfid' ? value.toUpperCase() : value;
}

export function tagKey(tagType: string, value: string): string {
  return `${tagType}\u0000${matchValue(tagType, value)}`;
}

function sourceKey(source: ScanSource): string {
  return source.kind === 'reader' ? `reader\u0000${source.reader_id}` : `handheld\u0000${source.submission_id}`;
}

/**
 * SHA-256 of a string, in hex: the one-shot `crypto.hash` where Node has it (20.12 and later; it
 * costs a fraction of createHash, and a replay hashes every read), createHash otherwise.
 */
const sha256Hex: (text: string) => string =
  typeof (crypto as { hash?: unknown }).hash === 'function'
    ? (text) => (crypto as unknown as { hash(algorithm: string, data: string, encoding: 'hex'): string }).hash('sha256', text, 'hex')
    : (text) => crypto.createHash('sha256').update(text).digest('hex');

/**
 * The identity of a read, whatever batch or event carries it: a read delivered twice (Kafka
 * redelivery, a gateway republishing) has the same key and counts once in every view.
 */
export function readKey(orgId: number, source: ScanSource, read: RawRead): string {
  const hex = sha256Hex(`${orgId}\u0000${sourceKey(source)}\u0000${read.capturePoint ?? ''}\u0000${tagKey(read.tag_type, read.value)}\u0000${read.observedUs}`);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

/** The payload fields of a ScansRecorded event for `reads` (at least one), resolved by `resolve`. */
export function encodeReads(
  reads: readonly RawRead[],
  resolve: (read: RawRead) => TagResolution,
): Pick<ScansRecordedData, 'tags' | 'base_us' | 'reads'> & { capturePoints: string[] } {
  const tagIndex = new Map<string, number>();
  const tags: ScansRecordedData['tags'] = [];
  const pointIndex = new Map<string, number>();
  const capturePoints: string[] = [];
  let base = Number.POSITIVE_INFINITY;
  for (const read of reads) base = Math.min(base, read.observedUs);
  const entries: string[] = [];
  for (const read of reads) {
    const key = tagKey(read.tag_type, read.value);
    let t = tagIndex.get(key);
    if (t === undefined) {
      const { assetId, cause } = resolve(read);
      t = tags.length;
      tagIndex.set(key, t);
      tags.push([read.tag_type, read.value, assetId, cause]);
    }
    let entry = `${t.toString(36)},${(read.observedUs - base).toString(36)}`;
    const rssi = read.rssi === null ? '' : String(read.rssi);
    if (read.capturePoint != null) {
      let p = pointIndex.get(read.capturePoint);
      if (p === undefined) {
        p = capturePoints.length;
        pointIndex.set(read.capturePoint, p);
        capturePoints.push(read.capturePoint);
      }
      entry += `,${rssi},${p.toString(36)}`;
    } else if (rssi !== '') {
      entry += `,${rssi}`;
    }
    entries.push(entry);
  }
  return { tags, base_us: base, reads: entries.join(';'), capturePoints };
}

/** Every read of a ScansRecorded event, in the order it was recorded. */
export function decodeReads(data: ScansRecordedData): DecodedRead[] {
  const points = data.source.kind === 'reader' ? data.source.capture_points : [];
  return data.reads.split(';').map((entry) => {
    const [t, delta, rssi, p] = entry.split(',');
    const [tag_type, value, assetId, cause] = data.tags[parseInt(t!, 36)]!;
    const read: RawRead = {
      tag_type,
      value,
      observedUs: data.base_us + parseInt(delta!, 36),
      rssi: rssi === undefined || rssi === '' ? null : Number(rssi),
      capturePoint: p === undefined ? null : points[parseInt(p, 36)]!,
    };
    return { ...read, assetId, cause, readKey: readKey(data.org_id, data.source, read) };
  });
}

const RFC3339_PARTS = /^(\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * An RFC 3339 timestamp as microseconds since the epoch (digits past the microsecond are
 * dropped), or null. Callers check the timestamp is valid RFC 3339 first.
 */
export function timestampMicros(text: string): number | null {
  const match = RFC3339_PARTS.exec(text);
  if (!match) return null;
  const seconds = Date.parse(`${match[1]}${match[3]}`);
  if (Number.isNaN(seconds)) return null;
  const fraction = Number((match[2] ?? '').slice(0, 6).padEnd(6, '0'));
  return seconds * 1000 + fraction;
}

/** Microseconds since the epoch as a Postgres timestamptz literal (UTC, full precision). */
export function microsToTimestamp(us: number): string {
  const ms = Math.floor(us / 1000);
  const iso = new Date(ms).toISOString(); // …T14:38:11.176Z
  const micros = String(us - ms * 1000).padStart(3, '0');
  return `${iso.slice(0, -1)}${micros}Z`;
}
