import fs from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { START, comparePositions, formatPosition, parsePosition, type Position } from '../event-store/port.js';
import type { Logger } from '../logger.js';
import {
  ArchiveSegmentError,
  encodeSegment,
  isSegmentFileName,
  readManifest,
  segmentFileName,
  sha256Hex,
  writeFileDurably,
  writeManifest,
  type Manifest,
  type EncodedSegment,
  type RowToArchive,
  type SegmentEntry,
} from './segment-file.js';

/**
 * The scan archive (docs/design.md "The scan archive"): `ScansRecorded` events recorded before a
 * cutoff move out of the Postgres log into checksummed segment files under ARCHIVE_DIR, which
 * `projections rebuild` and `replay` read before the store's log (archived-log.ts).
 *
 * What a run takes: the log in order from where the last segment ended, up to the first event
 * recorded at or after `olderThan` ("older" keys on the time the log recorded an event, which
 * follows log order; a late read observed long ago but recorded yesterday stays), and never past
 * a follower's checkpoint nor at or past an event a projection set aside (both still
 * need the log). Of that range it moves the `ScansRecorded` events only, and never a stream's last
 * event (the scan decider reads it for the stream's revision). Master data, handheld submission
 * records, placement closures and dead letters stay: positions in the log then have gaps, which
 * readers tolerate (they read "after a position", never "the next number").
 *
 * Each segment, in an order that survives a kill -9 at any point:
 * 1. the file is written to a temp name, fsynced, renamed, and the directory fsynced;
 * 2. the manifest gets the segment as `pending` (written the same way);
 * 3. one transaction deletes exactly the segment's events from the log (all of them or it rolls
 *    back) and records the segment in `event_store.archived_segments` with its SHA-256;
 * 4. the manifest marks it `committed`.
 * The database is the truth: a segment is archived when its row is. `reconcile` (at the start of
 * every run) completes a pending entry the database recorded, and deletes a pending entry's file
 * (and any stray file) the database did not: its events are still in the log.
 *
 * One run at a time, and never while a rebuild or a replay reads the archive: a run holds the
 * exclusive advisory lock ARCHIVE_LOCK, readers the shared one.
 */

export const ARCHIVE_LOCK = 'event-store-archive';
export const ARCHIVED_TYPE = 'ScansRecorded';

const SELECT_BATCH = 5000;
const DEFAULT_SEGMENT_EVENTS = 50_000;
const DEFAULT_SEGMENT_RAW_BYTES = 32 * 1024 * 1024;
/** Bytes of a row's line besides its data and metadata (ids, positions, times), for estimates. */
const LINE_OVERHEAD = 150;

/** The points of a segment's write where a test kills the process (test/archive). */
export type ArchiveStep = 'segment-temp-written' | 'segment-written' | 'manifest-pending' | 'rows-deleted' | 'manifest-committed';

export interface ArchiveRunOptions {
  pool: pg.Pool;
  /** ARCHIVE_DIR (`archiveDir(config)`). */
  dir: string;
  /** Events recorded before this instant are archived (the caller's retention). */
  olderThan: Date;
  /** The followers of the log: none of their checkpoints may be passed (none named: no checkpoint bounds the run). */
  projections: readonly string[];
  readModelSchema?: string;
  maxSegmentEvents?: number;
  /** A segment is closed once its uncompressed content reaches this many bytes. */
  maxSegmentBytes?: number;
  log?: Logger;
  signal?: AbortSignal;
  /** Test only: awaited at each step of each segment (test/archive kills the process there). */
  onStep?: (step: ArchiveStep, file: string) => Promise<void> | void;
}

export interface ReconcileReport {
  /** Pending segments the database had recorded: marked committed. */
  completed: string[];
  /** Pending segments (and stray files) the database had not recorded: deleted, their events are in the log. */
  discarded: string[];
  /** Segments the database recorded that the manifest missed: verified and listed again. */
  relisted: string[];
}

