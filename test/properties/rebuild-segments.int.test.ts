import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allProjections } from '../../projections/index.js';
import { applyMigrationGroup } from '../../shared/db/migrate.js';
import { createPool, type Pool } from '../../shared/db/pool.js';
import { comparePositions, formatPosition, type Position } from '../../shared/event-store/port.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { createLogger } from '../../shared/logger.js';
import { readCheckpoint } from '../../shared/projection/checkpoints.js';
import { RebuildInterruptedError, rebuildProjections, type ReplayProcesses } from '../../shared/projection/rebuild.js';
import { replayProjections } from '../../shared/projection/replay.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import { segmentName, type ProjectionSegments } from '../../shared/projection/segments.js';
import { appendScanLog } from '../archive/scan-log.js';
import { eventually } from '../event-store/conformance.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { settledHead } from '../support/visible.js';

/**
 * docs/design.md "Rebuild and replay": `projections rebuild --parallel p` with PROJECTION_SEGMENTS
 * n rebuilds the split projection (tracking) as n segments, p of them side by side, with every
 * other projection alongside, and its swap leaves the checkpoints of n segments. For random logs
 * (scans and master data interleaved), batch sizes, n from 1 to 5 and p from 1 to 4, every table
 * of every projection equals, row by row, a one-segment rebuild of the same log (tracking's `seq`
 * compared as its rank among the asset's reads, as tracking-segments.int does). After a rebuild
 * that changes n, a projector of the new n follows new reads; an interrupted parallel rebuild
 * leaves the current tables and checkpoints as they were. Reproduce a failure with the seed it
 * prints (PROPERTY_SEED).
 */

const SEED = Number(process.env.PROPERTY_SEED ?? 20261130);
const RUNS = Number(process.env.PROPERTY_RUNS ?? 6);
const log = createLogger(process.env.TEST_LOG === 'debug' ? 'debug' : 'silent');
const projections = allProjections();
let db: TestDatabase;
let pool: Pool;
let store: PostgresEventStore;
let nextOrg = 100;

beforeAll(async () => {
  db = await createTestDatabase('rebuild_segments');
  pool = createPool(db.url, { max: 40 });
  store = new PostgresEventStore(pool, db.url, { pollIntervalMs: 50 });
});

afterAll(async () => {
  await store?.close();
  await pool?.end();
  await db?.drop();
});

const segmentsOf = (n: number): ProjectionSegments => ({ all: n, byName: {} });

/**
 * The processes of `--parallel` as the CLI starts them (services/cli/catch-up-process.ts), on the
 * test's database: each applies its share of the segments, reading the log on its own.
 */
function replayProcesses(): ReplayProcesses {
  return { entry: new URL('../../services/cli/catch-up-process.ts', import.meta.url), connection: { databaseUrl: db.url, store: { kind: 'postgres' }, logLevel: 'silent' } };
}

/** A schema rebuilt from a fresh log of scans of `orgId` (20 assets, 3 locations): its read model and checkpoints. */
async function rebuiltSchema(schema: string, plan: { orgId: number; scanEvents: number; seed: number; segments: number; parallel: number }) {
  await appendScanLog(store, { orgId: plan.orgId, firstId: 1000 * plan.orgId, assets: 20, locations: 3, scanEvents: plan.scanEvents, seed: plan.seed });
  await rebuildInto(schema, { segments: plan.segments, parallel: plan.parallel, batchSize: 100 });
  return { model: await readModel(schema), at: await checkpoints(schema) };
}

/** After a rebuild that did not finish: the schema's read model and checkpoints as `before`, and no shadow or retired schema left. */
async function expectAsBefore(schema: string, before: { model: Record<string, string[]>; at: Record<string, string> }): Promise<void> {
  expect(await checkpoints(schema)).toEqual(before.at);
  expect(await readModel(schema)).toEqual(before.model);
  const left = await pool.query(`SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)`, [`${schema}_`]);
  expect(left.rows).toEqual([]);
}

