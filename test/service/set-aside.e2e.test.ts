import { execFile, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allProjections } from '../../projections/index.js';
import { rebuildProjections, selectProjections } from '../../shared/projection/rebuild.js';
import { replayProjections } from '../../shared/projection/replay.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import { AssetCreated, AssetUpdated, assetStream } from '../../shared/domain/assets/events.js';
import { formatPosition } from '../../shared/event-store/port.js';
import { ProjectionSetAsideError, listSetAside, type SetAsideStream } from '../../shared/projection/set-aside.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import type { TestDatabase } from '../support/database.js';
import { eventually } from '../support/kafka.js';
import { scrape } from '../support/metrics.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY, startTestService, type TestService } from '../support/service.js';
import { client, errorOf, type Reply } from '../master-data/http.js';
import { settledHead } from '../support/visible.js';

/**
 * docs/design.md "A projection that cannot apply an event": an event a projection cannot apply sets its
 * stream aside for that projection (recorded, counted, in /readyz, listed by `projections
 * failures`); every other stream and organization flows on; the stream's later events wait
 * behind it; `projections retry` applies them after a fix. A command whose own event is set aside
 * answers 500 at once, whether the projector runs in its process or in another.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
const SLOW = 300_000;
/** Well under the 10 s a command waits for its projections before answering 503. */
const PROMPT_MS = 2_000;

let svc: TestService;

beforeAll(async () => {
  svc = await startTestService('set_aside', { RATE_LIMIT_PER_MINUTE: '1000000', RATE_LIMIT_BURST: '1000000' });
}, SLOW);
afterAll(async () => {
  await svc?.stop();
}, SLOW);

