import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, type Pool } from '../../shared/db/pool.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { WrongExpectedRevisionError } from '../../shared/event-store/port.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

let db: TestDatabase;
let pool: Pool;
let store: PostgresEventStore;

beforeAll(async () => {
  db = await createTestDatabase('es_smoke');
  pool = createPool(db.url, { max: 5 });
  store = new PostgresEventStore(pool, db.url);
});

afterAll(async () => {
  await store.close();
  await pool.end();
  await db.drop();
});

describe('postgres event store smoke', () => {
  it('appends and reads back with optimistic concurrency', async () => {
    const first = await store.appendToStream('s-1', [{ type: 'A', data: { n: 1 } }], 'no_stream');
    expect(first.revisions.get('s-1')).toBe(0n);
    await expect(store.appendToStream('s-1', [{ type: 'A', data: { n: 2 } }], 'no_stream')).rejects.toBeInstanceOf(
      WrongExpectedRevisionError,
    );
    await store.appendToStream('s-1', [{ type: 'A', data: { n: 2 } }], 0n);
    const events = await store.readStream('s-1');
    expect(events.map((e) => e.data.n)).toEqual([1, 2]);
    const all = await store.readAll();
    expect(all).toHaveLength(2);
  });
});
