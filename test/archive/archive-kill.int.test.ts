import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allProjections } from '../../projections/index.js';
import { ArchivedLog, ArchiveNotGivenError } from '../../shared/archive/archived-log.js';
import { ArchiveBusyError, archiveScanEvents, archiveStatus, committedSegments, type ArchiveRunResult, type ArchiveStep } from '../../shared/archive/scan-archive.js';
import { ArchiveSegmentError, MANIFEST_FILE, readManifest } from '../../shared/archive/segment-file.js';
import { createPool } from '../../shared/db/pool.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { createLogger } from '../../shared/logger.js';
import { rebuildProjections } from '../../shared/projection/rebuild.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { readModelRows, wholeLog } from './logs.js';
import { appendScanLog } from './scan-log.js';

/**
 * docs/design.md "The scan archive", crash safety: archive runs in a child process killed with
 * SIGKILL at each step of a segment's write, and at random times, then run to the end. After every
 * kill the log as readers see it (archive and store events) is the log as it was, event for event;
 * after the last run every old scan event but its stream's last is archived, every other event
 * is still in the log, and a rebuild from archive and log builds the same read models, row for row.
 */

const CHILD = fileURLToPath(new URL('./archive-child.ts', import.meta.url));
const STEPS: ArchiveStep[] = ['segment-temp-written', 'segment-written', 'manifest-pending', 'rows-deleted', 'manifest-committed'];
const SEGMENT_EVENTS = 100;
const projections = allProjections();
const tables = projections.flatMap((p) => p.tables);

let db: TestDatabase;
let pool: pg.Pool;
let store: PostgresEventStore;
let dir: string;
let cutoff: Date;
let logBefore: string[];
let modelsBefore: Record<string, string[]>;
let oldEvents: { master: number; scans: number };

function runChild(env: Record<string, string>, killAfterMs?: number): Promise<{ signal: NodeJS.Signals | null; code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD], {
    env: {
      ...process.env,
      DATABASE_URL: db.url,
      ARCHIVE_DIR: dir,
      OLDER_THAN: cutoff.toISOString(),
      PROJECTIONS: projections.map((p) => p.name).join(','),
      SEGMENT_EVENTS: String(SEGMENT_EVENTS),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  // Killed once it has written its first segment file and then some random time more.
  if (killAfterMs !== undefined) {
    const watch = setInterval(() => {
      if (stdout.includes('step segment-written')) {
        clearInterval(watch);
        setTimeout(() => child.kill('SIGKILL'), killAfterMs);
      }
    }, 5);
    child.once('exit', () => clearInterval(watch));
  }
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal, stdout, stderr })));
}

function rebuild(archiveDir: string | undefined) {
  return rebuildProjections({ store, pool, log: createLogger('silent'), projections, archiveDir, batchSize: 100 });
}

async function storeCounts(): Promise<{ master: number; scans: number }> {
  const { rows } = await pool.query<{ master: number; scans: number }>(
    `SELECT count(*) FILTER (WHERE type <> 'ScansRecorded')::int AS master, count(*) FILTER (WHERE type = 'ScansRecorded')::int AS scans
       FROM event_store.events WHERE recorded_at < $1`,
    [cutoff],
  );
  return rows[0]!;
}

beforeAll(async () => {
  db = await createTestDatabase('archive_kill');
  pool = createPool(db.url, { max: 20, applicationName: 'archive-kill-test' });
  store = new PostgresEventStore(pool, db.url);
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'scan-archive-'));
  await appendScanLog(store, { orgId: 1, firstId: 1, locations: 12, assets: 80, scanEvents: 2400, perAppend: 12, masterEvery: 3 });
  await new Promise((resolve) => setTimeout(resolve, 20));
  cutoff = new Date();
  await new Promise((resolve) => setTimeout(resolve, 20));
  // After the cutoff: more of the same streams and new ones; they stay in the log.
  await appendScanLog(store, { orgId: 1, firstId: 1000, locations: 3, assets: 10, scanEvents: 60, seed: 9 });
  // The current read models, at the head: their checkpoints bound what a run may move.
  await rebuild(undefined);
  modelsBefore = await readModelRows(pool, 'read_model', tables);
  logBefore = await wholeLog(store, pool, undefined);
  oldEvents = await storeCounts();
}, 300_000);