/** Watches for a catch-up process's connections (its application name) until `stop`, which says whether one was seen. */
function watchCatchUpProcesses(): { stop(): Promise<boolean> } {
  let seen = false;
  let watching = true;
  const polling = (async () => {
    while (watching && !seen) {
      const { rows } = await pool.query(`SELECT 1 FROM pg_stat_activity WHERE application_name = 'tracking-catch-up' AND datname = current_database()`);
      seen = rows.length > 0;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  })();
  return {
    async stop() {
      watching = false;
      await polling;
      return seen;
    },
  };
}

/** A fresh current schema (all read-model migrations), rebuilt from the whole log; with `processes`, the replay in `parallel` processes. */
async function rebuildInto(schema: string, options: { segments: number; parallel: number; batchSize: number; processes?: boolean }) {
  await pool.query(`DROP SCHEMA IF EXISTS ${pg.escapeIdentifier(schema)} CASCADE`);
  await applyMigrationGroup(pool, 'read-model', schema);
  return rebuildProjections({
    store,
    pool,
    log,
    projections,
    schema,
    batchSize: options.batchSize,
    segments: segmentsOf(options.segments),
    parallel: options.parallel,
    processes: options.processes ? replayProcesses() : undefined,
  });
}

/** The checkpoint rows of a schema, by name. */
async function checkpoints(schema: string): Promise<Record<string, string>> {
  const { rows } = await pool.query<{ name: string; position: string }>(`SELECT name, position FROM ${pg.escapeIdentifier(schema)}.projection_checkpoints ORDER BY name`);
  return Object.fromEntries(rows.map((r) => [r.name, r.position]));
}

const TRACKING = new Set(['scan_read_keys', 'scan_read_chunks', 'asset_visits', 'asset_locations', 'tracking_key_progress']);

/**
 * Every table of every projection, each row as text, sorted. Tracking's tables that hold `seq` give
 * it as its rank among the asset's reads; tracking_key_progress (one row per segment) is left out.
 */
async function readModel(schema: string): Promise<Record<string, string[]>> {
  const s = pg.escapeIdentifier(schema);
  const rows = async (sql: string) => (await pool.query<{ row: string }>(sql)).rows.map((r) => r.row).sort();
  const ranks = `(SELECT c.org_id, c.asset_id, r.seq, rank() OVER (PARTITION BY c.org_id, c.asset_id ORDER BY r.seq) AS rank
                    FROM ${s}.scan_read_chunks c, ${s}.tracking_chunk_reads(c.first_at, c.first_seq, c.data) r)`;
  const rank = (alias: string, column: string) =>
    `(SELECT k.rank FROM ${ranks} k WHERE k.org_id = ${alias}.org_id AND k.asset_id = ${alias}.asset_id AND k.seq = ${alias}.${column})`;
  const model: Record<string, string[]> = {
    scan_read_keys: await rows(`SELECT concat_ws(' ', read_key, recorded_at) AS row FROM ${s}.scan_read_keys`),
    scan_read_chunks: await rows(
      `SELECT concat_ws(' ', c.org_id, c.asset_id, c.first_at, c.last_at, c.reads,
                (SELECT string_agg(concat_ws(':', r.observed_at, k.rank, r.location_id), ',' ORDER BY r.observed_at, r.seq)
                   FROM ${s}.tracking_chunk_reads(c.first_at, c.first_seq, c.data) r
                   JOIN ${ranks} k ON k.org_id = c.org_id AND k.asset_id = c.asset_id AND k.seq = r.seq)) AS row
         FROM ${s}.scan_read_chunks c`,
    ),
    asset_visits: await rows(
      `SELECT concat_ws(' ', v.org_id, v.asset_id, v.location_id, v.first_at, ${rank('v', 'first_seq')}, v.last_at, ${rank('v', 'last_seq')}) AS row FROM ${s}.asset_visits v`,
    ),
    asset_locations: await rows(
      `SELECT concat_ws(' ', l.org_id, l.asset_id, l.location_id, l.last_seen, l.dwell_started_at, ${rank('l', 'first_seq')}, ${rank('l', 'last_seq')}) AS row FROM ${s}.asset_locations l`,
    ),
  };
  for (const table of projections.flatMap((p) => p.tables)) {
    // The segments' own working state differs with their number by nature (segmentStateTables).
    if (TRACKING.has(table) || projections.some((p) => p.segmentStateTables?.includes(table))) continue;
    model[table] = await rows(`SELECT t::text AS row FROM ${s}.${pg.escapeIdentifier(table)} t`);
  }
  return model;
}

describe('projections rebuild in segments, side by side', () => {
  it('gives, table by table, a one-segment rebuild, for any log, batch size, 1 to 5 segments and --parallel 1 to 4, in this process or in processes of their own', { timeout: 1_800_000 }, async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          assets: fc.integer({ min: 1, max: 30 }),
          locations: fc.integer({ min: 1, max: 4 }),
          scanEvents: fc.integer({ min: 5, max: 150 }),
          readsPerEvent: fc.integer({ min: 1, max: 5 }),
          perAppend: fc.integer({ min: 1, max: 20 }),
          batchSize: fc.integer({ min: 7, max: 300 }),
          segments: fc.integer({ min: 1, max: 5 }),
          parallel: fc.integer({ min: 1, max: 4 }),
          processes: fc.boolean(),
          seed: fc.integer(),
        }),
        async (plan) => {
          run++;
          const orgId = ++nextOrg;
          await appendScanLog(store, { orgId, firstId: 1000 * orgId, ...plan, masterEvery: 3 });
          const one = `rb_one_${run}`;
          const many = `rb_many_${run}`;
          await rebuildInto(one, { segments: 1, parallel: 1, batchSize: plan.batchSize });
          await rebuildInto(many, plan);
          const names = plan.segments === 1 ? ['tracking'] : Array.from({ length: plan.segments }, (_, i) => segmentName('tracking', i, plan.segments));
          const oneAt = await checkpoints(one);
          const manyAt = await checkpoints(many);
          // The swap wrote the checkpoints of n segments, each where the one-segment rebuild got to.
          expect(Object.keys(manyAt).filter((n) => n.startsWith('tracking'))).toEqual(names);
          for (const name of names) expect(manyAt[name]).toBe(oneAt.tracking);
          const [a, b] = [await readModel(one), await readModel(many)];
          expect(a.asset_visits!.length).toBeGreaterThan(0);
          const how = `${plan.segments} segments, --parallel ${plan.parallel}${plan.processes ? ' in processes' : ''}`;
          for (const table of Object.keys(a)) expect(b[table], `${table} with ${how}`).toEqual(a[table]);
          for (const schema of [one, many]) await pool.query(`DROP SCHEMA ${pg.escapeIdentifier(schema)} CASCADE`);
        },
      ),
      { seed: SEED, numRuns: RUNS, endOnFailure: true },
    );
  });

  it('changes the number of segments: a projector of the new number follows new reads, and the old checkpoints are gone', { timeout: 600_000 }, async () => {
    const schema = 'rb_change';
    const orgId = ++nextOrg;
    await appendScanLog(store, { orgId, firstId: 1000 * orgId, assets: 20, locations: 3, scanEvents: 120, seed: 5 });
    await rebuildInto(schema, { segments: 1, parallel: 1, batchSize: 50 });
    expect(Object.keys(await checkpoints(schema))).toContain('tracking');
    // n = 1 → 3 by a rebuild; the swap takes the lease of the old segment with it.
    await rebuildProjections({ store, pool, log, projections, schema, batchSize: 50, segments: segmentsOf(3), parallel: 3 });
    const after = await checkpoints(schema);
    expect(after).not.toHaveProperty('tracking');
    for (let i = 0; i < 3; i++) expect(after).toHaveProperty(segmentName('tracking', i, 3));

    const runtime = new ProjectorRuntime({ store, pool, projections, log, schema, batchSize: 40, takeoverIntervalMs: 50, leaseMs: 5_000, segments: segmentsOf(3) });
    runtime.start();
    try {
      // A transaction of another database of the cluster open meanwhile (another test file's): the
      // log hands out the new events, and counts them in its head, only once it has ended.
      const holder = await pool.connect();
      let last: Position;
      try {
        await holder.query('BEGIN');
        await holder.query('SELECT pg_current_xact_id()');
        await appendScanLog(store, { orgId, firstId: 1000 * orgId + 500, assets: 10, locations: 2, scanEvents: 60, seed: 6 });
        const settled = settledHead(store, pool);
        await new Promise((resolve) => setTimeout(resolve, 500));
        await holder.query('COMMIT');
        last = await settled;
      } finally {
        // Destroyed, not returned: after a failure its transaction may still be open.
        holder.release(true);
      }
      await eventually(async () => {
        for (let i = 0; i < 3; i++) expect(comparePositions(await readCheckpoint(pool, schema, segmentName('tracking', i, 3)), last)).toBeGreaterThanOrEqual(0);
      }, 120_000);
    } finally {
      await runtime.stop();
    }
    // What it followed equals a one-segment rebuild of the whole log.
    await rebuildInto('rb_change_ref', { segments: 1, parallel: 1, batchSize: 100 });
    const [followed, reference] = [await readModel(schema), await readModel('rb_change_ref')];
    for (const table of Object.keys(reference)) expect(followed[table], table).toEqual(reference[table]);
    // And back to one segment.
    await rebuildProjections({ store, pool, log, projections, schema, batchSize: 100, segments: segmentsOf(1), parallel: 2 });
    expect(Object.keys(await checkpoints(schema)).filter((n) => n.startsWith('tracking'))).toEqual(['tracking']);
  });

  it('replays to an instant in segments, side by side, as in one segment', { timeout: 600_000 }, async () => {
    const orgId = ++nextOrg;
    await appendScanLog(store, { orgId, firstId: 1000 * orgId, assets: 15, locations: 3, scanEvents: 80, seed: 8 });
    const until = new Date();
    await new Promise((resolve) => setTimeout(resolve, 20));
    await appendScanLog(store, { orgId, firstId: 1000 * orgId + 500, assets: 5, locations: 2, scanEvents: 40, seed: 9 });
    const one = await replayProjections({ store, pool, log, projections, until, into: 'rp_one', replace: true, batchSize: 30, segments: segmentsOf(1), parallel: 1 });
    const many = await replayProjections({ store, pool, log, projections, until, into: 'rp_many', replace: true, batchSize: 30, segments: segmentsOf(3), parallel: 2 });
    const watching = watchCatchUpProcesses();
    const forked = await replayProjections({ store, pool, log, projections, until, into: 'rp_forked', replace: true, batchSize: 30, segments: segmentsOf(3), parallel: 2, processes: replayProcesses() });
    // The second process did its share: its connections were seen.
    expect(await watching.stop()).toBe(true);
    expect(many.events).toBe(one.events);
    expect(forked.events).toBe(one.events);
    const a = await readModel('rp_one');
    expect(a.asset_visits!.length).toBeGreaterThan(0);
    for (const schema of ['rp_many', 'rp_forked']) {
      expect(Object.keys(await checkpoints(schema)).filter((n) => n.startsWith('tracking'))).toEqual([0, 1, 2].map((i) => segmentName('tracking', i, 3)));
      const b = await readModel(schema);
      for (const table of Object.keys(a)) expect(b[table], `${schema}: ${table}`).toEqual(a[table]);
    }
    // Where the log was replayed to, as each says.
    const info = async (schema: string) => (await pool.query(`SELECT events, log_position FROM ${schema}.replay_info`)).rows[0];
    expect(await info('rp_forked')).toEqual(await info('rp_one'));
  });

  for (const processes of [false, true]) {
    it(`interrupted while the segments replay side by side ${processes ? 'in processes of their own' : 'in this process'}, leaves the current tables, checkpoints and leases as they were`, { timeout: 600_000 }, async () => {
      const schema = processes ? 'rb_interrupted_p' : 'rb_interrupted';
      const orgId = ++nextOrg;
      // Enough batches that the processes (a second or two to start) are stopped midway.
      const before = await rebuiltSchema(schema, { orgId, scanEvents: processes ? 600 : 200, seed: 7, segments: 2, parallel: 2 });
      const controller = new AbortController();
      let batches = 0;
      const rebuilding = rebuildProjections({
        store,
        pool,
        log,
        projections,
        schema,
        batchSize: 20,
        segments: segmentsOf(4),
        parallel: 3,
        processes: processes ? replayProcesses() : undefined,
        signal: controller.signal,
        onProgress: (p) => {
          if (p.phase === 'replaying' && p.events > 0 && ++batches === 3) controller.abort();
        },
      });
      await expect(rebuilding).rejects.toBeInstanceOf(RebuildInterruptedError);
      expect(batches).toBeGreaterThanOrEqual(3);
      await expectAsBefore(schema, before);
      expect(formatPosition(await readCheckpoint(pool, schema, segmentName('tracking', 0, 2)))).toBe(before.at[segmentName('tracking', 0, 2)]);
    });
  }

  it('stops when one of its processes fails: the rebuild fails with that process\'s error and leaves the current tables', { timeout: 600_000 }, async () => {
    const schema = 'rb_failed_process';
    const orgId = ++nextOrg;
    const before = await rebuiltSchema(schema, { orgId, scanEvents: 300, seed: 11, segments: 2, parallel: 1 });
    // The second process cannot connect: a database that does not exist.
    const url = new URL(db.url);
    url.pathname = '/no_such_database';
    const processes = replayProcesses();
    const rebuilding = rebuildProjections({
      store,
      pool,
      log,
      projections,
      schema,
      batchSize: 20,
      segments: segmentsOf(2),
      parallel: 2,
      processes: { ...processes, connection: { ...processes.connection, databaseUrl: url.toString() } },
    });
    await expect(rebuilding).rejects.toThrow(/no_such_database/);
    await expectAsBefore(schema, before);
  });
});
