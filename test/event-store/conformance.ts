/**
 * The behaviour every EventStore adapter must have. An adapter's test file calls
 * `eventStoreConformance(name, factory)`; the factory returns a store on an empty or shared log
 * (every test uses its own streams and only looks at them) and a cleanup.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import {
  START,
  WrongExpectedRevisionError,
  comparePositions,
  matchesLogFilter,
  type EventData,
  type EventStore,
  type LogBatch,
  type LogFilter,
  type Position,
  type RecordedEvent,
} from '../../shared/event-store/port.js';
import { rejectionOf } from '../support/rejection.js';

export interface ConformanceSubject {
  store: EventStore;
  cleanup(): Promise<void>;
}

const TYPE = 'ConformanceChecked';
/** Types of the filter tests. */
const KEPT = 'ConformanceKept';
const SKIPPED = 'ConformanceSkipped';

/** A fresh stream id for one test. */
export function uniqueStream(label: string): string {
  return `conformance-${label}-${randomUUID()}`;
}

export function testEvent(n: number, id?: string): EventData {
  return { id: id ?? randomUUID(), type: TYPE, data: { n }, metadata: { source: 'conformance' } };
}

function typedEvent(type: string, n: number): EventData {
  return { id: randomUUID(), type, data: { n }, metadata: { source: 'conformance' } };
}

/** Waits until `check` passes (returns without throwing), or rethrows its last failure. */
export async function eventually<T>(check: () => Promise<T> | T, timeoutMs = 10_000, intervalMs = 20): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  }
}

/** How and when a promise settled; handles its rejection at once (no unhandled-rejection noise). */
export function settlement<T>(promise: Promise<T>): Promise<{ value?: T; error?: unknown; at: number }> {
  return promise.then(
    (value) => ({ value, at: Date.now() }),
    (error: unknown) => ({ error, at: Date.now() }),
  );
}

/** Reads the global log after `after` in batches of `batchSize` until it holds `count` events of `streams`. */
export async function readAllOf(
  store: EventStore,
  streams: ReadonlySet<string>,
  count: number,
  options: { after?: Position; batchSize?: number; timeoutMs?: number } = {},
): Promise<RecordedEvent[]> {
  return eventually(async () => {
    const found: RecordedEvent[] = [];
    let after = options.after ?? START;
    for (;;) {
      const batch = await store.readAll({ after, maxCount: options.batchSize ?? 1000 });
      if (batch.length === 0) break;
      expect(batch.length).toBeLessThanOrEqual(options.batchSize ?? 1000);
      for (const event of batch) {
        // `after` is exclusive and batches continue where the last one ended, in log order.
        expect(comparePositions(event.position, after)).toBeGreaterThan(0);
        after = event.position;
        if (streams.has(event.streamId)) found.push(event);
      }
    }
    expect(found).toHaveLength(count);
    return found;
  }, options.timeoutMs ?? 10_000);
}

/**
 * A subscription running in the background, keeping the events of `streams` (a set of ids, or a
 * test on the id); `stop()` aborts it and resolves once the iteration has ended.
 */
