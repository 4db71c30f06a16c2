import { crc32c } from './crc32c.js';

/**
 * Record batches that cannot be read (docs/scan-ingestion.md "A batch that cannot be read"): a
 * checksum that does not match, a payload its codec cannot decompress, an unknown codec.
 *
 * kafkajs decodes every batch of a fetch response in one go and checks no checksum: a batch it
 * cannot decode fails the whole fetch, every time it is fetched, and the partition stalls; a batch
 * whose bytes changed may decode into wrong offsets or values. Its one hook into that decoding is
 * the codec table, which it asks for every batch whose attributes name a codec. So every entry of
 * the table, "none" included, is wrapped here: before decompressing, the wrapper finds the batch
 * around the payload it is handed, checks its CRC-32C as Kafka's own consumer does, and when the
 * batch cannot be read, answers stand-in records in its place (as many as the batch says it holds,
 * the last one at the batch's last offset) instead of failing. Each stand-in's empty value is a
 * view of one buffer registered to the batch, so `unreadableBatchOf` tells them from real records
 * (no record a producer sends can share that buffer), and the consumer dead-letters the batch
 * once and commits past it with the records around it.
 */

export interface UnreadableBatch {
  /** Offset of the batch's first record. */
  firstOffset: string;
  /** Offset of its last record (first plus the header's last offset delta). */
  lastOffset: string;
  /** One line: why it cannot be read. */
  reason: string;
  /** The whole batch as the broker sent it, header included. */
  bytes: Buffer;
}

interface Codec {
  compress(encoder: { buffer: Buffer }): Promise<Buffer>;
  decompress(buffer: Buffer): Promise<Buffer>;
}

/** The v2 record batch header up to its records: offset, length, epoch, magic, CRC, attributes, ..., record count. */
const HEADER_BYTES = 61;
/** Bytes of the header that its length field does not count (the offset and the length). */
const LOG_OVERHEAD = 12;
const CRC_AT = 17;
/** The CRC covers everything from the attributes on. */
const ATTRIBUTES_AT = 21;
/** A stand-in costs 7 to 11 bytes; a record count past this (a header too damaged to trust) is not stood in for. */
const MAX_STAND_INS = 1 << 20;

const standIns = new WeakMap<ArrayBufferLike, UnreadableBatch>();

/** The unreadable batch a record stands in for, or undefined for a real record. */
export function unreadableBatchOf(value: Buffer | null): UnreadableBatch | undefined {
  return value ? standIns.get(value.buffer) : undefined;
}

const CODEC_NAMES = ['none', 'gzip', 'snappy', 'lz4', 'zstd'];

/**
 * Wraps each entry of kafkajs's codec table (0 to 7; what it holds for 1 to 4 decodes, 0 and 5 to 7
 * are filled) so that a batch that cannot be read decodes as stand-ins rather than failing.
 */
export function guardCodecTable(table: Record<number, (() => Codec) | undefined>): void {
  for (let type = 0; type <= 7; type++) {
    const inner = table[type];
    const codec = guardedCodec(type, inner ? inner() : null);
    table[type] = () => codec;
  }
}

function guardedCodec(type: number, inner: Codec | null): Codec {
  const name = CODEC_NAMES[type] ?? `codec ${type}`;
  return {
    compress: (encoder) => (inner ? inner.compress(encoder) : Promise.reject(new Error(`${name} compression is not used by this service`))),
    async decompress(payload) {
      const batch = batchAround(payload);
      if (!batch) {
        // Not the records of a v2 batch: a message set of the formats before Kafka 0.11, which
        // kafkajs also hands to the codec table, for "none" too, where no answer would be right.
        if (type === 0 || !inner) throw new Error(`a ${name} message set in the legacy format (magic 0 or 1), which this consumer does not read`);
        return inner.decompress(payload);
      }
      let records: Buffer | null = null;
      const reason = await (async () => {
        const magic = batch.readInt8(16);
        if (magic !== 2) return `magic byte ${magic}, not 2`;
        const stored = batch.readUInt32BE(CRC_AT);
        const computed = crc32c(batch.subarray(ATTRIBUTES_AT));
        if (stored !== computed) return `CRC-32C mismatch: the batch says ${hex(stored)}, its bytes give ${hex(computed)}`;
        if (type === 0) records = payload;
        else if (!inner) return `unknown compression codec ${type}`;
        else {
          try {
            records = await inner.decompress(payload);
          } catch (error) {
            return `${name} payload does not decompress: ${error instanceof Error ? error.message : String(error)}`;
          }
        }
        return framingProblem(records, batch.readInt32BE(HEADER_BYTES - 4));
      })();
      if (reason === null) return records!;
      return standInsFor(batch, `unreadable record batch (${name}): ${reason}`);
    },
  };
}

