import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alertsProjection } from '../../projections/alerts/projection.js';
import { applyMigrationGroup } from '../../shared/db/migrate.js';
import { createPool, type Pool } from '../../shared/db/pool.js';
import { ScansRecorded, locationScansStream, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import { encodeReads, type RawRead } from '../../shared/domain/scans/read-codec.js';
import { START, type EventData, type Position } from '../../shared/event-store/port.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { seededRandom } from '../../shared/random.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { readLogUpTo } from '../support/read-log.js';
import { watchStatements } from '../support/statements.js';

/**
 * The alerts subscriber's batch that moves or restores locations (projections/alerts/projection.ts
 * `load`, docs/design.md "Alerts") loads the assets positioned under those locations, in the tree
 * as the batch found it, not every asset of the organization: random forests, assets read at
 * random places, one to three random moves in one batch. What the moves then do to the alerts is
 * the reference test's (test/properties/alerts-reference.int.test.ts, random trees with moves).
 */

const SEED = Number(process.env.PROPERTY_SEED ?? Date.now() % 1_000_000);
let db: TestDatabase;
let pool: Pool;
let store: PostgresEventStore;

beforeAll(async () => {
  db = await createTestDatabase('alerts_tree_moves');
  pool = createPool(db.url, { max: 8 });
  store = new PostgresEventStore(pool, db.url);
});
afterAll(async () => {
  await store?.close();
  await pool?.end();
  await db?.drop();
});

const at = () => new Date().toISOString();

describe('a batch that moves locations', () => {
  it('loads the assets positioned under the moved locations, not the organization\'s others', { timeout: 120_000 }, async () => {
    console.info(`alerts tree moves: PROPERTY_SEED=${SEED}`);
    for (let round = 0; round < 8; round++) {
      const random = seededRandom(SEED + round);
      const int = (min: number, max: number) => min + Math.floor(random() * (max - min + 1));
      const orgId = 500 + round;
      const appends: Array<{ stream: string; event: EventData }> = [];
      const size = int(8, 30);
      const parents = new Map<number, number | null>();
      for (let id = 1; id <= size; id++) {
        const parent = id === 1 || random() < 0.15 ? null : int(1, id - 1);
        parents.set(id, parent);
        appends.push({
          stream: `location-${orgId}-${id}`,
          event: { type: 'LocationCreated', data: { org_id: orgId, location_id: id, external_key: `L${id}`, name: `L${id}`, description: null, parent_id: parent, is_active: true, valid_from: null, valid_to: null, at: at() } },
        });
      }
      // Every asset read once, at a random location.
      const positions = new Map<number, number>();
      let us = Date.now() * 1000;
      for (let assetId = 1; assetId <= int(40, 150); assetId++) positions.set(assetId, int(1, size));
      for (let location = 1; location <= size; location++) {
        const here = [...positions].filter(([, l]) => l === location).map(([assetId]) => assetId);
        if (here.length === 0) continue;
        const reads: RawRead[] = here.map((assetId) => ({ tag_type: 'rfid', value: `E2801160600002090000${String(assetId).padStart(4, '0')}`, observedUs: (us += 1000), rssi: -60, capturePoint: `door-${location}` }));
        const { capturePoints, ...encoded } = encodeReads(reads, (read) => ({ assetId: Number(read.value.slice(-4)), cause: null }));
        const data: ScansRecordedData = { org_id: orgId, location_id: location, source: { kind: 'reader', reader_id: 'reader-1', capture_points: capturePoints }, ...encoded, at: at() };
        appends.push({ stream: locationScansStream(orgId, location), event: { type: ScansRecorded.type, data: data as never } });
      }
      const before = appends.length;
      // One to three moves (each under a location not in its own subtree, or to the root), in one batch.
      const subtree = (root: number, tree: Map<number, number | null>) => {
        const under = (l: number): boolean => l === root || (tree.get(l) != null && under(tree.get(l)!));
        return new Set([...tree.keys()].filter(under));
      };
      const startTree = new Map(parents);
      const movedLocations: number[] = [];
      for (let m = int(1, 3); m > 0; m--) {
        const id = int(1, size);
        const inside = subtree(id, parents);
        const choices = [null, ...[...parents.keys()].filter((p) => !inside.has(p))];
        const parent = choices[int(0, choices.length - 1)]!;
        appends.push({ stream: `location-${orgId}-${id}`, event: { type: 'LocationMoved', data: { org_id: orgId, location_id: id, parent_id: parent, previous_parent_id: parents.get(id) ?? null, at: at() } } });
        parents.set(id, parent);
        movedLocations.push(id);
      }
      let head: Position = START;
      for (const { stream, event } of appends) head = (await store.appendToStream(stream, [event])).position;
      const events = (await readLogUpTo(store, head)).filter((e) => (e.data as { org_id?: number }).org_id === orgId);

      const schema = `alerts_moves_${round}`;
      await applyMigrationGroup(pool, 'read-model', schema);
      const client = await pool.connect();
      const loaded: Array<Promise<string[]>> = [];
      try {
        const apply = async (batch: typeof events) => {
          await client.query(`BEGIN; SET LOCAL search_path TO ${pg.escapeIdentifier(schema)}`);
          await alertsProjection.apply(batch, client);
          await client.query('COMMIT');
        };
        await apply(events.slice(0, before));
        await watchStatements(
          ({ text, result }) => {
            if (text.includes('a.state::text AS state')) loaded.push(result.then(({ rows }: pg.QueryResult<{ org_id: number; asset_id: number }>) => rows.map((r) => `${r.org_id}/${r.asset_id}`)));
          },
          () => apply(events.slice(before)),
        );
      } finally {
        client.release();
      }
      // Under a moved location in the tree the batch started from.
      const affected = new Set(movedLocations.flatMap((l) => [...subtree(l, startTree)]));
      const expected = [...positions].filter(([, l]) => affected.has(l)).map(([assetId]) => `${orgId}/${assetId}`).sort();
      const got = (await Promise.all(loaded)).flat().sort();
      expect({ seed: SEED, round, loaded: got }).toEqual({ seed: SEED, round, loaded: expected });
      // The column the load reads is every state's position.
      const { rows } = await pool.query<{ asset_id: number; location_id: number | null; position: number | null }>(
        `SELECT asset_id, location_id, (state -> 'position' ->> 'locationId')::int AS position FROM ${pg.escapeIdentifier(schema)}.alerts_engine_assets WHERE org_id = $1`,
        [orgId],
      );
      expect(rows.length).toBe(positions.size);
      for (const row of rows) expect(row.location_id, `asset ${row.asset_id}`).toBe(row.position);
      await pool.query(`DROP SCHEMA ${pg.escapeIdentifier(schema)} CASCADE`);
    }
  });
});