export function backgroundSubscription(
  store: EventStore,
  streams: ReadonlySet<string> | ((streamId: string) => boolean),
  after: Position,
  maxCount = 100,
  filter?: LogFilter,
) {
  const keep = typeof streams === 'function' ? streams : (streamId: string) => streams.has(streamId);
  const controller = new AbortController();
  const received: RecordedEvent[] = [];
  let batches = 0;
  let position = after;
  const done = (async () => {
    for await (const batch of store.subscribeToAll({ after, maxCount, signal: controller.signal, filter })) {
      batches++;
      // Every batch moves forward, and holds events after the last position only.
      expect(comparePositions(batch.position, position)).toBe(1);
      expect(batch.events.length).toBeLessThanOrEqual(maxCount);
      for (const event of batch.events) {
        expect(comparePositions(event.position, position)).toBe(1);
        expect(comparePositions(event.position, batch.position)).toBeLessThanOrEqual(0);
        if (filter) expect(matchesLogFilter(filter, event)).toBe(true);
        if (keep(event.streamId)) received.push(event);
      }
      position = batch.position;
    }
    // Following until aborted: a subscription that ends by itself has stopped following the log.
    if (!controller.signal.aborted) throw new Error('the subscription ended without being aborted');
  })();
  let failure: unknown = null;
  done.catch((error: unknown) => {
    failure = error;
  });
  return {
    received,
    get failure() {
      return failure;
    },
    get batches() {
      return batches;
    },
    /** How far the subscription has read the log. */
    get position() {
      return position;
    },
    waitFor(count: number, timeoutMs = 10_000) {
      return eventually(() => {
        if (failure) throw failure;
        expect(received.length).toBeGreaterThanOrEqual(count);
      }, timeoutMs);
    },
    async stop(timeoutMs = 3_000): Promise<void> {
      controller.abort();
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('the subscription did not end after abort')), timeoutMs);
      });
      try {
        await Promise.race([done, timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

function ids(events: RecordedEvent[]): string[] {
  return events.map((e) => e.id);
}

function expectStrictlyIncreasing(events: RecordedEvent[]): void {
  for (let i = 1; i < events.length; i++) expect(comparePositions(events[i - 1]!.position, events[i]!.position)).toBe(-1);
}

export function eventStoreConformance(name: string, factory: () => Promise<ConformanceSubject>): void {
  describe(`EventStore conformance: ${name}`, () => {
    let subject: ConformanceSubject;
    let store: EventStore;

    // Made in the first test rather than in beforeAll: mutation testing then sees the code that
    // makes it as that test's, not as run outside every test (which would run all of them).
    beforeEach(async () => {
      if (subject) return;
      subject = await factory();
      store = subject.store;
    });

    afterAll(async () => {
      await subject?.cleanup();
    });

    describe('append with an expected revision', () => {
      it('any: creates the stream, then appends whatever its revision', async () => {
        const stream = uniqueStream('any');
        const first = await store.appendToStream(stream, [testEvent(1), testEvent(2)], 'any');
        expect(first.revisions.get(stream)).toBe(1n);
        const second = await store.appendToStream(stream, [testEvent(3)], 'any');
        expect(second.revisions.get(stream)).toBe(2n);
        expect(comparePositions(second.position, first.position)).toBe(1);
        expect((await store.readStream(stream)).map((e) => e.data.n)).toEqual([1, 2, 3]);
      });

      it('defaults to any', async () => {
        const stream = uniqueStream('default');
        await store.appendToStream(stream, [testEvent(1)]);
        const result = await store.appendToStream(stream, [testEvent(2)]);
        expect(result.revisions.get(stream)).toBe(1n);
      });

      it('no_stream: creates a new stream, refuses an existing one with its actual revision', async () => {
        const stream = uniqueStream('no-stream');
        const created = await store.appendToStream(stream, [testEvent(1), testEvent(2)], 'no_stream');
        expect(created.revisions.get(stream)).toBe(1n);
        const error = await rejectionOf(store.appendToStream(stream, [testEvent(3)], 'no_stream'));
        expect(error).toBeInstanceOf(WrongExpectedRevisionError);
        expect(error).toMatchObject({ streamId: stream, expected: 'no_stream', actual: 1n });
        expect(await store.readStream(stream)).toHaveLength(2);
      });

      it('stream_exists: refuses a missing stream (actual no_stream), appends to an existing one', async () => {
        const stream = uniqueStream('exists');
        const error = await rejectionOf(store.appendToStream(stream, [testEvent(1)], 'stream_exists'));
        expect(error).toBeInstanceOf(WrongExpectedRevisionError);
        expect(error).toMatchObject({ streamId: stream, expected: 'stream_exists', actual: 'no_stream' });
        expect(await store.readStream(stream)).toEqual([]);

        await store.appendToStream(stream, [testEvent(1)], 'no_stream');
        const appended = await store.appendToStream(stream, [testEvent(2)], 'stream_exists');
        expect(appended.revisions.get(stream)).toBe(1n);
      });

      it('exact revision: appends when it matches, refuses otherwise with the actual revision', async () => {
        const stream = uniqueStream('exact');
        const missing = await rejectionOf(store.appendToStream(stream, [testEvent(1)], 0n));
        expect(missing).toBeInstanceOf(WrongExpectedRevisionError);
        expect(missing).toMatchObject({ streamId: stream, expected: 0n, actual: 'no_stream' });

        await store.appendToStream(stream, [testEvent(1), testEvent(2), testEvent(3)], 'no_stream');
        const appended = await store.appendToStream(stream, [testEvent(4)], 2n);
        expect(appended.revisions.get(stream)).toBe(3n);

        for (const stale of [2n, 0n, 4n]) {
          const error = await rejectionOf(store.appendToStream(stream, [testEvent(99)], stale));
          expect(error).toBeInstanceOf(WrongExpectedRevisionError);
          expect(error).toMatchObject({ streamId: stream, expected: stale, actual: 3n });
        }
        expect((await store.readStream(stream)).map((e) => e.data.n)).toEqual([1, 2, 3, 4]);
      });

      it('of concurrent appends expecting the same revision, exactly one wins', async () => {
        const stream = uniqueStream('race');
        await store.appendToStream(stream, [testEvent(0)], 'no_stream');
        const outcomes = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => store.appendToStream(stream, [testEvent(i + 1)], 0n)));
        const won = outcomes.filter((o) => o.status === 'fulfilled');
        const lost = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
        expect(won).toHaveLength(1);
        expect(lost).toHaveLength(9);
        for (const o of lost) {
          expect(o.reason).toBeInstanceOf(WrongExpectedRevisionError);
          expect(o.reason).toMatchObject({ actual: 1n });
        }
        expect(await store.readStream(stream)).toHaveLength(2);
      });

      it('an append of no events checks the expectation only', async () => {
        const stream = uniqueStream('empty');
        await store.appendToStream(stream, [testEvent(1)], 'no_stream');
        const checked = await store.appendToStream(stream, [], 0n);
        expect(checked.revisions.get(stream)).toBe(0n);
        const error = await rejectionOf(store.appendToStream(stream, [], 1n));
        expect(error).toMatchObject({ streamId: stream, actual: 0n });
        expect(await store.readStream(stream)).toHaveLength(1);
      });

      it('answers with the position of the last event written', async () => {
        const stream = uniqueStream('position');
        const result = await store.appendToStream(stream, [testEvent(1), testEvent(2)]);
        const events = await store.readStream(stream);
        expect(events.at(-1)!.position).toEqual(result.position);
        expect(comparePositions(events[0]!.position, events[1]!.position)).toBe(-1);
      });
    });

    describe('atomic append to several streams', () => {
      it('refuses an append of no stream, and writes nothing', async () => {
        // Nothing between an event written just before and one written just after. (Not the head
        // before and after: on Postgres the head waits for transactions open anywhere on the
        // server, so it moves with other databases' work.)
        const before = await store.appendToStream(uniqueStream('before-none'), [testEvent(1)]);
        const error = await rejectionOf(store.appendToStreams([]));
        expect((error as Error).message).toBe('an append names at least one stream');
        const after = await store.appendToStream(uniqueStream('after-none'), [testEvent(2)]);
        await expect.poll(async () => (await store.readAll({ after: before.position, maxCount: 10 })).map((e) => e.position), { timeout: 10_000 }).toEqual([after.position]);
      });

      it('writes every stream in one call', async () => {
        const a = uniqueStream('multi-a');
        const b = uniqueStream('multi-b');
        await store.appendToStream(b, [testEvent(0)], 'no_stream');
        const result = await store.appendToStreams([
          { streamId: a, events: [testEvent(1), testEvent(2)], expectedRevision: 'no_stream' },
          { streamId: b, events: [testEvent(3)], expectedRevision: 0n },
        ]);
        expect(result.revisions.get(a)).toBe(1n);
        expect(result.revisions.get(b)).toBe(1n);
        const aEvents = await store.readStream(a);
        const bEvents = await store.readStream(b);
        expect(aEvents.map((e) => e.data.n)).toEqual([1, 2]);
        expect(bEvents.map((e) => e.data.n)).toEqual([0, 3]);
        const last = [...aEvents, ...bEvents].reduce((p, e) => (comparePositions(e.position, p) > 0 ? e.position : p), START);
        expect(result.position).toEqual(last);
      });

      it('gives each event its own data and metadata, in the caller order, across many streams given out of order', async () => {
        const streams = Array.from({ length: 7 }, (_, i) => uniqueStream(`own-${i}`));
        // Streams in reverse of their sorted order, events of varying counts and sizes.
        const appends = [...streams].reverse().map((streamId, s) => ({
          streamId,
          expectedRevision: 'no_stream' as const,
          events: Array.from({ length: 1 + ((s * 5) % 4) }, (_, k) => ({
            id: randomUUID(),
            type: TYPE,
            data: { s, k, pad: 'x'.repeat((s * 37 + k * 11) % 90), text: `"${s}\\${k}",{}` },
            metadata: { of: `${s}/${k}` },
          })),
        }));
        await store.appendToStreams(appends);
        for (const append of appends) {
          const read = await store.readStream(append.streamId);
          expect(read.map((e) => [e.id, e.data, e.metadata])).toEqual(append.events.map((e) => [e.id, e.data, e.metadata]));
        }
      });

      it('writes nothing to any stream when one expectation is wrong', async () => {
        const a = uniqueStream('atomic-a');
        const b = uniqueStream('atomic-b');
        const c = uniqueStream('atomic-c');
        await store.appendToStream(b, [testEvent(0)], 'no_stream');
        const head = await store.headPosition();
        const refused = [testEvent(1), testEvent(2), testEvent(3)];
        const error = await rejectionOf(
          store.appendToStreams([
            { streamId: a, events: [refused[0]!], expectedRevision: 'any' },
            { streamId: b, events: [refused[1]!], expectedRevision: 5n },
            { streamId: c, events: [refused[2]!], expectedRevision: 'no_stream' },
          ]),
        );
        expect(error).toBeInstanceOf(WrongExpectedRevisionError);
        expect(error).toMatchObject({ streamId: b, expected: 5n, actual: 0n });
        expect(await store.readStream(a)).toEqual([]);
        expect(await store.readStream(b)).toHaveLength(1);
        expect(await store.readStream(c)).toEqual([]);
        // Not in the global log either, and the streams are as they were.
        const after = await store.readAll({ after: head, maxCount: 10_000 });
        expect(after.filter((e) => refused.some((r) => r.id === e.id))).toEqual([]);
        await store.appendToStream(a, [testEvent(4)], 'no_stream');
        await store.appendToStream(b, [testEvent(5)], 0n);
      });
    });

    describe('idempotent append by event id', () => {
      it('stores the same event id once, without an error, and answers with the same position', async () => {
        const stream = uniqueStream('idem');
        const event = testEvent(1);
        const first = await store.appendToStream(stream, [event], 'any');
        const again = await store.appendToStream(stream, [event], 'any');
        expect(again.position).toEqual(first.position);
        expect(again.revisions.get(stream)).toBe(0n);
        const events = await store.readStream(stream);
        expect(ids(events)).toEqual([event.id]);
      });

      it('repeats a multi-event append with the same answer, even with a now stale expectation', async () => {
        const stream = uniqueStream('idem-batch');
        const batch = [testEvent(1), testEvent(2), testEvent(3)];
        const first = await store.appendToStream(stream, batch, 'no_stream');
        const again = await store.appendToStream(stream, batch, 'no_stream');
        expect(again.position).toEqual(first.position);
        expect(again.revisions.get(stream)).toBe(2n);
        expect(ids(await store.readStream(stream))).toEqual(batch.map((e) => e.id));
      });

      it('stores concurrent appends of the same event ids once, and all of them succeed', async () => {
        for (const expectedRevision of ['any', 'no_stream'] as const) {
          const stream = uniqueStream(`idem-concurrent-${expectedRevision}`);
          const batch = [testEvent(1), testEvent(2)];
          const results = await Promise.all(
            Array.from({ length: 8 }, () => store.appendToStream(stream, batch.map((e) => ({ ...e })), expectedRevision)),
          );
          const events = await store.readStream(stream);
          expect(ids(events)).toEqual(batch.map((e) => e.id));
          for (const result of results) {
            expect(result.position).toEqual(events[1]!.position);
            expect(result.revisions.get(stream)).toBe(1n);
          }
        }
      });
    });

    describe('event contents', () => {
      it('keeps data and metadata as given (nested values, numbers, booleans, null, any text), whatever the append', async () => {
        const data = { n: 1, nested: { list: [1, 'two', null, true, 2.5], text: 'é ü 漢字 \u{1F600} "quoted"', literal: '{a,"b"} \\ \\" ] [ NULL \n\t' }, empty: {} };
        const metadata = { source: 'conformance', nested: { keys: [1, 2], flag: false }, count: 3, none: null };
        const single = uniqueStream('content-single');
        const [x, y] = [uniqueStream('content-x'), uniqueStream('content-y')];
        const head = await store.headPosition();
        await store.appendToStream(single, [{ id: randomUUID(), type: TYPE, data, metadata }]);
        await store.appendToStreams([
          { streamId: x, events: [{ id: randomUUID(), type: TYPE, data, metadata }], expectedRevision: 'no_stream' },
          { streamId: y, events: [{ id: randomUUID(), type: TYPE, data, metadata }], expectedRevision: 'no_stream' },
        ]);
        const read = [...(await store.readStream(single)), ...(await store.readStream(x)), ...(await store.readStream(y))];
        expect(read).toHaveLength(3);
        for (const event of read) {
          expect(event.data).toEqual(data);
          expect(event.metadata).toEqual(metadata);
        }
        for (const event of await readAllOf(store, new Set([single, x, y]), 3, { after: head })) {
          expect(event.data).toEqual(data);
          expect(event.metadata).toEqual(metadata);
        }
      });

      it('an event without metadata reads back with empty metadata', async () => {
        const stream = uniqueStream('content-no-metadata');
        await store.appendToStream(stream, [{ type: TYPE, data: { n: 1 } }]);
        const [event] = await store.readStream(stream);
        expect(event!.metadata).toEqual({});
        expect(event!.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      });
    });

    describe('read a stream', () => {
      it('reads many streams at once: each whole, in order, and none for a stream without events', async () => {
        const a = uniqueStream('many-a');
        const b = uniqueStream('many-b');
        const missing = uniqueStream('many-missing');
        await store.appendToStreams([
          { streamId: a, events: [testEvent(1), testEvent(2)], expectedRevision: 'no_stream' },
          { streamId: b, events: [testEvent(3)], expectedRevision: 'no_stream' },
        ]);
        await store.appendToStream(a, [testEvent(4)], 1n);
        const read = await store.readStreams([b, missing, a, a]);
        expect([...read.keys()].sort()).toEqual([a, b].sort());
        expect(read.get(a)!.map((e) => [e.data.n, e.revision])).toEqual([[1, 0n], [2, 1n], [4, 2n]]);
        expect(read.get(a)).toEqual(await store.readStream(a));
        expect(read.get(b)).toEqual(await store.readStream(b));
        expect((await store.readStreams([])).size).toBe(0);
      });

      let stream: string;
      let written: EventData[];

      beforeEach(async () => {
        if (stream) return;
        stream = uniqueStream('read');
        // More than ten, so that an order by text ('10' < '9') would show.
        written = Array.from({ length: 12 }, (_, i) => testEvent(i));
        await store.appendToStream(stream, written.slice(0, 4), 'no_stream');
        await store.appendToStream(stream, written.slice(4), 3n);
      });

      it('forwards, with every field of the recorded event', async () => {
        const events = await store.readStream(stream);
        expect(ids(events)).toEqual(written.map((e) => e.id));
        expect(events.map((e) => e.revision)).toEqual(written.map((_, i) => BigInt(i)));
        expectStrictlyIncreasing(events);
        const third = events[2]!;
        expect(third).toMatchObject({ id: written[2]!.id, type: TYPE, data: { n: 2 }, streamId: stream, revision: 2n });
        expect(third.metadata).toMatchObject({ source: 'conformance' });
        expect(third.recordedAt).toBeInstanceOf(Date);
        expect(Math.abs(third.recordedAt.getTime() - Date.now())).toBeLessThan(5 * 60_000);
      });

      it('forwards from a revision (inclusive), up to maxCount', async () => {
        expect((await store.readStream(stream, { fromRevision: 7n })).map((e) => e.revision)).toEqual([7n, 8n, 9n, 10n, 11n]);
        expect((await store.readStream(stream, { fromRevision: 8n, maxCount: 3 })).map((e) => e.revision)).toEqual([8n, 9n, 10n]);
        expect((await store.readStream(stream, { fromRevision: 2n, maxCount: 3 })).map((e) => e.revision)).toEqual([2n, 3n, 4n]);
        expect((await store.readStream(stream, { maxCount: 2 })).map((e) => e.revision)).toEqual([0n, 1n]);
        expect(await store.readStream(stream, { fromRevision: 12n })).toEqual([]);
      });

      it('backwards from the end or from a revision (inclusive), up to maxCount', async () => {
        expect((await store.readStream(stream, { direction: 'backwards' })).map((e) => e.revision)).toEqual(
          written.map((_, i) => BigInt(11 - i)),
        );
        expect((await store.readStream(stream, { direction: 'backwards', maxCount: 3 })).map((e) => e.revision)).toEqual([11n, 10n, 9n]);
        expect((await store.readStream(stream, { direction: 'backwards', fromRevision: 10n, maxCount: 3 })).map((e) => e.revision)).toEqual([
          10n,
          9n,
          8n,
        ]);
        expect((await store.readStream(stream, { direction: 'backwards', fromRevision: 1n })).map((e) => e.revision)).toEqual([1n, 0n]);
      });

      it('a missing stream reads as empty', async () => {
        expect(await store.readStream(uniqueStream('missing'))).toEqual([]);
        expect(await store.readStream(uniqueStream('missing'), { direction: 'backwards' })).toEqual([]);
      });
    });

    describe('global log', () => {
      it('readAll reads from a position in batches, `after` exclusive, in append order', async () => {
        const a = uniqueStream('all-a');
        const b = uniqueStream('all-b');
        const head = await store.headPosition();
        const appended: EventData[] = [];
        for (let i = 0; i < 4; i++) {
          const events = [testEvent(i * 3), testEvent(i * 3 + 1), testEvent(i * 3 + 2)];
          appended.push(...events);
          await store.appendToStream(i % 2 === 0 ? a : b, events);
        }
        const streams = new Set([a, b]);
        const found = await readAllOf(store, streams, 12, { after: head, batchSize: 5 });
        expect(ids(found)).toEqual(appended.map((e) => e.id));
        expectStrictlyIncreasing(found);

        // From the middle: strictly after the given event.
        const fromMiddle = await readAllOf(store, streams, 7, { after: found[4]!.position, batchSize: 2 });
        expect(ids(fromMiddle)).toEqual(ids(found.slice(5)));
        // Each event carries the same position in the log as in its stream.
        const inStream = await store.readStream(a);
        expect(inStream.map((e) => e.position)).toEqual(found.filter((e) => e.streamId === a).map((e) => e.position));
      });

      it('readAll returns at most maxCount events', async () => {
        const stream = uniqueStream('all-max');
        const head = await store.headPosition();
        await store.appendToStream(stream, Array.from({ length: 5 }, (_, i) => testEvent(i)));
        await readAllOf(store, new Set([stream]), 5, { after: head });
        expect(await store.readAll({ after: head, maxCount: 3 })).toHaveLength(3);
      });

      it('headPosition reaches the last append and nothing is read after it', async () => {
        const stream = uniqueStream('head');
        const before = await store.headPosition();
        const result = await store.appendToStream(stream, [testEvent(1), testEvent(2)]);
        expect(comparePositions(result.position, before)).toBe(1);
        const head = await eventually(async () => {
          const head = await store.headPosition();
          expect(comparePositions(head, result.position)).toBeGreaterThanOrEqual(0);
          return head;
        });
        const later = await store.readAll({ after: head, maxCount: 10_000 });
        expect(later.filter((e) => e.streamId === stream)).toEqual([]);
      });
    });

    describe('positions of appends and lag', () => {
      it('endOfAppend gives the last position of the whole append, from any of its events, whatever the order of its streams', async () => {
        for (const [first, second] of [['a', 'z'], ['z', 'a']]) {
          const x = `${first}-${uniqueStream('end')}`;
          const y = `${second}-${uniqueStream('end')}`;
          const result = await store.appendToStreams([
            { streamId: x, events: [testEvent(1), testEvent(2)], expectedRevision: 'no_stream' },
            { streamId: y, events: [testEvent(3)], expectedRevision: 'no_stream' },
          ]);
          for (const event of [...(await store.readStream(x)), ...(await store.readStream(y))]) {
            expect(await store.endOfAppend(event.position)).toEqual(result.position);
          }
        }
        const single = await store.appendToStream(uniqueStream('end-single'), [testEvent(1)]);
        expect(await store.endOfAppend(single.position)).toEqual(single.position);
      });

      it('lagAfter counts the events after a position, up to a limit, and dates the oldest', async () => {
        // The position to count from is an append of this test's own, not the head: a writing
        // transaction elsewhere on the server (another test file's database) can hold the head back
        // behind the earlier tests' appends, which would then be counted once it ends.
        const before = (await store.appendToStream(uniqueStream('lag-from'), [testEvent(0)])).position;
        await eventually(async () => expect(await store.lagAfter(before)).toEqual({ events: 0, capped: false, oldestRecordedAt: null }));
        const started = Date.now();
        const result = await store.appendToStream(uniqueStream('lag'), [testEvent(1), testEvent(2), testEvent(3)]);
        const lag = await eventually(async () => {
          const lag = await store.lagAfter(before);
          expect(lag.events).toBe(3);
          return lag;
        });
        expect(lag.capped).toBe(false);
        expect(lag.oldestRecordedAt!.getTime()).toBeGreaterThanOrEqual(started - 5_000);
        expect(lag.oldestRecordedAt!.getTime()).toBeLessThanOrEqual(Date.now() + 5_000);
        expect(await store.lagAfter(before, { countLimit: 2 })).toMatchObject({ events: 2, capped: true });
        expect(await store.lagAfter(before, { countLimit: 0 })).toMatchObject({ events: 0, capped: true, oldestRecordedAt: lag.oldestRecordedAt });
        expect(await store.lagAfter(result.position)).toEqual({ events: 0, capped: false, oldestRecordedAt: null });
      });
    });

    describe('subscribeToAll', () => {
      it('catches up, then follows new appends, without gaps or duplicates, and stops on abort', async () => {
        const a = uniqueStream('sub-a');
        const b = uniqueStream('sub-b');
        const streams = new Set([a, b]);
        const start = await store.headPosition();
        const expected: string[] = [];
        for (let i = 0; i < 6; i++) {
          const events = [testEvent(i * 2), testEvent(i * 2 + 1)];
          expected.push(...events.map((e) => e.id!));
          await store.appendToStream(i % 2 === 0 ? a : b, events);
        }
        // Small batches, so that catching up takes several.
        const subscription = backgroundSubscription(store, streams, start, 3);
        try {
          await subscription.waitFor(12);
          const appends: Promise<unknown>[] = [];
          for (let i = 0; i < 5; i++) {
            const events = [testEvent(100 + i)];
            expected.push(events[0]!.id!);
            appends.push(store.appendToStream(i % 2 === 0 ? a : b, events));
            await appends.at(-1);
            await new Promise((resolve) => setTimeout(resolve, 10));
          }
          await subscription.waitFor(17);
          // Give a duplicate a chance to show up.
          await new Promise((resolve) => setTimeout(resolve, 200));
          expect(ids(subscription.received)).toEqual(expected);
          expectStrictlyIncreasing(subscription.received);
          expect(subscription.batches).toBeGreaterThan(1);
        } finally {
          await subscription.stop();
        }
        // Stopped: later appends are not delivered.
        await store.appendToStream(a, [testEvent(999)]);
        await new Promise((resolve) => setTimeout(resolve, 200));
        expect(subscription.received).toHaveLength(17);
      });

      it('starts strictly after the given position', async () => {
        const stream = uniqueStream('sub-after');
        const head = await store.headPosition();
        await store.appendToStream(stream, Array.from({ length: 5 }, (_, i) => testEvent(i)));
        const events = await store.readStream(stream);
        await readAllOf(store, new Set([stream]), 5, { after: head });
        const subscription = backgroundSubscription(store, new Set([stream]), events[2]!.position);
        try {
          await subscription.waitFor(2);
          await new Promise((resolve) => setTimeout(resolve, 100));
          expect(ids(subscription.received)).toEqual(ids(events.slice(3)));
        } finally {
          await subscription.stop();
        }
      });

      it('ends promptly when aborted while waiting for new events', async () => {
        const head = await store.headPosition();
        const subscription = backgroundSubscription(store, new Set(), head);
        await new Promise((resolve) => setTimeout(resolve, 150));
        const started = Date.now();
        await subscription.stop(2_000);
        expect(Date.now() - started).toBeLessThan(1_000);
      });

      it('does not start when the signal is already aborted', async () => {
        const controller = new AbortController();
        controller.abort();
        const batches: LogBatch[] = [];
        for await (const batch of store.subscribeToAll({ signal: controller.signal })) batches.push(batch);
        expect(batches).toEqual([]);
      });

      it('with a filter on event types: only those, in order, and the position moves past the others', async () => {
        const a = uniqueStream('filter-type-a');
        const b = uniqueStream('filter-type-b');
        const head = await store.headPosition();
        const filter = { eventTypes: [KEPT] };
        const subscription = backgroundSubscription(store, new Set([a, b]), head, 2, filter);
        try {
          const kept = [typedEvent(KEPT, 1), typedEvent(KEPT, 2), typedEvent(KEPT, 3)];
          await store.appendToStream(a, [kept[0]!, typedEvent(SKIPPED, 10), kept[1]!]);
          await store.appendToStreams([
            { streamId: b, events: [typedEvent(SKIPPED, 11), typedEvent(SKIPPED, 12)], expectedRevision: 'any' },
            { streamId: a, events: [typedEvent(SKIPPED, 13)], expectedRevision: 'any' },
          ]);
          await store.appendToStream(b, [kept[2]!]);
          await subscription.waitFor(3);
          // Then only events the filter leaves out: the position still passes them.
          const skipped = await store.appendToStream(a, [typedEvent(SKIPPED, 14), typedEvent(SKIPPED, 15)]);
          await eventually(() => expect(comparePositions(subscription.position, skipped.position)).toBeGreaterThanOrEqual(0), 15_000);
          expect(ids(subscription.received)).toEqual(kept.map((e) => e.id));
          expect(subscription.received.map((e) => e.type)).toEqual([KEPT, KEPT, KEPT]);
        } finally {
          await subscription.stop();
        }
      });

      it('with a filter on stream prefixes: only those streams, and the position moves past the others', async () => {
        const prefix = `${uniqueStream('filter-prefix')}-`;
        const [inside1, inside2, outside] = [`${prefix}1`, `${prefix}2`, uniqueStream('filter-outside')];
        const head = await store.headPosition();
        const filter = { streamPrefixes: [prefix] };
        const subscription = backgroundSubscription(store, () => true, head, 100, filter);
        try {
          const expected: string[] = [];
          for (let i = 0; i < 3; i++) {
            const ins = [testEvent(i), testEvent(i + 10)];
            expected.push(...ins.map((e) => e.id!));
            await store.appendToStreams([
              { streamId: outside, events: [testEvent(100 + i)], expectedRevision: 'any' },
              { streamId: i % 2 === 0 ? inside1 : inside2, events: ins, expectedRevision: 'any' },
            ]);
          }
          await subscription.waitFor(6);
          const skipped = await store.appendToStream(outside, [testEvent(200)]);
          await eventually(() => expect(comparePositions(subscription.position, skipped.position)).toBeGreaterThanOrEqual(0), 15_000);
          expect(ids(subscription.received)).toEqual(expected);
          expect(subscription.received.every((e) => e.streamId.startsWith(prefix))).toBe(true);
        } finally {
          await subscription.stop();
        }
      });
    });
  });
}