/**
 * The whole batch whose records `payload` is, or null. kafkajs hands the codec the records as a
 * view of the fetch response, right after the batch's header; the header's length field, which
 * must count exactly the payload and the header after it, tells a batch from anything else.
 */
function batchAround(payload: Buffer): Buffer | null {
  if (payload.byteOffset < HEADER_BYTES) return null;
  const batch = Buffer.from(payload.buffer, payload.byteOffset - HEADER_BYTES, HEADER_BYTES + payload.length);
  if (batch.readInt32BE(8) !== HEADER_BYTES - LOG_OVERHEAD + payload.length) return null;
  return batch;
}

/** Why `count` records cannot be cut from `records` (each a varint length, then at least 6 bytes), or null. */
function framingProblem(records: Buffer, count: number): string | null {
  let at = 0;
  for (let i = 0; i < count; i++) {
    let length = 0;
    let shift = 0;
    for (;;) {
      if (at >= records.length || shift > 28) return `record ${i} of ${count} is cut off`;
      const byte = records[at++]!;
      length |= (byte & 0x7f) << shift;
      shift += 7;
      if (byte < 0x80) break;
    }
    length = (length >>> 1) ^ -(length & 1);
    if (length < 6 || at + length > records.length) return `record ${i} of ${count} is cut off`;
    at += length;
  }
  return null;
}

/** Records for kafkajs to decode in place of the batch: `count` of them, empty, the last at its last offset. */
function standInsFor(batch: Buffer, reason: string): Buffer {
  const count = batch.readInt32BE(HEADER_BYTES - 4);
  const lastDelta = batch.readInt32BE(23);
  const firstOffset = batch.readBigInt64BE(0);
  const unreadable: UnreadableBatch = {
    firstOffset: firstOffset.toString(),
    lastOffset: (firstOffset + BigInt(Math.max(0, lastDelta))).toString(),
    reason,
    bytes: Buffer.from(batch),
  };
  if (count > MAX_STAND_INS) throw new Error(`${reason}; its record count ${count} is not believable either (offsets ${unreadable.firstOffset} to ${unreadable.lastOffset})`);
  const deltas = Array.from({ length: count }, (_, i) => (i === count - 1 ? Math.max(0, lastDelta) : Math.min(i, Math.max(0, lastDelta))));
  // Each: length, attributes 0, timestamp delta 0, offset delta, key null (-1), value empty (0), no headers.
  const bodies = deltas.map((delta) => Buffer.from([0, 0, ...varint(delta), 1, 0, 0]));
  const size = bodies.reduce((sum, body) => sum + varint(body.length).length + body.length, 0);
  // A buffer of its own (never from the pool), so every view of it is a stand-in of this batch.
  const out = Buffer.from(new ArrayBuffer(size));
  let at = 0;
  for (const body of bodies) {
    for (const byte of varint(body.length)) out[at++] = byte;
    at += body.copy(out, at);
  }
  standIns.set(out.buffer, unreadable);
  return out;
}

/** A zigzag varint, as Kafka writes a record's lengths and deltas. */
function varint(value: number): number[] {
  let v = ((value << 1) ^ (value >> 31)) >>> 0;
  const out: number[] = [];
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  out.push(v);
  return out;
}

const hex = (n: number) => `0x${n.toString(16).padStart(8, '0')}`;
