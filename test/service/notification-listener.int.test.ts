import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NotificationListener } from '../../shared/db/listener.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/** The LISTEN connection the event store, the checkpoint watcher and the authenticator share the code of. */

let db: TestDatabase;
let pool: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase('listener');
  pool = new pg.Pool({ connectionString: db.url, max: 2 });
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

async function until(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('NotificationListener', () => {
  it('hears its channels; when its connection is killed it says so, listens again and says it reconnected', async () => {
    const heard: string[] = [];
    const listening: boolean[] = [];
    let lost = 0;
    const listener = new NotificationListener({
      connectionString: db.url,
      channels: ['test_a', 'test_b'],
      onNotification: (m) => heard.push(`${m.channel}:${m.payload}`),
      onListening: (reconnected) => void listening.push(reconnected),
      onLost: () => lost++,
      retryMs: 50,
    });
    await listener.start();
    try {
      expect(listening).toEqual([false]);
      await pool.query(`SELECT pg_notify('test_a', '1'), pg_notify('test_b', '2'), pg_notify('test_c', '3')`);
      await until(() => heard.length === 2);
      expect(heard).toEqual(['test_a:1', 'test_b:2']);

      await pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND datname = current_database()`);
      await until(() => listening.length === 2);
      expect(listening).toEqual([false, true]);
      expect(lost).toBe(1);
      await pool.query(`SELECT pg_notify('test_a', '4')`);
      await until(() => heard.length === 3);
      expect(heard[2]).toBe('test_a:4');
    } finally {
      await listener.stop();
    }
    const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND datname = current_database()`);
    expect(rows[0]!.n).toBe(0);
  });

  it('a notification its owner throws on is dropped and reported, and the next ones are still heard', async () => {
    const heard: string[] = [];
    const unreadable: string[] = [];
    const listener = new NotificationListener({
      connectionString: db.url,
      channels: ['test_u'],
      onNotification: (m) => {
        if (m.payload === 'garbage') throw new Error('cannot read it');
        heard.push(m.payload ?? '');
      },
      onUnreadable: (m, error) => unreadable.push(`${m.payload}: ${(error as Error).message}`),
    });
    await listener.start();
    try {
      await pool.query(`SELECT pg_notify('test_u', '1')`);
      await pool.query(`SELECT pg_notify('test_u', 'garbage')`);
      await pool.query(`SELECT pg_notify('test_u', '2')`);
      await until(() => heard.length === 2);
      expect(heard).toEqual(['1', '2']);
      expect(unreadable).toEqual(['garbage: cannot read it']);
    } finally {
      await listener.stop();
    }
  });

  it('start rejects when the first connection fails; startInBackground keeps trying until stopped', async () => {
    const url = new URL(db.url);
    url.pathname = '/no_such_database';
    const failing = new NotificationListener({ connectionString: url.toString(), channels: ['x'], onNotification: () => undefined, retryMs: 20 });
    await expect(failing.start()).rejects.toThrow();
    await failing.startInBackground();
    await failing.stop();
  });
});
