import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { lookupTags } from '../../projections/tags/queries.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * Resolving the tags of a batch of reads costs one index probe per value, whatever the planner
 * knows of the tags table. The case that went wrong: tags just loaded, the table not analyzed yet,
 * and the statement's generic plan (a prepared statement after five runs) joined every tag of the
 * org against every value: 0.5 s per Kafka batch among 2,000 tags, and ingest fell behind.
 */

const TAGS = 20_000;
let db: TestDatabase;
let pool: pg.Pool;
let client: pg.PoolClient;

beforeAll(async () => {
  db = await createTestDatabase('tag_lookup_plan');
  pool = new pg.Pool({ connectionString: db.url, max: 1 });
  client = await pool.connect();
  // The database is dropped (WITH FORCE) right after the pool ends: a FATAL that reaches this
  // connection while it is still closing is no failure of the test.
  client.on('error', () => undefined);
  await client.query('SET search_path = read_model, public');
  await client.query(
    `INSERT INTO tags (id, org_id, owner_type, owner_id, tag_type, value, is_active, created_at, deleted_at)
     SELECT i, 1, 'asset', i, 'rfid', 'E280' || lpad(i::text, 20, '0'), true, now(), CASE WHEN i % 10 = 0 THEN now() END
       FROM generate_series(1, $1) i`,
    [TAGS],
  );
});

afterAll(async () => {
  client?.release();
  await pool?.end();
  await db?.drop();
});

const values = Array.from({ length: 500 }, (_, k) => ({ tag_type: 'rfid', value: `e280${String(k * 37 + 1).padStart(20, '0')}` }));

async function timedLookup(): Promise<{ ms: number; states: string[] }> {
  const started = performance.now();
  const found = await lookupTags(client, 1, values);
  return { ms: performance.now() - started, states: found.map((f) => f.state) };
}

function expected(): string[] {
  return values.map((_, k) => ((k * 37 + 1) % 10 === 0 ? 'retired' : 'existing'));
}

it.each([
  ['without statistics, generic plan', 'force_generic_plan', false],
  ['analyzed, generic plan', 'force_generic_plan', true],
  ['without statistics, custom plan', 'force_custom_plan', false],
])('%s: one probe per value', async (_label, mode, analyzed) => {
  if (analyzed) await client.query('ANALYZE tags');
  else await client.query(`SELECT pg_clear_relation_stats('read_model', 'tags')`);
  await client.query(`SET plan_cache_mode = ${mode}`);
  const runs = [];
  for (let i = 0; i < 3; i++) runs.push(await timedLookup());
  for (const run of runs) expect(run.states).toEqual(expected());
  // One probe per value takes milliseconds; the join of every tag against every value, seconds.
  expect(Math.min(...runs.map((r) => r.ms))).toBeLessThan(250);
});
