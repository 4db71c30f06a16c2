import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import '../../services/ingest/kafka/client.js';
import { crc32c } from '../../services/ingest/kafka/crc32c.js';
import { unreadableBatchOf } from '../../services/ingest/kafka/record-batches.js';

/**
 * Record batches as kafkajs decodes them from a fetch response, through the codec table that
 * services/ingest/kafka/client.ts guards: a batch that cannot be read decodes as stand-ins for
 * the consumer to dead-letter, never as an error that fails the fetch (docs/scan-ingestion.md).
 */

const require = createRequire(import.meta.url);
type Record = { offset: string; key: Buffer | null; value: Buffer | null };
const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0') as { RecordBatch(options: object): Promise<{ buffer: Buffer }> };
const RecordBatchRecord = require('kafkajs/src/protocol/recordBatch/record/v0') as (options: object) => unknown;
const decodeBatch = require('kafkajs/src/protocol/recordBatch/v0/decoder') as (decoder: unknown) => Promise<{ records: Record[] }>;
const Decoder = require('kafkajs/src/protocol/decoder') as new (buffer: Buffer) => unknown;

/** A v2 batch of `values` at offsets 40 onwards, as a broker stores and sends it. */
async function batch(values: string[], compression: number): Promise<Buffer> {
  const records = values.map((value, i) => RecordBatchRecord({ offsetDelta: i, key: Buffer.from(`k${i}`), value: Buffer.from(value), headers: {} }));
  const encoded = await RecordBatch({ compression, firstOffset: { toString: () => '40' }, lastOffsetDelta: values.length - 1, records });
  return encoded.buffer;
}

/** Decodes `bytes` as kafkajs does inside a fetch response: preceded by other bytes of it, so the batch is a view, not a buffer of its own. */
async function decode(bytes: Buffer): Promise<Record[]> {
  const response = Buffer.concat([Buffer.alloc(100, 7), bytes]);
  return (await decodeBatch(new Decoder(response.subarray(100)))).records;
}

const flip = (bytes: Buffer, at: number) => void (bytes[at] = bytes[at]! ^ 0x5a);

const values = ['{"reader_id": "a", "reads": []}', '{"reader_id": "b", "reads": []}', '{"reader_id": "c", "reads": []}'];

describe('record batches through the guarded codec table', () => {
  it('crc32c gives the standard check value', () => {
    expect(crc32c(Buffer.from('123456789')).toString(16)).toBe('e3069283');
  });

  for (const [name, compression] of [['none', 0], ['gzip', 1]] as const) {
    it(`a ${name} batch that is whole decodes as its records`, async () => {
      const records = await decode(await batch(values, compression));
      expect(records.map((r) => [r.offset, r.value?.toString()])).toEqual(values.map((v, i) => [String(40 + i), v]));
      expect(records.some((r) => unreadableBatchOf(r.value))).toBe(false);
    });

    it(`a ${name} batch with a damaged record decodes as stand-ins of the batch, the last at its last offset`, async () => {
      const bytes = await batch(values, compression);
      flip(bytes, bytes.length - 5);
      const records = await decode(bytes);
      expect(records.map((r) => r.offset)).toEqual(['40', '41', '42']);
      const unreadable = records.map((r) => unreadableBatchOf(r.value));
      expect(new Set(unreadable).size).toBe(1);
      expect(unreadable[0]).toMatchObject({ firstOffset: '40', lastOffset: '42', reason: expect.stringMatching(new RegExp(`^unreadable record batch \\(${name}\\): CRC-32C mismatch: the batch says 0x[0-9a-f]{8}, its bytes give 0x[0-9a-f]{8}$`)) });
      expect(unreadable[0]!.bytes.equals(bytes)).toBe(true);
    });
  }

  it('a gzip batch whose payload does not decompress (its checksum right) is unreadable with the codec error', async () => {
    const bytes = await batch(values, 1);
    flip(bytes, 61 + Math.floor((bytes.length - 61) / 2));
    bytes.writeUInt32BE(crc32c(bytes.subarray(21)), 17);
    const [first] = await decode(bytes);
    expect(unreadableBatchOf(first!.value)?.reason).toMatch(/^unreadable record batch \(gzip\): gzip payload does not decompress: /);
  });

  it('a batch of an unknown codec is unreadable', async () => {
    const bytes = await batch(values, 0);
    bytes.writeInt16BE((bytes.readInt16BE(21) & ~7) | 6, 21);
    bytes.writeUInt32BE(crc32c(bytes.subarray(21)), 17);
    const [first] = await decode(bytes);
    expect(unreadableBatchOf(first!.value)?.reason).toBe('unreadable record batch (codec 6): unknown compression codec 6');
  });

  it('a plain batch whose record length runs past its end (kafkajs alone would throw) is unreadable, even with its checksum right', async () => {
    const bytes = await batch(values, 0);
    bytes[61] = 0x7e;
    bytes.writeUInt32BE(crc32c(bytes.subarray(21)), 17);
    const [first] = await decode(bytes);
    expect(unreadableBatchOf(first!.value)?.reason).toMatch(/^unreadable record batch \(none\): record \d of 3 is cut off$/);
  });
});