function cli(db: TestDatabase, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { ...process.env, DATABASE_URL: db.url, SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY, LOG_LEVEL: 'warn', NODE_NO_WARNINGS: '1' };
  return new Promise((resolve) => {
    execFile(process.execPath, [path.join(ROOT, 'bin', 'tracking.js'), ...args], { cwd: ROOT, env, timeout: SLOW }, (error, stdout, stderr) =>
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await work();
  return { value, ms: performance.now() - started };
}

async function orgApi(svcUrl: string, ctx: TestService['service']['ctx'], name: string) {
  const org = await createOrg(ctx, `${name}-${Math.random().toString(36).slice(2, 8)}`);
  const { token } = await mintApiKey(ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write'] });
  return { org, api: client(svcUrl, token) };
}

/** The internal-error envelope, with the request id the response carries. */
function expectInternalError(reply: Reply): void {
  expect(reply.status, reply.text).toBe(500);
  const error = errorOf(reply);
  expect(error.type).toBe('internal_error');
  expect(error.status).toBe(500);
  expect(error.request_id).toBe(reply.headers.get('x-request-id'));
  // Nothing about the cause on the wire.
  expect(reply.text).not.toMatch(/set aside|projection/i);
}

/** A failure's decision, without the time it was made. */
const decision = ({ set_aside_at: _at, ...rest }: SetAsideStream) => rest;

describe('an event a projection cannot apply', () => {
  it('sets its stream aside: other organizations flow on, later events are held, failures/readyz/metrics show it, a rebuild decides the same, retry recovers it', async () => {
    const { ctx } = svc.service;
    const poisoned = await orgApi(svc.apiUrl, ctx, 'poisoned');
    const others = await Promise.all([orgApi(svc.apiUrl, ctx, 'healthy-a'), orgApi(svc.apiUrl, ctx, 'healthy-b')]);
    // Warm up: the usual time of a write here.
    for (const { api } of others) expect((await api('POST', '/assets', { body: { name: 'warm-up' } })).status).toBe(201);

    // The poison, straight into the log (past the edge's validation): a year-0 timestamp, which Postgres refuses (22008).
    const assetId = 1_900_000 + Math.floor(Math.random() * 1000);
    const stream = assetStream(poisoned.org.id, assetId);
    const at = new Date().toISOString();
    const planted = await ctx.store.appendToStreams([
      {
        streamId: stream,
        expectedRevision: 'no_stream',
        events: [
          {
            type: AssetCreated.type,
            data: { org_id: poisoned.org.id, asset_id: assetId, at, external_key: `POISON-${assetId}`, minted: false, name: 'poison', description: null, is_active: true, valid_from: '0000-06-01T00:00:00Z', valid_to: null, metadata: {} },
          },
        ],
      },
    ]);

    // Meanwhile, the other organizations write, each answered within the usual time.
    const writes = await Promise.all(
      others.map(async ({ api }) => {
        const times: number[] = [];
        for (let i = 0; i < 4; i++) {
          const { value, ms } = await timed(() => api('POST', '/assets', { body: { name: `flowing ${i}` } }));
          expect(value.status, value.text).toBe(201);
          times.push(ms);
        }
        return times;
      }),
    );
    for (const ms of writes.flat()) expect(ms).toBeLessThan(PROMPT_MS);

    // The poisoned org's later events of that stream: a command whose event waits behind the failed one fails at once...
    const patch = await timed(() => poisoned.api('PATCH', `/assets/${assetId}`, { body: { name: 'renamed while set aside' } }));
    expectInternalError(patch.value);
    expect(patch.ms).toBeLessThan(PROMPT_MS);
    // ...and so does one appended straight to the log; neither is lost: both are held.
    await ctx.store.appendToStreams([
      { streamId: stream, expectedRevision: 1n, events: [{ type: AssetUpdated.type, data: { org_id: poisoned.org.id, asset_id: assetId, at, changes: { description: 'held too' } } }] },
    ]);
    const head = await settledHead(ctx.store, ctx.pool);
    await eventually(async () => expect((await listSetAside(ctx.pool, 'read_model', { stream }))[0]?.held_events).toBe(2));
    await ctx.checkpoints.waitForCheckpoint(head);
    // Its other streams and its other assets are not held.
    expect((await poisoned.api('POST', '/assets', { body: { name: 'unrelated' } })).status).toBe(201);

    const failures = await cli(svc.db, 'projections', 'failures', '--json');
    expect(failures.code, failures.stderr).toBe(0);
    const listed = JSON.parse(failures.stdout) as SetAsideStream[];
    expect(listed).toEqual([
      expect.objectContaining({ projection: 'assets', stream, position: formatPosition(planted.position), event_type: 'AssetCreated', sqlstate: '22008', held_events: 2 }),
    ]);
    expect(listed[0]!.error).toMatch(/out of range|date/i);
    expect(new Date(listed[0]!.set_aside_at).getTime()).toBeGreaterThan(Date.now() - 120_000);

    const ready = await fetch(`${svc.opsUrl}/readyz`);
    expect(ready.status).toBe(200);
    const readyBody = (await ready.json()) as { status: string; checks: Record<string, string>; degraded: boolean; set_aside_streams: Record<string, number> };
    expect(readyBody).toMatchObject({ status: 'ready', degraded: true, set_aside_streams: { assets: 1 } });
    expect(readyBody.checks['projection:assets']).toBe('ok');
    const metrics = await scrape(svc.opsUrl);
    expect(metrics.sum('tracking_projection_set_aside_streams', { projection: 'assets' })).toBe(1);
    expect(metrics.sum('tracking_projection_set_aside_streams', { projection: 'tags' })).toBe(0);

    // A rebuild and a replay meet the same events and set the same stream aside.
    const before = (await listSetAside(ctx.pool, 'read_model')).map(decision);
    const assets = selectProjections(allProjections(), ['assets']);
    await rebuildProjections({ store: ctx.store, pool: ctx.pool, log: ctx.log, projections: assets, batchSize: 7 });
    expect((await listSetAside(ctx.pool, 'read_model')).map(decision)).toEqual(before);
    await replayProjections({ store: ctx.store, pool: ctx.pool, log: ctx.log, projections: allProjections(), until: new Date(), into: 'set_aside_replay', batchSize: 5 });
    expect((await listSetAside(ctx.pool, 'set_aside_replay')).map(decision)).toEqual(before);
    // Still set aside after the swap: the next command on the stream fails at once again.
    expectInternalError(await poisoned.api('PATCH', `/assets/${assetId}`, { body: { description: 'after the rebuild' } }));
    expect((await poisoned.api('GET', `/assets/${assetId}`)).status).toBe(404);

    // The fix: the stored event made valid. Then `projections retry` applies it and the held events, in order.
    const admin = new pg.Client({ connectionString: svc.db.url });
    await admin.connect();
    try {
      await admin.query(`UPDATE event_store.events SET data = jsonb_set(data, '{valid_from}', '"2020-06-01T00:00:00Z"') WHERE stream_id = $1 AND stream_revision = 0`, [stream]);
    } finally {
      await admin.end();
    }
    const retry = await cli(svc.db, 'projections', 'retry', stream, '--projection', 'assets', '--json');
    expect(retry.code, retry.stderr).toBe(0);
    expect(JSON.parse(retry.stdout)).toEqual([{ projection: 'assets', stream, outcome: 'recovered', applied: 4, held_events: 0, error: null }]);

    const recovered = await poisoned.api<{ data: { name: string; description: string | null; valid_from: string } }>('GET', `/assets/${assetId}`);
    expect(recovered.status, recovered.text).toBe(200);
    expect(recovered.body.data).toMatchObject({ name: 'renamed while set aside', description: 'after the rebuild', valid_from: '2020-06-01T00:00:00.000Z' });
    // The stream flows again.
    expect((await poisoned.api('PATCH', `/assets/${assetId}`, { body: { name: 'flowing again' } })).status).toBe(200);

    const empty = await cli(svc.db, 'projections', 'failures', '--json');
    expect(empty.code, empty.stderr).toBe(0);
    expect(JSON.parse(empty.stdout)).toEqual([]);
    expect(await (await fetch(`${svc.opsUrl}/readyz`)).json()).toMatchObject({ status: 'ready', degraded: false, set_aside_streams: {} });
    expect((await scrape(svc.opsUrl)).sum('tracking_projection_set_aside_streams', { projection: 'assets' })).toBe(0);
  }, SLOW);

  it('a command whose own event is set aside answers 500 internal_error at once; retry after the fix makes it visible', async () => {
    const { ctx } = svc.service;
    const { api } = await orgApi(svc.apiUrl, ctx, 'refused');
    const other = await orgApi(svc.apiUrl, ctx, 'bystander');
    // A deterministic failure of a real command: the read model refuses this name.
    const admin = new pg.Client({ connectionString: svc.db.url });
    await admin.connect();
    try {
      await admin.query(`ALTER TABLE read_model.assets ADD CONSTRAINT set_aside_probe CHECK (name <> 'refused by the read model') NOT VALID`);
      const refused = await timed(() => api('POST', '/assets', { body: { name: 'refused by the read model', external_key: 'REFUSED-1' } }));
      expectInternalError(refused.value);
      expect(refused.ms).toBeLessThan(PROMPT_MS);
      expect((await other.api('POST', '/assets', { body: { name: 'bystander' } })).status).toBe(201);

      // A retry while the cause is still there fails again (exit code 1) and keeps it set aside.
      const runtime = new ProjectorRuntime({ store: ctx.store, pool: ctx.pool, projections: allProjections(), log: ctx.log });
      const [again] = await runtime.retrySetAside({ projection: 'assets' });
      expect(again).toMatchObject({ projection: 'assets', outcome: 'failed again', applied: 0, held_events: 0 });
      expect(again!.error).toMatch(/set_aside_probe/);
      const failed = await cli(svc.db, 'projections', 'retry', '--json');
      expect(failed.code).toBe(1);
      expect(failed.stderr).toMatch(/^error: 1 of 1 set-aside stream failed again/m);
      expect(JSON.parse(failed.stdout)).toEqual([expect.objectContaining({ outcome: 'failed again' })]);

      await admin.query('ALTER TABLE read_model.assets DROP CONSTRAINT set_aside_probe');
      const [retried] = await runtime.retrySetAside({ projection: 'assets' });
      expect(retried).toMatchObject({ projection: 'assets', outcome: 'recovered', applied: 1 });
      const list = await api<{ data: Array<{ external_key: string }> }>('GET', '/assets?external_key=REFUSED-1');
      expect(list.body.data.map((a) => a.external_key)).toEqual(['REFUSED-1']);
      expect(await listSetAside(ctx.pool, 'read_model')).toEqual([]);
    } finally {
      await admin.query('ALTER TABLE read_model.assets DROP CONSTRAINT IF EXISTS set_aside_probe');
      await admin.end();
    }
  }, SLOW);
});

describe('every kind of command learns at once that its own stream was set aside', () => {
  it('minting a key the auth projection cannot apply fails at once, in process and through the CLI; retry recovers it', async () => {
    const { ctx } = svc.service;
    const org = await createOrg(ctx, `keys-${Math.random().toString(36).slice(2, 8)}`);
    const admin = new pg.Client({ connectionString: svc.db.url });
    await admin.connect();
    try {
      await admin.query(`ALTER TABLE read_model.api_keys ADD CONSTRAINT set_aside_probe CHECK (name NOT LIKE 'refused%') NOT VALID`);
      const minted = await timed(() => mintApiKey(ctx, { orgId: org.id, name: 'refused in process', scopes: ['assets:read'] }).then(() => null, (error: unknown) => error));
      expect(minted.value).toBeInstanceOf(ProjectionSetAsideError);
      expect(minted.ms).toBeLessThan(PROMPT_MS);
      const started = performance.now();
      const run = await cli(svc.db, 'keys', 'mint', '--org', String(org.id), '--name', 'refused by the cli', '--scopes', 'assets:read', '--json');
      expect(run.code, run.stderr).toBe(1);
      expect(run.stderr).toMatch(/^error: /m);
      // The CLI's own wait is 30 s: it learnt of the set-aside stream, it did not time out.
      expect(performance.now() - started).toBeLessThan(20_000);
      expect((await listSetAside(ctx.pool, 'read_model')).filter((s) => s.projection === 'auth')).toHaveLength(2);
      await admin.query('ALTER TABLE read_model.api_keys DROP CONSTRAINT set_aside_probe');
      const runtime = new ProjectorRuntime({ store: ctx.store, pool: ctx.pool, projections: allProjections(), log: ctx.log });
      expect((await runtime.retrySetAside({ projection: 'auth' })).map((o) => o.outcome)).toEqual(['recovered', 'recovered']);
      const { rows } = await ctx.pool.query<{ name: string }>('SELECT name FROM read_model.api_keys WHERE org_id = $1 ORDER BY name', [org.id]);
      expect(rows.map((r) => r.name)).toEqual(['refused by the cli', 'refused in process']);
    } finally {
      await admin.query('ALTER TABLE read_model.api_keys DROP CONSTRAINT IF EXISTS set_aside_probe');
      await admin.end();
    }
  }, SLOW);

  it('a PATCH that changes nothing, on an asset whose last change was set aside, answers 500 at once (not a 503 after the wait)', async () => {
    const { ctx } = svc.service;
    const { api } = await orgApi(svc.apiUrl, ctx, 'no-op');
    const created = await api<{ data: { id: number } }>('POST', '/assets', { body: { name: 'before' } });
    expect(created.status, created.text).toBe(201);
    const id = created.body.data.id;
    const admin = new pg.Client({ connectionString: svc.db.url });
    await admin.connect();
    try {
      await admin.query(`ALTER TABLE read_model.assets ADD CONSTRAINT set_aside_probe CHECK (name <> 'refused rename') NOT VALID`);
      expectInternalError(await api('PATCH', `/assets/${id}`, { body: { name: 'refused rename' } }));
      // The stream says the name is already that: nothing to append, only the wait, which fails at once.
      const again = await timed(() => api('PATCH', `/assets/${id}`, { body: { name: 'refused rename' } }));
      expectInternalError(again.value);
      expect(again.ms).toBeLessThan(PROMPT_MS);
      await admin.query('ALTER TABLE read_model.assets DROP CONSTRAINT set_aside_probe');
      const runtime = new ProjectorRuntime({ store: ctx.store, pool: ctx.pool, projections: allProjections(), log: ctx.log });
      expect((await runtime.retrySetAside({ projection: 'assets' })).map((o) => o.outcome)).toEqual(['recovered']);
      const same = await api<{ data: { name: string } }>('PATCH', `/assets/${id}`, { body: { name: 'refused rename' } });
      expect([same.status, same.body.data.name]).toEqual([200, 'refused rename']);
    } finally {
      await admin.query('ALTER TABLE read_model.assets DROP CONSTRAINT IF EXISTS set_aside_probe');
      await admin.end();
    }
  }, SLOW);
});

describe('with the projector in another process', () => {
  let db: TestDatabase;
  let api: TestService;
  let projector: ChildProcess | null = null;
  let exited: Promise<unknown>;

  beforeAll(async () => {
    // This process serves the API without a projector; a `ROLES=projector` process projects.
    api = await startTestService('set_aside_apart', { ROLES: 'api', RATE_LIMIT_PER_MINUTE: '1000000', RATE_LIMIT_BURST: '1000000' });
    db = api.db;
    const child = spawn(process.execPath, ['--import', 'tsx', 'services/main.ts'], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: db.url, SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY, ROLES: 'projector', PORT: '0', OPS_PORT: '0', INGEST_PORT: '0', LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    projector = child;
    exited = new Promise((resolve) => child.once('exit', resolve));
    let out = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`projector not ready in time:\n${out}`)), 120_000);
      const onData = (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('tracking service ready')) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', (chunk: Buffer) => (out += chunk.toString()));
      void exited.then(() => reject(new Error(`projector exited:\n${out}`)));
    });
  }, SLOW);
  afterAll(async () => {
    if (projector && projector.exitCode === null) {
      projector.kill('SIGTERM');
      await exited;
    }
    await api?.stop();
  }, SLOW);

  it('the API learns through Postgres that its command\'s event was set aside, and answers 500 at once', async () => {
    const { ctx } = api.service;
    const { api: call } = await orgApi(api.apiUrl, ctx, 'apart');
    expect((await call('POST', '/assets', { body: { name: 'projected elsewhere' } })).status).toBe(201);
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    try {
      await admin.query(`ALTER TABLE read_model.assets ADD CONSTRAINT set_aside_probe CHECK (name <> 'refused elsewhere') NOT VALID`);
      const refused = await timed(() => call('POST', '/assets', { body: { name: 'refused elsewhere' } }));
      expectInternalError(refused.value);
      expect(refused.ms).toBeLessThan(PROMPT_MS);
      expect((await call('POST', '/assets', { body: { name: 'still flowing' } })).status).toBe(201);
      // A later command on the set-aside stream: its event is held.
      const [failure] = await listSetAside(ctx.pool, 'read_model');
      const assetId = Number(/-(\d+)$/.exec(failure!.stream)![1]);
      const held = await timed(() => call('PATCH', `/assets/${assetId}`, { body: { description: 'held' } }));
      expectInternalError(held.value);
      expect(held.ms).toBeLessThan(PROMPT_MS);
    } finally {
      await admin.query('ALTER TABLE read_model.assets DROP CONSTRAINT IF EXISTS set_aside_probe');
      await admin.end();
    }
  }, SLOW);
});
