import fs from 'node:fs/promises';
import path from 'node:path';

/** The record batches of a stopped broker's log segment, to damage one as a failing disk would. */

export interface SegmentBatch {
  /** Byte position of the batch in the segment file. */
  position: number;
  /** Size of the whole batch, its header included. */
  size: number;
  firstOffset: bigint;
  lastOffset: bigint;
  /** 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd. */
  codec: number;
  isControl: boolean;
}

/** The first segment of `<logDir>/<topic>-<partition>/`. */
export const firstSegment = (logDir: string, topic: string, partition: number) => path.join(logDir, `${topic}-${partition}`, '00000000000000000000.log');

export async function segmentBatches(file: string): Promise<SegmentBatch[]> {
  const bytes = await fs.readFile(file);
  const batches: SegmentBatch[] = [];
  for (let at = 0; at + 61 <= bytes.length; ) {
    const size = 12 + bytes.readInt32BE(at + 8);
    const firstOffset = bytes.readBigInt64BE(at);
    const attributes = bytes.readInt16BE(at + 21);
    batches.push({ position: at, size, firstOffset, lastOffset: firstOffset + BigInt(bytes.readInt32BE(at + 23)), codec: attributes & 7, isControl: (attributes & 0x20) !== 0 });
    at += size;
  }
  return batches;
}

/** XORs `length` bytes of the batch's records (after its 61-byte header) from `from` on; answers the damaged batch. */
export async function damageRecords(file: string, batch: SegmentBatch, from: number, length = 4): Promise<Buffer> {
  const handle = await fs.open(file, 'r+');
  try {
    const at = batch.position + 61 + from;
    const part = Buffer.alloc(length);
    await handle.read(part, 0, length, at);
    for (let i = 0; i < length; i++) part[i] = part[i]! ^ 0x5a;
    await handle.write(part, 0, length, at);
    const whole = Buffer.alloc(batch.size);
    await handle.read(whole, 0, batch.size, batch.position);
    return whole;
  } finally {
    await handle.close();
  }
}
