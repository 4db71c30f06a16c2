import { randomUUID } from 'node:crypto';
import net from 'node:net';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { applyMigrationGroup } from '../../shared/db/migrate.js';
import { createPool, type Pool } from '../../shared/db/pool.js';
import { formatPosition, type Position, type RecordedEvent } from '../../shared/event-store/port.js';
import { CheckpointWatcher, ensureCheckpoint, moveCheckpointAndCommit, readCheckpoint } from '../../shared/projection/checkpoints.js';
import { ProjectionSetAsideError, SET_ASIDE_CHANNEL, recordSetAside, setAsidePayload } from '../../shared/projection/set-aside.js';
import { eventually } from '../event-store/conformance.js';
import { rejectionOf } from '../support/rejection.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * What a command learns from the checkpoint watcher about set-aside streams (docs/design.md "A
 * projection that cannot apply an event"), against a real database: each batch is committed as
 * the projector of another process commits it (`recordSetAside`, then `moveCheckpointAndCommit`,
 * in one transaction), each retry as `projections retry` does (the row deleted, a recovery
 * NOTIFY). The watchers poll never unless a test says so: what they know came by NOTIFY, or by the
 * table reads of their start and of a reconnect.
 *
 * A command fails at once (ProjectionSetAsideError) when its own event was set aside, or held
 * behind one that was, and only then: not for a later event of its stream, nor for another
 * schema's set-aside (a rebuild's shadow, a replay); and it succeeds again once the stream is
 * retried, even when the watcher was disconnected meanwhile and missed the recovery.
 */

const PROJECTION = 'watched_counter';
const NO_POLLING = 600_000;
/** What must happen "at once" gets this long on a loaded machine. */
const SOON = 10_000;

let db: TestDatabase;
let pool: Pool;
const cleanups: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  db = await createTestDatabase('set_aside_watcher');
  pool = createPool(db.url, { max: 6 });
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

const at = (commit: number): Position => ({ commit: BigInt(commit), prepare: 0n });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A read-model schema of its own, with PROJECTION's checkpoint at the start of the log. */
async function freshSchema(): Promise<string> {
  const schema = `watched_${randomUUID().slice(0, 8)}`;
  await applyMigrationGroup(pool, 'read-model', schema);
  const client = await pool.connect();
  try {
    await ensureCheckpoint(client, schema, PROJECTION);
  } finally {
    client.release();
  }
  return schema;
}

/** The event of `streamId` at `position`, as the projector read it from the log. */
function event(streamId: string, position: Position): RecordedEvent {
  return { id: randomUUID(), type: 'Counted', data: {}, metadata: {}, streamId, revision: 0n, position, recordedAt: new Date() };
}

/**
 * A batch of PROJECTION up to `to`, committed as the projector commits it: the streams of the
 * events it could not apply set aside (rows and NOTIFYs), then the checkpoint moved (and its
 * NOTIFY), in one transaction; the notifications arrive in that order.
 */
async function commitBatch(schema: string, to: Position, failed: RecordedEvent[] = []): Promise<void> {
  const client = await pool.connect();
  try {
    const from = await readCheckpoint(client, schema, PROJECTION);
    await client.query('BEGIN');
    await recordSetAside(client, schema, PROJECTION, failed.map((e) => ({ event: e, error: new Error(`cannot apply ${e.id}`) })));
    await moveCheckpointAndCommit(client, schema, PROJECTION, from, to);
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/** `projections retry` recovering a stream: its row deleted, and every watcher told, at commit. */
async function retried(schema: string, streamId: string): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const { rowCount } = await client.query(`DELETE FROM ${pg.escapeIdentifier(schema)}.projection_set_aside WHERE projection = $1 AND stream_id = $2`, [
      PROJECTION,
      streamId,
    ]);
    expect(rowCount).toBe(1);
    await client.query('SELECT pg_notify($1, $2)', [SET_ASIDE_CHANNEL, setAsidePayload(schema, PROJECTION, streamId, null)]);
    await client.query('COMMIT');
  } finally {
    client.release();
  }
}

async function startWatcher(schema: string, options: { pool?: pg.Pool; url?: string; pollIntervalMs?: number } = {}): Promise<CheckpointWatcher> {
  const watcher = new CheckpointWatcher(options.pool ?? pool, options.url ?? db.url, [PROJECTION], schema, options.pollIntervalMs ?? NO_POLLING);
  cleanups.push(() => watcher.stop());
  await watcher.start();
  return watcher;
}

/** A command that appended to `streamId` at `position`, waiting until its event is visible. */
function command(watcher: CheckpointWatcher, streamId: string, position: Position): Promise<void> {
  return watcher.waitForCheckpoint(position, { timeoutMs: SOON, streams: [{ streamId, projections: [PROJECTION] }] });
}

/** A command waiting in the background (its rejection handled until the test awaits it). */
function waiting(watcher: CheckpointWatcher, streamId: string, position: Position): Promise<void> {
  const wait = command(watcher, streamId, position);
  wait.catch(() => undefined);
  return wait;
}

