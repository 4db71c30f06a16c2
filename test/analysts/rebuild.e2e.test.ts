import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { allProjections } from '../../projections/index.js';
import { trackingProjection } from '../../projections/tracking/projection.js';
import { rebuildProjections, RebuildInterruptedError, RebuildRefusedError, selectProjections, type RebuildPhase } from '../../shared/projection/rebuild.js';
import { projectionStatuses } from '../../shared/projection/status.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { expectAnswered, seedHistory, snapshot, type History } from '../support/history.js';
import { scanner } from '../support/scans.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';

/**
 * `projections rebuild` (docs/design.md "Rebuild and replay"): fresh tables beside the current ones, swapped in
 * one transaction while the API answers and commands write, with the same answers afterwards.
 */

let svc: TestService;
let history: History;

beforeAll(async () => {
  // The comparisons read every view several times with one key: no rate limit in the way.
  svc = await startTestService('rebuild', { LOG_LEVEL: process.env.TEST_LOG ?? 'silent', RATE_LIMIT_PER_MINUTE: '1000000', RATE_LIMIT_BURST: '1000000' });
  history = await seedHistory(svc, 'rebuild');
});
afterAll(async () => {
  await svc?.stop();
});

async function relationOids(): Promise<Record<string, number>> {
  const { rows } = await svc.service.ctx.pool.query<{ relname: string; oid: number }>(
    `SELECT relname, oid::int AS oid FROM pg_class WHERE relnamespace = 'read_model'::regnamespace AND relkind IN ('r', 'p', 'S') AND NOT relispartition ORDER BY relname`,
  );
  return Object.fromEntries(rows.map((r) => [r.relname, r.oid]));
}

async function rebuildSchemas(): Promise<string[]> {
  const { rows } = await svc.service.ctx.pool.query<{ nspname: string }>(`SELECT nspname FROM pg_namespace WHERE nspname ~ '^read_model_(rebuild|retired)_' ORDER BY 1`);
  return rows.map((r) => r.nspname);
}

function rebuild(names: string[] = [], options: { signal?: AbortSignal; onPhase?: (phase: RebuildPhase, events: number) => void; log?: typeof svc.service.ctx.log } = {}) {
  const { ctx } = svc.service;
  return rebuildProjections({
    store: ctx.store,
    pool: ctx.pool,
    log: options.log ?? ctx.log,
    projections: selectProjections(allProjections(), names),
    batchSize: 50,
    signal: options.signal,
    onProgress: (p) => options.onPhase?.(p.phase, p.events),
  });
}

