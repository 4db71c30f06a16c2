import { execFile, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ScansRecorded, locationScansStream, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import { encodeReads } from '../../shared/domain/scans/read-codec.js';
import type { StreamAppend } from '../../shared/event-store/port.js';
import { bearer } from '../support/auth.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY, startTestService, type TestService } from '../support/service.js';

/**
 * The analysts' commands as scripts run them (docs/cli.md "projections"): `projections status|rebuild|replay`
 * and `seed demo`, as child processes against the database of a running service.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/**
 * The CLI as `npx tracking` runs it: bin/tracking.js, one process, so a signal reaches the command
 * itself (tsx's own binary is a wrapper that gives the command 30 ms to take a relayed signal
 * before it kills it: too short on a loaded machine).
 */
const CLI = [path.join(ROOT, 'bin', 'tracking.js')];
/** Each CLI run is a process that loads the whole service (seconds of CPU on a busy machine). */
const SLOW = 300_000;

let svc: TestService;

beforeAll(async () => {
  svc = await startTestService('analysts_cli');
});
afterAll(async () => {
  await svc?.stop();
});

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

function env(): NodeJS.ProcessEnv {
  return { ...process.env, DATABASE_URL: svc.db.url, SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY, LOG_LEVEL: 'warn', NODE_NO_WARNINGS: '1' };
}

function cli(...args: string[]): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...CLI, ...args], { cwd: ROOT, env: env(), timeout: SLOW }, (error, stdout, stderr) =>
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

/** Exactly one JSON document on stdout; progress (if any) on stderr. */
async function cliJson<T>(...args: string[]): Promise<{ value: T; stderr: string }> {
  const run = await cli(...args, '--json');
  expect(run.code, run.stderr).toBe(0);
  return { value: JSON.parse(run.stdout) as T, stderr: run.stderr };
}

async function schemas(pattern: string): Promise<string[]> {
  const { rows } = await svc.service.ctx.pool.query<{ nspname: string }>('SELECT nspname FROM pg_namespace WHERE nspname ~ $1 ORDER BY 1', [pattern]);
  return rows.map((r) => r.nspname);
}

/** `count` ScansRecorded events of one read each, appended straight to the store (as the tracking projection tests do). */
async function appendScans(orgId: number, count: number): Promise<void> {
  const base = Date.UTC(2026, 0, 1) * 1000;
  for (let start = 0; start < count; start += 500) {
    const appends: StreamAppend[] = [];
    for (let i = start; i < Math.min(count, start + 500); i++) {
      const { capturePoints, ...encoded } = encodeReads([{ tag_type: 'rfid', value: `E2${i % 50}`, observedUs: base + i * 1000, rssi: -60, capturePoint: 'p' }], () => ({ assetId: 1 + (i % 50), cause: null }));
      const data: ScansRecordedData = { org_id: orgId, location_id: 1 + (i % 7), source: { kind: 'reader', reader_id: 'bulk', capture_points: capturePoints }, ...encoded, at: new Date().toISOString() };
      appends.push({ streamId: `${locationScansStream(orgId, 1 + (i % 7))}-${i}`, expectedRevision: 'no_stream', events: [{ type: ScansRecorded.type, data }] });
    }
    await svc.service.ctx.store.appendToStreams(appends);
  }
}

