import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool } from '../../shared/db/pool.js';
import { comparePositions } from '../../shared/event-store/port.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { backgroundSubscription, settlement, testEvent } from './conformance.js';
import { blockers } from './postgres-blockers.js';

/**
 * Concurrent writers (four store instances, raw transactions that commit late, appends that wait
 * inside Postgres) and subscribers of one store: nothing skipped, nothing twice. Seconds long, so
 * kept out of the event store's mutation testing (test/mutation/modules.ts), whose faster tests
 * cover the same code.
 */
let db: TestDatabase;
let admin: pg.Client;
let holdEventId: ReturnType<typeof blockers>['holdEventId'];
let blockedAppendBackend: ReturnType<typeof blockers>['blockedAppendBackend'];

beforeAll(async () => {
  db = await createTestDatabase('es_concurrent');
  admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
  ({ holdEventId, blockedAppendBackend } = blockers(db.url, admin));
});

afterAll(async () => {
  await admin?.end();
  await db?.drop();
});

describe('postgres event store: concurrent writers and a reader of the global log', () => {
  it('the subscriber gets every committed event once, in order, including late commits with lower positions', async () => {
    const prefix = `cw-${randomUUID()}`;
    const ours = (streamId: string) => streamId.startsWith(prefix);
    const pools = Array.from({ length: 4 }, () => createPool(db.url, { max: 6, applicationName: 'es-writers' }));
    const writers = pools.map((pool) => new PostgresEventStore(pool, db.url));
    const readerPool = createPool(db.url, { max: 3 });
    const reader = new PostgresEventStore(readerPool, db.url, { pollIntervalMs: 50 });
    const start = await reader.headPosition();
    // Three subscriptions of one store at the same position and batch size share their reads of
    // the log (as the projection workers of a process do): each must still get everything.
    const subscriptions = Array.from({ length: 3 }, () => backgroundSubscription(reader, ours, start, 50));

    // A naive reader that follows global_position alone. It must miss the late commits: that is
    // what proves the scenario happened and that the subscriber would miss them without its guard.
    let naiveLast = 0n;
    const naiveSeen = new Set<string>();
    let writing = true;
    const naive = (async () => {
      while (writing) {
        const { rows } = await readerPool.query<{ event_id: string; stream_id: string; position: string }>(
          'SELECT event_id, stream_id, global_position::text AS position FROM event_store.events WHERE global_position > $1 ORDER BY global_position LIMIT 1000',
          [String(naiveLast)],
        );
        for (const row of rows) {
          naiveLast = BigInt(row.position);
          if (ours(row.stream_id)) naiveSeen.add(row.event_id);
        }
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    // Waits for the naive reader to pass a position; gives up at once when the writers have failed.
    let writersFailed = false;
    const naivePassed = async (position: bigint) => {
      const deadline = Date.now() + 20_000;
      while (naiveLast <= position) {
        if (writersFailed || Date.now() > deadline) throw new Error(`the naive reader did not pass ${position}`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    };

    // 20 clients x 50 appends of 1 to 3 events, through four store instances (and on for as long
    // as the late transactions below need later events to be written).
    let lateOnesRunning = 8 + 2;
    const appends = Promise.all(
      Array.from({ length: 20 }, async (_, w) => {
        for (let i = 0; i < 50 || lateOnesRunning > 0; i++) {
          const count = 1 + ((w + i) % 3);
          await writers[w % writers.length]!.appendToStream(
            `${prefix}-w${w}-${i % 5}`,
            Array.from({ length: count }, (_, k) => testEvent(i * 10 + k)),
          );
        }
      }),
    );
    appends.catch(() => {
      writersFailed = true;
    });

    // Raw transactions that take a position early and commit (or roll back) only once later events are visible.
    const lateCommitted = new Set<string>();
    const rolledBack = new Set<string>();
    const late = Promise.all(
      Array.from({ length: 8 }, async (_, k) => {
        await new Promise((resolve) => setTimeout(resolve, k * 40));
        const client = new pg.Client({ connectionString: db.url });
        await client.connect();
        try {
          await client.query('BEGIN');
          const id = randomUUID();
          const { rows } = await client.query<{ position: string }>(
            `INSERT INTO event_store.events (event_id, stream_id, stream_revision, type, data)
             VALUES ($1, $2, 0, 'LateCommitted', '{}') RETURNING global_position::text AS position`,
            [id, `${prefix}-late-${k}`],
          );
          await naivePassed(BigInt(rows[0]!.position));
          await new Promise((resolve) => setTimeout(resolve, Math.random() * 30));
          if (k % 4 === 3) {
            await client.query('ROLLBACK');
            rolledBack.add(id);
          } else {
            await client.query('COMMIT');
            lateCommitted.add(id);
          }
        } finally {
          lateOnesRunning--;
          await client.end();
        }
      }),
    );

    // Store appends that commit late: each waits inside its insert on an uncommitted event id,
    // after its transaction has taken its id and its first position.
    const blockedAppends = Promise.all(
      Array.from({ length: 2 }, async (_, k) => {
        await new Promise((resolve) => setTimeout(resolve, 100 + k * 150));
        const heldId = randomUUID();
        const blocker = await holdEventId(heldId);
        const pool = createPool(db.url, { max: 1, applicationName: `es-blocked-${k}` });
        const store = new PostgresEventStore(pool, db.url);
        try {
          const batch = [testEvent(1, heldId), testEvent(2)];
          const appended = settlement(store.appendToStream(`${prefix}-blocked-${k}`, batch));
          const backend = await Promise.race([
            blockedAppendBackend(`es-blocked-${k}`),
            appended.then((outcome) => {
              throw outcome.error ?? new Error('the append ended before it waited');
            }),
          ]);
          expect(backend.hasWritten).toBe(true);
          const { rows } = await admin.query<{ position: string }>("SELECT last_value::text AS position FROM event_store.events_global_position_seq");
          await naivePassed(BigInt(rows[0]!.position) + 5n);
          await blocker.query('ROLLBACK');
          const outcome = await appended;
          if (outcome.error) throw outcome.error;
          return batch.map((e) => e.id!);
        } finally {
          lateOnesRunning--;
          await blocker.end();
          await store.close();
          await pool.end();
        }
      }),
    );

    try {
      await Promise.all([appends, late]);
      const blockedIds = (await blockedAppends).flat();
      const committed = (
        await admin.query<{ event_id: string }>(
          'SELECT event_id FROM event_store.events WHERE stream_id LIKE $1 ORDER BY tx_id, global_position',
          [`${prefix}-%`],
        )
      ).rows.map((r) => r.event_id);
      expect(committed.length).toBeGreaterThan(1000);
      for (const subscription of subscriptions) await subscription.waitFor(committed.length, 15_000);
      await new Promise((resolve) => setTimeout(resolve, 200));
      const [received, ...others] = subscriptions.map((subscription) => subscription.received.map((e) => e.id));

      // Exactly the committed events, each once, in log order, for every subscription.
      expect(new Set(received).size).toBe(received!.length);
      expect(received).toEqual(committed);
      for (const other of others) expect(other).toEqual(committed);
      const positions = subscriptions[0]!.received;
      for (let i = 1; i < positions.length; i++) {
        expect(comparePositions(positions[i - 1]!.position, positions[i]!.position)).toBe(-1);
      }
      for (const id of rolledBack) expect(received).not.toContain(id);
      for (const id of [...lateCommitted, ...blockedIds]) expect(received).toContain(id);
      // The naive reader skipped them: they committed after a higher position was visible.
      expect(lateCommitted.size).toBe(6);
      for (const id of [...lateCommitted, blockedIds[0]!, blockedIds[2]!]) expect(naiveSeen.has(id)).toBe(false);
    } finally {
      writing = false;
      await naive;
      await Promise.all(subscriptions.map((subscription) => subscription.stop()));
      await Promise.allSettled([appends, late, blockedAppends]);
      await Promise.all(writers.map((w) => w.close()));
      await Promise.all(pools.map((p) => p.end()));
      await reader.close();
      await readerPool.end();
    }
  });
});
