import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool } from '../../shared/db/pool.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * A statement on the pool that Postgres picks as a deadlock's victim runs again (shared/db/pool.ts):
 * what a reader meets when a rebuild swaps tables in while the read holds one of them and waits
 * for another. Here a real deadlock: the other session locks `a`, the read takes `b` and waits
 * for `a`, the other session asks for `b`; the read waits longest, so its session finds the
 * deadlock and is rolled back.
 */

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('deadlock_retry');
});
afterAll(async () => {
  await db?.drop();
});

async function deadlocks(client: pg.Client): Promise<number> {
  await client.query('SELECT pg_stat_clear_snapshot()');
  return Number((await client.query<{ n: string }>('SELECT deadlocks::text AS n FROM pg_stat_database WHERE datname = current_database()')).rows[0]!.n);
}

describe('a deadlock victim on the pool', () => {
  it('runs again and answers, once the other session is through', async () => {
    const pool = createPool(db.url, { max: 2 });
    const other = new pg.Client({ connectionString: db.url });
    await other.connect();
    try {
      await other.query('CREATE TABLE a (x int); CREATE TABLE b (y int); INSERT INTO a VALUES (1); INSERT INTO b VALUES (2)');
      const before = await deadlocks(other);
      // The other session never runs the deadlock check first.
      await other.query("SET deadlock_timeout = '30s'");
      await other.query('BEGIN');
      await other.query('LOCK TABLE a IN ACCESS EXCLUSIVE MODE');
      const read = pool.query<{ x: number; y: number }>('SELECT x, y FROM b, a');
      // The read holds b and waits for a.
      for (let i = 0; i < 100; i++) {
        const waiting = await pool.query("SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query = 'SELECT x, y FROM b, a'");
        if (waiting.rowCount) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      await other.query('LOCK TABLE b IN ACCESS EXCLUSIVE MODE');
      await new Promise((r) => setTimeout(r, 200));
      await other.query('COMMIT');
      expect((await read).rows).toEqual([{ x: 1, y: 2 }]);
      expect(await deadlocks(other)).toBe(before + 1);
    } finally {
      await other.end();
      await pool.end();
    }
  });
});