describe('analysts CLI', () => {
  it('seed demo makes a new org per run, with keys that work, and status and rebuild report on it', async () => {
    const first = await cliJson<{ org_id: number; api_key: { token: string; scopes: string[] }; scans_key: { token: string; scopes: string[] }; readers: string[]; scans: { handheld: number; kafka: number } }>('seed', 'demo');
    const second = await cliJson<typeof first.value>('seed', 'demo');
    const [a, b] = [first.value, second.value];
    expect(b.org_id).not.toBe(a.org_id);
    expect(a.api_key.scopes).toEqual(['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read']);
    expect(a.scans_key.scopes).toEqual(['scans:write']);
    expect(b.readers).not.toEqual(a.readers);
    expect(a.scans).toMatchObject({ handheld: expect.any(Number), kafka: 0 });
    expect(a.scans.handheld).toBeGreaterThan(100);
    const me = await fetch(`${svc.apiUrl}/orgs/me`, { headers: bearer(b.api_key.token) });
    expect(((await me.json()) as { data: { id: number } }).data.id).toBe(b.org_id);
    const report = await fetch(`${svc.apiUrl}/reports/asset-locations?limit=100`, { headers: bearer(a.api_key.token) });
    const rows = ((await report.json()) as { data: Array<{ location_external_key: string }> }).data;
    expect(rows).toHaveLength(30);
    const locations = await fetch(`${svc.apiUrl}/locations?limit=100`, { headers: bearer(a.api_key.token) });
    expect(((await locations.json()) as { total_count: number }).total_count).toBe(23);

    const { value: status } = await cliJson<Array<Record<string, unknown>>>('projections', 'status');
    expect(status.map((s) => s.name)).toEqual(['auth', 'people', 'locations', 'assets', 'tags', 'readers', 'tracking', 'webhook_endpoints', 'alert-rules', 'audit', 'alerts', 'counts', 'webhooks']);
    for (const s of status) expect(Object.keys(s)).toEqual(['name', 'checkpoint', 'head', 'lag_events', 'lag_seconds', 'rebuilding', 'needs_rebuild']);

    const { value: rebuilt, stderr } = await cliJson<{ rebuilt: string[]; events: number; seconds: number }>('projections', 'rebuild', 'tracking', 'assets');
    expect(rebuilt).toEqual({ rebuilt: ['assets', 'tracking'], events: expect.any(Number), seconds: expect.any(Number) });
    expect(rebuilt.events).toBeGreaterThan(100);
    // Not a terminal: plain progress lines, one per phase at least.
    expect(stderr).toMatch(/^rebuild: replaying, /m);
    expect(stderr).toMatch(/^rebuild: swapping, .* events\/s/m);
    const again = await fetch(`${svc.apiUrl}/reports/asset-locations?limit=100`, { headers: bearer(a.api_key.token) });
    expect(((await again.json()) as { data: unknown[] }).data).toEqual(rows);
  }, SLOW);

  it('rebuild and replay refuse bad arguments with one line on stderr', async () => {
    const cases: Array<[string[], number, RegExp]> = [
      [['projections', 'rebuild', 'nope'], 2, /^error: unknown projection nope \(projections: auth, people, locations, assets, tags, readers, tracking, webhook_endpoints, alert-rules, audit, alerts, counts\)\n$/],
      [['projections', 'replay', '--into', 'x'], 2, /^error: required option '--until <RFC 3339>' not specified/],
      [['projections', 'replay', '--until', 'yesterday', '--into', 'x'], 2, /^error: --until must be an RFC 3339 timestamp/],
      [['projections', 'replay', '--until', '2026-02-30T00:00:00Z', '--into', 'x'], 2, /^error: --until must be an RFC 3339 timestamp/],
      [['projections', 'replay', '--until', '0000-06-01T00:00:00Z', '--into', 'x'], 2, /^error: --until must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z\n$/],
      [['projections', 'replay', '--until', '2026-01-01T00:00:00Z', '--into', 'Bad-Name'], 2, /^error: --into must be a schema name/],
      [['projections', 'replay', '--until', '2026-01-01T00:00:00Z', '--into', 'read_model'], 2, /^error: --into read_model: that schema belongs to the service/],
      [['projections', 'replay', '--until', '2999-01-01T00:00:00Z', '--into', 'later'], 1, /^error: --until 2999-01-01T00:00:00.000Z is in the future\n$/],
    ];
    const runs = await Promise.all(cases.map(([args]) => cli(...args, '--json')));
    runs.forEach((run, i) => {
      const [args, code, message] = cases[i]!;
      expect([args.join(' '), run.code, run.stdout]).toEqual([args.join(' '), code, '']);
      expect(run.stderr).toMatch(message);
    });
  }, SLOW);

  it('replay builds the read models as of an instant into their own schema, refuses to overwrite it without --replace, and gives a URL that lands in it', async () => {
    const { pool } = svc.service.ctx;
    await pool.query('CREATE SCHEMA IF NOT EXISTS not_a_replay');
    const until = new Date(Date.now() - 1000).toISOString();
    const { value: replay } = await cliJson<{ schema: string; until: string; events: number; seconds: number; database_url: string }>('projections', 'replay', '--until', until, '--into', 'analyst_snapshot');
    expect(Object.keys(replay)).toEqual(['schema', 'until', 'events', 'seconds', 'database_url']);
    expect(replay).toMatchObject({ schema: 'analyst_snapshot', until, events: expect.any(Number) });
    const analyst = new pg.Client({ connectionString: replay.database_url });
    await analyst.connect();
    try {
      const { rows } = await analyst.query<{ schema: string; assets: number; until: Date }>(
        'SELECT current_schema() AS schema, (SELECT count(*)::int FROM assets) AS assets, (SELECT until FROM replay_info) AS until',
      );
      expect(rows[0]).toMatchObject({ schema: 'analyst_snapshot', until: new Date(until) });
    } finally {
      await analyst.end();
    }
    const refused = await cli('projections', 'replay', '--until', until, '--into', 'analyst_snapshot');
    expect([refused.code, refused.stderr]).toEqual([1, 'error: schema analyst_snapshot exists; pass --replace to build it again\n']);
    const notOurs = await cli('projections', 'replay', '--until', until, '--into', 'not_a_replay', '--replace');
    expect([notOurs.code, notOurs.stderr]).toEqual([1, 'error: schema not_a_replay exists and is not a replay schema: it is not replaced\n']);
    // An earlier instant, replaced: fewer events.
    const { value: earlier } = await cliJson<{ events: number }>('projections', 'replay', '--until', '2000-01-01T00:00:00Z', '--into', 'analyst_snapshot', '--replace');
    expect(earlier.events).toBe(0);
    expect((await pool.query('SELECT count(*)::int AS n FROM analyst_snapshot.orgs')).rows[0].n).toBe(0);
  }, SLOW);

  it('a rebuild interrupted by SIGINT or SIGTERM leaves the current tables untouched and drops its shadow schema', async () => {
    await appendScans(9999, 20_000);
    const oids = async () =>
      (await svc.service.ctx.pool.query(`SELECT relname, oid::int FROM pg_class WHERE relnamespace = 'read_model'::regnamespace AND relkind = 'r' ORDER BY 1`)).rows;
    const before = await oids();
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      const child = spawn(process.execPath, [...CLI, 'projections', 'rebuild', '--json'], { cwd: ROOT, env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      const replaying = new Promise<void>((resolve) =>
        child.stderr.on('data', (chunk: Buffer) => {
          stderr += chunk.toString();
          if (/rebuild: replaying/.test(stderr)) resolve();
        }),
      );
      const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
      await replaying;
      child.kill(signal);
      const code = await exited;
      expect([signal, code, stdout]).toEqual([signal, 1, '']);
      expect(stderr.trim().split('\n').at(-1)).toBe('error: rebuild interrupted: the live tables are untouched and the shadow tables were dropped');
      expect(await oids()).toEqual(before);
      expect(await schemas('^read_model_(rebuild|retired)_')).toEqual([]);
    }
  }, SLOW);
});
