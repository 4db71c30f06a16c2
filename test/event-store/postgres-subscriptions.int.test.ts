/**
 * The Postgres adapter's subscriptions: how an append reaches subscribers (directly in the
 * same store, by NOTIFY in other ones), when they read the log, and how they end. Stores here poll
 * once a minute, so within a test only a notification (or an append of their own) can wake them.
 */
import { randomUUID } from 'node:crypto';
import { getEventListeners } from 'node:events';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createPool } from '../../shared/db/pool.js';
import { comparePositions, type LogBatch, type Position } from '../../shared/event-store/port.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { backgroundSubscription, eventually, testEvent, uniqueStream } from './conformance.js';
import { startHoldingProxy, type HoldingProxy } from './holding-proxy.js';
import { countStatements, type Statements } from './statements.js';

/** What must happen "at once" gets this long on a loaded machine; the poll interval is far longer. */
const SOON = 3_000;
const NEVER_POLL = 60_000;
const CHANNEL = 'event_store_appended';

let db: TestDatabase;
/** Checks and NOTIFYs of the tests, on connections of their own (appends side by side check at once). */
let admin: pg.Pool;
const cleanups: Array<() => Promise<unknown>> = [];
const proxies: HoldingProxy[] = [];

beforeAll(async () => {
  db = await createTestDatabase('es_subscriptions');
  admin = new pg.Pool({ connectionString: db.url, max: 4 });
});

