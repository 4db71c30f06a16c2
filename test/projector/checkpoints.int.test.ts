import type { EventEmitter } from 'node:events';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createPool, type Pool } from '../../shared/db/pool.js';
import { START, formatPosition, type Position } from '../../shared/event-store/port.js';
import {
  CHECKPOINT_CHANNEL,
  CHECKPOINT_MOVED_SQLSTATE,
  CheckpointTimeoutError,
  CheckpointWatcher,
  advanceCheckpoint,
  ensureCheckpoint,
  moveCheckpointAndCommit,
  readCheckpoint,
} from '../../shared/projection/checkpoints.js';
import { eventually } from '../event-store/conformance.js';
import { rejectionOf } from '../support/rejection.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * The checkpoint watcher on its own: each way it learns of progress (in-process `advance`,
 * NOTIFY, polling the table) tested apart from the others, and the checkpoint statements the
 * projector ends its batches with. The projector runtime tests use them together, where one path
 * covers for another.
 */

let db: TestDatabase;
let pool: Pool;
const watchers: CheckpointWatcher[] = [];
const NO_POLLING = 600_000;

beforeAll(async () => {
  db = await createTestDatabase('checkpoints');
  pool = createPool(db.url, { max: 6 });
});

afterEach(async () => {
  await Promise.all(watchers.splice(0).map((w) => w.stop()));
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

const at = (commit: number, prepare = 0): Position => ({ commit: BigInt(commit), prepare: BigInt(prepare) });
let nameSeq = 0;
const uniqueName = (prefix: string) => `${prefix}_${++nameSeq}`;

/** A pool that counts the queries the watcher makes (its refreshes). */
function countingPool(): { pool: pg.Pool; queries: () => number } {
  let count = 0;
  const counting = {
    query: (...args: unknown[]) => {
      count++;
      return (pool.query as (...a: unknown[]) => Promise<unknown>)(...args);
    },
  } as unknown as pg.Pool;
  return { pool: counting, queries: () => count };
}

function watcher(
  projections: ConstructorParameters<typeof CheckpointWatcher>[2],
  options: { pool?: pg.Pool; pollIntervalMs?: number; schema?: string } = {},
): CheckpointWatcher {
  // No schema given: the default, read_model.
  const w = new CheckpointWatcher(options.pool ?? pool, db.url, projections, options.schema, options.pollIntervalMs ?? NO_POLLING);
  watchers.push(w);
  return w;
}

/** Sets a checkpoint row in read_model directly, without telling anyone. */
async function setRow(name: string, position: Position): Promise<void> {
  await pool.query(
    `INSERT INTO read_model.projection_checkpoints (name, position) VALUES ($1, $2)
     ON CONFLICT (name) DO UPDATE SET position = EXCLUDED.position`,
    [name, formatPosition(position)],
  );
}

async function listenerConnections(): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query = ANY($1::text[]) AND pid <> pg_backend_pid()`,
    [LISTEN_QUERIES],
  );
  return rows[0]!.n;
}

/** The listener's last statement, as the shared NotificationListener sends it (quoted) or plain. */
const LISTEN_QUERIES = [`LISTEN ${CHECKPOINT_CHANNEL}`, `LISTEN "${CHECKPOINT_CHANNEL}"`];

const changeListeners = (w: CheckpointWatcher) => (w as unknown as { changed: EventEmitter }).changed.listenerCount('change');

describe('CheckpointWatcher', () => {
  it('consumersOf: the projections that read any of the types, each once; names alone register no types', () => {
    const w = watcher([{ name: 'assets', eventTypes: ['AssetCreated', 'TagAttached'] }, { name: 'tags', eventTypes: ['TagAttached', 'TagDetached'] }, 'orgs']);
    expect(w.consumersOf(['AssetCreated'])).toEqual(['assets']);
    expect(w.consumersOf(['TagAttached', 'TagDetached', 'AssetCreated'])).toEqual(['assets', 'tags']);
    expect(w.consumersOf(['OrgCreated', 'Unknown'])).toEqual([]);
    expect(w.consumersOf([])).toEqual([]);
  });

  it('given projections rather than names, waits for them by name', async () => {
    const w = watcher([{ name: 'assets', eventTypes: ['AssetCreated'] }, 'orgs']);
    w.advance('assets', at(2));
    w.advance('orgs', at(2));
    await w.waitForCheckpoint(at(2), { timeoutMs: 50 });
  });

  it('advance only moves a position forward; an unknown projection is at the start', () => {
    const w = watcher(['p']);
    expect(w.position('p')).toEqual(START);
    w.advance('p', at(10, 5));
    w.advance('p', at(10, 4));
    w.advance('p', at(9, 99));
    expect(w.position('p')).toEqual(at(10, 5));
    w.advance('p', at(10, 6));
    expect(w.position('p')).toEqual(at(10, 6));
    expect(w.position('other')).toEqual(START);
  });

  it('waitForCheckpoint resolves at once when passed, waits for in-process advances of every projection, and leaves no listener behind', async () => {
    const w = watcher(['a', 'b']);
    w.advance('a', at(5));
    w.advance('b', at(5));
    await w.waitForCheckpoint(at(5), { timeoutMs: 1 });
    await w.waitForCheckpoint(at(4, 7), { timeoutMs: 1 });

    let resolved = false;
    const waiting = w.waitForCheckpoint(at(6)).then(() => {
      resolved = true;
    });
    w.advance('a', at(6));
    await new Promise((r) => setTimeout(r, 20));
    expect(resolved).toBe(false);
    w.advance('b', at(7));
    await waiting;
    expect(changeListeners(w)).toBe(0);
  });

  it('waitForCheckpoint with `projections` waits for those only', async () => {
    const w = watcher(['fast', 'slow']);
    w.advance('fast', at(3));
    await w.waitForCheckpoint(at(3), { projections: ['fast'], timeoutMs: 1 });
    const error = await rejectionOf(w.waitForCheckpoint(at(3), { timeoutMs: 50 }));
    expect(error).toBeInstanceOf(CheckpointTimeoutError);
  });

  it('a timeout names the lagging projections and the position', async () => {
    const w = watcher(['ahead', 'behind_1', 'behind_2']);
    w.advance('ahead', at(9));
    const started = Date.now();
    const error = (await rejectionOf(w.waitForCheckpoint(at(8, 3), { timeoutMs: 100 }))) as Error;
    expect(Date.now() - started).toBeGreaterThanOrEqual(95);
    expect(error).toBeInstanceOf(CheckpointTimeoutError);
    expect(error.name).toBe('CheckpointTimeoutError');
    expect(error.message).toBe('projections behind_1, behind_2 did not reach 8/3 in time');
    expect(changeListeners(w)).toBe(0);
  });

  it('start reads every checkpoint of its schema (read_model by default)', async () => {
    const name = uniqueName('start');
    await setRow(name, at(40, 2));
    const w = watcher([name]);
    await w.start();
    expect(w.position(name)).toEqual(at(40, 2));
  });

  it('learns of moves by NOTIFY alone (no polling), ignoring other schemas and malformed payloads', async () => {
    const name = uniqueName('notified');
    const w = watcher([name]);
    await w.start();
    const notify = (payload: string) => pool.query('SELECT pg_notify($1, $2)', [CHECKPOINT_CHANNEL, payload]);
    await notify(`other_schema ${name} 50/0`);
    await notify(`read_model ${name}`);
    await notify(`read_model  50/0`);
    await notify('');
    await new Promise((r) => setTimeout(r, 100));
    expect(w.position(name)).toEqual(START);
    const waiting = w.waitForCheckpoint(at(50), { timeoutMs: 5_000 });
    await notify(`read_model ${name} 50/0`);
    await waiting;
    expect(w.position(name)).toEqual(at(50));
  });

  it('learns of moves by polling alone while someone waits, and stops polling when nobody does', async () => {
    const name = uniqueName('polled');
    const counting = countingPool();
    const w = watcher([name], { pool: counting.pool, pollIntervalMs: 20 });
    // Not started: no notifications, only polling.
    const waiting = w.waitForCheckpoint(at(60), { timeoutMs: 5_000 });
    // Polled again and again while the wait lasts (every 20 ms; a busy machine may stretch that).
    await expect.poll(() => counting.queries(), { timeout: 4_000, interval: 10 }).toBeGreaterThan(2);
    await setRow(name, at(60));
    await waiting;
    await new Promise((r) => setTimeout(r, 60));
    const after = counting.queries();
    await new Promise((r) => setTimeout(r, 200));
    expect(counting.queries()).toBe(after);

    // A later wait polls again.
    const again = w.waitForCheckpoint(at(61), { timeoutMs: 5_000 });
    await setRow(name, at(61));
    await again;
  });

  it('a listener connection that dies is replaced, and moves made meanwhile are read again', async () => {
    const name = uniqueName('reconnect');
    const w = watcher([name]);
    await w.start();
    expect(await listenerConnections()).toBe(1);
    await pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query = ANY($1::text[])`, [LISTEN_QUERIES]);
    // Missed while disconnected: found by the refresh after reconnecting.
    await setRow(name, at(70));
    await eventually(async () => expect(w.position(name)).toEqual(at(70)), 5_000);
    await eventually(async () => expect(await listenerConnections()).toBe(1), 5_000);
    const waiting = w.waitForCheckpoint(at(71), { timeoutMs: 5_000 });
    await pool.query('SELECT pg_notify($1, $2)', [CHECKPOINT_CHANNEL, `read_model ${name} 71/0`]);
    await waiting;
  });

  it('stop closes the listener and ends polling; a stop during start leaves no connection', async () => {
    const counting = countingPool();
    const w = watcher(['stopped'], { pool: counting.pool, pollIntervalMs: 20 });
    await w.start();
    expect(await listenerConnections()).toBe(1);
    const waiting = rejectionOf(w.waitForCheckpoint(at(1), { timeoutMs: 300 }));
    await new Promise((r) => setTimeout(r, 60));
    await w.stop();
    await eventually(async () => expect(await listenerConnections()).toBe(0), 5_000);
    const after = counting.queries();
    expect(await waiting).toBeInstanceOf(CheckpointTimeoutError);
    expect(counting.queries()).toBeLessThanOrEqual(after + 1);
    // Stopped: a new wait does not start polling again.
    const later = counting.queries();
    expect(await rejectionOf(w.waitForCheckpoint(at(1), { timeoutMs: 100 }))).toBeInstanceOf(CheckpointTimeoutError);
    expect(counting.queries()).toBe(later);

    // Stopped while its listener connects (after the first read): that connection is closed too.
    let stopping: Promise<void> | null = null;
    const racing = new CheckpointWatcher(
      {
        query: async (...args: unknown[]) => {
          const result = await (pool.query as (...a: unknown[]) => Promise<unknown>)(...args);
          setImmediate(() => {
            stopping ??= racing.stop();
          });
          return result;
        },
      } as unknown as pg.Pool,
      db.url,
      ['racing'],
      'read_model',
      NO_POLLING,
    );
    await racing.start();
    await stopping;
    await new Promise((r) => setTimeout(r, 200));
    expect(await listenerConnections()).toBe(0);

    // A listener that cannot connect fails the start and leaves nothing behind.
    const url = new URL(db.url);
    url.pathname = '/no_such_database';
    const unreachable = new CheckpointWatcher(pool, url.toString(), ['unreachable'], 'read_model', NO_POLLING);
    expect(await rejectionOf(unreachable.start())).toMatchObject({ code: '3D000' });
    await unreachable.stop();

    // Stopped before it started: it does not listen at all.
    const never = watcher(['never']);
    await never.stop();
    await never.start();
    expect(await listenerConnections()).toBe(0);
  });
});

