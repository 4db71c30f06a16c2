import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyMigrationGroup } from '../../shared/db/migrate.js';
import { createPool, type Pool } from '../../shared/db/pool.js';
import { ScansRecorded, locationScansStream, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import { encodeReads, type RawRead } from '../../shared/domain/scans/read-codec.js';
import { comparePositions, type Position } from '../../shared/event-store/port.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { createLogger } from '../../shared/logger.js';
import { readCheckpoint } from '../../shared/projection/checkpoints.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import { segmentName } from '../../shared/projection/segments.js';
import { seededRandom as random, shuffled as shuffle } from '../../shared/random.js';
import { trackingProjection } from '../../projections/tracking/projection.js';
import { eventually } from '../event-store/conformance.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * The tracking projection split into segments (docs/design.md "Segmented processors") gives, table
 * by table, the read model one segment gives: for random reads (placed and unknown, some delivered
 * again), random orders, random events (reads per event, locations) and batch sizes, and 1 to 8
 * segments, the log is applied into two fresh read-model schemas, one of one segment and one of n,
 * and every tracking table is compared. `seq` is compared as its rank among the asset's reads (its
 * only use: the log order within an asset; the values are drawn from a shared sequence).
 * Reproduce a failure with the seed it prints (PROPERTY_SEED).
 */

const SEED = Number(process.env.PROPERTY_SEED ?? 20261129);
const RUNS = Number(process.env.PROPERTY_RUNS ?? 8);
const log = createLogger('silent');
let db: TestDatabase;
let pool: Pool;
let store: PostgresEventStore;

beforeAll(async () => {
  db = await createTestDatabase('tracking_segments');
  pool = createPool(db.url, { max: 30 });
  store = new PostgresEventStore(pool, db.url, { pollIntervalMs: 50 });
});

afterAll(async () => {
  await store?.close();
  await pool?.end();
  await db?.drop();
});

interface Read {
  /** null: a tag no asset holds (counted in unknown_reads). */
  assetId: number | null;
  tag: string;
  locationId: number;
  us: number;
}

const historyArb = fc
  .record({
    assets: fc.integer({ min: 1, max: 12 }),
    reads: fc.integer({ min: 20, max: 400 }),
    unknown: fc.double({ min: 0, max: 0.2, noNaN: true }),
    again: fc.double({ min: 0, max: 0.2, noNaN: true }),
    perEvent: fc.integer({ min: 1, max: 40 }),
    batch: fc.integer({ min: 1, max: 50 }),
    segments: fc.integer({ min: 1, max: 8 }),
    seed: fc.integer(),
  })
  .map((h) => {
    const rnd = random(h.seed);
    const reads: Read[] = [];
    let us = Date.UTC(2026, 9, 31, 23, 30, 0) * 1000;
    for (let i = 0; i < h.reads; i++) {
      us += Math.floor(rnd() * 20_000_000);
      const unknown = rnd() < h.unknown;
      const assetId = unknown ? null : 1 + Math.floor(rnd() * h.assets);
      const tag = unknown ? `E2801160600002090000F${String(Math.floor(rnd() * 5)).padStart(3, '0')}` : `E28011606000020900000${String(assetId).padStart(3, '0')}`;
      reads.push({ assetId, tag, locationId: 1 + Math.floor(rnd() * 3), us });
    }
    // Any order, some delivered again (the same read: same tag, place and time).
    const deliveries = shuffle([...reads, ...reads.filter(() => rnd() < h.again)], rnd);
    return { deliveries, perEvent: h.perEvent, batch: h.batch, segments: h.segments, seed: h.seed };
  });