/** The command fails because PROJECTION set `streamId` aside at `position` (not by a timeout). */
async function expectSetAside(waiting: Promise<unknown>, streamId: string, position: Position): Promise<void> {
  const error = await rejectionOf(waiting);
  expect(error).toBeInstanceOf(ProjectionSetAsideError);
  expect(error).toMatchObject({ projection: PROJECTION, streamId, position });
}

describe('a command and the set-aside streams of its projections', () => {
  it('fails at once when its own event was set aside, or held behind one that was: waiting when the batch commits, or beginning after it', async () => {
    const schema = await freshSchema();
    const watcher = await startWatcher(schema);
    // x's event at 10 cannot be applied, x's next one (12) waits behind it; y's (11, 13) are applied.
    const own = waiting(watcher, 'x', at(10));
    const held = waiting(watcher, 'x', at(12));
    const other = command(watcher, 'y', at(11));
    await commitBatch(schema, at(13), [event('x', at(10))]);
    await expectSetAside(own, 'x', at(10));
    await expectSetAside(held, 'x', at(10));
    await other;

    // Commands that begin waiting once the checkpoint has passed their events: decided at once.
    await expectSetAside(command(watcher, 'x', at(10)), 'x', at(10));
    await expectSetAside(command(watcher, 'x', at(12)), 'x', at(10));
    await command(watcher, 'y', at(13));
  });

  it('does not fail when its stream was set aside only at a later event: its own event was applied', async () => {
    const schema = await freshSchema();
    const watcher = await startWatcher(schema);
    // x's event at 20 is applied; its next one, at 21, cannot be.
    const earlier = command(watcher, 'x', at(20));
    await commitBatch(schema, at(22), [event('x', at(21))]);
    await earlier;
    await command(watcher, 'x', at(20));
    await expectSetAside(command(watcher, 'x', at(21)), 'x', at(21));
    await expectSetAside(command(watcher, 'x', at(22)), 'x', at(21));
  });

  it("ignores another schema's set-aside streams (a rebuild's shadow schema, a replay's): they are decided afresh there", async () => {
    const current = await freshSchema();
    const shadow = await freshSchema();
    const watcher = await startWatcher(current);
    const pending = command(watcher, 'x', at(30));
    // The shadow's projector (the same projection, rebuilt) fails on x's event first; the current one applies it.
    await commitBatch(shadow, at(31), [event('x', at(30))]);
    await commitBatch(current, at(31));
    await pending;
    await command(watcher, 'x', at(30));
    // The current schema's own set-aside streams still count.
    await commitBatch(current, at(33), [event('x', at(32))]);
    await expectSetAside(command(watcher, 'x', at(32)), 'x', at(32));
  });

  it('is not misled by set-aside notifications it cannot use (malformed; the recovery of a stream it never knew set aside), and the watcher hears the next ones', async () => {
    const schema = await freshSchema();
    const watcher = await startWatcher(schema);
    const notify = (payload: string) => pool.query('SELECT pg_notify($1, $2)', [SET_ASIDE_CHANNEL, payload]);
    for (const payload of ['', schema, `${schema} ${PROJECTION}`, `${schema} ${PROJECTION} ${formatPosition(at(1))}`, `${schema} ${PROJECTION} - `]) {
      await notify(payload);
    }
    // Recoveries of streams it never heard were set aside (it was disconnected when they were, say):
    // of a projection with set-aside streams of its own, and of one with none.
    await notify(setAsidePayload(schema, 'other_projection', 'x', null));
    await notify(setAsidePayload(schema, PROJECTION, 'never-set-aside', null));
    const pending = waiting(watcher, 'x', at(40));
    const other = command(watcher, 'y', at(41));
    await commitBatch(schema, at(41), [event('x', at(40))]);
    await expectSetAside(pending, 'x', at(40));
    await other;
    await notify(setAsidePayload(schema, PROJECTION, 'never-set-aside', null));
    await notify('');
    // A recovery of x after that: heard, x's next command succeeds.
    await retried(schema, 'x');
    await commitBatch(schema, at(42));
    await command(watcher, 'x', at(42));
  });

  it('fails the commands of every stream a projection set aside: told one after the other, or read from the table by a watcher starting later', async () => {
    const schema = await freshSchema();
    const watcher = await startWatcher(schema);
    // One batch fails x's event at 50 and y's at 51, holds x's at 52 and y's at 53, applies z's at 54.
    await commitBatch(schema, at(54), [event('x', at(50)), event('y', at(51))]);
    await command(watcher, 'z', at(54));
    await expectSetAside(command(watcher, 'x', at(52)), 'x', at(50));
    await expectSetAside(command(watcher, 'y', at(53)), 'y', at(51));

    // Another process starting now: it reads both from the table.
    const late = await startWatcher(schema);
    await command(late, 'z', at(54));
    await expectSetAside(command(late, 'x', at(52)), 'x', at(50));
    await expectSetAside(command(late, 'y', at(53)), 'y', at(51));
  });

  it('keeps a set-aside stream it was told of when a poll that read the tables just before that batch committed answers after it', async () => {
    const schema = await freshSchema();
    const holding = holdingPool();
    const watcher = await startWatcher(schema, { pool: holding.pool, pollIntervalMs: 20 });
    const poll = holding.holdNext();
    // The command waits, so the watcher polls; its first poll reads the tables before the batch commits.
    const own = waiting(watcher, 'x', at(60));
    await poll.taken;
    // x's event at 60 cannot be applied; x's next one, at 61, is held. Told by NOTIFY.
    await commitBatch(schema, at(61), [event('x', at(60))]);
    await expectSetAside(own, 'x', at(60));
    // Nobody waits: the polling stops, and every other poll has answered.
    await sleep(100);
    await eventually(() => expect(holding.inFlight()).toBe(1), SOON);
    // The held poll answers now, with the tables as they were before the batch.
    poll.release();
    await eventually(() => expect(holding.inFlight()).toBe(0), SOON);
    await sleep(20);
    // The command of x's held event, beginning now, fails at once all the same.
    await expectSetAside(command(watcher, 'x', at(61)), 'x', at(60));
  });

  it('succeeds again once its stream is retried: told by NOTIFY, or, when the listener was down meanwhile, by the full read after it reconnects', async () => {
    const schema = await freshSchema();
    const proxy = await startProxy(db.url);
    const listenerName = `set-aside-listener-${randomUUID().slice(0, 8)}`;
    const listenerUrl = new URL(proxy.url);
    listenerUrl.searchParams.set('application_name', listenerName);
    const watcher = await startWatcher(schema, { url: listenerUrl.toString() });
    await commitBatch(schema, at(71), [event('x', at(70)), event('y', at(71))]);
    await expectSetAside(command(watcher, 'x', at(70)), 'x', at(70));
    await expectSetAside(command(watcher, 'y', at(71)), 'y', at(71));

    // y is retried while the watcher listens; y's next event (72) is then applied.
    await retried(schema, 'y');
    await commitBatch(schema, at(72));
    await command(watcher, 'y', at(72));

    // The listener's connection is terminated, and a new one cannot be made for now. Meanwhile x
    // is retried and its next event (73) applied: the watcher hears of neither.
    proxy.refuse();
    const { rows } = await pool.query<{ terminated: boolean }>(
      'SELECT pg_terminate_backend(pid, 10000) AS terminated FROM pg_stat_activity WHERE application_name = $1',
      [listenerName],
    );
    expect(rows).toEqual([{ terminated: true }]);
    await retried(schema, 'x');
    await commitBatch(schema, at(73));
    await sleep(100);

    // Connections come back: the listener reconnects (it retries every half second) and reads the
    // set-aside streams afresh. x's command succeeds; only what is still in the table counts.
    proxy.accept();
    await command(watcher, 'x', at(73));
    await commitBatch(schema, at(75), [event('y', at(74))]);
    await expectSetAside(command(watcher, 'y', at(74)), 'y', at(74));
    await command(watcher, 'x', at(75));
  });
});