export interface ArchiveRunResult {
  segments: number;
  events: number;
  /** Bytes of the segment files written, and of their content uncompressed. */
  bytes: number;
  rawBytes: number;
  /** The last position archived; null when nothing was. */
  through: string | null;
  /** Why the run stopped where it did. */
  stoppedAt: 'cutoff' | 'checkpoint' | 'set-aside' | 'head';
  reconciled: ReconcileReport;
  seconds: number;
  /**
   * Where the time went, seconds: reading the log, encoding and compressing, writing files (with
   * fsyncs), the delete transactions. Encoding overlaps the others: they add up to more than `seconds`.
   */
  phases: Record<SegmentPhase, number>;
}

type SegmentPhase = 'read' | 'encode' | 'write' | 'delete';

/** Another archive run holds the lock, or a rebuild or a replay reads the archive. */
export class ArchiveBusyError extends Error {
  constructor() {
    super('the scan archive is busy: another archive run, or a rebuild or a replay reading it; run again once it has finished');
    this.name = 'ArchiveBusyError';
  }
}

/** The manifest and the database disagree in a way no crash can cause: an operator must look. */
export class ArchiveInconsistentError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ArchiveInconsistentError';
  }
}

/**
 * ARCHIVE_DIR holds another installation's archive (its manifest names another installation id):
 * a run would delete that archive's segments as files this database does not know.
 */
export class ArchiveForeignError extends Error {
  constructor(dir: string, theirs: string, ours: string) {
    super(
      `the archive directory ${dir} holds the scan archive of another installation (its manifest.json names installation ${theirs}; this database is installation ${ours}): refusing to touch it. Point ARCHIVE_DIR at this installation's own archive directory (docs/operations.md "The scan archive")`,
    );
    this.name = 'ArchiveForeignError';
  }
}

/** This database's installation id (migrations/event-store/004_archive_installation.sql). */
export async function archiveInstallationId(db: pg.Pool | pg.ClientBase): Promise<string> {
  const { rows } = await db.query<{ id: string }>('SELECT id::text AS id FROM event_store.archive_installation');
  if (!rows[0]) throw new ArchiveInconsistentError('event_store.archive_installation has no row: the scan archive does not know which installation it belongs to');
  return rows[0].id;
}

/** Refuses a manifest that names another installation (see ArchiveForeignError). */
export function checkInstallation(manifest: Pick<Manifest, 'installation'>, dir: string, installation: string): void {
  if (manifest.installation !== undefined && manifest.installation !== installation) throw new ArchiveForeignError(dir, manifest.installation, installation);
}

/**
 * The last position the archive holds (the end of its last committed segment); null when nothing
 * is archived. A follower whose checkpoint is before it would skip the archived events.
 */
export async function archivedThrough(db: pg.Pool | pg.ClientBase): Promise<Position | null> {
  const { rows } = await db.query<{ commit: string; prepare: string }>(
    'SELECT a.last_commit::text AS commit, a.last_prepare::text AS prepare FROM event_store.archived_segments a ORDER BY a.last_commit DESC, a.last_prepare DESC LIMIT 1',
  );
  return rows[0] ? { commit: BigInt(rows[0].commit), prepare: BigInt(rows[0].prepare) } : null;
}

/** A segment as `event_store.archived_segments` records it. */
export interface SegmentRecord {
  file: string;
  after: Position;
  last: Position;
  events: number;
  bytes: number;
  rawBytes: number;
  sha256: string;
  oldestRecordedAt: Date;
  newestRecordedAt: Date;
}

