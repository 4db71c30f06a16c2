import { untilVisible } from '../support/visible.js';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyMigrationGroup } from '../../shared/db/migrate.js';
import { createPool, isTransientDatabaseError, type Pool } from '../../shared/db/pool.js';
import { EventStoreUnavailableError, formatPosition, type EventData, type Position } from '../../shared/event-store/port.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { createLogger } from '../../shared/logger.js';
import { CheckpointWatcher, readCheckpoint } from '../../shared/projection/checkpoints.js';
import type { Projection } from '../../shared/projection/projection.js';
import { ProjectionSetAsideError, listSetAside, type SetAsideStream } from '../../shared/projection/set-aside.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import { rejectionOf } from '../support/rejection.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { COUNTED, counterProjection, counterTableSql } from './counter-projection.js';

/**
 * The projector's rule for an event a projection cannot apply (docs/design.md "A projection that
 * cannot apply an event"), on the counter projection: the stream is set aside at that event, its
 * later events are held in order, everything else is applied and the checkpoint reaches the head;
 * the same log gives the same decisions whatever the batch size; `retry` applies them after a fix;
 * a transient failure is never a reason to set anything aside.
 */

const log = createLogger('silent');
let db: TestDatabase;
let pool: Pool;
let store: PostgresEventStore;

beforeAll(async () => {
  db = await createTestDatabase('projector_set_aside');
  pool = createPool(db.url, { max: 10 });
  store = new PostgresEventStore(pool, db.url, { pollIntervalMs: 50 });
});

afterAll(async () => {
  await store?.close();
  await pool?.end();
  await db?.drop();
});

const TABLE = 'set_aside_counters';

async function freshSchema(): Promise<string> {
  const schema = `set_aside_${randomUUID().slice(0, 8)}`;
  await applyMigrationGroup(pool, 'read-model', schema);
  await pool.query(counterTableSql(schema, TABLE));
  return schema;
}

function counted(n: number, poison?: 'sql' | 'code'): EventData {
  return { id: randomUUID(), type: COUNTED, data: poison ? { n, poison } : { n } };
}

/**
 * The counter projection, refusing the events marked poison while `cured` is false: with a
 * Postgres error (division by zero, 22012) after its writes, or an error of its own code.
 */
function poisonable(name: string, state: { cured: boolean }): Projection {
  const inner = counterProjection({ name, table: TABLE });
  return {
    ...inner,
    async apply(events, tx, options) {
      await inner.apply(events, tx, options);
      if (state.cured) return;
      const poison = events.find((e) => e.data.poison);
      if (poison?.data.poison === 'sql') await tx.query('SELECT 1 / 0');
      if (poison?.data.poison === 'code') throw new TypeError(`cannot read the payload of ${poison.id}`);
    },
  };
}

async function counts(schema: string, prefix: string): Promise<Record<string, { events: number; last: number }>> {
  const { rows } = await pool.query<{ stream_id: string; events: number; last: string }>(
    `SELECT stream_id, events, last_revision::text AS last FROM ${pg.escapeIdentifier(schema)}.${TABLE} WHERE stream_id LIKE $1`,
    [`${prefix}-%`],
  );
  return Object.fromEntries(rows.map((r) => [r.stream_id, { events: r.events, last: Number(r.last) }]));
}

async function heldRevisions(schema: string, streamId: string): Promise<number[]> {
  const { rows } = await pool.query<{ revision: string }>(
    `SELECT revision::text AS revision FROM ${pg.escapeIdentifier(schema)}.projection_held_events WHERE stream_id = $1 ORDER BY revision`,
    [streamId],
  );
  return rows.map((r) => Number(r.revision));
}

const decision = ({ set_aside_at: _at, ...rest }: SetAsideStream) => rest;
/** The decisions of a schema, by stream (the list is ordered by time first). */
const decisions = async (schema: string) => (await listSetAside(pool, schema)).map(decision).sort((a, b) => a.stream.localeCompare(b.stream));

