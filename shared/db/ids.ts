import type pg from 'pg';
import { prepared } from './prepared.js';

/**
 * The ids of the command port (`shared/domain/port.ts`, `Ids`) drawn from Postgres: surrogate ids
 * from the `service.*_ids` sequences, minted-key numbers from the per-org `service.key_counters`.
 * Declared here by shape only (the domain is above `db/`); the service context hands it to the
 * commands as their `ids`.
 */

type Sequence = 'asset_ids' | 'location_ids' | 'tag_ids' | 'alert_rule_ids' | 'count_ids';
type Resource = 'asset' | 'location';

export function postgresIds(pool: pg.Pool) {
  return {
    async nextId(sequence: Sequence): Promise<number> {
      const result = await pool.query<{ id: number }>(prepared(`SELECT nextval('service.${sequence}')::int AS id`));
      return result.rows[0]!.id;
    },

    async nextIds(sequence: Sequence, count: number): Promise<number[]> {
      if (count === 0) return [];
      const result = await pool.query<{ id: number }>(
        prepared(`SELECT nextval('service.${sequence}')::int AS id FROM generate_series(1, $1::int)`, [count]),
      );
      return result.rows.map((r) => r.id).sort((a, b) => a - b);
    },

    async nextKeyNumber(orgId: number, resource: Resource): Promise<number> {
      const result = await pool.query<{ value: number }>(
        prepared(
          `INSERT INTO service.key_counters (org_id, resource, next_value) VALUES ($1, $2, 2)
       ON CONFLICT (org_id, resource) DO UPDATE SET next_value = key_counters.next_value + 1
       RETURNING next_value - 1 AS value`,
          [orgId, resource],
        ),
      );
      return result.rows[0]!.value;
    },

    /** One statement, one commit. */
    async nextIdAndKeyNumber(sequence: Sequence, orgId: number, resource: Resource): Promise<{ id: number; keyNumber: number }> {
      const result = await pool.query<{ id: number; value: number }>(
        prepared(
          `WITH counter AS (
         INSERT INTO service.key_counters (org_id, resource, next_value) VALUES ($1, $2, 2)
         ON CONFLICT (org_id, resource) DO UPDATE SET next_value = key_counters.next_value + 1
         RETURNING next_value - 1 AS value)
       SELECT nextval('service.${sequence}')::int AS id, value FROM counter`,
          [orgId, resource],
        ),
      );
      const row = result.rows[0]!;
      return { id: row.id, keyNumber: row.value };
    },

    async nextOrgId(): Promise<number> {
      const { rows } = await pool.query<{ id: number }>(`SELECT nextval('service.org_ids')::int AS id`);
      return rows[0]!.id;
    },
  };
}
