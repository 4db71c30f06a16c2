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

/** SHA-256 in hex: the one-shot `crypto.hash` where this Node has it (20.12+, several times cheaper for short input). */
const sha256Hex: (text: string) => string =
  typeof crypto.hash === 'function' ? (text) => crypto.hash('sha256', text, 'hex') : (text) => crypto.createHash('sha256').update(text).digest('hex');

/** A read key from its input (see readKey): the first 128 bits of its SHA-256, as a UUID. */
function keyOf(input: string): string {
  const hex = sha256Hex(input);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

/** What a read key hashes, up to the read's own fields: the org and the source. */
function keyPrefix(orgId: number, source: ScanSource): string {
  return `${orgId}\u0000${sourceKey(source)}\u0000`;
}

/**
 * The identity of a read, whatever batch or event carries it: a read delivered twice (Kafka
 * redelivery, a gateway republishing) has the same key and counts once in every view.
 */
export function readKey(orgId: number, source: ScanSource, read: RawRead): string {
  return keyOf(`${keyPrefix(orgId, source)}${read.capturePoint ?? ''}\u0000${tagKey(read.tag_type, read.value)}\u0000${read.observedUs}`);
}

/** The widest span of observed times one event's offsets hold exactly: 2^53 microseconds, about 285 years. */
const EXACT_SPAN_US = 2 ** 53;

/**
 * The reads in groups that one event each can carry exactly: a read's offset from the event's
 * base is exact in a double only within 2^53 microseconds. Real batches are one group; reads
 * centuries apart (the time range allows years 1 to 9999) are grouped by 2^52-microsecond era,
 * in their order.
 */
export function readsInExactSpans(reads: readonly RawRead[]): RawRead[][] {
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (const read of reads) {
    min = Math.min(min, read.observedUs);
    max = Math.max(max, read.observedUs);
  }
  if (max - min <= EXACT_SPAN_US) return [[...reads]];
  const eras = new Map<number, RawRead[]>();
  for (const read of reads) {
    const era = Math.floor(read.observedUs / (EXACT_SPAN_US / 2));
    const group = eras.get(era) ?? [];
    group.push(read);
    eras.set(era, group);
  }
  return [...eras.values()];
}

/**
 * The payload fields of a ScansRecorded event for `reads` (at least one, within an exact span:
 * readsInExactSpans), resolved by `resolve`.
 */
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

/**
 * Every read of a ScansRecorded event, in the order it was recorded. The projection decodes
 * every read of the log, so this is written for speed: what the reads of one event share (the
 * key's prefix, each tag's match form) is computed once, and each read is one object. The keys
 * are exactly readKey's. With `keep`, only the reads of the tags it keeps (by their index in
 * `data.tags`), in the same order.
 */
export function decodeReads(data: ScansRecordedData, keep?: (tagIndex: number) => boolean): DecodedRead[] {
  const points = data.source.kind === 'reader' ? data.source.capture_points : [];
  const prefix = keyPrefix(data.org_id, data.source);
  const tagKeys = data.tags.map(([tagType, value]) => tagKey(tagType, value));
  const entries = data.reads.split(';');
  const reads: DecodedRead[] = [];
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i]!;
    // A read of a tag not kept is skipped before anything else of it is parsed.
    if (keep && !keep(parseInt(entry.slice(0, entry.indexOf(',')), 36))) continue;
    const parts = entry.split(',');
    const t = parseInt(parts[0]!, 36);
    const tag = data.tags[t]!;
    const observedUs = data.base_us + parseInt(parts[1]!, 36);
    const rssi = parts[2];
    const capturePoint = parts.length > 3 ? points[parseInt(parts[3]!, 36)]! : null;
    reads.push({
      tag_type: tag[0],
      value: tag[1],
      observedUs,
      rssi: rssi === undefined || rssi === '' ? null : Number(rssi),
      capturePoint,
      assetId: tag[2],
      cause: tag[3],
      readKey: keyOf(`${prefix}${capturePoint ?? ''}\u0000${tagKeys[t]}\u0000${observedUs}`),
    });
  }
  return reads;
}
