import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool } from '../../shared/db/pool.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { WrongExpectedRevisionError } from '../../shared/event-store/port.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * A statement the server refuses keeps its connection (shared/db/pool.ts, docs/design.md "Event
 * store (Postgres adapter)"): pg's Pool.query alone discards it, so that every conflict of writers
 * on one stream cost a new connection. Real writers, in parallel, on a real Postgres.
 */

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('refused_statements');
});
afterAll(async () => {
  await db?.drop();
});

describe('a refused statement on the pool', () => {
  it('eight writers appending to one stream with expected revisions: the conflicts reuse the pool’s connections', async () => {
    const pool = createPool(db.url, { max: 8 });
    let connections = 0;
    pool.on('connect', () => connections++);
    const store = new PostgresEventStore(pool, db.url);
    const stream = 'contended-1';
    let conflicts = 0;
    let written = 0;
    try {
      await Promise.all(
        Array.from({ length: 8 }, async (_, writer) => {
          for (let attempt = 0; attempt < 40; attempt++) {
            const events = await store.readStream(stream);
            const expected = events.length === 0 ? ('no_stream' as const) : events.at(-1)!.revision;
            try {
              await store.appendToStream(stream, [{ type: 'Contended', data: { writer, attempt } }], expected);
              written++;
            } catch (error) {
              if (!(error instanceof WrongExpectedRevisionError)) throw error;
              conflicts++;
            }
          }
        }),
      );
      expect(written + conflicts).toBe(320);
      expect(conflicts).toBeGreaterThan(20);
      expect((await store.readStream(stream)).length).toBe(written);
      // pg's own Pool.query opened a connection for (about) every conflict.
      expect(connections).toBeLessThanOrEqual(8);
    } finally {
      await store.close();
      await pool.end();
    }
  });

  it('a failed multi-statement transaction leaves no aborted transaction behind on its connection', async () => {
    const pool = createPool(db.url, { max: 1 });
    let connections = 0;
    pool.on('connect', () => connections++);
    try {
      await pool.query('CREATE TABLE once (k int PRIMARY KEY)');
      await pool.query('INSERT INTO once VALUES (1)');
      await expect(pool.query('BEGIN; INSERT INTO once VALUES (2); INSERT INTO once VALUES (1); COMMIT')).rejects.toMatchObject({ code: '23505' });
      // The same (only) connection: its transaction was rolled back, 2 was not kept, and it answers.
      expect((await pool.query<{ k: number }>('SELECT k FROM once ORDER BY k')).rows.map((r) => r.k)).toEqual([1]);
      await expect(pool.query('SELECT 1/0')).rejects.toMatchObject({ code: '22012' });
      expect((await pool.query<{ n: number }>('SELECT 1 AS n')).rows[0]!.n).toBe(1);
      expect(connections).toBe(1);
    } finally {
      await pool.end();
    }
  });
});
