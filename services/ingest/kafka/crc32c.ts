/**
 * CRC-32C (Castagnoli), the checksum of a Kafka record batch. Slicing by 8: kafkajs's own
 * byte-at-a-time table (which it uses only to write) reads about 60 MB/s, this about 350 MB/s on one core.
 */
const POLYNOMIAL = 0x82f63b78;
const TABLES: Int32Array[] = (() => {
  const tables = Array.from({ length: 8 }, () => new Int32Array(256));
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ POLYNOMIAL : c >>> 1;
    tables[0]![n] = c;
  }
  for (let n = 0; n < 256; n++) {
    for (let t = 1; t < 8; t++) tables[t]![n] = (tables[t - 1]![n]! >>> 8) ^ tables[0]![tables[t - 1]![n]! & 0xff]!;
  }
  return tables;
})();

export function crc32c(bytes: Uint8Array): number {
  const [t0, t1, t2, t3, t4, t5, t6, t7] = TABLES as [Int32Array, Int32Array, Int32Array, Int32Array, Int32Array, Int32Array, Int32Array, Int32Array];
  let crc = -1;
  let i = 0;
  for (const end8 = bytes.length - (bytes.length % 8); i < end8; i += 8) {
    const a = (crc ^ (bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24))) | 0;
    crc =
      t7[a & 0xff]! ^
      t6[(a >>> 8) & 0xff]! ^
      t5[(a >>> 16) & 0xff]! ^
      t4[a >>> 24]! ^
      t3[bytes[i + 4]!]! ^
      t2[bytes[i + 5]!]! ^
      t1[bytes[i + 6]!]! ^
      t0[bytes[i + 7]!]!;
  }
  for (; i < bytes.length; i++) crc = (crc >>> 8) ^ t0[(crc ^ bytes[i]!) & 0xff]!;
  return (crc ^ -1) >>> 0;
}
