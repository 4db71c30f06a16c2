import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allProjections } from '../../projections/index.js';
import { archiveScanEvents, archiveStatus, committedSegments } from '../../shared/archive/scan-archive.js';
import { replayProjections } from '../../shared/projection/replay.js';
import { expectAnswered, seedHistory, snapshot, type History } from '../support/history.js';
import { scanner } from '../support/scans.js';
import { startTestService, TEST_SIGNING_KEY_ENCRYPTION_KEY, type TestService } from '../support/service.js';
import { readModelRows, wholeLog } from './logs.js';
import { settledHead } from '../support/visible.js';

/**
 * docs/design.md "The scan archive": over three histories with every kind of event (master data,
 * people, tags, readers, handheld scans, late reads, deletes, dead letters), the scan events of the
 * first two move into the archive. Then `projections rebuild` (the CLI, as an operator runs it,
 * with ARCHIVE_DIR) builds the same read models, row for row, and the API answers the same, byte
 * for byte; a replay to an instant inside the archived range equals the one before archiving;
 * nothing but scan events left the log; scans go on being recorded in the archived streams.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CLI = ['--import', 'tsx', 'services/cli/main.ts'];
const projections = allProjections();
const names = projections.map((p) => p.name);
const tables = projections.flatMap((p) => p.tables);

let svc: TestService;
let dir: string;
let histories: History[];
let midway: Date;
let cutoff: Date;

const pause = () => new Promise((resolve) => setTimeout(resolve, 20));

function cli(env: Record<string, string>, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...CLI, ...args],
      { cwd: ROOT, env: { ...process.env, DATABASE_URL: svc.db.url, SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY, LOG_LEVEL: 'warn', NODE_NO_WARNINGS: '1', ...env }, timeout: 300_000 },
      (error, stdout, stderr) => resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

async function cliRebuild(env: Record<string, string>): Promise<void> {
  const run = await cli(env, 'projections', 'rebuild', '--json');
  expect(run.code, run.stderr).toBe(0);
}

function replay(into: string) {
  const { ctx } = svc.service;
  return replayProjections({ store: ctx.store, pool: ctx.pool, log: ctx.log, projections, until: midway, into, archiveDir: dir, batchSize: 7 });
}

async function answers(): Promise<Array<Record<string, string>>> {
  return Promise.all(histories.map((h) => snapshot(svc.apiUrl, h.token, h.paths)));
}

beforeAll(async () => {
  svc = await startTestService('archive_history', { RATE_LIMIT_PER_MINUTE: '1000000', RATE_LIMIT_BURST: '1000000' });
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'scan-archive-'));
  const first = await seedHistory(svc, 'archive-a');
  await pause();
  midway = new Date();
  await pause();
  const second = await seedHistory(svc, 'archive-b');
  await pause();
  cutoff = new Date();
  await pause();
  histories = [first, second, await seedHistory(svc, 'archive-c')];
  const { ctx } = svc.service;
  const head = await settledHead(ctx.store, ctx.pool);
  await ctx.checkpoints.waitForCheckpoint(head, { projections: projections.map((p) => p.name), timeoutMs: 60_000 });
}, 600_000);

afterAll(async () => {
  await svc?.stop();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

describe('scan archive over a whole history', () => {
  it('rebuild and replay read archive and log and build what the log alone built; only scan events leave the log', async () => {
    const { ctx } = svc.service;
    const { pool } = ctx;
    const countsByType = async () =>
      Object.fromEntries(
        (await pool.query<{ type: string; n: number }>(`SELECT type, count(*)::int AS n FROM event_store.events GROUP BY type ORDER BY type`)).rows.map((r) => [r.type, r.n]),
      );

    // Before: the replay to an instant inside what will be archived, the rebuilt tables, the API's answers, the log.
    await replay('archive_midway_before');
    const midwayBefore = await readModelRows(pool, 'archive_midway_before', tables);
    expect(midwayBefore['asset_visits']!.length).toBeGreaterThan(0);
    await cliRebuild({ ARCHIVE_DIR: dir });
    const modelsBefore = await readModelRows(pool, 'read_model', tables);
    const answersBefore = await answers();
    for (const [i, h] of histories.entries()) expectAnswered(answersBefore[i]!, h);
    const logBefore = await wholeLog(ctx.store, pool, dir);
    const typesBefore = await countsByType();

    const planned = (await archiveStatus({ pool, dir, projections: names, olderThan: cutoff })).next!;
    const run = await archiveScanEvents({ pool, dir, olderThan: cutoff, projections: names, maxSegmentEvents: 10 });
    expect(run.events).toBe(planned.events);
    expect(run.events).toBeGreaterThan(20);
    expect(run.segments).toBeGreaterThan(2);
    expect(run.stoppedAt).toBe('cutoff');

    // Only ScansRecorded events left the log, all recorded before the cutoff; every other event is where it was.
    const typesAfter = await countsByType();
    expect(typesAfter).toEqual({ ...typesBefore, ScansRecorded: typesBefore['ScansRecorded']! - run.events });
    const { rows: oldScans } = await pool.query<{ n: number; streams: number }>(
      `SELECT count(*)::int AS n, count(DISTINCT stream_id)::int AS streams FROM event_store.events WHERE type = 'ScansRecorded' AND recorded_at < $1`,
      [cutoff],
    );
    // What stays of the old scans: each stream's last event, which the scan decider reads.
    expect(oldScans[0]!.n).toBe(oldScans[0]!.streams);
    expect(await wholeLog(ctx.store, pool, dir)).toEqual(logBefore);

    // The CLI's rebuild reads ARCHIVE_DIR: the same tables, row for row, and the same answers.
    await cliRebuild({ ARCHIVE_DIR: dir });
    expect(await readModelRows(pool, 'read_model', tables)).toEqual(modelsBefore);
    expect(await answers()).toEqual(answersBefore);
    // Without it (DATA_DIR's archive, empty here) the rebuild stops and names the segment it lacks.
    const blind = await cli({ ARCHIVE_DIR: path.join(dir, 'elsewhere') }, 'projections', 'rebuild');
    expect(blind.code).not.toBe(0);
    expect(blind.stderr).toContain(`scan archive segment ${(await committedSegments(pool))[0]!.file}: missing from the archive directory`);

    await replay('archive_midway_after');
    expect(await readModelRows(pool, 'archive_midway_after', tables)).toEqual(midwayBefore);

    // Scans go on in a stream whose events were archived: its last event stayed, so its revision holds.
    const stream = `scans-${histories[0]!.orgId}-`;
    const [last] = (await pool.query<{ stream_id: string; revision: string }>(`SELECT stream_id, revision::text FROM event_store.event_streams WHERE stream_id ~ ('^' || $1 || '[0-9]+$') ORDER BY revision DESC LIMIT 1`, [stream])).rows;
    const locationId = Number(last!.stream_id.slice(stream.length));
    const { scan } = await scanner(svc, histories[0]!.orgId);
    await scan({ id: locationId }, [{ tag_type: 'rfid', value: 'E2801160600002084D9F1000', observed_at: '2026-06-01T00:00:00Z' }]);
    const [now] = await ctx.store.readStream(last!.stream_id, { direction: 'backwards', maxCount: 1 });
    expect(now!.revision).toBe(BigInt(last!.revision) + 1n);
  }, 600_000);
});