/** Every committed segment, in log order. (ORDER BY names the table's columns: the bare names are the text aliases, which sort "1003" before "815".) */
export async function committedSegments(db: pg.Pool | pg.ClientBase): Promise<SegmentRecord[]> {
  const { rows } = await db.query<{
    file: string;
    after_commit: string;
    after_prepare: string;
    last_commit: string;
    last_prepare: string;
    events: number;
    bytes: string;
    raw_bytes: string;
    sha256: string;
    oldest_recorded_at: Date;
    newest_recorded_at: Date;
  }>(
    `SELECT file, after_commit::text, after_prepare::text, last_commit::text, last_prepare::text, events, bytes::text, raw_bytes::text, sha256,
            oldest_recorded_at, newest_recorded_at
       FROM event_store.archived_segments a ORDER BY a.last_commit, a.last_prepare`,
  );
  return rows.map((r) => ({
    file: r.file,
    after: { commit: BigInt(r.after_commit), prepare: BigInt(r.after_prepare) },
    last: { commit: BigInt(r.last_commit), prepare: BigInt(r.last_prepare) },
    events: r.events,
    bytes: Number(r.bytes),
    rawBytes: Number(r.raw_bytes),
    sha256: r.sha256,
    oldestRecordedAt: r.oldest_recorded_at,
    newestRecordedAt: r.newest_recorded_at,
  }));
}

/**
 * Brings the manifest and the directory in line with the database after an interrupted run (see
 * the module comment). Call with ARCHIVE_LOCK held exclusively.
 */
export async function reconcileArchive(client: pg.ClientBase, dir: string, log?: Logger): Promise<ReconcileReport> {
  await fs.mkdir(dir, { recursive: true });
  const report: ReconcileReport = { completed: [], discarded: [], relisted: [] };
  const manifest = await readManifest(dir);
  // Before anything is deleted: a directory of another installation is left as it is.
  const installation = await archiveInstallationId(client);
  checkInstallation(manifest, dir, installation);
  const recorded = new Map((await committedSegments(client)).map((s) => [s.file, s]));
  // The first run (or the first since the manifest was removed) names the installation at once.
  let changed = manifest.installation === undefined;
  manifest.installation = installation;
  const kept: SegmentEntry[] = [];
  for (const entry of manifest.segments) {
    const record = recorded.get(entry.file);
    if (record) {
      if (record.sha256 !== entry.sha256) {
        throw new ArchiveInconsistentError(`scan archive segment ${entry.file}: the manifest says SHA-256 ${entry.sha256}, the database ${record.sha256}`);
      }
      if (entry.state === 'pending') {
        entry.state = 'committed';
        report.completed.push(entry.file);
        changed = true;
      }
      kept.push(entry);
    } else if (entry.state === 'pending') {
      // Its events never left the log (their delete and this record are one transaction).
      await fs.rm(path.join(dir, entry.file), { force: true });
      report.discarded.push(entry.file);
      changed = true;
    } else {
      throw new ArchiveInconsistentError(
        `scan archive segment ${entry.file} is committed in the manifest, but the database has no record of it: was the database restored from a backup older than the archive? Its events may be in the log again; see docs/operations.md "The scan archive"`,
      );
    }
  }
  const listed = new Set(kept.map((e) => e.file));
  for (const record of recorded.values()) {
    if (listed.has(record.file)) continue;
    // The database recorded it, the manifest lost it (a manifest restored from an older backup): list it again, once the file checks out.
    let bytes: Buffer;
    try {
      bytes = await fs.readFile(path.join(dir, record.file));
    } catch {
      throw new ArchiveSegmentError(record.file, `missing from the archive directory ${dir}`);
    }
    if (sha256Hex(bytes) !== record.sha256) throw new ArchiveSegmentError(record.file, `does not match the SHA-256 the database recorded (the file is corrupt)`);
    kept.push(entryOf(record, 'committed'));
    report.relisted.push(record.file);
    changed = true;
  }
  kept.sort((a, b) => comparePositions(parsePosition(a.last), parsePosition(b.last)));
  const known = new Set(kept.map((e) => e.file));
  for (const name of await fs.readdir(dir)) {
    if (name.endsWith('.tmp') || (isSegmentFileName(name) && !known.has(name))) {
      await fs.rm(path.join(dir, name), { force: true });
      if (!name.endsWith('.tmp')) report.discarded.push(name);
    }
  }
  if (changed) await writeManifest(dir, { ...manifest, installation, segments: kept });
  if (report.completed.length + report.discarded.length + report.relisted.length > 0) log?.info({ ...report }, 'scan archive reconciled after an interrupted run');
  return report;
}

