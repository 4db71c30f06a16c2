/**
 * An asset's reads as the tracking read model keeps them (docs/design.md "Tracking storage"): in
 * (observed time, log order), up to CHUNK_READS to a row of `scan_read_chunks`, each read a few
 * bytes of the row's `data`: three unsigned LEB128 varints, the microseconds since the previous
 * read (the first: since the row's `first_at`, so 0), the change of `seq` from the previous read
 * (zigzag: a late read has a higher seq than the reads around it), and the location, or 0 when it
 * is the previous read's. A parked tag read every 2 seconds costs 3 + 2 + 1 bytes a read.
 *
 * A chunk never spans two calendar months (UTC) of observed time: it lives in one partition.
 */

/** One read of an asset: observed time in microseconds since the epoch, log order, location. */
export interface ChunkRead {
  us: number;
  seq: number;
  locationId: number;
}

export interface Chunk {
  firstUs: number;
  firstSeq: number;
  lastUs: number;
  lastSeq: number;
  reads: ChunkRead[];
}

/** Reads per chunk, at most: a row stays well under the 2 kB where Postgres moves it out to TOAST, and an append rewrites under a kilobyte. */
export const CHUNK_READS = 128;

/** The first instant (µs) of the UTC calendar month of `us`. */
export function monthStartUs(us: number): number {
  const d = new Date(Math.floor(us / 1000));
  // setUTCFullYear, not Date.UTC: that one reads years 0-99 as 1900-1999.
  d.setUTCFullYear(d.getUTCFullYear(), d.getUTCMonth(), 1);
  d.setUTCHours(0, 0, 0, 0);
  return d.getTime() * 1000;
}

/** The first instant (µs) of the UTC calendar month after the one beginning at `monthUs`. */
export function nextMonthStartUs(monthUs: number): number {
  const d = new Date(Math.floor(monthUs / 1000));
  d.setUTCFullYear(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
  return d.getTime() * 1000;
}

function writeVarint(out: number[], value: number): void {
  let v = value;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
}

const zigzag = (n: number) => (n >= 0 ? n * 2 : -n * 2 - 1);
const unzigzag = (n: number) => (n % 2 === 0 ? n / 2 : -(n + 1) / 2);

/**
 * The bytes of `reads`: a whole chunk's, or, given the read they follow (`after`, the last of a
 * chunk), the bytes that extend that chunk's (decoding the two as one gives both reads').
 */
export function encodeChunk(reads: readonly ChunkRead[], after?: ChunkRead): Buffer {
  const out: number[] = [];
  let us = after ? after.us : reads[0]!.us;
  let seq = after ? after.seq : reads[0]!.seq;
  let locationId = after ? after.locationId : 0;
  for (const read of reads) {
    writeVarint(out, read.us - us);
    writeVarint(out, zigzag(read.seq - seq));
    writeVarint(out, read.locationId === locationId ? 0 : read.locationId);
    us = read.us;
    seq = read.seq;
    locationId = read.locationId;
  }
  return Buffer.from(out);
}

export function decodeChunk(firstUs: number, firstSeq: number, data: Uint8Array): ChunkRead[] {
  const reads: ChunkRead[] = [];
  let us = firstUs;
  let seq = firstSeq;
  let locationId = 0;
  let i = 0;
  const varint = () => {
    let value = 0;
    let scale = 1;
    for (;;) {
      const byte = data[i++]!;
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 0x80;
    }
  };
  while (i < data.length) {
    us += varint();
    seq += unzigzag(varint());
    const location = varint();
    if (location !== 0) locationId = location;
    reads.push({ us, seq, locationId });
  }
  return reads;
}

/**
 * Sorted reads (current-location.ts compareReads) cut into chunks: a chunk ends at CHUNK_READS
 * reads and at a month's end. Cut greedily from the first read, so reads appended after the last
 * chunk fill it before a new one begins, and its key (first read) stays.
 */
export function chunksOf(sorted: readonly ChunkRead[]): Chunk[] {
  const chunks: Chunk[] = [];
  let current: ChunkRead[] = [];
  let month = Number.NaN;
  // The month's bounds, so that a read in the same month as the one before costs no Date.
  let monthEnd = Number.NaN;
  const close = () => {
    if (current.length === 0) return;
    const first = current[0]!;
    const last = current.at(-1)!;
    chunks.push({ firstUs: first.us, firstSeq: first.seq, lastUs: last.us, lastSeq: last.seq, reads: current });
    current = [];
  };
  for (const read of sorted) {
    const sameMonth = read.us >= month && read.us < monthEnd;
    if (current.length === CHUNK_READS || !sameMonth) close();
    if (!sameMonth) {
      month = monthStartUs(read.us);
      monthEnd = nextMonthStartUs(month);
    }
    current.push(read);
  }
  close();
  return chunks;
}
