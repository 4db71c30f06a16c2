import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyMigrationGroup } from '../../shared/db/migrate.js';
import { createPool } from '../../shared/db/pool.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * migrations/read-model/570_tracking_wire_times_written.sql on an installation whose current
 * locations and visits had generated wire times: the values stay, the columns become plain ones
 * that a write must fill (the projector writes them, projections/tracking/projection.ts).
 */

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('wire_times');
});
afterAll(async () => {
  await db?.drop();
});

describe('wire times written by the projector (migration 570)', () => {
  it('keeps the rows’ wire times, and refuses a row written without them', async () => {
    const pool = createPool(db.url, { max: 1, searchPath: 'read_model' });
    try {
      // The tables as they stood before the migration: generated wire times.
      await pool.query(`ALTER TABLE asset_locations DROP COLUMN last_seen_rfc3339, DROP COLUMN dwell_started_at_rfc3339,
                          ADD COLUMN last_seen_rfc3339 text GENERATED ALWAYS AS (rfc3339(last_seen)) STORED,
                          ADD COLUMN dwell_started_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(dwell_started_at)) STORED`);
      await pool.query(`ALTER TABLE asset_visits DROP COLUMN first_at_rfc3339, DROP COLUMN last_at_rfc3339,
                          ADD COLUMN first_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(first_at)) STORED,
                          ADD COLUMN last_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(last_at)) STORED`);
      await pool.query(`DELETE FROM schema_migrations WHERE name = '570_tracking_wire_times_written.sql'`);
      await pool.query(`SELECT tracking_create_partition('asset_visits', 'asset_visits_m202605', '2026-05-01', '2026-06-01')`);
      await pool.query(`INSERT INTO asset_locations (org_id, asset_id, location_id, last_seen, dwell_started_at, first_seq, last_seq, first_seen_at)
                        VALUES (1, 2, 3, '2026-05-25T14:00:01.234567Z', '2026-05-25T13:00:00.000999Z', 1, 2, '2026-05-25T13:00:00.000999Z')`);
      await pool.query(`INSERT INTO asset_visits (org_id, asset_id, location_id, first_at, first_seq, last_at, last_seq)
                        VALUES (1, 2, 3, '2026-05-25T13:00:00.000999Z', 1, '2026-05-25T14:00:01.234567Z', 2)`);

      expect(await applyMigrationGroup(pool, 'read-model')).toEqual(['570_tracking_wire_times_written.sql']);

      const current = await pool.query('SELECT last_seen_rfc3339, dwell_started_at_rfc3339 FROM asset_locations');
      expect(current.rows).toEqual([{ last_seen_rfc3339: '2026-05-25T14:00:01.234Z', dwell_started_at_rfc3339: '2026-05-25T13:00:00.000Z' }]);
      const visits = await pool.query('SELECT first_at_rfc3339, last_at_rfc3339 FROM asset_visits');
      expect(visits.rows).toEqual([{ first_at_rfc3339: '2026-05-25T13:00:00.000Z', last_at_rfc3339: '2026-05-25T14:00:01.234Z' }]);
      const columns = await pool.query<{ column: string; generated: string; not_null: boolean }>(
        `SELECT c.relname || '.' || a.attname AS column, a.attgenerated::text AS generated, a.attnotnull AS not_null
           FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
          WHERE c.relnamespace = 'read_model'::regnamespace AND c.relname IN ('asset_locations', 'asset_visits', 'asset_visits_m202605')
            AND a.attname LIKE '%rfc3339' ORDER BY 1`,
      );
      expect(columns.rows.map((r) => [r.column, r.generated, r.not_null])).toEqual(
        ['asset_locations.dwell_started_at_rfc3339', 'asset_locations.last_seen_rfc3339', 'asset_visits.first_at_rfc3339', 'asset_visits.last_at_rfc3339', 'asset_visits_m202605.first_at_rfc3339', 'asset_visits_m202605.last_at_rfc3339'].map(
          (column) => [column, '', true],
        ),
      );
      await expect(
        pool.query(`INSERT INTO asset_locations (org_id, asset_id, location_id, last_seen, dwell_started_at, first_seq, last_seq, first_seen_at)
                    VALUES (1, 4, 3, now(), now(), 1, 2, now())`),
      ).rejects.toMatchObject({ code: '23502' });
    } finally {
      await pool.end();
    }
  });
});
