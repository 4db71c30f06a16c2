import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool } from '../../shared/db/pool.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * The append's plans on a fresh database (migrations/event-store/006_append_plans.sql, docs/design.md
 * "Event store (Postgres adapter)"): a connection that appended to an empty log keeps its plans
 * while the log grows, so none of them may be a sequential scan. Counted by the server's own
 * statistics (pg_stat_user_tables.seq_scan) over appends made after the plans are cached, on a
 * database no ANALYZE has seen.
 */

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('cold_plans');
});
afterAll(async () => {
  await db?.drop();
});

const SCANNED = `SELECT relname, seq_scan::int AS n FROM pg_stat_user_tables WHERE schemaname = 'event_store' AND relname IN ('events', 'event_streams') ORDER BY relname`;

describe('appends on a fresh database', () => {
  it('scan no table sequentially once the log has grown, with plans cached on the empty log (single appends, batches, repeats)', async () => {
    const observer = createPool(db.url, { max: 1 });
    const writerPool = createPool(db.url, { max: 1 });
    const store = new PostgresEventStore(writerPool, db.url);
    try {
      const analyzed = await observer.query(`SELECT 1 FROM pg_stat_user_tables WHERE schemaname = 'event_store' AND relname = 'events' AND (last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL)`);
      expect(analyzed.rowCount, 'the database is fresh: never analyzed').toBe(0);
      // The first calls on the empty log: PL/pgSQL plans and caches its statements here.
      const append = (i: number) =>
        i % 3 === 0
          ? store.appendToStreams([
              { streamId: `a-${i % 40}`, expectedRevision: 'any', events: [{ type: 'T', data: { i } }] },
              { streamId: `b-${i % 40}`, expectedRevision: 'any', events: [{ type: 'T', data: { i } }, { type: 'T', data: { i, second: true } }] },
            ])
          : store.appendToStream(`a-${i % 40}`, [{ type: 'T', data: { i } }], 'any');
      for (let i = 0; i < 2_000; i++) await append(i);
      // A repeat of an append (the same event id) takes the duplicate path.
      const id = '0193e7a4-0000-7000-8000-000000000001';
      await store.appendToStream('r-1', [{ id, type: 'T', data: {} }], 'any');
      // The server's statistics of a connection are flushed at most once a second: forced here.
      const counts = async () => {
        await writerPool.query('SELECT pg_stat_force_next_flush()');
        await writerPool.query('SELECT 1');
        await observer.query('SELECT pg_stat_clear_snapshot()');
        return new Map((await observer.query<{ relname: string; n: number }>(SCANNED)).rows.map((r) => [r.relname, r.n]));
      };
      const before = await counts();
      // The same connection, its plans made on the empty log, now that the log holds thousands.
      for (let i = 0; i < 1_000; i++) await append(i);
      await store.appendToStream('r-1', [{ id, type: 'T', data: {} }], 'any');
      const after = await counts();
      expect(after.get('events')! - before.get('events')!, 'sequential scans of event_store.events').toBe(0);
      expect(after.get('event_streams')! - before.get('event_streams')!, 'sequential scans of event_store.event_streams').toBe(0);
    } finally {
      await writerPool.end();
      await observer.end();
    }
  }, 120_000);
});
