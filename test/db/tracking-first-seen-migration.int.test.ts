import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyMigrationGroup } from '../../shared/db/migrate.js';
import { createPool } from '../../shared/db/pool.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * migrations/read-model/540_tracking_first_seen.sql on an installation whose asset_locations had
 * no first_seen_at: each asset's becomes its first visit's first read, or its current visit's
 * when its visits are gone (retention) or it was placed by a read older than the cutoff alone.
 */

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('tracking_first_seen');
});
afterAll(async () => {
  await db?.drop();
});

describe('asset_locations.first_seen_at (migration 540)', () => {
  it('is the earliest first read of the asset’s visits and its current visit', async () => {
    const pool = createPool(db.url, { max: 1 });
    try {
      // The database as it stood before the migration.
      await pool.query(`ALTER TABLE read_model.asset_locations DROP COLUMN first_seen_at`);
      await pool.query(`DELETE FROM read_model.schema_migrations WHERE name = '540_tracking_first_seen.sql'`);
      for (const month of ['01', '02', '03']) {
        await pool.query(`SELECT read_model.tracking_create_partition('asset_visits', $1, $2, $3)`, [
          `asset_visits_m2026${month}`,
          `2026-${month}-01T00:00:00Z`,
          `2026-${String(Number(month) + 1).padStart(2, '0')}-01T00:00:00Z`,
        ]);
      }
      // Asset 1: three visits, the current one the last; asset 2: its visits gone; asset 3 in
      // another org, one visit; asset 4: a visit of asset 1's number in that other org.
      await pool.query(
        `INSERT INTO read_model.asset_visits (org_id, asset_id, location_id, first_at, first_seq, last_at, last_seq, first_at_rfc3339, last_at_rfc3339)
         SELECT *, read_model.rfc3339(first_at), read_model.rfc3339(last_at) FROM (VALUES
           (7, 1, 10, timestamptz '2026-01-05T10:00:00.000001Z', 1, timestamptz '2026-01-06T00:00:00Z', 2),
           (7, 1, 11, '2026-02-01T00:00:00Z', 3, '2026-02-02T00:00:00Z', 4),
           (7, 1, 10, '2026-03-01T00:00:00Z', 5, '2026-03-01T01:00:00Z', 6),
           (8, 3, 12, '2026-02-10T00:00:00Z', 7, '2026-02-10T00:00:00Z', 7),
           (8, 1, 12, '2026-01-01T00:00:00Z', 8, '2026-01-01T00:00:00Z', 8)) AS v (org_id, asset_id, location_id, first_at, first_seq, last_at, last_seq)`,
      );
      await pool.query(
        `INSERT INTO read_model.asset_locations (org_id, asset_id, location_id, last_seen, dwell_started_at, first_seq, last_seq, last_seen_rfc3339, dwell_started_at_rfc3339)
         SELECT *, read_model.rfc3339(last_seen), read_model.rfc3339(dwell_started_at) FROM (VALUES
           (7, 1, 10, timestamptz '2026-03-01T01:00:00Z', timestamptz '2026-03-01T00:00:00Z', 5, 6),
           (7, 2, 11, '2026-02-20T00:00:00Z', '2026-02-15T00:00:00Z', 9, 9),
           (8, 3, 12, '2026-02-10T00:00:00Z', '2026-02-10T00:00:00Z', 7, 7)) AS l (org_id, asset_id, location_id, last_seen, dwell_started_at, first_seq, last_seq)`,
      );

      expect(await applyMigrationGroup(pool, 'read-model')).toEqual(['540_tracking_first_seen.sql']);

      const { rows } = await pool.query<{ row: string }>(
        `SELECT concat_ws(' ', org_id, asset_id, to_char(first_seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')) AS row FROM read_model.asset_locations ORDER BY org_id, asset_id`,
      );
      expect(rows.map((r) => r.row)).toEqual(['7 1 2026-01-05T10:00:00.000001', '7 2 2026-02-15T00:00:00.000000', '8 3 2026-02-10T00:00:00.000000']);
      const column = await pool.query(`SELECT is_nullable FROM information_schema.columns WHERE table_schema = 'read_model' AND table_name = 'asset_locations' AND column_name = 'first_seen_at'`);
      expect(column.rows).toEqual([{ is_nullable: 'NO' }]);
    } finally {
      await pool.end();
    }
  });
});
