import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allProjections } from '../../projections/index.js';
import { seedDemo } from '../../services/cli/demo/seed.js';
import { rebuildProjections } from '../../shared/projection/rebuild.js';
import { replayProjections } from '../../shared/projection/replay.js';
import { comparePositions } from '../../shared/event-store/port.js';
import { kafkaEnv, eventually } from '../support/kafka.js';
import { expectAnswered, seedHistory, snapshot, type History } from '../support/history.js';
import { startTestService, type TestService } from '../support/service.js';
import { settledHead } from '../support/visible.js';

/**
 * docs/design.md "The event log is the only source of truth": the read models are a function of the log. Over a history with
 * every kind of event (master data, tags, readers, scans by handheld and by Kafka in both shapes,
 * deletes, renames, re-parents, late reads) plus a demo organization, a replay up to now equals
 * the current tables row for row, and the API answers byte for byte the same before and after a
 * rebuild swaps every table.
 */

let svc: TestService;
let history: History;
let demo: { token: string; paths: string[] };

beforeAll(async () => {
  // The comparisons read every view with one key: no rate limit in the way.
  svc = await startTestService('determinism', { ...await kafkaEnv('determinism'), RATE_LIMIT_PER_MINUTE: '1000000', RATE_LIMIT_BURST: '1000000' });
  history = await seedHistory(svc, 'determinism');
  const { ctx } = svc.service;
  // The demo's reader reports go through the service's own Kafka consumer (the group has a member).
  const seed = await seedDemo(ctx, { project: (position) => ctx.checkpoints.waitForCheckpoint(position) });
  expect(seed.scans.kafka).toBeGreaterThan(100);
  demo = {
    token: seed.api_key.token,
    paths: ['/assets?limit=100', '/locations?limit=100', '/reports/asset-locations?limit=100', '/orgs/me', ...Array.from({ length: 30 }, (_, i) => `/assets?limit=1&offset=${i}`)],
  };
  // Everything appended is projected.
  const head = await settledHead(ctx.store, ctx.pool);
  await eventually(async () => {
    for (const p of allProjections()) expect(comparePositions(ctx.checkpoints.position(p.name), head)).toBeGreaterThanOrEqual(0);
  });
}, 600_000);
afterAll(async () => {
  await svc?.stop();
});

/**
 * A table's rows in a stable order. Scan sequence numbers (`seq`, `first_seq`, `last_seq`) are
 * compared by their rank among the reads: they order reads in the log, and their values depend on
 * how reads were batched (a re-delivered read uses one up in one batching and not in another).
 */
async function rows(schema: string, table: string): Promise<unknown[]> {
  const { pool } = svc.service.ctx;
  const s = `"${schema}"`;
  const ranked = (column: string) => `(SELECT r.rank FROM ranks r WHERE r.seq = t.${column}) AS ${column}`;
  const reads = `SELECT c.org_id, c.asset_id, r.* FROM ${s}.scan_read_chunks c, ${s}.tracking_chunk_reads(c.first_at, c.first_seq, c.data) r`;
  const ranks = `WITH reads AS (${reads}), ranks AS (SELECT seq, dense_rank() OVER (ORDER BY seq) AS rank FROM reads)`;
  const sql: Record<string, string> = {
    // The rows the webhooks role has yet to follow: a replay or a rebuild writes no row its cursor
    // has passed (docs/design.md "Alerts and webhooks"), so the live table holds more until a prune.
    alert_outbox: `SELECT * FROM ${s}.alert_outbox t
                    WHERE NOT EXISTS (SELECT 1 FROM service.webhook_alert_cursor c
                                       WHERE (t.position_commit, t.position_prepare, t.org_id, t.alert_id, t.change) <= (c.position_commit, c.position_prepare, c.org_id, c.alert_id, c.change))
                    ORDER BY t`,
    // The engines' segment rows without the token of the batch that wrote them last (random: projections/engine-states.ts).
    alerts_engine_segments: `SELECT t.segment, t.state FROM ${s}.alerts_engine_segments t ORDER BY t.segment`,
    counts_engine_segments: `SELECT t.segment, t.state FROM ${s}.counts_engine_segments t ORDER BY t.segment`,
    // Chunk boundaries depend on how reads were batched: their reads are compared.
    scan_read_chunks: `${ranks} SELECT t.org_id, t.asset_id, t.observed_at, t.location_id, ${ranked('seq')} FROM reads t ORDER BY t.org_id, t.asset_id, t.observed_at, 5`,
    asset_visits: `${ranks} SELECT t.org_id, t.asset_id, t.location_id, t.first_at, ${ranked('first_seq')}, t.last_at, ${ranked('last_seq')}, t.first_at_rfc3339, t.last_at_rfc3339
                    FROM ${s}.asset_visits t ORDER BY t.org_id, t.asset_id, t.first_at, t.first_seq`,
    asset_locations: `${ranks} SELECT t.org_id, t.asset_id, t.location_id, t.last_seen, t.dwell_started_at, ${ranked('first_seq')}, ${ranked('last_seq')}
                    FROM ${s}.asset_locations t ORDER BY t.org_id, t.asset_id`,
  };
  const result = await pool.query(sql[table] ?? `SELECT * FROM ${s}.${table} t ORDER BY t`);
  return result.rows;
}

describe('determinism', () => {
  it('replay up to now equals the current tables, row for row, and a rebuild changes no answer of the API', async () => {
    const { ctx } = svc.service;
    const { pool } = ctx;
    const tables = allProjections().flatMap((p) => p.tables);
    const before = await snapshot(svc.apiUrl, history.token, history.paths);
    expectAnswered(before, history);
    const demoBefore = await snapshot(svc.apiUrl, demo.token, demo.paths);
    expect(Object.values(demoBefore).every((answer) => answer.startsWith('200 '))).toBe(true);

    // Small batches: a read delivered again lands in another batch than its first delivery, as in a long log.
    const replay = await replayProjections({ store: ctx.store, pool: ctx.pool, log: ctx.log, projections: allProjections(), until: new Date(), into: 'determinism_now', batchSize: 7 });
    expect(replay.events).toBeGreaterThan(300);
    const current: Record<string, unknown[]> = {};
    for (const table of tables) {
      current[table] = await rows('read_model', table);
      // Empty while the projection runs as one segment (docs/design.md "Segmented processors"); the
      // counts' ahead sightings, while no read observed ahead of the service's clock reaches an open
      // count (docs/design.md "Counts"; the counts property test makes them).
      if (table === 'alert_outbox') expect((await pool.query('SELECT 1 FROM read_model.alert_outbox LIMIT 1')).rowCount, table).toBe(1);
      else if (table !== 'tracking_key_progress' && table !== 'count_ahead_sightings') expect(current[table]!.length, table).toBeGreaterThan(0);
      expect(await rows('determinism_now', table), table).toEqual(current[table]);
    }

    const rebuilt = await rebuildProjections({ store: ctx.store, pool: ctx.pool, log: ctx.log, projections: allProjections(), batchSize: 50 });
    expect(rebuilt.rebuilt).toHaveLength(allProjections().length);
    expect(await snapshot(svc.apiUrl, history.token, history.paths)).toEqual(before);
    expect(await snapshot(svc.apiUrl, demo.token, demo.paths)).toEqual(demoBefore);
    for (const table of tables) expect(await rows('read_model', table), table).toEqual(current[table]);
  });
});
