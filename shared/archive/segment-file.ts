import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { formatPosition, type Position, type RecordedEvent } from '../event-store/port.js';
import { recordedEventFromRow, type EventRow } from '../event-store/postgres.js';

/**
 * The files of the scan archive (docs/design.md "The scan archive"). A segment is one file,
 * `scans-<after>-<last>.jsonl.br` (positions written `<commit>.<prepare>`), Brotli-compressed
 * JSON lines: a header line, then one line per event, the stored row as it was in the log:
 *
 *   [commit, prepare, event_id, stream_id, revision, type, data, metadata, recorded_ms, recorded_us]
 *
 * `commit`, `prepare` and `revision` as decimal strings (64-bit); `data` and `metadata` as the
 * JSON Postgres printed for the jsonb; `recorded_ms` the very number the log adapter reads a
 * row's time as (so a rebuild sees the same `recordedAt`), `recorded_us` the exact microseconds.
 * The manifest (`manifest.json`) lists the segments with their SHA-256; it is replaced atomically.
 */

export const SEGMENT_FORMAT = 'tracking-scan-archive-segment';
export const MANIFEST_FORMAT = 'tracking-scan-archive-manifest';
export const MANIFEST_FILE = 'manifest.json';
const FORMAT_VERSION = 1;
const SEGMENT_SUFFIX = '.jsonl.br';

/** A log row as the archive keeps it (see the module comment): the log adapter's row, and the exact microseconds. */
export type ArchivedRow = [...EventRow, recordedUs: string];

/** A row read from the log with its jsonb still as text, to be written without parsing it. */
export interface RowToArchive {
  commit: string;
  prepare: string;
  eventId: string;
  streamId: string;
  revision: string;
  type: string;
  dataJson: string;
  metadataJson: string;
  recordedMs: number;
  recordedUs: string;
}

export interface SegmentEntry {
  file: string;
  after: string;
  last: string;
  events: number;
  bytes: number;
  rawBytes: number;
  sha256: string;
  oldestRecordedAt: string;
  newestRecordedAt: string;
  /** pending: written, its events may still be in the log; committed: its events left the log. */
  state: 'pending' | 'committed';
}

export interface Manifest {
  format: typeof MANIFEST_FORMAT;
  version: number;
  compression: 'brotli';
  /**
   * The installation the archive belongs to (`event_store.archive_installation`), written by the
   * first run; absent in a manifest no run has written yet. A run or a reader refuses a manifest
   * that names another installation.
   */
  installation?: string;
  segments: SegmentEntry[];
}

/** A segment file that is missing, does not match its checksum, or cannot be read. Names the file. */
export class ArchiveSegmentError extends Error {
  constructor(
    readonly file: string,
    reason: string,
  ) {
    super(`scan archive segment ${file}: ${reason}; it is never skipped (docs/operations.md "The scan archive": restore it from a backup)`);
    this.name = 'ArchiveSegmentError';
  }
}

const brotliCompress = promisify(zlib.brotliCompress);
const brotliDecompress = promisify(zlib.brotliDecompress);

const positionInName = (p: Position) => `${p.commit}.${p.prepare}`;

export function segmentFileName(after: Position, last: Position): string {
  return `scans-${positionInName(after)}-${positionInName(last)}${SEGMENT_SUFFIX}`;
}

export function isSegmentFileName(name: string): boolean {
  return /^scans-\d+\.\d+-\d+\.\d+\.jsonl\.br$/.test(name);
}

export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

export interface EncodedSegment {
  bytes: Buffer;
  rawBytes: number;
  sha256: string;
}