function entryOf(record: SegmentRecord, state: SegmentEntry['state']): SegmentEntry {
  return {
    file: record.file,
    after: formatPosition(record.after),
    last: formatPosition(record.last),
    events: record.events,
    bytes: record.bytes,
    rawBytes: record.rawBytes,
    sha256: record.sha256,
    oldestRecordedAt: record.oldestRecordedAt.toISOString(),
    newestRecordedAt: record.newestRecordedAt.toISOString(),
    state,
  };
}

const LAST_POSSIBLE: Position = { commit: 2n ** 63n - 1n, prepare: 2n ** 63n - 1n };

/** Where a run may not pass: the earliest follower's checkpoint (inclusive), the earliest set-aside event (exclusive). */
interface Bounds {
  checkpoint: Position;
  setAside: Position | null;
}

async function boundsOf(db: pg.ClientBase | pg.Pool, schema: string, projections: readonly string[]): Promise<Bounds> {
  const s = pg.escapeIdentifier(schema);
  const checkpoints = await db.query<{ name: string; position: string }>(`SELECT name, position FROM ${s}.projection_checkpoints WHERE name = ANY($1::text[])`, [[...projections]]);
  // A projection with no checkpoint yet needs the whole log; none named, no checkpoint bounds the run.
  let checkpoint: Position | null = projections.length === 0 ? LAST_POSSIBLE : checkpoints.rows.length < new Set(projections).size ? START : null;
  for (const row of checkpoints.rows) {
    const at = parsePosition(row.position);
    if (!checkpoint || comparePositions(at, checkpoint) < 0) checkpoint = at;
  }
  const setAsideRows = await db.query<{ position: string }>(`SELECT position FROM ${s}.projection_set_aside`);
  let setAside: Position | null = null;
  for (const row of setAsideRows.rows) {
    const at = parsePosition(row.position);
    if (!setAside || comparePositions(at, setAside) < 0) setAside = at;
  }
  return { checkpoint: checkpoint ?? START, setAside };
}

interface ScannedRow {
  commit: string;
  prepare: string;
  old: boolean;
  archivable: boolean;
  event_id: string | null;
  stream_id: string | null;
  revision: string | null;
  data_json: string | null;
  metadata_json: string | null;
  recorded_ms: number;
  recorded_us: string;
}

// The log in order past `after`, up to the checkpoint bound, visible rows only (as readers see it).
// `archivable`: a ScansRecorded event that is not its stream's last; only those carry their content.
const SCAN_LOG = `
  SELECT e.tx_id::text AS commit, e.global_position::text AS prepare, e.recorded_at < $5 AS old,
         x.archivable,
         CASE WHEN x.archivable THEN e.event_id::text END AS event_id,
         CASE WHEN x.archivable THEN e.stream_id END AS stream_id,
         CASE WHEN x.archivable THEN e.stream_revision::text END AS revision,
         CASE WHEN x.archivable THEN e.data::text END AS data_json,
         CASE WHEN x.archivable THEN e.metadata::text END AS metadata_json,
         date_part('epoch', e.recorded_at) * 1000 AS recorded_ms,
         (extract(epoch FROM e.recorded_at) * 1000000)::bigint::text AS recorded_us
    FROM event_store.events e
   CROSS JOIN LATERAL (SELECT CASE WHEN e.type = '${ARCHIVED_TYPE}'
                                   THEN e.stream_revision < (SELECT s.revision FROM event_store.event_streams s WHERE s.stream_id = e.stream_id)
                                   ELSE false END AS archivable) x
   WHERE (e.tx_id, e.global_position) > ($1::text::xid8, $2::bigint)
     AND (e.tx_id, e.global_position) <= ($3::text::xid8, $4::bigint)
     AND e.tx_id < pg_snapshot_xmin(pg_current_snapshot())
   ORDER BY e.tx_id, e.global_position
   LIMIT $6`;