describe('an event a projection cannot apply', () => {
  it('sets its stream aside, holds the later events of the stream in order, applies everything else; the same decisions at any batch size; retry recovers after the fix', async () => {
    const prefix = `poison-${randomUUID()}`;
    const s = (i: number) => `${prefix}-${i}`;
    // Five streams written in turns; s2 fails at its revision 3, s4 at its first event.
    const positions = new Map<string, Position>();
    let last: Position | null = null;
    for (let round = 0; round < 8; round++) {
      for (let i = 0; i < 5; i++) {
        if (i === 4 && round > 2) continue;
        const poison = i === 2 && round === 3 ? 'sql' : i === 4 && round === 0 ? 'code' : undefined;
        const result = await store.appendToStream(s(i), [counted(round, poison)]);
        if (poison) positions.set(s(i), result.position);
        last = result.position;
      }
    }
    const head = await untilVisible(store, last!);
    const state = { cured: false };
    const name = 'poison_counter';

    const schema = await freshSchema();
    await new ProjectorRuntime({ store, pool, projections: [poisonable(name, state)], log, schema, batchSize: 10 }).catchUp();
    expect(formatPosition(await readCheckpoint(pool, schema, name))).toBe(formatPosition(head));
    const failures = await decisions(schema);
    expect(failures).toEqual([
      expect.objectContaining({ projection: name, stream: s(2), position: formatPosition(positions.get(s(2))!), revision: '3', event_type: COUNTED, sqlstate: '22012', error: 'division by zero', held_events: 4 }),
      expect.objectContaining({ projection: name, stream: s(4), position: formatPosition(positions.get(s(4))!), revision: '0', event_type: COUNTED, sqlstate: null, held_events: 2 }),
    ]);
    expect(failures.find((f) => f.stream === s(4))!.error).toMatch(/^cannot read the payload of /);
    expect(await heldRevisions(schema, s(2))).toEqual([4, 5, 6, 7]);
    expect(await heldRevisions(schema, s(4))).toEqual([1, 2]);
    // Every other stream whole; s2 up to its failed event; s4 not at all.
    expect(await counts(schema, prefix)).toEqual({
      [s(0)]: { events: 8, last: 7 },
      [s(1)]: { events: 8, last: 7 },
      [s(2)]: { events: 3, last: 2 },
      [s(3)]: { events: 8, last: 7 },
    });

    // The same log, other batches: the same decisions and the same rows.
    for (const batchSize of [1, 3, 1000]) {
      const again = await freshSchema();
      await new ProjectorRuntime({ store, pool, projections: [poisonable(name, state)], log, schema: again, batchSize }).catchUp();
      expect(await decisions(again), `batch size ${batchSize}`).toEqual(failures);
      expect(await heldRevisions(again, s(2))).toEqual([4, 5, 6, 7]);
      expect(await counts(again, prefix)).toEqual(await counts(schema, prefix));
    }

    // More events on a set-aside stream are held too, and the checkpoint still moves on.
    await store.appendToStream(s(2), [counted(8)]);
    await untilVisible(store, (await store.appendToStream(s(0), [counted(8)])).position);
    const runtime = new ProjectorRuntime({ store, pool, projections: [poisonable(name, state)], log, schema, batchSize: 10 });
    await runtime.catchUp();
    expect(await heldRevisions(schema, s(2))).toEqual([4, 5, 6, 7, 8]);
    expect((await counts(schema, prefix))[s(0)]).toEqual({ events: 9, last: 8 });

    // A retry before the fix fails again and changes nothing.
    const before = await retryOutcomes(runtime);
    expect(before).toEqual([
      { projection: name, stream: s(2), outcome: 'failed again', applied: 0, held_events: 5, error: 'division by zero' },
      { projection: name, stream: s(4), outcome: 'failed again', applied: 0, held_events: 2, error: expect.stringMatching(/^cannot read the payload/) },
    ]);
    expect(await heldRevisions(schema, s(2))).toEqual([4, 5, 6, 7, 8]);

    // After the fix: the failed event, then the held ones, in order (the hash chain would show any other order).
    state.cured = true;
    expect(await retryOutcomes(runtime, { stream: s(2) })).toEqual([{ projection: name, stream: s(2), outcome: 'recovered', applied: 6, held_events: 0, error: null }]);
    expect(await retryOutcomes(runtime)).toEqual([{ projection: name, stream: s(4), outcome: 'recovered', applied: 3, held_events: 0, error: null }]);
    expect(await listSetAside(pool, schema)).toEqual([]);
    const cured = await freshSchema();
    await new ProjectorRuntime({ store, pool, projections: [poisonable(name, state)], log, schema: cured, batchSize: 10 }).catchUp();
    const chains = async (of: string) =>
      (await pool.query(`SELECT stream_id, events, chain FROM ${pg.escapeIdentifier(of)}.${TABLE} WHERE stream_id LIKE $1 ORDER BY stream_id`, [`${prefix}-%`])).rows;
    expect(await chains(schema)).toEqual(await chains(cured));
  });

  it('a waiter learns through the database, as another process would, that its stream was set aside, and that it recovered', async () => {
    const prefix = `waiter-${randomUUID()}`;
    const name = 'waited_counter';
    const state = { cured: false };
    const schema = await freshSchema();
    // No in-process link: the watcher learns through NOTIFY (and its polling) only.
    const watcher = new CheckpointWatcher(pool, db.url, [name], schema, 50);
    await watcher.start();
    const runtime = new ProjectorRuntime({ store, pool, projections: [poisonable(name, state)], log, schema, batchSize: 50 });
    try {
      runtime.start();
      const fine = await store.appendToStream(`${prefix}-0`, [counted(1)]);
      await watcher.waitForCheckpoint(fine.position, { timeoutMs: 30_000, streams: [{ streamId: `${prefix}-0`, projections: [name] }] });
      const poisoned = await store.appendToStream(`${prefix}-1`, [counted(2, 'sql')]);
      const started = Date.now();
      const error = await rejectionOf(watcher.waitForCheckpoint(poisoned.position, { timeoutMs: 10_000, streams: [{ streamId: `${prefix}-1`, projections: [name] }] }));
      expect(error).toBeInstanceOf(ProjectionSetAsideError);
      expect(Date.now() - started).toBeLessThan(5_000);
      // A later event of that stream: held, and its waiter fails as soon as the checkpoint passes it.
      const held = await store.appendToStream(`${prefix}-1`, [counted(3)]);
      expect(await rejectionOf(watcher.waitForCheckpoint(held.position, { timeoutMs: 10_000, streams: [{ streamId: `${prefix}-1`, projections: [name] }] }))).toBeInstanceOf(
        ProjectionSetAsideError,
      );
      // A new watcher (another process starting) reads it from the table.
      const late = new CheckpointWatcher(pool, db.url, [name], schema, 50);
      await late.start();
      try {
        expect(late.setAsideAt(name, `${prefix}-1`)).toEqual(poisoned.position);
      } finally {
        await late.stop();
      }
      // Other streams are not concerned; after a retry the stream is not either.
      const other = await store.appendToStream(`${prefix}-0`, [counted(4)]);
      await watcher.waitForCheckpoint(other.position, { timeoutMs: 30_000, streams: [{ streamId: `${prefix}-0`, projections: [name] }] });
      state.cured = true;
      await runtime.retrySetAside({ stream: `${prefix}-1` });
      await expectEventually(() => watcher.setAsideAt(name, `${prefix}-1`) === null);
      const after = await store.appendToStream(`${prefix}-1`, [counted(5)]);
      await watcher.waitForCheckpoint(after.position, { timeoutMs: 30_000, streams: [{ streamId: `${prefix}-1`, projections: [name] }] });
      expect(await counts(schema, prefix)).toEqual({ [`${prefix}-0`]: { events: 2, last: 1 }, [`${prefix}-1`]: { events: 3, last: 2 } });
    } finally {
      await runtime.stop();
      await watcher.stop();
    }
  });

  it('a transient failure (serialization, a lost connection, the event store unreachable) is retried until it passes, never set aside', async () => {
    const prefix = `transient-${randomUUID()}`;
    const name = 'transient_counter';
    const schema = await freshSchema();
    const inner = counterProjection({ name, table: TABLE });
    const failures = [
      Object.assign(new Error('could not serialize access due to concurrent update'), { code: '40001' }),
      Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' }),
      Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }),
      new EventStoreUnavailableError('event store unreachable'),
      Object.assign(new Error('canceling statement due to lock timeout'), { code: '55P03' }),
    ];
    let calls = 0;
    const flaky: Projection = {
      ...inner,
      async apply(events, tx, options) {
        const failure = failures[calls++];
        if (failure) throw failure;
        await inner.apply(events, tx, options);
      },
    };
    const watcher = new CheckpointWatcher(pool, db.url, [name], schema, 50);
    await watcher.start();
    const runtime = new ProjectorRuntime({ store, pool, projections: [flaky], log, schema, batchSize: 50 });
    try {
      runtime.start();
      const { position } = await store.appendToStream(`${prefix}-0`, [counted(1), counted(2)]);
      await watcher.waitForCheckpoint(position, { timeoutMs: 60_000, streams: [{ streamId: `${prefix}-0`, projections: [name] }] });
      expect(calls).toBeGreaterThan(failures.length);
      expect(await listSetAside(pool, schema)).toEqual([]);
      expect(await counts(schema, prefix)).toEqual({ [`${prefix}-0`]: { events: 2, last: 1 } });
    } finally {
      await runtime.stop();
      await watcher.stop();
    }
  }, 90_000);

  it('what counts as transient', () => {
    for (const code of ['08006', '40001', '40P01', '53300', '57014', '57P01', '58030', 'XX000', '55P03', 'ECONNRESET', 'ECONNREFUSED']) {
      expect(isTransientDatabaseError(Object.assign(new Error(code), { code })), code).toBe(true);
    }
    expect(isTransientDatabaseError(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isTransientDatabaseError(new Error('timeout exceeded when trying to connect'))).toBe(true);
    for (const code of ['22008', '22012', '23505', '23514', '42703', '22P02']) {
      expect(isTransientDatabaseError(Object.assign(new Error(code), { code })), code).toBe(false);
    }
    expect(isTransientDatabaseError(new TypeError('cannot read properties of undefined'))).toBe(false);
  });
});

async function retryOutcomes(runtime: ProjectorRuntime, filter: { stream?: string } = {}) {
  const outcomes = await runtime.retrySetAside(filter);
  return outcomes.sort((a, b) => a.stream.localeCompare(b.stream));
}

async function expectEventually(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