/**
 * The watcher's pool, through which a test holds back the answer of the watcher's next query (a
 * poll): the query runs, and reads the tables, at once; the watcher gets its answer on `release`.
 */
function holdingPool(): { pool: pg.Pool; inFlight(): number; holdNext(): { taken: Promise<void>; release(): void } } {
  let next: { taken(): void; released: Promise<void> } | null = null;
  let inFlight = 0;
  const holding = {
    query: async (...args: unknown[]) => {
      inFlight++;
      try {
        const result = await (pool.query as (...a: unknown[]) => Promise<unknown>)(...args);
        const hold = next;
        next = null;
        if (hold) {
          hold.taken();
          await hold.released;
        }
        return result;
      } finally {
        inFlight--;
      }
    },
  } as unknown as pg.Pool;
  return {
    pool: holding,
    inFlight: () => inFlight,
    holdNext() {
      let taken!: () => void;
      let release!: () => void;
      const tookIt = new Promise<void>((resolve) => (taken = resolve));
      next = { taken, released: new Promise<void>((resolve) => (release = resolve)) };
      return { taken: tookIt, release };
    },
  };
}

/** A TCP proxy to the database that can refuse new connections for a while (those open stay). */
async function startProxy(url: string): Promise<{ url: string; refuse(): void; accept(): void }> {
  const target = new URL(url);
  const sockets = new Set<net.Socket>();
  let refusing = false;
  const server = net.createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    const upstream = net.connect(Number(target.port), target.hostname);
    const close = () => {
      sockets.delete(client);
      sockets.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    sockets.add(client).add(upstream);
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const proxied = new URL(url);
  proxied.hostname = '127.0.0.1';
  proxied.port = String((server.address() as net.AddressInfo).port);
  return {
    url: proxied.toString(),
    refuse: () => void (refusing = true),
    accept: () => void (refusing = false),
  };
}
