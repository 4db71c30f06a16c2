import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyMigrationGroup } from '../../shared/db/migrate.js';
import { createPool } from '../../shared/db/pool.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * migrations/read-model/530_engine_trees.sql on an installation that kept the alerts and counts
 * segments' trees in their JSON states: every location of every segment's tree becomes a row
 * (roots with a null parent), and the states keep everything but the tree.
 */

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('engine_trees');
});
afterAll(async () => {
  await db?.drop();
});

describe('the engines’ trees, a row per location (migration 530)', () => {
  it('moves each segment’s tree out of its state into rows, for alerts and counts', async () => {
    const pool = createPool(db.url, { max: 1 });
    try {
      // The database as it stood before the migration.
      await pool.query(`DROP TABLE read_model.alerts_engine_tree, read_model.counts_engine_tree`);
      await pool.query(`DELETE FROM read_model.schema_migrations WHERE name = '530_engine_trees.sql'`);
      const tree = (shift: number) => ({ 7: { [10 + shift]: null, [11 + shift]: 10 + shift, 12: 11 + shift }, 8: { 20: null } });
      await pool.query(`INSERT INTO read_model.alerts_engine_segments (segment, state) VALUES (0, $1), (1, $2)`, [
        JSON.stringify({ clockUs: 5, rules: { '7/3': { ruleId: 3 } }, tree: tree(0) }),
        JSON.stringify({ clockUs: 6, rules: {}, tree: {} }),
      ]);
      await pool.query(`INSERT INTO read_model.counts_engine_segments (segment, state) VALUES (0, $1), (2, $2)`, [
        JSON.stringify({ tree: tree(100), counts: { 7: { 4: { locationId: 110, startedUs: 1, closedUs: null } } } }),
        JSON.stringify({ tree: { 9: { 30: null } }, counts: {} }),
      ]);

      expect(await applyMigrationGroup(pool, 'read-model')).toEqual(['530_engine_trees.sql']);

      const rows = async (table: string) =>
        (await pool.query<{ row: string }>(`SELECT concat_ws(' ', segment, org_id, location_id, coalesce(parent_id::text, 'root')) AS row FROM read_model.${table} ORDER BY segment, org_id, location_id`)).rows.map(
          (r) => r.row,
        );
      expect(await rows('alerts_engine_tree')).toEqual(['0 7 10 root', '0 7 11 10', '0 7 12 11', '0 8 20 root']);
      expect(await rows('counts_engine_tree')).toEqual(['0 7 12 111', '0 7 110 root', '0 7 111 110', '0 8 20 root', '2 9 30 root']);
      const states = async (table: string) => (await pool.query<{ state: unknown }>(`SELECT state FROM read_model.${table} ORDER BY segment`)).rows.map((r) => r.state);
      expect(await states('alerts_engine_segments')).toEqual([
        { clockUs: 5, rules: { '7/3': { ruleId: 3 } } },
        { clockUs: 6, rules: {} },
      ]);
      expect(await states('counts_engine_segments')).toEqual([{ counts: { 7: { 4: { locationId: 110, startedUs: 1, closedUs: null } } } }, { counts: {} }]);
    } finally {
      await pool.end();
    }
  });
});