afterAll(async () => {
  await store?.close();
  await pool?.end();
  await db?.drop();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

describe('scan archive: kill -9', () => {
  it('a run killed at each step of a segment, and at random times, loses no event and repeats none; the runs after finish the work', async () => {
    expect(oldEvents.scans).toBeGreaterThan(2000);
    const planned = (await archiveStatus({ pool, dir, projections: projections.map((p) => p.name), olderThan: cutoff })).next!;
    // Every old scan event but the last of each of the 12 location streams.
    expect(planned.events).toBe(oldEvents.scans - 12);

    for (const step of STEPS) {
      const run = await runChild({ KILL_AT: step, KILL_SEGMENT: '2' });
      expect(run.signal, `${step}: ${run.stderr}`).toBe('SIGKILL');
      expect(await wholeLog(store, pool, dir), `after a kill at ${step}`).toEqual(logBefore);
      const manifest = await readManifest(dir);
      const recorded = await committedSegments(pool);
      const last = manifest.segments.at(-1)!;
      // Where the kill left the segment: a file with no entry, a pending entry with or without its rows deleted, or committed.
      if (step === 'manifest-pending') expect([last.state, recorded.some((s) => s.file === last.file)]).toEqual(['pending', false]);
      if (step === 'rows-deleted') expect([last.state, recorded.some((s) => s.file === last.file)]).toEqual(['pending', true]);
      if (step === 'manifest-committed') expect([last.state, recorded.at(-1)!.file]).toEqual(['committed', last.file]);
    }
    for (let i = 0; i < 3; i++) {
      const run = await runChild({}, Math.floor(Math.random() * 150));
      expect(run.code === 0 || run.signal === 'SIGKILL', run.stderr).toBe(true);
      expect(await wholeLog(store, pool, dir), `after a kill at a random time (${i})`).toEqual(logBefore);
    }

    const final = await runChild({});
    expect(final.code, final.stderr).toBe(0);
    const result = JSON.parse(final.stdout.split('\n').find((line) => line.startsWith('done '))!.slice(5)) as ArchiveRunResult;
    expect(result.stoppedAt).toBe('cutoff');
    expect(await wholeLog(store, pool, dir)).toEqual(logBefore);

    // Only the old scan events (but each stream's last) left the log; master data never does.
    const segments = await committedSegments(pool);
    const archived = segments.reduce((n, s) => n + s.events, 0);
    expect(archived).toBe(planned.events);
    // The status's estimate of the uncompressed size is within a fifth of what was written.
    const rawBytes = segments.reduce((n, s) => n + s.rawBytes, 0);
    expect(Math.abs(planned.rawBytesEstimate / rawBytes - 1)).toBeLessThan(0.2);
    expect(planned.tableBytes).toBeGreaterThan(rawBytes / 2);
    expect(await storeCounts()).toEqual({ master: oldEvents.master, scans: 12 });
    // The directory holds the manifest and the committed segments, nothing half-written; the manifest agrees with the database.
    const manifest = await readManifest(dir);
    expect(manifest.segments.map((s) => [s.file, s.state, s.sha256])).toEqual(segments.map((s) => [s.file, 'committed', s.sha256]));
    expect((await fs.readdir(dir)).sort()).toEqual([MANIFEST_FILE, ...segments.map((s) => s.file)].sort());
    const status = await archiveStatus({ pool, dir, projections: projections.map((p) => p.name), olderThan: cutoff });
    expect(status.archived.events).toBe(archived);
    expect(status.next!.events).toBe(0);

    // The same read models from archive and log.
    await rebuild(dir);
    expect(await readModelRows(pool, 'read_model', tables)).toEqual(modelsBefore);
  }, 600_000);

  it('a rebuild refuses to read without the archive, or with a segment missing or corrupt, and names the file', async () => {
    const segments = await committedSegments(pool);
    expect(segments.length).toBeGreaterThan(5);
    await expect(rebuild(undefined)).rejects.toBeInstanceOf(ArchiveNotGivenError);

    const victim = segments[3]!.file;
    const file = path.join(dir, victim);
    const good = await fs.readFile(file);
    const bad = Buffer.from(good);
    bad[Math.floor(bad.length / 2)]! ^= 0x01;
    await fs.writeFile(file, bad);
    await expect(rebuild(dir)).rejects.toThrow(new RegExp(`${victim.replace(/\./g, '\\.')}: SHA-256 is [0-9a-f]{64}, the archive recorded ${segments[3]!.sha256}`));
    await fs.rm(file);
    await expect(rebuild(dir)).rejects.toThrow(ArchiveSegmentError);
    await expect(rebuild(dir)).rejects.toThrow(`${victim}: missing from the archive directory`);
    // The current tables were never swapped: they are as they were.
    expect(await readModelRows(pool, 'read_model', tables)).toEqual(modelsBefore);

    await fs.writeFile(file, good);
    await rebuild(dir);
    expect(await readModelRows(pool, 'read_model', tables)).toEqual(modelsBefore);
  }, 300_000);

  it('moves nothing past a follower that has not applied it, nor while a rebuild or replay reads the archive', async () => {
    const now = new Date();
    const names = projections.map((p) => p.name);
    // The scans recorded after the first cutoff are old by now; a projection that never ran still needs them in the log.
    expect((await archiveStatus({ pool, dir, projections: names, olderThan: now })).next!.events).toBeGreaterThan(0);
    const held = await archiveScanEvents({ pool, dir, olderThan: now, projections: [...names, 'not_started_yet'] });
    expect([held.events, held.stoppedAt]).toEqual([0, 'checkpoint']);

    const reader = await ArchivedLog.open({ store, pool, dir });
    try {
      await expect(archiveScanEvents({ pool, dir, olderThan: now, projections: names })).rejects.toBeInstanceOf(ArchiveBusyError);
    } finally {
      await reader.close();
    }
    const moved = await archiveScanEvents({ pool, dir, olderThan: now, projections: names });
    expect(moved.events).toBeGreaterThan(0);
    expect(await wholeLog(store, pool, dir)).toEqual(logBefore);
  }, 120_000);
});