/** The reads as ScansRecorded events of a fixed reader, up to `perEvent` to an event, each event at one location. */
async function appendReads(orgId: number, deliveries: Read[], perEvent: number): Promise<Position> {
  let last: Position | null = null;
  for (let start = 0; start < deliveries.length; start += perEvent) {
    const part = deliveries.slice(start, start + perEvent);
    for (const locationId of [...new Set(part.map((r) => r.locationId))]) {
      const here = part.filter((r) => r.locationId === locationId);
      const raw: RawRead[] = here.map((r) => ({ tag_type: 'rfid', value: r.tag, observedUs: r.us, rssi: -60, capturePoint: `door-${locationId}` }));
      const byTag = new Map(here.map((r) => [r.tag, r.assetId]));
      const { capturePoints, ...encoded } = encodeReads(raw, (read) => {
        const assetId = byTag.get(read.value) ?? null;
        return assetId === null ? { assetId: null, cause: 'unknown_tag' } : { assetId, cause: null };
      });
      const data: ScansRecordedData = {
        org_id: orgId,
        location_id: locationId,
        source: { kind: 'reader', reader_id: 'reader-1', capture_points: capturePoints },
        ...encoded,
        at: new Date().toISOString(),
      };
      last = (await store.appendToStream(locationScansStream(orgId, locationId), [{ type: ScansRecorded.type, data }])).position;
    }
  }
  return last!;
}

/** A fresh read-model schema with the tracking projection applied up to `head`, by the followers of `segments` segments. */
async function project(schema: string, segments: number, batchSize: number, head: Position): Promise<void> {
  await pool.query(`DROP SCHEMA IF EXISTS ${pg.escapeIdentifier(schema)} CASCADE`);
  await applyMigrationGroup(pool, 'read-model', schema);
  const runtime = new ProjectorRuntime({
    store,
    pool,
    schema,
    projections: [trackingProjection],
    log,
    batchSize,
    takeoverIntervalMs: 50,
    leaseMs: 5_000,
    segments: { all: segments, byName: {} },
  });
  runtime.start();
  try {
    await eventually(
      async () => {
        for (let index = 0; index < segments; index++) {
          const at = await readCheckpoint(pool, schema, segmentName('tracking', index, segments));
          expect(comparePositions(at, head)).toBeGreaterThanOrEqual(0);
        }
      },
      120_000,
    );
  } finally {
    await runtime.stop();
  }
}

/** Every tracking table of `schema`, each row as text, sorted; seq as its rank among its asset's reads. */
async function readModel(schema: string): Promise<Record<string, string[]>> {
  const s = pg.escapeIdentifier(schema);
  const rows = async (sql: string) => (await pool.query<{ row: string }>(sql)).rows.map((r) => r.row).sort();
  const ranks = `(SELECT c.org_id, c.asset_id, r.seq, rank() OVER (PARTITION BY c.org_id, c.asset_id ORDER BY r.seq) AS rank
                    FROM ${s}.scan_read_chunks c, ${s}.tracking_chunk_reads(c.first_at, c.first_seq, c.data) r)`;
  const rank = (alias: string, column: string) =>
    `(SELECT k.rank FROM ${ranks} k WHERE k.org_id = ${alias}.org_id AND k.asset_id = ${alias}.asset_id AND k.seq = ${alias}.${column})`;
  return {
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
    asset_location_counts: await rows(`SELECT concat_ws(' ', org_id, located) AS row FROM ${s}.asset_location_counts`),
    unknown_reads: await rows(
      `SELECT concat_ws(' ', org_id, cause, reader_id, capture_point, tag_type, value, count, first_seen, last_seen) AS row FROM ${s}.unknown_reads`,
    ),
  };
}

describe('tracking projection in segments', () => {
  it('gives, table by table, the read model of one segment, for any reads, order, events, batch size and 1 to 8 segments', { timeout: 1_800_000 }, async () => {
    let orgId = 9000;
    let run = 0;
    await fc.assert(
      fc.asyncProperty(historyArb, async ({ deliveries, perEvent, batch, segments }) => {
        run++;
        const head = await appendReads(++orgId, deliveries, perEvent);
        await project(`seg_one_${run}`, 1, batch, head);
        await project(`seg_many_${run}`, segments, batch, head);
        const [one, many] = [await readModel(`seg_one_${run}`), await readModel(`seg_many_${run}`)];
        expect(many.asset_visits?.length).toBeGreaterThan(0);
        for (const table of Object.keys(one)) expect(many[table], `${table} with ${segments} segments`).toEqual(one[table]);
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true },
    );
  });
});
