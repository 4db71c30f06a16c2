import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allProjections } from '../../projections/index.js';
import type { RetentionRow } from '../../projections/tracking/retention.js';
import { ARCHIVE_TARGET } from '../../services/cli/archive-retention.js';
import { committedSegments } from '../../shared/archive/scan-archive.js';
import { START, formatPosition } from '../../shared/event-store/port.js';
import { expectAnswered, seedHistory, snapshot, type History } from '../support/history.js';
import { eventually } from '../support/kafka.js';
import { startTestService, TEST_SIGNING_KEY_ENCRYPTION_KEY, type TestService } from '../support/service.js';
import { readModelRows, wholeLog } from './logs.js';
import { settledHead } from '../support/visible.js';

/**
 * docs/operations.md "Retention": the daily `retention run`, as an operator runs it (the CLI, a
 * child process), moves the scan events recorded before now − SCAN_RETENTION_DAYS into the scan
 * archive at ARCHIVE_DIR: they leave the log, the log read whole (archive and store) is what it
 * was, the read models and the API's answers do not change, and `retention status --json` shows
 * the archive's row before and after. A rebuild afterwards builds the same read models, row for
 * row. A projection whose checkpoint is then set back before the archive's end is named by
 * `projections status` and /readyz until a rebuild.
 *
 * The first two histories are recorded "201 days ago" (their events' recording times moved back,
 * in log order, before the baseline rebuild); their reads are observed in May 2026, within the
 * 200 days of SCAN_RETENTION_DAYS here, so the run drops no read-model partition and moves only
 * events of the log.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CLI = ['--import', 'tsx', 'services/cli/main.ts'];
const projections = allProjections();
const tables = projections.flatMap((p) => p.tables);
const RETENTION = { SCAN_RETENTION_DAYS: '200', HISTORY_RETENTION_DAYS: '400' };

let svc: TestService;
let dir: string;
let histories: History[];

function cli(env: Record<string, string>, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...CLI, ...args],
      { cwd: ROOT, env: { ...process.env, DATABASE_URL: svc.db.url, SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY, LOG_LEVEL: 'warn', NODE_NO_WARNINGS: '1', ARCHIVE_DIR: dir, ...env }, timeout: 300_000 },
      (error, stdout, stderr) => resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

async function cliJson<T>(...args: string[]): Promise<T> {
  const run = await cli(RETENTION, ...args, '--json');
  expect(run.code, run.stderr).toBe(0);
  return JSON.parse(run.stdout) as T;
}

async function rebuildThenDropKeys(): Promise<void> {
  const rebuilt = await cli({}, 'projections', 'rebuild', '--json');
  expect(rebuilt.code, rebuilt.stderr).toBe(0);
  const run = await cli({ SCAN_RETENTION_DAYS: 'unlimited', HISTORY_RETENTION_DAYS: 'unlimited' }, 'retention', 'run', '--json');
  expect(run.code, run.stderr).toBe(0);
  const rows = JSON.parse(run.stdout) as RetentionRow[];
  for (const row of rows) if (row.target !== 'scan_read_keys') expect(row.drops, row.target).toEqual([]);
}

const archiveRow = (rows: RetentionRow[]) => rows.find((r) => r.target === ARCHIVE_TARGET)!;

async function answers(): Promise<Array<Record<string, string>>> {
  return Promise.all(histories.map((h) => snapshot(svc.apiUrl, h.token, h.paths)));
}

beforeAll(async () => {
  svc = await startTestService('retention_archive', { RATE_LIMIT_PER_MINUTE: '1000000', RATE_LIMIT_BURST: '1000000' });
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'scan-archive-'));
  const first = await seedHistory(svc, 'retention-a');
  const second = await seedHistory(svc, 'retention-b');
  // Everything so far was recorded 201 days ago (the order of recording times is the log's still).
  await svc.service.ctx.pool.query(`UPDATE event_store.events SET recorded_at = recorded_at - interval '201 days'`);
  histories = [first, second, await seedHistory(svc, 'retention-c')];
  const { ctx } = svc.service;
  const head = await settledHead(ctx.store, ctx.pool);
  await ctx.checkpoints.waitForCheckpoint(head, { projections: projections.map((p) => p.name), timeoutMs: 60_000 });
}, 600_000);

afterAll(async () => {
  await svc?.stop();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

describe('retention run with the scan archive', () => {
  it('moves old scan events into the archive and out of the log; read models, answers and a rebuild stay the same', async () => {
    const { ctx } = svc.service;
    const { pool } = ctx;
    // The read models as the log (with its recording times moved) builds them: a rebuild, then
    // a run that drops only what a rebuild brings back (the keys of reads delivered long ago by
    // the log's time; the archive keeps everything with `unlimited`).
    await rebuildThenDropKeys();
    const modelsBefore = await readModelRows(pool, 'read_model', tables);
    expect(modelsBefore['asset_visits']!.length).toBeGreaterThan(0);
    const answersBefore = await answers();
    for (const [i, h] of histories.entries()) expectAnswered(answersBefore[i]!, h);
    const logBefore = await wholeLog(ctx.store, pool, dir);
    const oldScans = async () =>
      (
        await pool.query<{ n: number; movable: number }>(
          `SELECT count(*)::int AS n, count(*) FILTER (WHERE e.stream_revision < s.revision)::int AS movable
             FROM event_store.events e JOIN event_store.event_streams s USING (stream_id)
            WHERE e.type = 'ScansRecorded' AND e.recorded_at < now() - interval '200 days'`,
        )
      ).rows[0]!;
    const before = await oldScans();
    // What moves: every old scan event but its stream's last (the scan decider reads it).
    const movable = before.movable;
    expect(movable).toBeGreaterThan(10);

    const status = await cliJson<RetentionRow[]>('retention', 'status');
    expect(status.map((r) => r.target)).toEqual(['scan_read_chunks', 'asset_visits', 'scan_read_keys', ARCHIVE_TARGET]);
    const planned = archiveRow(status);
    expect(planned).toMatchObject({ kept: '200 days in the log, then in the archive', partitions: 0, bytes: 0, from: null, to: null, drops: [`${movable} scan events`], aged_reads: null });
    expect(planned.holds).toContain(dir);
    expect(planned.drop_bytes).toBeGreaterThan(movable * 50);
    expect(Date.now() - Date.parse(planned.cutoff!)).toBeGreaterThanOrEqual(200 * 86_400_000);
    // Nothing of the read models is old enough to go.
    for (const row of status) if (row.target !== ARCHIVE_TARGET) expect(row.drops, row.target).toEqual([]);

    const run = await cliJson<RetentionRow[]>('retention', 'run');
    const moved = archiveRow(run);
    expect(moved.drops).toEqual([`${movable} scan events`]);
    const segments = await committedSegments(pool);
    expect(segments.reduce((n, s) => n + s.events, 0)).toBe(movable);
    expect(moved.partitions).toBe(segments.length);
    expect(moved.bytes).toBe(segments.reduce((n, s) => n + s.bytes, 0));
    expect((await fs.readdir(dir)).filter((f) => f.endsWith('.jsonl.br')).sort()).toEqual(segments.map((s) => s.file).sort());

    // Out of the log, each stream's last event aside; the log read whole is what it was.
    expect(await oldScans()).toEqual({ n: before.n - movable, movable: 0 });
    expect(await wholeLog(ctx.store, pool, dir)).toEqual(logBefore);
    expect(await readModelRows(pool, 'read_model', tables)).toEqual(modelsBefore);
    expect(await answers()).toEqual(answersBefore);

    const after = archiveRow(await cliJson<RetentionRow[]>('retention', 'status'));
    expect(after).toMatchObject({ partitions: segments.length, bytes: moved.bytes, drops: [], drop_bytes: 0 });
    expect(Date.parse(after.to!)).toBeLessThan(Date.parse(after.cutoff!));
    expect(Date.parse(after.from!)).toBeLessThanOrEqual(Date.parse(after.to!));
    // A second run has nothing left to move.
    expect(archiveRow(await cliJson<RetentionRow[]>('retention', 'run')).drops).toEqual([]);

    // A rebuild reads archive and log: the same read models, row for row.
    await rebuildThenDropKeys();
    expect(await readModelRows(pool, 'read_model', tables)).toEqual(modelsBefore);
    expect(await answers()).toEqual(answersBefore);
  }, 600_000);

  it('names a projection set back before the archive in `projections status` and /readyz, until a rebuild', async () => {
    const { pool } = svc.service.ctx;
    expect((await committedSegments(pool)).length).toBeGreaterThan(0);
    const ready = async () => {
      const reply = await fetch(`${svc.opsUrl}/readyz`);
      return { code: reply.status, body: (await reply.json()) as { status: string; checks: Record<string, string> } };
    };
    expect((await ready()).code).toBe(200);
    await pool.query(`UPDATE read_model.projection_checkpoints SET position = $1 WHERE name = 'tracking'`, [formatPosition(START)]);

    const statuses = await cliJson<Array<{ name: string; needs_rebuild: string | null }>>('projections', 'status');
    expect(statuses.find((s) => s.name === 'tracking')!.needs_rebuild).toContain('run `npx tracking projections rebuild tracking`');
    for (const s of statuses.filter((s) => s.name !== 'tracking')) expect(s.needs_rebuild, s.name).toBeNull();
    const table = await cli({}, 'projections', 'status');
    expect(table.stdout).toMatch(/^tracking .* yes\s*$/m);
    const notReady = await ready();
    expect(notReady.code).toBe(503);
    expect(notReady.body.checks['projection:tracking']).toMatch(/^needs `projections rebuild`: projection tracking is at .*, before the end of the scan archive/);

    const rebuilt = await cli({}, 'projections', 'rebuild', 'tracking', '--json');
    expect(rebuilt.code, rebuilt.stderr).toBe(0);
    await eventually(async () => expect((await ready()).code).toBe(200));
    expect((await cliJson<Array<{ name: string; needs_rebuild: string | null }>>('projections', 'status')).every((s) => s.needs_rebuild === null)).toBe(true);
  }, 300_000);
});