afterEach(async () => {
  // Answers still held would keep a pool from ending.
  for (const proxy of proxies.splice(0)) proxy.release();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

afterAll(async () => {
  await admin?.end();
  await db?.drop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Opened {
  store: PostgresEventStore;
  pool: pg.Pool;
  statements: Statements;
  /** application_name of the store's LISTEN connection. */
  listenerName: string;
}

/** A store polling once a minute (or every `pollIntervalMs`), on its own pool (through `poolUrl` if given). */
function openStore(options: { pollIntervalMs?: number; poolUrl?: string; max?: number; recentEvents?: number } = {}): Opened {
  const pool = createPool(options.poolUrl ?? db.url, { max: options.max ?? 4, applicationName: 'es-subscriptions' });
  const statements = countStatements(pool);
  const listenerName = `es-subscriptions-listener-${randomUUID().slice(0, 8)}`;
  const listenerUrl = new URL(db.url);
  listenerUrl.searchParams.set('application_name', listenerName);
  const store = new PostgresEventStore(pool, listenerUrl.toString(), { pollIntervalMs: options.pollIntervalMs ?? NEVER_POLL, recentEvents: options.recentEvents });
  cleanups.push(async () => {
    await store.close();
    await pool.end();
  });
  return { store, pool, statements, listenerName };
}

async function openProxy(): Promise<HoldingProxy> {
  const proxy = await startHoldingProxy(db.url);
  proxies.push(proxy);
  cleanups.push(() => proxy.close());
  return proxy;
}

/** Sessions with this application name. */
async function sessions(applicationName: string): Promise<number> {
  const { rows } = await admin.query('SELECT 1 FROM pg_stat_activity WHERE application_name = $1', [applicationName]);
  return rows.length;
}

/** A NOTIFY such as another process's append sends (there is nothing new to read). */
async function foreignNotify(): Promise<void> {
  await admin.query('SELECT pg_notify($1, $2)', [CHANNEL, 'another-process']);
}

async function visible(position: Position): Promise<boolean> {
  const { rows } = await admin.query<{ visible: boolean }>('SELECT $1::text::xid8 < pg_snapshot_xmin(pg_current_snapshot()) AS visible', [
    String(position.commit),
  ]);
  return rows[0]!.visible;
}

interface Appended {
  position: Position;
  /** Not yet readable right after the append: a transaction that began before it was still open. */
  heldBack: boolean;
}

/**
 * Appends, and tells whether readers can see the events yet. They cannot while any transaction of
 * the cluster that began earlier is open (another test file's, when files run side by side); a
 * subscriber that reads then finds nothing and rightly waits for its poll. Checked at once, before
 * a subscriber woken by the append can have read.
 */
async function append(store: PostgresEventStore, stream: string, n: number): Promise<Appended> {
  const { position } = await store.appendToStream(stream, [testEvent(n)]);
  return { position, heldBack: !(await visible(position)) };
}

/**
 * Waits until `subscription` has `count` events. When an append was held back, the subscriber may
 * have read too early: once the events are visible, a NOTIFY stands in for the next append.
 */
async function delivered(subscription: { waitFor(count: number, timeoutMs: number): Promise<void> }, count: number, appended: Appended[]) {
  const last = appended.at(-1)!;
  if (appended.some((a) => a.heldBack)) {
    await eventually(async () => expect(await visible(last.position)).toBe(true), 30_000);
    await foreignNotify();
  }
  await subscription.waitFor(count, SOON);
}

/** A subscription iterated without a signal: it ends only when its store closes. */
function unsignalledSubscription(store: PostgresEventStore, after: Position) {
  const batches: LogBatch[] = [];
  let ended = false;
  const done = (async () => {
    for await (const batch of store.subscribeToAll({ after })) batches.push(batch);
    ended = true;
  })();
  done.catch(() => undefined);
  return {
    batches,
    done,
    get ended() {
      return ended;
    },
  };
}

async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

describe('postgres event store: subscriptions', () => {
  it('an abort ends a waiting subscription at once, and its waits leave no listener on the signal', async () => {
    const b = openStore();
    const stream = uniqueStream('abort');
    const controller = new AbortController();
    const batches: LogBatch[] = [];
    const start = await b.store.headPosition();
    const done = (async () => {
      for await (const batch of b.store.subscribeToAll({ after: start, signal: controller.signal })) {
        if (batch.events.some((e) => e.streamId === stream)) batches.push(batch);
      }
    })();
    for (let i = 0; i < 10; i++) {
      const appended = await append(b.store, stream, i);
      await delivered({ waitFor: (count, ms) => eventually(() => expect(batches).toHaveLength(count), ms) }, i + 1, [appended]);
    }
    await sleep(100);
    expect(getEventListeners(controller.signal, 'abort').length).toBeLessThanOrEqual(1);
    controller.abort();
    await within(done, 1_000, 'the aborted subscription ended');
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('subscribers read the log only when an append is signalled, share their reads, and ignore the echo of their own NOTIFY', async () => {
    const a = openStore();
    const b = openStore();
    const stream = uniqueStream('reads');
    const start = await b.store.headPosition();
    const subscriptions = Array.from({ length: 3 }, () => backgroundSubscription(b.store, new Set([stream]), start));
    cleanups.push(...subscriptions.map((s) => () => s.stop()));
    await sleep(200);
    const idle = b.statements.reads;
    await sleep(400);
    expect(b.statements.reads).toBe(idle);

    // Another store's append: one read finds it, one finds nothing more, each shared by all three.
    // (Not countable when a transaction elsewhere held the append back: the subscribers then read too early.)
    const foreign = await append(a.store, stream, 1);
    for (const subscription of subscriptions) await delivered(subscription, 1, [foreign]);
    await sleep(300);
    if (!foreign.heldBack) expect(b.statements.reads - idle).toBe(2);

    // Its own append: the same, and the echo of its NOTIFY wakes nobody.
    const before = b.statements.reads;
    const own = await append(b.store, stream, 2);
    for (const subscription of subscriptions) await delivered(subscription, 2, [own]);
    await sleep(300);
    if (!own.heldBack) expect(b.statements.reads - before).toBe(2);
  });

  it('subscriptions at different positions or with different batch sizes read apart', async () => {
    const b = openStore();
    const stream = uniqueStream('apart');
    const start = (await b.store.appendToStream(uniqueStream('apart-start'), [testEvent(0)])).position;
    const { position } = await b.store.appendToStream(stream, [testEvent(1), testEvent(2), testEvent(3)]);
    await eventually(async () => expect(await visible(position)).toBe(true), 30_000);
    const [first] = await b.store.readStream(stream);
    // Started together: their first reads run at the same time, with no append in between.
    const subscriptions = [
      backgroundSubscription(b.store, new Set([stream]), start, 100),
      backgroundSubscription(b.store, new Set([stream]), first!.position, 100),
      backgroundSubscription(b.store, new Set([stream]), start, 1),
    ];
    cleanups.push(...subscriptions.map((s) => () => s.stop()));
    await subscriptions[0]!.waitFor(3, SOON);
    await subscriptions[1]!.waitFor(2, SOON);
    await subscriptions[2]!.waitFor(3, SOON);
    expect(subscriptions.map((s) => s.received.map((e) => e.data.n))).toEqual([
      [1, 2, 3],
      [2, 3],
      [1, 2, 3],
    ]);
  });

  it('a subscriber gets the appends of another store instance (by NOTIFY) and of its own at once, not at its poll', async () => {
    const a = openStore();
    const b = openStore();
    const stream = uniqueStream('notify');
    const start = await a.store.headPosition();
    const onA = backgroundSubscription(a.store, new Set([stream]), start);
    const onB = backgroundSubscription(b.store, new Set([stream]), start);
    cleanups.push(() => onA.stop(), () => onB.stop());
    for (let i = 0; i < 6; i++) {
      // Both subscribers are waiting again: the next append can reach them only by being signalled.
      await sleep(100);
      const appended = await append((i % 2 === 0 ? a : b).store, stream, i);
      await delivered(onA, i + 1, [appended]);
      await delivered(onB, i + 1, [appended]);
    }
    expect(onA.received.map((e) => e.data.n)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(onB.received.map((e) => e.data.n)).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('close ends every subscription at once, with or without a signal, and stops listening', async () => {
    const b = openStore();
    const start = await b.store.headPosition();
    const plain = unsignalledSubscription(b.store, start);
    const controller = new AbortController();
    const signalled = (async () => {
      for await (const _batch of b.store.subscribeToAll({ after: start, signal: controller.signal }));
    })();
    await eventually(async () => expect(await sessions(b.listenerName)).toBe(1), SOON);
    await sleep(200);
    await within(b.store.close(), 1_000, 'close');
    await within(plain.done, 1_000, 'the subscription without a signal ended');
    await within(signalled, 1_000, 'the subscription with a signal ended');
    expect(controller.signal.aborted).toBe(false);
    await eventually(async () => expect(await sessions(b.listenerName)).toBe(0), SOON);

    // Closed: a new subscription ends at once, and an append through it is only that append (no NOTIFY).
    const late = unsignalledSubscription(b.store, start);
    await within(late.done, 1_000, 'a subscription of a closed store ended');
    expect(late.batches).toEqual([]);
    const before = { ...b.statements };
    await b.store.appendToStream(uniqueStream('after-close'), [testEvent(1)]);
    expect(b.statements.appends).toBe(before.appends + 1);
    expect(b.statements.notifies).toBe(before.notifies);
  });

  it('close during a read still ends the subscription at once', async () => {
    const proxy = await openProxy();
    const b = openStore({ poolUrl: proxy.url, max: 1 });
    const plain = unsignalledSubscription(b.store, await b.store.headPosition());
    await eventually(async () => expect(await sessions(b.listenerName)).toBe(1), SOON);
    await sleep(200);
    const reads = b.statements.reads;
    expect(proxy.hold()).toBe(1);
    await foreignNotify();
    await eventually(() => expect(b.statements.reads).toBe(reads + 1), SOON);
    const closed = b.store.close();
    await sleep(50);
    proxy.release();
    await within(closed, 1_000, 'close');
    await within(plain.done, 1_000, 'the subscription ended');
  });

  it('appends that land while a NOTIFY is under way share the next one: one burst, few NOTIFYs, every event delivered', async () => {
    const a = openStore({ max: 3 });
    const b = openStore();
    const streams = Array.from({ length: 4 }, (_, i) => uniqueStream(`burst-${i}`));
    const onB = backgroundSubscription(b.store, new Set(streams), await b.store.headPosition());
    cleanups.push(() => onB.stop());
    await sleep(100);
    const appended = await Promise.all(Array.from({ length: 24 }, (_, i) => append(a.store, streams[i % 4]!, i)));
    await delivered(onB, 24, appended);
    expect(a.statements.appends).toBe(24);
    expect(a.statements.notifies).toBeGreaterThanOrEqual(1);
    expect(a.statements.notifies).toBeLessThan(24);
    // And then none: a burst ends its NOTIFYs.
    const notifies = a.statements.notifies;
    await sleep(300);
    expect(a.statements.notifies).toBe(notifies);
  });

  it('reads the next batch while the consumer handles a full one, not once caught up, and leaves no read running when it ends', async () => {
    const b = openStore();
    const stream = uniqueStream('ahead');
    const start = (await b.store.appendToStream(uniqueStream('ahead-start'), [testEvent(0)])).position;
    const { position } = await b.store.appendToStream(stream, Array.from({ length: 25 }, (_, i) => testEvent(i)));
    await eventually(async () => expect(await visible(position)).toBe(true), 30_000);
    const readsAtBatch: number[] = [];
    const controller = new AbortController();
    let received = 0;
    let last = start;
    for await (const batch of b.store.subscribeToAll({ after: start, maxCount: 10, signal: controller.signal })) {
      readsAtBatch.push(b.statements.reads);
      for (const event of batch.events) {
        expect(comparePositions(event.position, last)).toBe(1);
        last = event.position;
      }
      received += batch.events.length;
      if (received >= 25) break;
    }
    // 10 (the next one already asked for), 10 (again), 5 (caught up: nothing asked for yet).
    expect(readsAtBatch).toEqual([2, 3, 3]);

    // Left in the middle of catching up, with a read ahead under way: it ends only once that read
    // has. (Another store: this one keeps what it read, and would not read again.)
    const c = openStore();
    for await (const _batch of c.store.subscribeToAll({ after: start, maxCount: 10, signal: controller.signal })) break;
    expect(c.statements.reads).toBe(2);
    expect(c.pool.totalCount - c.pool.idleCount).toBe(0);
  });

  /** Every event of `streams` after `after`, through `through`, as one read of the log finds them. */
  async function logAfter(store: PostgresEventStore, streams: ReadonlySet<string>, after: Position, through: Position): Promise<string[]> {
    const events = await store.readAll({ after, maxCount: 100_000 });
    return events.filter((e) => streams.has(e.streamId) && comparePositions(e.position, through) <= 0).map((e) => e.id);
  }

  /**
   * Waits until `opened` has sent `reads` reads of the log and had them answered, then holds it to
   * exactly that: with no polling, a subscription that has caught up reads again only when an
   * append is signalled, so the count settles once its last read (the one that found nothing) is
   * answered. Answered, not only sent: a subscription that comes to the same position while that
   * read is in flight shares it instead of reading.
   */
  async function readsSettleAt(opened: Opened, reads: number): Promise<void> {
    await eventually(() => expect(opened.statements.readsDone).toBeGreaterThanOrEqual(reads), SOON);
    expect(opened.statements.reads).toBe(reads);
  }

  it('a subscription behind another takes its batches from what that one read, and reads the log only past it', async () => {
    const b = openStore({ recentEvents: 10_000 });
    const stream = uniqueStream('behind');
    const start = (await b.store.appendToStream(uniqueStream('behind-start'), [testEvent(0)])).position;
    const { position } = await b.store.appendToStream(stream, Array.from({ length: 25 }, (_, i) => testEvent(i)));
    await eventually(async () => expect(await visible(position)).toBe(true), 30_000);
    const first = backgroundSubscription(b.store, new Set([stream]), start, 10);
    cleanups.push(() => first.stop());
    await first.waitFor(25, SOON);
    // 10, 10 and 5, then one read that found nothing past them (the subscription waits).
    await readsSettleAt(b, 4);
    const second = backgroundSubscription(b.store, new Set([stream]), start, 10);
    cleanups.push(() => second.stop());
    await second.waitFor(25, SOON);
    // Its batches came from the first one's reads: one read of its own, past them, found nothing.
    await readsSettleAt(b, 5);
    expect(second.received.map((e) => e.id)).toEqual(first.received.map((e) => e.id));
  });

  it('a subscription behind another takes in one batch what that one read and what was appended since, read past it', async () => {
    const b = openStore({ recentEvents: 10_000 });
    const stream = uniqueStream('tail');
    const start = (await b.store.appendToStream(uniqueStream('tail-start'), [testEvent(0)])).position;
    const { position: firstPart } = await b.store.appendToStream(stream, Array.from({ length: 5 }, (_, i) => testEvent(i)));
    await eventually(async () => expect(await visible(firstPart)).toBe(true), 30_000);
    const first = backgroundSubscription(b.store, new Set([stream]), start, 100);
    await first.waitFor(5, SOON);
    await first.stop();
    const { position } = await b.store.appendToStream(stream, Array.from({ length: 7 }, (_, i) => testEvent(5 + i)));
    await eventually(async () => expect(await visible(position)).toBe(true), 30_000);
    const reads = b.statements.reads;
    const second = backgroundSubscription(b.store, new Set([stream]), start, 100);
    cleanups.push(() => second.stop());
    await second.waitFor(12, SOON);
    // The 5 kept and the 7 after them in one batch (not the smaller batch the first one read);
    // the log read twice: the 7 past the kept events, then nothing past them (the subscription waits).
    await readsSettleAt(b, reads + 2);
    expect(second.received.map((e) => e.data.n)).toEqual(Array.from({ length: 12 }, (_, i) => i));
    expect(second.batches).toBe(1);
  });

  it('a subscription further behind than the events kept reads the log on its own until it reaches them', async () => {
    const b = openStore({ recentEvents: 12 });
    const stream = uniqueStream('far');
    const start = (await b.store.appendToStream(uniqueStream('far-start'), [testEvent(0)])).position;
    const { position } = await b.store.appendToStream(stream, Array.from({ length: 25 }, (_, i) => testEvent(i)));
    await eventually(async () => expect(await visible(position)).toBe(true), 30_000);
    const first = backgroundSubscription(b.store, new Set([stream]), start, 10);
    cleanups.push(() => first.stop());
    await first.waitFor(25, SOON);
    await readsSettleAt(b, 4);
    const second = backgroundSubscription(b.store, new Set([stream]), start, 10);
    cleanups.push(() => second.stop());
    await second.waitFor(25, SOON);
    // The last 12 were kept: it read the first 10 and the next 10 itself, the last 5 were kept,
    // and one read past them found nothing.
    await readsSettleAt(b, 4 + 3);
    expect(second.received.map((e) => e.id)).toEqual(first.received.map((e) => e.id));
  });

  it('subscriptions at random positions, with random batch sizes and a random number of events kept, each get exactly the log after their start, in order', async () => {
    const writer = openStore();
    const streams = new Set([uniqueStream('random-a'), uniqueStream('random-b'), uniqueStream('random-c')]);
    const names = [...streams];
    const start = (await writer.store.appendToStream(uniqueStream('random-start'), [testEvent(0)])).position;
    const positions: Position[] = [start];
    for (let i = 0; i < 12; i++) {
      const sizes = [1 + (i % 3), i % 2, 2];
      const appends = names.map((streamId, j) => ({ streamId, expectedRevision: 'any' as const, events: Array.from({ length: sizes[j]! }, (_, k) => testEvent(i * 10 + j * 3 + k)) })).filter((a) => a.events.length > 0);
      const { position } = await writer.store.appendToStreams(appends);
      positions.push(position);
    }
    const end = positions.at(-1)!;
    await eventually(async () => expect(await visible(end)).toBe(true), 30_000);
    const all = await logAfter(writer.store, streams, start, end);
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 60 }),
        fc.array(fc.record({ from: fc.integer({ min: 0, max: positions.length - 1 }), maxCount: fc.integer({ min: 1, max: 15 }), delayMs: fc.integer({ min: 0, max: 30 }) }), { minLength: 2, maxLength: 5 }),
        async (recentEvents, subscribers) => {
          const b = openStore({ recentEvents });
          const subscriptions = await Promise.all(
            subscribers.map(async ({ from, maxCount, delayMs }) => {
              await sleep(delayMs);
              const after = positions[from]!;
              const expected = all.slice(all.length - (await logAfter(writer.store, streams, after, end)).length);
              const subscription = backgroundSubscription(b.store, streams, after, maxCount);
              return { subscription, expected };
            }),
          );
          try {
            for (const { subscription, expected } of subscriptions) {
              await subscription.waitFor(expected.length, 5_000);
              expect(subscription.received.map((e) => e.id)).toEqual(expected);
            }
          } finally {
            for (const { subscription } of subscriptions) await subscription.stop();
            await b.store.close();
            await b.pool.end();
          }
        },
      ),
      { numRuns: 25, endOnFailure: true },
    );
  }, 180_000);

  it('a poll finds an event that nobody signalled', async () => {
    const b = openStore({ pollIntervalMs: 200 });
    const stream = uniqueStream('polled');
    const start = await b.store.headPosition();
    const onB = backgroundSubscription(b.store, new Set([stream]), start);
    cleanups.push(() => onB.stop());
    await sleep(300);
    for (let i = 0; i < 2; i++) {
      await admin.query(`INSERT INTO event_store.events (event_id, stream_id, stream_revision, type, data) VALUES ($1, $2, $3, 'Silent', '{}')`, [
        randomUUID(),
        stream,
        i,
      ]);
      await onB.waitFor(i + 1, SOON);
    }
  });

  it('a read shared between subscriptions is not reused once an append has been signalled after it began', async () => {
    const proxy = await openProxy();
    const a = openStore();
    const b = openStore({ poolUrl: proxy.url, max: 2 });
    const stream = uniqueStream('stale');
    const start = (await a.store.appendToStream(uniqueStream('stale-start'), [testEvent(0)])).position;
    const first = backgroundSubscription(b.store, new Set([stream]), start);
    cleanups.push(() => first.stop());
    await sleep(300);
    // The first subscription's next read runs now, before the append, and its answer is held.
    const reads = b.statements.reads;
    expect(proxy.hold()).toBe(1);
    await foreignNotify();
    await eventually(() => expect(b.statements.reads).toBe(reads + 1), SOON);
    const appended = await append(a.store, stream, 1);
    await sleep(200);
    // A second subscription at the same position must read again: the held read predates the append.
    const second = backgroundSubscription(b.store, new Set([stream]), start);
    cleanups.push(() => second.stop());
    await sleep(100);
    proxy.release();
    await delivered(second, 1, [appended]);
    await delivered(first, 1, [appended]);
  });

  it('an append that lands while its store NOTIFY is under way gets a NOTIFY of its own', async () => {
    const proxy = await openProxy();
    const a = openStore({ poolUrl: proxy.url, max: 2 });
    const b = openStore();
    const stream = uniqueStream('again');
    const onB = backgroundSubscription(b.store, new Set([stream]), await b.store.headPosition());
    cleanups.push(() => onB.stop());
    await sleep(200);
    const one = await a.store.appendToStream(stream, [testEvent(1)]);
    // That append's NOTIFY is on its way: it reaches B, but A gets the answer only on release.
    expect(proxy.hold()).toBe(1);
    await delivered(onB, 1, [{ position: one.position, heldBack: !(await visible(one.position)) }]);
    await sleep(200);
    // This append commits after that NOTIFY and before A knows the NOTIFY is done.
    const two = await append(a.store, stream, 2);
    proxy.release();
    await delivered(onB, 2, [two]);
  });

  it('a read that finds nothing while an append is signalled is tried again, backing off (an older transaction may hold the log back), then the poll', async () => {
    const proxy = await openProxy();
    const b = openStore({ poolUrl: proxy.url, max: 1 });
    const onB = backgroundSubscription(b.store, new Set(), await b.store.headPosition());
    cleanups.push(() => onB.stop());
    await sleep(300);
    let reads = b.statements.reads;
    expect(proxy.hold()).toBe(1);
    await foreignNotify();
    await eventually(() => expect(b.statements.reads).toBe(reads + 1), SOON);
    const gaps: number[] = [];
    for (let retry = 1; retry <= 9; retry++) {
      // Signalled while the read is under way (its answer held): it may have missed that append.
      await foreignNotify();
      await sleep(150);
      reads = b.statements.reads;
      const released = Date.now();
      proxy.release();
      proxy.hold();
      await eventually(() => expect(b.statements.reads).toBe(reads + 1), SOON, 1);
      gaps.push(b.statements.readTimes.at(-1)! - released);
    }
    // 2, 4, 8, 16, 32, then 50 ms: never at once, soon much less often than reads could go, and
    // never longer than 50 ms (the bound is loose: a loaded machine is late, never early).
    for (const gap of gaps.slice(4)) expect(gap).toBeGreaterThanOrEqual(25);
    expect(gaps.at(-1)).toBeLessThan(400);
    // No signal during the last one: then nothing until the poll.
    reads = b.statements.reads;
    proxy.release();
    await sleep(500);
    expect(b.statements.reads).toBe(reads);
  });
});