/** A segment's file content: the header and the rows, compressed. */
export async function encodeSegment(after: Position, last: Position, rows: readonly RowToArchive[]): Promise<EncodedSegment> {
  const header = JSON.stringify({ format: SEGMENT_FORMAT, version: FORMAT_VERSION, after: formatPosition(after), last: formatPosition(last), events: rows.length });
  const lines = [header];
  for (const r of rows) {
    // data and metadata are Postgres's own JSON text: written as they are, parsed once on reading.
    lines.push(
      `[${JSON.stringify(r.commit)},${JSON.stringify(r.prepare)},${JSON.stringify(r.eventId)},${JSON.stringify(r.streamId)},${JSON.stringify(r.revision)},${JSON.stringify(r.type)},${r.dataJson},${r.metadataJson},${JSON.stringify(r.recordedMs)},${JSON.stringify(r.recordedUs)}]`,
    );
  }
  const raw = Buffer.from(`${lines.join('\n')}\n`, 'utf8');
  // Quality 4: smaller than gzip -9 at about gzip -6's speed, and faster to read back (docs/design.md).
  const bytes = await brotliCompress(raw, {
    params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 4, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: raw.length },
  });
  return { bytes, rawBytes: raw.length, sha256: sha256Hex(bytes) };
}

/**
 * A segment's events, after checking the file against the checksum the database recorded for
 * it. A missing file, a mismatch, or content that does not decode is an ArchiveSegmentError.
 */
export async function readSegment(dir: string, file: string, expected: { sha256: string; events: number }): Promise<RecordedEvent[]> {
  let bytes: Buffer;
  try {
    bytes = await fs.readFile(path.join(dir, file));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new ArchiveSegmentError(file, `missing from the archive directory ${dir}`);
    throw new ArchiveSegmentError(file, `cannot be read (${(error as Error).message})`);
  }
  const actual = sha256Hex(bytes);
  if (actual !== expected.sha256) throw new ArchiveSegmentError(file, `SHA-256 is ${actual}, the archive recorded ${expected.sha256} (the file is corrupt)`);
  let lines: string[];
  try {
    lines = (await brotliDecompress(bytes)).toString('utf8').split('\n');
  } catch (error) {
    throw new ArchiveSegmentError(file, `does not decompress (${(error as Error).message})`);
  }
  const header = JSON.parse(lines[0]!) as { format?: string; version?: number; events?: number };
  if (header.format !== SEGMENT_FORMAT || header.version !== FORMAT_VERSION) throw new ArchiveSegmentError(file, `is not a version ${FORMAT_VERSION} segment`);
  const events: RecordedEvent[] = [];
  for (let i = 1; i < lines.length; i++) {
    if (lines[i] === '') continue;
    events.push(recordedEventFromRow(JSON.parse(lines[i]!) as ArchivedRow));
  }
  if (events.length !== expected.events || header.events !== expected.events) {
    throw new ArchiveSegmentError(file, `holds ${events.length} events, the archive recorded ${expected.events}`);
  }
  return events;
}

/** Writes `name` in `dir` so that it is either absent or complete after a crash: temp file, fsync, rename, fsync of the directory. */
export async function writeFileDurably(dir: string, name: string, bytes: Uint8Array | string, beforeRename?: () => Promise<void>): Promise<void> {
  const temp = path.join(dir, `${name}.tmp`);
  const handle = await fs.open(temp, 'w', 0o640);
  try {
    await handle.writeFile(bytes);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await beforeRename?.();
  await fs.rename(temp, path.join(dir, name));
  await syncDirectory(dir);
}

export async function syncDirectory(dir: string): Promise<void> {
  const handle = await fs.open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

export function emptyManifest(): Manifest {
  return { format: MANIFEST_FORMAT, version: FORMAT_VERSION, compression: 'brotli', segments: [] };
}

/** The manifest of `dir`; an empty one when there is none yet. */
export async function readManifest(dir: string): Promise<Manifest> {
  let text: string;
  try {
    text = await fs.readFile(path.join(dir, MANIFEST_FILE), 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return emptyManifest();
    throw error;
  }
  const manifest = JSON.parse(text) as Manifest;
  if (manifest.format !== MANIFEST_FORMAT || manifest.version !== FORMAT_VERSION) throw new Error(`${MANIFEST_FILE} in the archive directory ${dir} is not a version ${FORMAT_VERSION} scan archive manifest`);
  return manifest;
}

export async function writeManifest(dir: string, manifest: Manifest): Promise<void> {
  await writeFileDurably(dir, MANIFEST_FILE, `${JSON.stringify(manifest, null, 1)}\n`);
}