describe('projections rebuild', () => {
  it('every read-model table and sequence is written by exactly one projection', async () => {
    const { rows } = await svc.service.ctx.pool.query<{ relname: string; relkind: string }>(
      `SELECT relname, relkind FROM pg_class WHERE relnamespace = 'read_model'::regnamespace AND relkind IN ('r', 'p', 'S') AND NOT relispartition
          AND relname NOT IN ('projection_checkpoints', 'projection_set_aside', 'projection_held_events', 'projection_leases', 'projector_members', 'schema_migrations', 'tracking_retention_cutoffs') ORDER BY relname`,
    );
    const owners = (name: string, kind: string) => allProjections().filter((p) => (kind === 'S' ? (p.sequences ?? []) : p.tables).includes(name)).map((p) => p.name);
    expect(rows.map((r) => [r.relname, owners(r.relname, r.relkind).length])).toEqual(rows.map((r) => [r.relname, 1]));
    expect(allProjections().flatMap((p) => [...p.tables, ...(p.sequences ?? [])]).sort()).toEqual(rows.map((r) => r.relname).sort());
  });

  it('swaps fresh tables in while the API answers and commands write elsewhere: the same answers, byte for byte, and read-your-writes after', async () => {
    const { ctx } = svc.service;
    const before = await snapshot(svc.apiUrl, history.token, history.paths);
    expectAnswered(before, history);
    const oids = await relationOids();

    // Meanwhile, in another org: reads that must keep succeeding, and commands that must read their writes.
    const other = await createOrg(ctx, `busy-${randomUUID().slice(0, 6)}`);
    const api = client(svc.apiUrl, (await mintApiKey(ctx, { orgId: other.id, scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read'] })).token);
    const shelf = (await api<{ data: { id: number } }>('POST', '/locations', { body: { name: 'busy shelf' } })).body.data;
    const { scan } = await scanner(svc, other.id);
    let stop = false;
    const failures: string[] = [];
    let rounds = 0;
    const busy = (async () => {
      while (!stop) {
        const created = await api<{ data: { id: number; external_key: string } }>('POST', '/assets', { body: { name: `busy ${rounds}`, tags: [{ tag_type: 'rfid', value: `BUSY${rounds}` }] } });
        if (created.status !== 201) failures.push(`create ${created.status} ${created.text}`);
        const read = await api('GET', `/assets/${created.body.data.id}`);
        if (read.status !== 200 || JSON.stringify(read.body) !== JSON.stringify(created.body)) failures.push(`read after create: ${read.status} ${read.text}`);
        const placed = await scan({ id: shelf.id }, [{ tag_type: 'rfid', value: `BUSY${rounds}`, observed_at: new Date(Date.UTC(2026, 0, 1, 0, 0, rounds)).toISOString() }]);
        if (placed.accepted !== 1) failures.push(`scan accepted ${placed.accepted}`);
        const report = await api<{ data: Array<{ asset_id: number; location_id: number }> }>('GET', `/reports/asset-locations?asset_id=${created.body.data.id}`);
        if (report.status !== 200 || report.body.data[0]?.location_id !== shelf.id) failures.push(`report after scan: ${report.text}`);
        rounds++;
      }
    })();
    const readers = Array.from({ length: 2 }, async () => {
      const watched = history.paths.filter((path) => !path.startsWith('/assets/') || history.gone.includes(path)).slice(0, 12);
      while (!stop) {
        for (const path of watched) {
          const response = await fetch(svc.apiUrl + path, { headers: { authorization: `Bearer ${history.token}` } });
          const text = await response.text();
          if (`${response.status} ${text}` !== before[path]) failures.push(`${path} during the rebuild: ${response.status} ${text.slice(0, 200)}`);
        }
      }
    });

    const phases: RebuildPhase[] = [];
    // A swap that could not lock the live tables in time, or deadlocked with a transaction, lets
    // the API go on and tries again (docs/design.md "Rebuild and replay"): on a loaded machine the
    // busy writers above may cause it. Each retry says so in a warning.
    const log = svc.service.ctx.log.child({});
    const warn = vi.spyOn(log, 'warn');
    const result = await rebuild([], { onPhase: (phase) => phases.at(-1) !== phase && phases.push(phase), log });
    // Right after the swap: prepared statements planned on the old tables answer from the new ones.
    const after = await snapshot(svc.apiUrl, history.token, history.paths);
    stop = true;
    await Promise.all([busy, ...readers]);

    expect(result.rebuilt).toEqual(allProjections().map((p) => p.name));
    expect(result.events).toBeGreaterThan(100);
    const retries = warn.mock.calls.filter((call) => /^swap (deadlocked|could not lock)/.test(String(call[1]))).length;
    expect(phases).toEqual(['replaying', 'analyzing', ...Array.from({ length: 1 + retries }, () => ['catching up', 'swapping'] as const).flat()]);
    expect(failures).toEqual([]);
    expect(rounds).toBeGreaterThan(0);
    expect(after).toEqual(before);
    // New tables (and sequence), not the old ones changed in place; nothing left behind.
    const swapped = await relationOids();
    expect(Object.keys(swapped)).toEqual(Object.keys(oids));
    for (const name of allProjections().flatMap((p) => [...p.tables, ...(p.sequences ?? [])])) expect(swapped[name], name).not.toBe(oids[name]);
    expect(await rebuildSchemas()).toEqual([]);

    // The projector's followers go on from the swapped checkpoints, on the new tables.
    const late = await api<{ data: { id: number } }>('POST', '/assets', { body: { name: 'after the swap', tags: [{ tag_type: 'rfid', value: 'AFTERSWAP' }] } });
    expect(late.status).toBe(201);
    await scan({ id: shelf.id }, [{ tag_type: 'rfid', value: 'AFTERSWAP' }]);
    const row = await api<{ data: Array<{ location_id: number }> }>('GET', `/reports/asset-locations?asset_id=${late.body.data.id}`);
    expect(row.body.data.map((r) => r.location_id)).toEqual([shelf.id]);
    const status = await projectionStatuses(ctx.store, ctx.pool, allProjections().map((p) => p.name), { rebuilds: true });
    expect(status.every((s) => s.rebuilding === false)).toBe(true);
  });

  it('a swap that deadlocks with a transaction (holding a live table the swap locks last, then asking for one it holds) rolls back, lets it finish and swaps after', async () => {
    const { pool } = svc.service.ctx;
    // The swap of `alerts` locks its tables in their order: `alerts` first, `alert_outbox` last.
    expect(allProjections().find((p) => p.name === 'alerts')!.tables).toEqual(['alerts', 'alerts_engine_segments', 'alerts_engine_tree', 'alerts_engine_assets', 'alert_outbox']);
    const other = new pg.Client({ connectionString: svc.db.url });
    await other.connect();
    try {
      await other.query('BEGIN');
      await other.query('SELECT count(*) FROM read_model.alert_outbox');
      const phases: RebuildPhase[] = [];
      const running = rebuild(['alerts'], { onPhase: (phase) => phases.at(-1) !== phase && phases.push(phase) });
      // The swap holds `alerts` and waits for `alert_outbox`; then the other transaction asks for `alerts`.
      const waiting = async () =>
        (
          await pool.query(
            `SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE n.nspname = 'read_model' AND c.relname = 'alert_outbox' AND l.mode = 'AccessExclusiveLock' AND NOT l.granted`,
          )
        ).rowCount === 1;
      const deadline = Date.now() + 60_000;
      while (!(await waiting())) {
        if (Date.now() > deadline) throw new Error('the swap never waited for alert_outbox');
        await new Promise((r) => setTimeout(r, 10));
      }
      const asked = other.query('SELECT count(*) FROM read_model.alerts');
      // Postgres breaks the circle by failing one of the two: the swap (it waited first) tries again; the other goes on.
      await asked;
      await other.query('COMMIT');
      const result = await running;
      expect(result.rebuilt).toEqual(['alerts']);
      expect(phases.filter((phase) => phase === 'swapping').length).toBeGreaterThanOrEqual(2);
      expect(await rebuildSchemas()).toEqual([]);
    } finally {
      await other.end();
    }
  });

  it('refuses a second rebuild of a projection while one runs, and status shows it running', async () => {
    const { ctx } = svc.service;
    // The order is fixed, not left to which call takes the lock first: the first rebuild is held
    // at its swap by a lock on one of tracking's current tables, the second starts only once the first
    // reports it is replaying (its locks taken), and the status is read while it is held.
    const holder = await ctx.pool.connect();
    await holder.query(`BEGIN; LOCK TABLE read_model.${trackingProjection.tables[0]!} IN ACCESS SHARE MODE`);
    let replaying!: () => void;
    const inReplay = new Promise<void>((resolve) => (replaying = resolve));
    const first = rebuild(['tracking'], { onPhase: (phase) => phase === 'replaying' && replaying() });
    first.catch(() => undefined); // awaited below
    try {
      await inReplay;
      const statuses = await projectionStatuses(ctx.store, ctx.pool, ['tracking', 'assets'], { rebuilds: true });
      expect(statuses.map((s) => s.rebuilding)).toEqual([true, false]);
      const refused = await rebuild(['tracking', 'assets']).then(
        () => null,
        (error: unknown) => error,
      );
      expect(refused).toBeInstanceOf(RebuildRefusedError);
      expect(String((refused as Error).message)).toMatch(/^a rebuild of tracking is already running/);
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }
    await expect(first).resolves.toMatchObject({ rebuilt: ['tracking'] });
    // Other projections are not held: a rebuild of assets alone goes through meanwhile.
    await expect(rebuild(['assets'])).resolves.toMatchObject({ rebuilt: ['assets'] });
    await expect(async () => rebuild(['nope'])).rejects.toThrow(/unknown projection nope \(projections: auth, /);
  });

  it('interrupted while replaying or inside the swap: the current tables are untouched and the shadow schema is gone', async () => {
    const before = await snapshot(svc.apiUrl, history.token, history.paths);
    for (const at of ['replaying', 'swapping'] as const) {
      const oids = await relationOids();
      const abort = new AbortController();
      await expect(
        rebuild([], {
          signal: abort.signal,
          onPhase: (phase, events) => {
            if (phase === at && (at !== 'replaying' || events > 0)) abort.abort();
          },
        }),
      ).rejects.toBeInstanceOf(RebuildInterruptedError);
      expect(await relationOids()).toEqual(oids);
      expect(await rebuildSchemas()).toEqual([]);
      expect(await snapshot(svc.apiUrl, history.token, history.paths)).toEqual(before);
    }
  });

  it('drops the shadow schema a killed rebuild left behind', async () => {
    const { pool } = svc.service.ctx;
    await pool.query('CREATE SCHEMA read_model_rebuild_killed1; CREATE TABLE read_model_rebuild_killed1.scan_reads (x int)');
    await rebuildProjections({ store: svc.service.ctx.store, pool, log: svc.service.ctx.log, projections: [trackingProjection] });
    expect(await rebuildSchemas()).toEqual([]);
  });
});
