import { randomUUID } from 'node:crypto';
import net from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createPool, type Pool } from '../../shared/db/pool.js';
import {
  EventStoreUnavailableError,
  InvalidEventError,
  START,
  WrongExpectedRevisionError,
  type EventData,
  type StreamAppend,
} from '../../shared/event-store/port.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { EventCatalogue, defineEvent } from '../../shared/event-store/catalogue.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { blockers } from './postgres-blockers.js';
import { countStatements } from './statements.js';
import {
  eventStoreConformance,
  eventually,
  settlement,
  testEvent,
  uniqueStream,
} from './conformance.js';
import { rejectionOf } from '../support/rejection.js';

let db: TestDatabase;
let admin: pg.Client;
let holdEventId: ReturnType<typeof blockers>['holdEventId'];
let blockedAppendBackend: ReturnType<typeof blockers>['blockedAppendBackend'];

beforeAll(async () => {
  db = await createTestDatabase('es_postgres');
  admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
  ({ holdEventId, blockedAppendBackend } = blockers(db.url, admin));
});

afterAll(async () => {
  await admin?.end();
  await db?.drop();
});

eventStoreConformance('postgres', async () => {
  const pool = createPool(db.url, { max: 10, applicationName: 'es-conformance' });
  const store = new PostgresEventStore(pool, db.url, { pollIntervalMs: 50 });
  return {
    store,
    async cleanup() {
      await store.close();
      await pool.end();
    },
  };
});

/** What the table holds for these streams, straight from SQL. */
async function storedEvents(streams: string[]): Promise<Array<{ event_id: string; stream_id: string }>> {
  const result = await admin.query<{ event_id: string; stream_id: string }>(
    'SELECT event_id, stream_id FROM event_store.events WHERE stream_id = ANY($1) ORDER BY tx_id, global_position',
    [streams],
  );
  return result.rows;
}

async function storedStreams(streams: string[]): Promise<string[]> {
  const result = await admin.query<{ stream_id: string }>('SELECT stream_id FROM event_store.event_streams WHERE stream_id = ANY($1)', [
    streams,
  ]);
  return result.rows.map((r) => r.stream_id);
}

