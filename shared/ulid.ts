import { getRandomValues } from 'node:crypto';
import { ulid } from 'ulid';

/**
 * ULIDs (request ids, webhook message ids, key and session ids) whose random part is crypto
 * randomness drawn 4 KiB at a time. ulid's own default asks the crypto module for one byte per
 * character, 16 calls a ULID: about 60 µs each on a 2-core machine, against about a microsecond
 * here (shared/ulid.unit.test.ts). Each byte is used once; its top five bits pick a character,
 * uniformly (256 is a multiple of 32).
 */
const pool = new Uint8Array(4096);
let offset = pool.length;

function pooledRandom(): number {
  if (offset >= pool.length) {
    getRandomValues(pool);
    offset = 0;
  }
  return pool[offset++]! / 256;
}

/** A new ULID, of `time` (ms since the epoch; now by default). */
export function newUlid(time?: number): string {
  return ulid(time, pooledRandom);
}
