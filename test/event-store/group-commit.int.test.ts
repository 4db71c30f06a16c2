import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, type Pool } from '../../shared/db/pool.js';
import { groupCommitStore } from '../../shared/event-store/group-commit.js';
import { comparePositions, WrongExpectedRevisionError, type AppendResult, type StreamAppend } from '../../shared/event-store/port.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { seededRandom } from '../../shared/random.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { testEvent } from './conformance.js';

/**
 * Group commit (shared/event-store/group-commit.ts) on the real Postgres store: many writers at
 * once, in random mixes. Each writer's append stays its own: all of it or none of it, refused only
 * for its own wrong expected revision, answered with its own streams' revisions and a position
 * that covers its events; writers appending in the same moment share transactions.
 */

const SEED = Number(process.env.PROPERTY_SEED ?? Date.now() % 1_000_000);
let db: TestDatabase;
let pool: Pool;
let store: PostgresEventStore;

beforeAll(async () => {
  db = await createTestDatabase('group_commit');
  pool = createPool(db.url, { max: 8 });
  store = new PostgresEventStore(pool, db.url);
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

type Kind = 'any' | 'fresh' | 'wrong';

interface Writer {
  kind: Kind;
  appends: StreamAppend[];
}

describe('group commit', () => {
  it('keeps every writer\'s append whole and its own, whatever the mix of writers in flight together', { timeout: 120_000 }, async () => {
    console.info(`group commit: PROPERTY_SEED=${SEED}`);
    let shared = 0;
    let grouped = 0;
    for (let round = 0; round < 25; round++) {
      const random = seededRandom(SEED + round);
      const prefix = `gc-${round}-${randomUUID().slice(0, 8)}`;
      // A few streams many writers name (some at once, so some groups cannot be one append), and
      // streams of their own.
      const common = Array.from({ length: 3 }, (_, i) => `${prefix}-common-${i}`);
      const grouping = groupCommitStore(store);
      const writers: Writer[] = Array.from({ length: 10 + Math.floor(random() * 30) }, (_, w) => {
        const draw = random();
        const kind: Kind = draw < 0.6 ? 'any' : draw < 0.8 ? 'fresh' : 'wrong';
        const streams = new Set<string>();
        const n = 1 + Math.floor(random() * 3);
        for (let i = 0; i < n; i++) streams.add(random() < 0.3 ? common[Math.floor(random() * common.length)]! : `${prefix}-own-${w}-${i}`);
        const appends = [...streams].map((streamId, i): StreamAppend => ({
          streamId,
          events: Array.from({ length: 1 + Math.floor(random() * 3) }, (_, e) => testEvent(w * 100 + e)),
          // A writer expecting no stream or a wrong revision does so on a stream of its own; its others take any.
          expectedRevision: i === 0 && kind === 'fresh' && !common.includes(streamId) ? 'no_stream' : i === 0 && kind === 'wrong' ? 7_777n : 'any',
        }));
        return { kind, appends };
      });
      const outcomes = await Promise.all(
        writers.map((writer) =>
          grouping.appendToStreams(writer.appends).then(
            (result) => ({ writer, result, error: null }),
            (error: unknown) => ({ writer, result: null as AppendResult | null, error }),
          ),
        ),
      );
      const commits = new Set<string>();
      let succeeded = 0;
      for (const { writer, result, error } of outcomes) {
        const wrong = writer.appends.some((a) => a.expectedRevision === 7_777n);
        const ids = new Set(writer.appends.flatMap((a) => a.events.map((e) => e.id!)));
        const stored = (await Promise.all(writer.appends.map((a) => store.readStream(a.streamId)))).flat().filter((e) => ids.has(e.id));
        if (wrong) {
          // Refused for its own expectation, and nothing of it written.
          expect(error).toBeInstanceOf(WrongExpectedRevisionError);
          expect(writer.appends.map((a) => a.streamId)).toContain((error as WrongExpectedRevisionError).streamId);
          expect(stored).toEqual([]);
          continue;
        }
        expect(error, `round ${round}: a ${writer.kind} writer was refused`).toBeNull();
        succeeded++;
        // All of it, in one transaction, covered by its position, with its own streams' revisions only.
        expect(stored.length).toBe(ids.size);
        expect(new Set(stored.map((e) => String(e.position.commit))).size).toBe(1);
        commits.add(String(stored[0]!.position.commit));
        for (const e of stored) expect(comparePositions(e.position, result!.position)).toBeLessThanOrEqual(0);
        expect([...result!.revisions.keys()].sort()).toEqual(writer.appends.map((a) => a.streamId).sort());
        for (const append of writer.appends) {
          const last = stored.filter((e) => e.streamId === append.streamId).at(-1)!;
          expect(result!.revisions.get(append.streamId)).toBe(last.revision);
        }
      }
      shared += succeeded - commits.size;
      if (commits.size < succeeded) grouped++;
      // Every stream holds its events once, revisions from 0 without a gap.
      const streams = new Set(writers.flatMap((w) => w.appends.map((a) => a.streamId)));
      for (const streamId of streams) {
        const events = await store.readStream(streamId);
        expect(events.map((e) => e.revision)).toEqual(events.map((_, i) => BigInt(i)));
        expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
      }
    }
    // Writers in flight together shared transactions: without grouping, every writer is one.
    expect(grouped, 'rounds in which writers shared a transaction').toBeGreaterThan(20);
    expect(shared).toBeGreaterThan(100);
  });

  it('waits for the writers still deciding, up to its linger, so that writers in flight together are one transaction', { timeout: 60_000 }, async () => {
    const random = seededRandom(SEED);
    for (let round = 0; round < 5; round++) {
      const grouping = groupCommitStore(store, { lingerMs: 1_000 });
      const prefix = `gc-linger-${round}-${randomUUID().slice(0, 8)}`;
      // Writers that decide for a random while (0 to 30 ms), then append: all of them in one transaction.
      const positions = await Promise.all(
        Array.from({ length: 8 }, async (_, w) => {
          const decided = grouping.deciding();
          await new Promise((resolve) => setTimeout(resolve, random() * 30));
          decided();
          return (await grouping.appendToStreams([{ streamId: `${prefix}-${w}`, events: [testEvent(w)], expectedRevision: 'no_stream' }])).position;
        }),
      );
      const events = (await Promise.all(positions.map((_, w) => store.readStream(`${prefix}-${w}`)))).flat();
      expect(new Set(events.map((e) => String(e.position.commit))).size, `round ${round}`).toBe(1);
    }

    // Without the linger, the same writers are several transactions: the first goes at once.
    const plain = groupCommitStore(store);
    const prefix = `gc-plain-${randomUUID().slice(0, 8)}`;
    await Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        const decided = plain.deciding();
        await new Promise((resolve) => setTimeout(resolve, 5 * w));
        decided();
        await plain.appendToStreams([{ streamId: `${prefix}-${w}`, events: [testEvent(w)], expectedRevision: 'no_stream' }]);
      }),
    );
    const events = (await Promise.all(Array.from({ length: 8 }, (_, w) => store.readStream(`${prefix}-${w}`)))).flat();
    expect(new Set(events.map((e) => String(e.position.commit))).size).toBeGreaterThan(1);

    // A full group goes without waiting for the writers still deciding.
    const small = groupCommitStore(store, { lingerMs: 5_000, maxAppends: 3 });
    const slow = small.deciding();
    const full = performance.now();
    await Promise.all([0, 1, 2].map((w) => small.appendToStreams([{ streamId: `${prefix}-full-${w}`, events: [testEvent(w)], expectedRevision: 'no_stream' }])));
    expect(performance.now() - full).toBeLessThan(2_500);
    slow();

    // A writer that never appends (it gave up, or is slow) holds a group no longer than the linger.
    const lingering = groupCommitStore(store, { lingerMs: 1_000 });
    const stuck = lingering.deciding();
    const started = performance.now();
    await lingering.appendToStreams([{ streamId: `${prefix}-alone`, events: [testEvent(1)], expectedRevision: 'no_stream' }]);
    const waited = performance.now() - started;
    expect(waited).toBeGreaterThanOrEqual(990);
    expect(waited).toBeLessThan(3_000);
    // Its giving up lets the next group go at once.
    const next = lingering.appendToStreams([{ streamId: `${prefix}-next`, events: [testEvent(2)], expectedRevision: 'no_stream' }]);
    const at = performance.now();
    stuck();
    await next;
    expect(performance.now() - at).toBeLessThan(500);
  });
});