/**
 * One archive run (see the module comment): reconciles, then moves what is older than
 * `olderThan` into segments. Safe to kill at any point and to run again.
 */
export async function archiveScanEvents(options: ArchiveRunOptions): Promise<ArchiveRunResult> {
  const started = performance.now();
  const client = await options.pool.connect();
  let broken = false;
  try {
    const { rows: got } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [ARCHIVE_LOCK]);
    if (!got[0]!.ok) throw new ArchiveBusyError();
    // The segment being written while the next one is read (see `SegmentBatcher`).
    const inflight: Inflight = { segment: null };
    try {
      return await archiveLocked(client, options, inflight, started);
    } finally {
      // A failed run lets its segment in flight finish (or fail) before the connection goes.
      await inflight.segment?.catch(() => undefined);
      await client.query('SELECT pg_advisory_unlock(hashtext($1))', [ARCHIVE_LOCK]).catch(() => {
        broken = true;
      });
    }
  } catch (error) {
    // A connection in an unknown state (a query cut short) is not handed back to the pool.
    broken = true;
    throw error;
  } finally {
    client.release(broken);
  }
}

/** The segment of a run being written, if any. */
interface Inflight {
  segment: Promise<void> | null;
}

/** The run itself, under the archive lock: reconcile, read the log from the last segment, write segments. */
async function archiveLocked(client: pg.PoolClient, options: ArchiveRunOptions, inflight: Inflight, started: number): Promise<ArchiveRunResult> {
  const { dir, log } = options;
  const reconciled = await reconcileArchive(client, dir, log);
  const manifest = await readManifest(dir);
  const segments = await committedSegments(client);
  const from = segments.at(-1)?.last ?? START;
  const bounds = await boundsOf(client, options.readModelSchema ?? 'read_model', options.projections);
  const phases: Record<SegmentPhase, number> = { read: 0, encode: 0, write: 0, delete: 0 };
  const result: ArchiveRunResult = { segments: 0, events: 0, bytes: 0, rawBytes: 0, through: null, stoppedAt: 'head', reconciled, seconds: 0, phases };
  const batcher = new SegmentBatcher(client, options, manifest, from, inflight, result);
  result.stoppedAt = await scanLog(client, from, bounds, options.olderThan, batcher, phases);
  await batcher.flush();
  await inflight.segment;
  result.seconds = Math.round(performance.now() - started) / 1000;
  for (const phase of Object.keys(phases) as SegmentPhase[]) phases[phase] = Math.round(phases[phase] * 1000) / 1000;
  return result;
}

/**
 * Reads the log in order from `from` and hands every archivable event to `batcher`, until the
 * first event recorded at or after `olderThan`, a set-aside event, the earliest checkpoint or the
 * head: which of them it stopped at.
 */
async function scanLog(
  client: pg.ClientBase,
  from: Position,
  bounds: Bounds,
  olderThan: Date,
  batcher: SegmentBatcher,
  phases: Record<SegmentPhase, number>,
): Promise<ArchiveRunResult['stoppedAt']> {
  let mark = from;
  for (;;) {
    const reading = performance.now();
    const { rows } = await client.query<ScannedRow>(SCAN_LOG, [
      String(mark.commit),
      String(mark.prepare),
      String(bounds.checkpoint.commit),
      String(bounds.checkpoint.prepare),
      olderThan,
      SELECT_BATCH,
    ]);
    phases.read += (performance.now() - reading) / 1000;
    for (const row of rows) {
      const position = { commit: BigInt(row.commit), prepare: BigInt(row.prepare) };
      if (!row.old) return 'cutoff';
      if (bounds.setAside && comparePositions(position, bounds.setAside) >= 0) return 'set-aside';
      mark = position;
      if (row.archivable) await batcher.add(rowToArchive(row));
    }
    // The end of the readable log, or the earliest checkpoint.
    if (rows.length < SELECT_BATCH) return (await eventsPastCheckpoint(client, bounds)) ? 'checkpoint' : 'head';
  }
}