describe('checkpoint statements', () => {
  it('ensureCheckpoint creates the row at the start of the log once; readCheckpoint reads it (START when absent)', async () => {
    const name = uniqueName('ensured');
    expect(await readCheckpoint(pool, 'read_model', name)).toEqual(START);
    const client = await pool.connect();
    try {
      await ensureCheckpoint(client, 'read_model', name);
      expect(await readCheckpoint(client, 'read_model', name)).toEqual(START);
      await setRow(name, at(5, 1));
      await ensureCheckpoint(client, 'read_model', name);
      expect(await readCheckpoint(pool, 'read_model', name)).toEqual(at(5, 1));
    } finally {
      client.release();
    }
  });

  it('moveCheckpointAndCommit moves from where the batch began and commits, telling listeners; from elsewhere it raises and changes nothing', async () => {
    const name = uniqueName('moved');
    await setRow(name, at(10, 1));
    const w = watcher([name]);
    await w.start();
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await moveCheckpointAndCommit(client, 'read_model', name, at(10, 1), at(12, 3));
      expect(await readCheckpoint(pool, 'read_model', name)).toEqual(at(12, 3));
      await w.waitForCheckpoint(at(12, 3), { timeoutMs: 5_000 });

      await client.query('BEGIN');
      const error = await rejectionOf(moveCheckpointAndCommit(client, 'read_model', name, at(10, 1), at(20)));
      expect((error as { code?: string }).code).toBe(CHECKPOINT_MOVED_SQLSTATE);
      await client.query('ROLLBACK');
      expect(await readCheckpoint(pool, 'read_model', name)).toEqual(at(12, 3));
    } finally {
      client.release();
    }
  });

  it('advanceCheckpoint: true and a notification when it moved, false and no change when the checkpoint was elsewhere', async () => {
    const name = uniqueName('advanced');
    await setRow(name, at(30, 0));
    const w = watcher([name]);
    await w.start();
    const client = await pool.connect();
    try {
      expect(await advanceCheckpoint(client, 'read_model', name, at(30, 0), at(31, 4))).toBe(true);
      expect(await readCheckpoint(pool, 'read_model', name)).toEqual(at(31, 4));
      await w.waitForCheckpoint(at(31, 4), { timeoutMs: 5_000 });

      expect(await advanceCheckpoint(client, 'read_model', name, at(30, 0), at(40))).toBe(false);
      expect(await advanceCheckpoint(client, 'read_model', name, at(31, 3), at(40))).toBe(false);
      expect(await readCheckpoint(pool, 'read_model', name)).toEqual(at(31, 4));
      await new Promise((r) => setTimeout(r, 100));
      expect(formatPosition(w.position(name))).toBe('31/4');
    } finally {
      client.release();
    }
  });
});
