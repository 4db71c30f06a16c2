import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ensurePartitions, listPartitions } from '../../projections/tracking/partitions.js';
import { historyQuery } from '../../projections/tracking/queries.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * A first page is planned once per connection, not once per request. With `OFFSET $n` Postgres
 * re-planned the named history statement on every execution (about 1 ms of 2 over 14 monthly
 * partitions); the first page leaves OFFSET out and keeps its generic plan (shared/db/list-sql.ts
 * pageLimitSql). Later pages still pass their offset, and answer the same rows.
 */

const DAY = 86_400_000;
let db: TestDatabase;
let pool: pg.Pool;
let client: pg.PoolClient;

beforeAll(async () => {
  db = await createTestDatabase('page_plan');
  pool = new pg.Pool({ connectionString: db.url, max: 1 });
  client = await pool.connect();
  client.on('error', () => undefined);
  await client.query('SET search_path = read_model, public');
  const now = Date.now();
  await client.query('BEGIN');
  await ensurePartitions(client, 'asset_visits', Array.from({ length: 16 }, (_, i) => now - i * 28 * DAY), await listPartitions(client, ['asset_visits']));
  await client.query('COMMIT');
  // 400 assets with 300 visits each over 13 months, in 14 or more monthly partitions.
  await client.query(
    `INSERT INTO asset_visits (org_id, asset_id, location_id, first_at, first_seq, last_at, last_seq)
     SELECT 1, a, 1 + v % 7, now() - v * interval '1 day' * 395 / 300, a * 1000 + v, now() - v * interval '1 day' * 395 / 300 + interval '1 minute', a * 1000 + v
       FROM generate_series(1, 400) a, generate_series(1, 300) v`,
  );
  await client.query('ANALYZE asset_visits');
});

afterAll(async () => {
  client?.release();
  await pool?.end();
  await db?.drop();
});

async function plans(config: pg.QueryConfig, runs: number): Promise<{ generic: number; custom: number }> {
  for (let i = 0; i < runs; i++) await client.query(config);
  const { rows } = await client.query<{ generic_plans: string; custom_plans: string }>('SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1', [config.text]);
  expect(rows).toHaveLength(1);
  return { generic: Number(rows[0]!.generic_plans), custom: Number(rows[0]!.custom_plans) };
}

it('a first history page keeps its generic plan; a later page answers the same rows as before', async () => {
  const first = historyQuery(1, 77, { limit: 50, offset: 0 });
  expect(first.name).toBeDefined();
  const counts = await plans(first, 20);
  // Postgres plans the first five runs for their values, then settles on the generic plan.
  expect(counts.custom).toBeLessThanOrEqual(5);
  expect(counts.generic).toBeGreaterThanOrEqual(15);
  // Paging still works with an offset: pages 1 and 2 of 25 are the first page of 50.
  const data = async (config: pg.QueryConfig) => JSON.parse((await client.query<{ data: string }>(config)).rows[0]!.data) as unknown[];
  const whole = await data(first);
  expect(whole).toHaveLength(50);
  expect([...(await data(historyQuery(1, 77, { limit: 25, offset: 0 }))), ...(await data(historyQuery(1, 77, { limit: 25, offset: 25 })))]).toEqual(whole);
});

