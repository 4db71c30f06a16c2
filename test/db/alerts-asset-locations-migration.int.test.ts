import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyMigrationGroup } from '../../shared/db/migrate.js';
import { createPool } from '../../shared/db/pool.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * migrations/read-model/580_alerts_engine_asset_locations.sql on an installation whose alerts
 * subscriber kept its assets' positions only in their JSON states: each row gets its state's
 * location, an asset never placed none.
 */

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('alerts_asset_locations');
});
afterAll(async () => {
  await db?.drop();
});

describe('the alerts subscriber’s asset locations as a column (migration 580)', () => {
  it('fills each asset’s location from its state’s position', async () => {
    const pool = createPool(db.url, { max: 1 });
    try {
      // The database as it stood before the migration.
      await pool.query(`DROP INDEX read_model.alerts_engine_tree_children`);
      await pool.query(`ALTER TABLE read_model.alerts_engine_assets DROP COLUMN location_id`);
      await pool.query(`DELETE FROM read_model.schema_migrations WHERE name = '580_alerts_engine_asset_locations.sql'`);
      const state = (assetId: number, position: unknown) => JSON.stringify({ orgId: 7, assetId, position, since: {}, deleted: false, watches: {}, unresolved: [] });
      await pool.query(`INSERT INTO read_model.alerts_engine_assets (org_id, asset_id, segment, state) VALUES (7, 1, 0, $1), (7, 2, 1, $2), (7, 3, 0, $3)`, [
        state(1, { locationId: 12, lastSeenUs: 5 }),
        state(2, null),
        state(3, { locationId: 40, lastSeenUs: 9 }),
      ]);

      expect(await applyMigrationGroup(pool, 'read-model')).toEqual(['580_alerts_engine_asset_locations.sql']);

      const { rows } = await pool.query<{ asset_id: number; location_id: number | null }>('SELECT asset_id, location_id FROM read_model.alerts_engine_assets ORDER BY asset_id');
      expect(rows).toEqual([
        { asset_id: 1, location_id: 12 },
        { asset_id: 2, location_id: null },
        { asset_id: 3, location_id: 40 },
      ]);
    } finally {
      await pool.end();
    }
  });
});