/** Whether the readable log goes on past the earliest checkpoint. */
async function eventsPastCheckpoint(client: pg.ClientBase, bounds: Bounds): Promise<boolean> {
  const head = await client.query<{ found: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM event_store.events WHERE (tx_id, global_position) > ($1::text::xid8, $2::bigint)
                      AND tx_id < pg_snapshot_xmin(pg_current_snapshot())) AS found`,
    [String(bounds.checkpoint.commit), String(bounds.checkpoint.prepare)],
  );
  return head.rows[0]!.found;
}

/** An archivable row of SCAN_LOG as a segment holds it. */
function rowToArchive(row: ScannedRow): RowToArchive {
  return {
    commit: row.commit,
    prepare: row.prepare,
    eventId: row.event_id!,
    streamId: row.stream_id!,
    revision: row.revision!,
    type: ARCHIVED_TYPE,
    dataJson: row.data_json!,
    metadataJson: row.metadata_json!,
    recordedMs: row.recorded_ms,
    recordedUs: row.recorded_us,
  };
}

/**
 * The events of a run gathered into segments. One segment is in flight while the next one's
 * events are read: its compression runs on libuv's threads meanwhile. Segments still commit one
 * after the other, in log order.
 */
class SegmentBatcher {
  private pending: RowToArchive[] = [];
  private pendingRaw = 0;
  private readonly maxEvents: number;
  private readonly maxRaw: number;

  constructor(
    private readonly client: pg.ClientBase,
    private readonly options: ArchiveRunOptions,
    private readonly manifest: Manifest,
    /** Where the next segment starts: after the last event of the one before. */
    private segmentAfter: Position,
    private readonly inflight: Inflight,
    private readonly result: ArchiveRunResult,
  ) {
    this.maxEvents = options.maxSegmentEvents ?? DEFAULT_SEGMENT_EVENTS;
    this.maxRaw = options.maxSegmentBytes ?? DEFAULT_SEGMENT_RAW_BYTES;
  }

  /** Adds an event to the segment being gathered, and sends the segment off once it is full. */
  async add(row: RowToArchive): Promise<void> {
    this.pending.push(row);
    this.pendingRaw += row.dataJson.length + row.metadataJson.length + LINE_OVERHEAD;
    if (this.pending.length >= this.maxEvents || this.pendingRaw >= this.maxRaw) await this.flush();
  }

  /** Encodes the gathered events, waits for the segment in flight, then writes this one in flight. */
  async flush(): Promise<void> {
    if (this.pending.length === 0) return;
    const { client, options, manifest, inflight, result } = this;
    const { phases } = result;
    const rows = this.pending;
    const after = this.segmentAfter;
    const last = { commit: BigInt(rows.at(-1)!.commit), prepare: BigInt(rows.at(-1)!.prepare) };
    this.segmentAfter = last;
    this.pending = [];
    this.pendingRaw = 0;
    const encodingStarted = performance.now();
    const encoding = encodeSegment(after, last, rows).then((encoded) => {
      phases.encode += (performance.now() - encodingStarted) / 1000;
      return encoded;
    });
    encoding.catch(() => undefined); // surfaces when awaited
    await inflight.segment;
    const { signal } = options;
    if (signal?.aborted) throw signal.reason instanceof Error ? signal.reason : new Error('archive run interrupted');
    inflight.segment = (async () => {
      const written = await writeSegment(client, options.dir, manifest, after, last, rows, await encoding, options.onStep, phases);
      result.segments++;
      result.events += rows.length;
      result.bytes += written.bytes;
      result.rawBytes += written.rawBytes;
      result.through = formatPosition(last);
      options.log?.info({ file: written.file, events: rows.length, bytes: written.bytes }, 'scan archive segment written');
    })();
    inflight.segment.catch(() => undefined); // surfaces when awaited
  }
}

/** Steps 1–4 of the module comment for one segment. */
async function writeSegment(
  client: pg.ClientBase,
  dir: string,
  manifest: Manifest,
  after: Position,
  last: Position,
  rows: readonly RowToArchive[],
  encoded: EncodedSegment,
  onStep: ArchiveRunOptions['onStep'],
  phases: Record<SegmentPhase, number>,
): Promise<{ file: string; bytes: number; rawBytes: number }> {
  let at = performance.now();
  const lap = (phase: SegmentPhase) => {
    const now = performance.now();
    phases[phase] += (now - at) / 1000;
    at = now;
  };
  const file = segmentFileName(after, last);
  let oldest = Infinity;
  let newest = -Infinity;
  for (const row of rows) {
    oldest = Math.min(oldest, row.recordedMs);
    newest = Math.max(newest, row.recordedMs);
  }
  const entry: SegmentEntry = {
    file,
    after: formatPosition(after),
    last: formatPosition(last),
    events: rows.length,
    bytes: encoded.bytes.length,
    rawBytes: encoded.rawBytes,
    sha256: encoded.sha256,
    oldestRecordedAt: new Date(oldest).toISOString(),
    newestRecordedAt: new Date(newest).toISOString(),
    state: 'pending',
  };
  await writeFileDurably(dir, file, encoded.bytes, async () => onStep?.('segment-temp-written', file));
  await onStep?.('segment-written', file);
  manifest.segments.push(entry);
  await writeManifest(dir, manifest);
  await onStep?.('manifest-pending', file);
  lap('write');

  await client.query('BEGIN');
  try {
    const deleted = await client.query(`DELETE FROM event_store.events WHERE global_position = ANY($1::bigint[]) AND type = $2`, [rows.map((r) => r.prepare), ARCHIVED_TYPE]);
    if (deleted.rowCount !== rows.length) throw new ArchiveInconsistentError(`segment ${file}: ${rows.length} events to move, ${deleted.rowCount} found in the log`);
    await client.query(
      `INSERT INTO event_store.archived_segments (file, after_commit, after_prepare, last_commit, last_prepare, events, bytes, raw_bytes, sha256, oldest_recorded_at, newest_recorded_at)
       VALUES ($1, $2::text::xid8, $3, $4::text::xid8, $5, $6, $7, $8, $9, $10, $11)`,
      [file, String(after.commit), String(after.prepare), String(last.commit), String(last.prepare), rows.length, entry.bytes, entry.rawBytes, entry.sha256, entry.oldestRecordedAt, entry.newestRecordedAt],
    );
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
  await onStep?.('rows-deleted', file);
  lap('delete');
  entry.state = 'committed';
  await writeManifest(dir, manifest);
  lap('write');
  await onStep?.('manifest-committed', file);
  return { file, bytes: entry.bytes, rawBytes: entry.rawBytes };
}

export interface ArchiveStatusOptions {
  pool: pg.Pool;
  dir: string;
  projections: readonly string[];
  readModelSchema?: string;
  /** With it, what a run with this cutoff would move. */
  olderThan?: Date;
}

export interface ArchiveStatus {
  dir: string;
  /** What the archive holds (committed segments). */
  archived: {
    segments: number;
    events: number;
    bytes: number;
    rawBytes: number;
    oldestRecordedAt: string | null;
    newestRecordedAt: string | null;
    through: string | null;
  };
  /** What a run with `olderThan` would move now. */
  next?: {
    olderThan: string;
    events: number;
    /** The events' uncompressed size in the segment format, and the files' size at the archive's ratio so far (a first run assumes 1:8). */
    rawBytesEstimate: number;
    bytesEstimate: number;
    /** The events' share of the log table's heap (pg_column_size of their rows). */
    tableBytes: number;
    oldestRecordedAt: string | null;
    newestRecordedAt: string | null;
  };
}

const FIRST_RUN_RATIO = 1 / 8;

/** For `retention status`: what the archive holds and, given `olderThan`, what the next run moves. */
export async function archiveStatus(options: ArchiveStatusOptions): Promise<ArchiveStatus> {
  const segments = await committedSegments(options.pool);
  const sum = (pick: (s: SegmentRecord) => number) => segments.reduce((n, s) => n + pick(s), 0);
  const status: ArchiveStatus = {
    dir: options.dir,
    archived: {
      segments: segments.length,
      events: sum((s) => s.events),
      bytes: sum((s) => s.bytes),
      rawBytes: sum((s) => s.rawBytes),
      oldestRecordedAt: segments.length ? new Date(Math.min(...segments.map((s) => s.oldestRecordedAt.getTime()))).toISOString() : null,
      newestRecordedAt: segments.length ? new Date(Math.max(...segments.map((s) => s.newestRecordedAt.getTime()))).toISOString() : null,
      through: segments.length ? formatPosition(segments.at(-1)!.last) : null,
    },
  };
  if (!options.olderThan) return status;
  const mark = segments.at(-1)?.last ?? START;
  const bounds = await boundsOf(options.pool, options.readModelSchema ?? 'read_model', options.projections);
  const setAside = bounds.setAside ?? LAST_POSSIBLE;
  // The same range as a run: up to the first event recorded at or after the cutoff, the checkpoint, the set-aside event.
  const { rows } = await options.pool.query<{ events: number; raw: string | null; heap: string | null; oldest: Date | null; newest: Date | null }>(
    `WITH stop AS (
       SELECT e.tx_id, e.global_position FROM event_store.events e
        WHERE (e.tx_id, e.global_position) > ($1::text::xid8, $2::bigint) AND e.recorded_at >= $5
          AND e.tx_id < pg_snapshot_xmin(pg_current_snapshot())
        ORDER BY e.tx_id, e.global_position LIMIT 1)
     SELECT count(*)::int AS events,
            sum(octet_length(e.data::text) + octet_length(e.metadata::text) + ${LINE_OVERHEAD})::text AS raw,
            sum(pg_column_size(e.*))::text AS heap,
            min(e.recorded_at) AS oldest, max(e.recorded_at) AS newest
       FROM event_store.events e
      WHERE (e.tx_id, e.global_position) > ($1::text::xid8, $2::bigint)
        AND (e.tx_id, e.global_position) <= ($3::text::xid8, $4::bigint)
        AND (e.tx_id, e.global_position) < ($6::text::xid8, $7::bigint)
        AND e.tx_id < pg_snapshot_xmin(pg_current_snapshot())
        AND NOT EXISTS (SELECT 1 FROM stop WHERE (e.tx_id, e.global_position) >= (stop.tx_id, stop.global_position))
        AND e.type = '${ARCHIVED_TYPE}'
        AND e.stream_revision < (SELECT s.revision FROM event_store.event_streams s WHERE s.stream_id = e.stream_id)`,
    [String(mark.commit), String(mark.prepare), String(bounds.checkpoint.commit), String(bounds.checkpoint.prepare), options.olderThan, String(setAside.commit), String(setAside.prepare)],
  );
  const row = rows[0]!;
  const raw = Number(row.raw ?? 0);
  const ratio = status.archived.rawBytes > 0 ? status.archived.bytes / status.archived.rawBytes : FIRST_RUN_RATIO;
  status.next = {
    olderThan: options.olderThan.toISOString(),
    events: row.events,
    rawBytesEstimate: raw,
    bytesEstimate: Math.round(raw * ratio),
    tableBytes: Number(row.heap ?? 0),
    oldestRecordedAt: row.oldest?.toISOString() ?? null,
    newestRecordedAt: row.newest?.toISOString() ?? null,
  };
  return status;
}