/** Backends of `applicationName` waiting on a lock inside an append, once there are `count` of them. */
async function waitingAppends(applicationName: string, count: number): Promise<number[]> {
  return eventually(async () => {
    const result = await admin.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity
       WHERE datname = current_database() AND application_name = $1 AND wait_event_type = 'Lock' AND query LIKE '%append_events%'`,
      [applicationName],
    );
    expect(result.rows).toHaveLength(count);
    return result.rows.map((r) => r.pid);
  });
}

/** A store on its own pool, for one test. */
function openStore(applicationName: string, max = 4) {
  const pool = createPool(db.url, { max, applicationName });
  const store = new PostgresEventStore(pool, db.url);
  return {
    pool,
    store,
    async close() {
      await store.close();
      await pool.end();
    },
  };
}

function shuffled<T>(items: readonly T[]): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy;
}

describe('postgres event store: the adapter', () => {
  it('is named postgres', async () => {
    const { store, close } = openStore('es-name', 1);
    expect(store.name).toBe('postgres');
    await close();
  });

  it('on an empty log, an expectation check answers the start of the log and no revision for a missing stream', async () => {
    const empty = await createTestDatabase('es_empty');
    const pool = createPool(empty.url, { max: 1 });
    const store = new PostgresEventStore(pool, empty.url);
    try {
      const stream = uniqueStream('empty-log');
      const result = await store.appendToStreams([{ streamId: stream, events: [], expectedRevision: 'no_stream' }]);
      expect(result).toEqual({ revisions: new Map(), position: START });
    } finally {
      await store.close();
      await pool.end();
      await empty.drop();
    }
  });
});

describe('postgres event store: invalid events', () => {
  let pool: Pool;
  let store: PostgresEventStore;

  beforeEach(() => {
    if (store) return;
    const catalogue = new EventCatalogue().register(
      defineEvent('AssetNamed', 2, z.object({ assetId: z.number().int().positive(), name: z.string().min(1) })),
      defineEvent('AssetMoved', 1, z.object({ assetId: z.number().int().positive(), locationId: z.number().int() })),
    );
    pool = createPool(db.url, { max: 4 });
    store = new PostgresEventStore(pool, db.url, { catalogue });
  });

  afterAll(async () => {
    await store?.close();
    await pool?.end();
  });

  it('stores valid events with their schema version', async () => {
    const stream = uniqueStream('valid');
    await store.appendToStream(stream, [{ type: 'AssetNamed', data: { assetId: 1, name: 'pump' }, metadata: { by: 'test' } }]);
    const [event] = await store.readStream(stream);
    expect(event).toMatchObject({ type: 'AssetNamed', data: { assetId: 1, name: 'pump' }, metadata: { by: 'test', schema_version: 2 } });
  });

  it('refuses an unknown type or a payload failing its schema, and writes nothing of the call', async () => {
    const a = uniqueStream('invalid-a');
    const b = uniqueStream('invalid-b');
    const valid: EventData = { type: 'AssetNamed', data: { assetId: 1, name: 'pump' } };
    const cases: Array<{ bad: EventData; reason: RegExp }> = [
      { bad: { type: 'AssetTeleported', data: { assetId: 1 } }, reason: /unknown event type/ },
      { bad: { type: 'AssetMoved', data: { assetId: -3, locationId: 7 } }, reason: /assetId/ },
      { bad: { type: 'AssetMoved', data: { assetId: 3 } }, reason: /locationId/ },
      { bad: { id: 'not-a-uuid', type: 'AssetMoved', data: { assetId: 3, locationId: 1 } }, reason: /UUID/ },
    ];
    for (const { bad, reason } of cases) {
      const error = await rejectionOf(
        store.appendToStreams([
          { streamId: a, events: [valid, { ...valid, data: { assetId: 2, name: 'valve' } }], expectedRevision: 'any' },
          { streamId: b, events: [valid, bad], expectedRevision: 'no_stream' },
        ]),
      );
      expect(error).toBeInstanceOf(InvalidEventError);
      expect(error).toMatchObject({ eventType: bad.type });
      expect((error as InvalidEventError).reason).toMatch(reason);
    }
    expect(await storedEvents([a, b])).toEqual([]);
    expect(await storedStreams([a, b])).toEqual([]);
  });
});

describe('postgres event store: repeats', () => {
  let pool: Pool;
  let store: PostgresEventStore;

  beforeEach(() => {
    if (store) return;
    pool = createPool(db.url, { max: 4 });
    store = new PostgresEventStore(pool, db.url);
  });

  afterAll(async () => {
    await store?.close();
    await pool?.end();
  });

  it('a partly repeated append writes only the new events, with the next revisions', async () => {
    const a = uniqueStream('partial-a');
    const b = uniqueStream('partial-b');
    const [x, y, z, w] = [testEvent(1), testEvent(2), testEvent(3), testEvent(4)];
    await store.appendToStreams([
      { streamId: a, events: [x!], expectedRevision: 'no_stream' },
      { streamId: b, events: [y!], expectedRevision: 'no_stream' },
    ]);
    // A redelivered batch: a's event is stored already, b gets one old and two new ones.
    const result = await store.appendToStreams([
      { streamId: a, events: [x!], expectedRevision: 'any' },
      { streamId: b, events: [y!, z!, w!], expectedRevision: 'any' },
    ]);
    expect(result.revisions.get(a)).toBe(0n);
    expect(result.revisions.get(b)).toBe(2n);
    const bEvents = await store.readStream(b);
    expect(bEvents.map((e) => [e.id, e.revision])).toEqual([
      [y!.id, 0n],
      [z!.id, 1n],
      [w!.id, 2n],
    ]);
    expect(result.position).toEqual(bEvents[2]!.position);
    expect(await storedEvents([a, b])).toHaveLength(4);
  });

  it('the same event id twice in one call is stored once', async () => {
    const stream = uniqueStream('twice');
    const event = testEvent(1);
    const result = await store.appendToStream(stream, [event, testEvent(2), { ...event }], 'no_stream');
    expect(result.revisions.get(stream)).toBe(1n);
    expect((await store.readStream(stream)).map((e) => e.data.n)).toEqual([1, 2]);
  });

  it('an expectation check of a missing stream answers no revision for it', async () => {
    const missing = uniqueStream('check-missing');
    const present = uniqueStream('check-present');
    await store.appendToStream(present, [testEvent(1)]);
    const result = await store.appendToStreams([
      { streamId: missing, events: [], expectedRevision: 'no_stream' },
      { streamId: present, events: [], expectedRevision: 0n },
    ]);
    expect(result.revisions).toEqual(new Map([[present, 0n]]));
    expect((await store.appendToStream(missing, [], 'any')).revisions).toEqual(new Map());
  });

  it('refuses a stream given twice in one append, and writes nothing', async () => {
    const a = uniqueStream('twice-a');
    const b = uniqueStream('twice-b');
    for (const order of [[a, b, a], [b, a, a], [a, a, b]]) {
      const error = await rejectionOf(store.appendToStreams(order.map((streamId) => ({ streamId, events: [testEvent(1)], expectedRevision: 'any' }))));
      expect(error).toBeInstanceOf(Error);
      expect((error as Error).message).toBe(`stream ${a} appears twice in one append`);
    }
    expect(await storedEvents([a, b])).toEqual([]);
  });

  it('refuses an id with anything before or after the UUID, and writes nothing', async () => {
    const stream = uniqueStream('bad-id');
    const id = randomUUID();
    for (const bad of [`x${id}`, `${id}x`, `{${id}}`, ` ${id}`, `${id}\n`]) {
      const error = await rejectionOf(store.appendToStream(stream, [testEvent(1, bad)]));
      expect(error).toBeInstanceOf(InvalidEventError);
      expect((error as InvalidEventError).reason).toBe(`id ${bad} is not a UUID`);
    }
    expect(await storedEvents([stream])).toEqual([]);
  });

  it('endOfAppend refuses a position where no event is', async () => {
    const { position } = await store.appendToStream(uniqueStream('end-none'), [testEvent(1)]);
    const nowhere = { commit: position.commit + 1_000_000n, prepare: 1n };
    const error = await rejectionOf(store.endOfAppend(nowhere));
    expect((error as Error).message).toBe(`no event at ${nowhere.commit}/1`);
  });

  it('lagAfter is not capped when the count is exactly the limit', async () => {
    const { position } = await store.appendToStream(uniqueStream('lag-from'), [testEvent(0)]);
    await store.appendToStream(uniqueStream('lag-exact'), [testEvent(1), testEvent(2), testEvent(3)]);
    await eventually(async () => expect((await store.lagAfter(position)).events).toBe(3));
    expect(await store.lagAfter(position, { countLimit: 3 })).toMatchObject({ events: 3, capped: false });
    expect(await store.lagAfter(position, { countLimit: 2 })).toMatchObject({ events: 2, capped: true });
  });

  it('event ids are matched whatever their letter case', async () => {
    const stream = uniqueStream('case');
    const event = testEvent(1);
    await store.appendToStream(stream, [event]);
    await store.appendToStream(stream, [{ ...event, id: event.id!.toUpperCase() }]);
    expect(await store.readStream(stream)).toHaveLength(1);
  });
});

describe('postgres event store: racing appends', () => {
  it('an append repeated while the first is still running answers as a repeat, with the same result', async () => {
    for (const expectedRevision of ['any', 'no_stream'] as const) {
      const applicationName = `es-race-${expectedRevision}`;
      const { store, close } = openStore(applicationName);
      const stream = uniqueStream(`race-${expectedRevision}`);
      const heldId = randomUUID();
      const blocker = await holdEventId(heldId);
      try {
        const batch = [testEvent(1), testEvent(2, heldId)];
        // The first waits on the held id; the repeat, which found none of the ids stored, waits on the first.
        const first = settlement(store.appendToStream(stream, batch, expectedRevision));
        await waitingAppends(applicationName, 1);
        const repeat = settlement(store.appendToStream(stream, batch.map((e) => ({ ...e })), expectedRevision));
        await waitingAppends(applicationName, 2);
        await blocker.query('ROLLBACK');
        const [one, two] = await Promise.all([first, repeat]);
        expect(one.error).toBeUndefined();
        expect(two.error).toBeUndefined();
        const stored = await store.readStream(stream);
        expect(stored.map((e) => e.id)).toEqual(batch.map((e) => e.id));
        expect(one.value).toEqual({ revisions: new Map([[stream, 1n]]), position: stored[1]!.position });
        expect(two.value).toEqual(one.value);
      } finally {
        await blocker.end();
        await close();
      }
    }
  });

  it('a refused expectation costs one statement when the event ids are generated (no repeat can have raced it)', async () => {
    const pool = createPool(db.url, { max: 2 });
    const statements = countStatements(pool);
    const store = new PostgresEventStore(pool, db.url);
    try {
      const stream = uniqueStream('refused-once');
      await store.appendToStream(stream, [testEvent(1)]);
      const before = statements.appends;
      for (const events of [[{ type: 'Generated', data: {} }], []]) {
        expect(await rejectionOf(store.appendToStream(stream, events, 'no_stream'))).toBeInstanceOf(WrongExpectedRevisionError);
      }
      expect(statements.appends - before).toBe(2);
    } finally {
      await store.close();
      await pool.end();
    }
  });

  it('concurrent appends to the same streams, each naming them in its own order, never deadlock', async () => {
    // A plain pool: the service's pool runs a deadlock's victim again, which would hide one.
    const pool = new pg.Pool({ connectionString: db.url, max: 4, application_name: 'es-lock-order' });
    pool.on('error', () => undefined);
    const store = new PostgresEventStore(pool, db.url);
    const locker = new pg.Client({ connectionString: db.url });
    await locker.connect();
    try {
      // Two appends naming three streams in opposite orders, made to take their first lock at the
      // same time: both wait on the middle stream, which another transaction holds, then go on.
      const [x, middle, y] = ['a', 'b', 'c'].map((k) => `${k}-${uniqueStream('lock-order')}`) as [string, string, string];
      await store.appendToStream(middle, [testEvent(0)]);
      await locker.query('BEGIN');
      await locker.query('SELECT 1 FROM event_store.event_streams WHERE stream_id = $1 FOR UPDATE', [middle]);
      const appends = [
        [x, middle, y],
        [y, middle, x],
      ].map((order) => settlement(store.appendToStreams(order.map((streamId) => ({ streamId, events: [testEvent(1)], expectedRevision: 'any' })))));
      await waitingAppends('es-lock-order', 2);
      await locker.query('COMMIT');
      for (const { error } of await Promise.all(appends)) expect(error).toBeUndefined();

      // And many rounds of real parallel appends, each in a random order.
      await Promise.all(Array.from({ length: 4 }, () => pool.query('SELECT pg_sleep(0.05)')));
      const streams = Array.from({ length: 8 }, (_, i) => uniqueStream(`lock-order-${i}`));
      for (let round = 0; round < 15; round++) {
        await Promise.all(
          Array.from({ length: 4 }, (_, writer) =>
            store.appendToStreams(
              shuffled(streams).map((streamId): StreamAppend => ({ streamId, events: [testEvent(round * 10 + writer)], expectedRevision: 'any' })),
            ),
          ),
        );
      }
      for (const stream of streams) expect((await store.readStream(stream)).map((e) => e.revision)).toEqual(Array.from({ length: 60 }, (_, i) => BigInt(i)));
    } finally {
      await locker.end();
      await store.close();
      await pool.end();
    }
  });
});

describe('postgres event store: losing the database', () => {
  it('an append whose backend is terminated mid-insert fails promptly and leaves nothing behind', async () => {
    const pool = createPool(db.url, { max: 2, applicationName: 'es-terminated' });
    const store = new PostgresEventStore(pool, db.url);
    const a = uniqueStream('lost-a');
    const b = uniqueStream('lost-b');
    const heldId = randomUUID();
    const blocker = await holdEventId(heldId);
    try {
      // Stream a sorts first: its revision moves and its events go in before the insert waits.
      const batch = [
        { streamId: a, events: [testEvent(1), testEvent(2)], expectedRevision: 'no_stream' as const },
        { streamId: b, events: [testEvent(3), testEvent(4, heldId)], expectedRevision: 'no_stream' as const },
      ];
      const appended = settlement(store.appendToStreams(batch));
      const backend = await blockedAppendBackend('es-terminated');
      expect(backend.hasWritten).toBe(true);
      const started = Date.now();
      await admin.query('SELECT pg_terminate_backend($1)', [backend.pid]);
      const outcome = await appended;
      expect(outcome.at - started).toBeLessThan(2_000);
      expect(outcome.error).toBeInstanceOf(EventStoreUnavailableError);
      expect((outcome.error as Error).message).toBe(
        'connection to the event store was lost during an append: it was written entirely or not at all; repeat it with the same event ids',
      );
      expect((outcome.error as Error).cause).toMatchObject({ code: '57P01' });
      await blocker.query('ROLLBACK');

      expect(await storedEvents([a, b])).toEqual([]);
      expect(await storedStreams([a, b])).toEqual([]);
      // The store recovers: the same append goes through, once.
      await store.appendToStreams(batch);
      expect(await storedEvents([a, b])).toHaveLength(4);
    } finally {
      await blocker.end();
      await store.close();
      await pool.end();
    }
  });

  it('an append whose connection drops (proxy killed) fails promptly; the batch is then all there or not at all', async () => {
    const target = new URL(db.url);
    const sockets = new Set<net.Socket>();
    const proxy = net.createServer((client) => {
      const server = net.connect(Number(target.port), target.hostname);
      sockets.add(client).add(server);
      client.pipe(server).pipe(client);
      const close = () => {
        client.destroy();
        server.destroy();
      };
      client.on('error', close).on('close', close);
      server.on('error', close).on('close', close);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const proxied = new URL(db.url);
    proxied.port = String((proxy.address() as net.AddressInfo).port);
    const pool = createPool(proxied.toString(), { max: 2, applicationName: 'es-proxied' });
    const store = new PostgresEventStore(pool, proxied.toString());
    const a = uniqueStream('proxy-a');
    const b = uniqueStream('proxy-b');
    const heldId = randomUUID();
    const blocker = await holdEventId(heldId);
    const batch = [
      { streamId: a, events: [testEvent(1), testEvent(2)], expectedRevision: 'any' as const },
      { streamId: b, events: [testEvent(3), testEvent(4, heldId), testEvent(5)], expectedRevision: 'any' as const },
    ];
    try {
      const appended = settlement(store.appendToStreams(batch));
      const backend = await blockedAppendBackend('es-proxied');
      const started = Date.now();
      proxy.close();
      for (const socket of sockets) socket.destroy();
      const outcome = await appended;
      expect(outcome.at - started).toBeLessThan(2_000);
      expect(outcome.error).toBeInstanceOf(EventStoreUnavailableError);

      // The orphaned backend finishes on its own once the blocker goes; whatever it did, it did whole.
      await blocker.query('ROLLBACK');
      await eventually(async () => {
        const { rows } = await admin.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [backend.pid]);
        expect(rows).toEqual([]);
      });
      const stored = await storedEvents([a, b]);
      expect([0, 5]).toContain(stored.length);
      // Repeating the append with the same event ids is the recovery: exactly one copy.
      const direct = createPool(db.url, { max: 1 });
      const retry = new PostgresEventStore(direct, db.url);
      await retry.appendToStreams(batch);
      expect((await storedEvents([a, b])).map((e) => e.event_id).sort()).toEqual(batch.flatMap((s) => s.events.map((e) => e.id!)).sort());
      await retry.close();
      await direct.end();
    } finally {
      await blocker.end();
      await store.close();
      await pool.end();
      proxy.close();
    }
  });

  it('a statement the database cancels or refuses is reported as itself, not as a lost connection', async () => {
    const { store, close } = openStore('es-cancelled', 2);
    const locker = new pg.Client({ connectionString: db.url });
    await locker.connect();
    try {
      // Each waits on a table lock until cancelled.
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE event_store.events IN ACCESS EXCLUSIVE MODE');
      const statements: Array<() => Promise<unknown>> = [() => store.appendToStream(uniqueStream('cancelled'), [testEvent(1)]), () => store.readAll(), () => store.headPosition()];
      for (const statement of statements) {
        const outcome = settlement(statement());
        const pid = await eventually(async () => {
          const { rows } = await admin.query<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity WHERE application_name = 'es-cancelled' AND wait_event_type = 'Lock'`,
          );
          expect(rows).toHaveLength(1);
          return rows[0]!.pid;
        });
        await admin.query('SELECT pg_cancel_backend($1)', [pid]);
        const { error } = await outcome;
        expect(error).not.toBeInstanceOf(EventStoreUnavailableError);
        expect(error).toMatchObject({ code: '57014' });
      }
      await locker.query('ROLLBACK');
      // Refused outright: a NUL character is no JSON text Postgres can store.
      const refused = await rejectionOf(store.appendToStream(uniqueStream('refused'), [{ type: 'Nul', data: { text: 'a\u0000b' } }]));
      expect(refused).not.toBeInstanceOf(EventStoreUnavailableError);
      expect(refused).toMatchObject({ code: '22P05' });
    } finally {
      await locker.end();
      await close();
    }
  });

  it('an unreachable database fails appends and reads with EventStoreUnavailableError', async () => {
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const url = new URL(db.url);
    url.port = String(port);
    const pool = createPool(url.toString(), { max: 1 });
    const store = new PostgresEventStore(pool, url.toString());
    try {
      expect(await rejectionOf(store.appendToStream(uniqueStream('down'), [testEvent(1)]))).toBeInstanceOf(EventStoreUnavailableError);
      for (const read of [store.readAll(), store.headPosition()]) {
        const error = await rejectionOf(read);
        expect(error).toBeInstanceOf(EventStoreUnavailableError);
        expect(error).toMatchObject({ message: 'event store unreachable', cause: { code: 'ECONNREFUSED' } });
      }
    } finally {
      await store.close();
      await pool.end();
    }
  });
});
