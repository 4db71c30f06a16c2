import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyMigrationGroup } from '../../shared/db/migrate.js';
import { createPool, type Pool } from '../../shared/db/pool.js';
import { comparePositions, formatPosition, type EventData, type Position, type RecordedEvent } from '../../shared/event-store/port.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { createLogger } from '../../shared/logger.js';
import { CheckpointTimeoutError, CheckpointWatcher, readCheckpoint } from '../../shared/projection/checkpoints.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import { eventually } from '../event-store/conformance.js';
import { rejectionOf } from '../support/rejection.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { COUNTED, counterProjection, counterTableSql } from './counter-projection.js';

const log = createLogger('silent');
let db: TestDatabase;
let pool: Pool;
let store: PostgresEventStore;

beforeAll(async () => {
  db = await createTestDatabase('projector_runtime');
  pool = createPool(db.url, { max: 10 });
  store = new PostgresEventStore(pool, db.url, { pollIntervalMs: 50 });
});

afterAll(async () => {
  await store?.close();
  await pool?.end();
  await db?.drop();
});

function counted(n: number): EventData {
  return { id: randomUUID(), type: COUNTED, data: { n } };
}

/** Appends `count` Counted events over `streams` streams (plus some of another type); returns the last position. */
async function appendLog(prefix: string, count: number, options: { streams?: number; perAppend?: number } = {}): Promise<Position> {
  const streams = options.streams ?? 10;
  const perAppend = options.perAppend ?? 50;
  let last: Position | null = null;
  for (let done = 0; done < count; done += perAppend) {
    const events = Array.from({ length: Math.min(perAppend, count - done) }, (_, i) =>
      (done + i) % 7 === 6 ? { id: randomUUID(), type: 'Ignored', data: { n: 1000 } } : counted(done + i),
    );
    last = (await store.appendToStream(`${prefix}-${(done / perAppend) % streams}`, events)).position;
  }
  return last!;
}

async function createCounterTable(schema: string, table: string): Promise<void> {
  await pool.query(counterTableSql(schema, table));
}

async function tableRows(schema: string, table: string): Promise<unknown[]> {
  const { rows } = await pool.query(
    `SELECT stream_id, events, total::text, last_revision::text, chain FROM ${pg.escapeIdentifier(schema)}.${pg.escapeIdentifier(table)}
     ORDER BY stream_id`,
  );
  return rows;
}

/** What the counter rows must be after applying the whole log (computed from the log itself). */
async function expectedTotals(prefix: string): Promise<Map<string, { events: number; total: number }>> {
  const totals = new Map<string, { events: number; total: number }>();
  const { rows } = await pool.query<{ stream_id: string; events: number; total: number }>(
    `SELECT stream_id, count(*)::int AS events, sum((data->>'n')::int)::int AS total FROM event_store.events
     WHERE stream_id LIKE $1 AND type = $2 GROUP BY stream_id`,
    [`${prefix}-%`, COUNTED],
  );
  for (const row of rows) totals.set(row.stream_id, { events: row.events, total: row.total });
  return totals;
}

async function actualTotals(schema: string, table: string, prefix: string): Promise<Map<string, { events: number; total: number }>> {
  const { rows } = await pool.query<{ stream_id: string; events: number; total: number }>(
    `SELECT stream_id, events, total::int AS total FROM ${pg.escapeIdentifier(schema)}.${pg.escapeIdentifier(table)} WHERE stream_id LIKE $1`,
    [`${prefix}-%`],
  );
  return new Map(rows.map((r) => [r.stream_id, { events: r.events, total: r.total }]));
}

function waitForCheckpointIn(schema: string, name: string, position: Position, timeoutMs = 20_000): Promise<Position> {
  return eventually(
    async () => {
      const checkpoint = await readCheckpoint(pool, schema, name);
      expect(comparePositions(checkpoint, position), `checkpoint ${formatPosition(checkpoint)} vs ${formatPosition(position)}`).toBeGreaterThanOrEqual(0);
      return checkpoint;
    },
    timeoutMs,
    25,
  );
}

/** A fresh read-model schema (all read-model migrations) holding the counter table. */
async function freshSchema(table: string): Promise<string> {
  const schema = `rebuild_${randomUUID().slice(0, 8)}`;
  await applyMigrationGroup(pool, 'read-model', schema);
  await createCounterTable(schema, table);
  return schema;
}

describe('ProjectorRuntime', () => {
  it('advances the checkpoint with the read model, and a restart resumes exactly where it stopped', async () => {
    const prefix = `resume-${randomUUID()}`;
    const table = 'resume_counters';
    await createCounterTable('read_model', table);
    const applied: RecordedEvent[][] = [];
    const projection = counterProjection({
      name: 'resume_counter',
      table,
      afterWrites: async (events) => {
        applied.push(events);
      },
    });
    const checkpoints: Position[] = [];
    const runtimeOptions = {
      store,
      pool,
      projections: [projection],
      log,
      batchSize: 40,
      onCheckpoint: (_: string, position: Position) => checkpoints.push(position),
    };

    const first = new ProjectorRuntime(runtimeOptions);
    first.start();
    const firstHead = await appendLog(prefix, 300);
    await waitForCheckpointIn('read_model', 'resume_counter', firstHead);
    await first.stop();
    // The checkpoint only moves forward, and every committed batch moved it.
    for (let i = 1; i < checkpoints.length; i++) expect(comparePositions(checkpoints[i - 1]!, checkpoints[i]!)).toBe(-1);
    const stoppedAt = await readCheckpoint(pool, 'read_model', 'resume_counter');
    expect(stoppedAt).toEqual(checkpoints.at(-1));
    expect(await actualTotals('read_model', table, prefix)).toEqual(await expectedTotals(prefix));

    // Appended while no projector runs.
    const secondHead = await appendLog(prefix, 210);
    applied.length = 0;
    const second = new ProjectorRuntime(runtimeOptions);
    second.start();
    await waitForCheckpointIn('read_model', 'resume_counter', secondHead);
    await second.stop();

    // It started with the first Counted event after the checkpoint, and applied each once.
    const missed = (await store.readAll({ after: stoppedAt, maxCount: 10_000 })).filter(
      (e) => e.type === COUNTED && e.streamId.startsWith(prefix),
    );
    const reapplied = applied.flat().filter((e) => e.streamId.startsWith(prefix));
    expect(reapplied.map((e) => e.id)).toEqual(missed.map((e) => e.id));
    expect(await actualTotals('read_model', table, prefix)).toEqual(await expectedTotals(prefix));
  });

  it('a projector killed mid-batch resumes after a restart to the same read model as a clean rebuild', async () => {
    const prefix = `kill-${randomUUID()}`;
    const table = 'kill_counters';
    await createCounterTable('read_model', table);
    const head = await appendLog(prefix, 8_000, { streams: 40, perAppend: 100 });

    const killed = startChild({ HOLD_AT_BATCH: '15' });
    try {
      await killed.waitForLine('holding');
      // The batch's transaction is open, with its writes in it, when the process dies.
      const { rows } = await pool.query<{ state: string; xid: boolean }>(
        `SELECT state, backend_xid IS NOT NULL AS xid FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'projector-child' AND state LIKE 'idle in transaction%'`,
      );
      expect(rows).toEqual([{ state: 'idle in transaction', xid: true }]);
      killed.process.kill('SIGKILL');
      await killed.exited;
    } finally {
      killed.process.kill('SIGKILL');
    }
    // What was committed is exactly the first 14 batches: the read model matches its checkpoint.
    const checkpoint = await readCheckpoint(pool, 'read_model', 'kill_counter');
    expect(formatPosition(checkpoint)).toBe(killed.lines.filter((l) => l.startsWith('checkpoint ')).at(-1)!.slice('checkpoint '.length));
    expect(killed.lines.filter((l) => l.startsWith('checkpoint '))).toHaveLength(14);
    expect(comparePositions(checkpoint, head)).toBe(-1);
    const upToCheckpoint = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM event_store.events WHERE type = $1 AND (tx_id, global_position) <= ($2::text::xid8, $3::bigint)`,
      [COUNTED, String(checkpoint.commit), String(checkpoint.prepare)],
    );
    const appliedSoFar = await pool.query<{ n: number }>(`SELECT coalesce(sum(events), 0)::int AS n FROM read_model.${table}`);
    expect(appliedSoFar.rows[0]!.n).toBe(upToCheckpoint.rows[0]!.n);

    // Restarted, it finishes the log.
    const restarted = startChild({});
    try {
      await waitForCheckpointIn('read_model', 'kill_counter', head, 60_000);
      restarted.process.kill('SIGTERM');
      expect(await restarted.exited).toBe(0);
    } finally {
      restarted.process.kill('SIGKILL');
    }

    const rebuilt = await freshSchema(table);
    const rebuild = new ProjectorRuntime({ store, pool, projections: [counterProjection({ name: 'kill_counter', table })], log, schema: rebuilt });
    await rebuild.catchUp();
    const current = await tableRows('read_model', table);
    expect(current.filter((row) => (row as { stream_id: string }).stream_id.startsWith(prefix))).toHaveLength(40);
    expect(current).toEqual(await tableRows(rebuilt, table));
    expect(await actualTotals('read_model', table, prefix)).toEqual(await expectedTotals(prefix));
  }, 120_000);

  it('runs one active instance per projection; another takes over when its connection dies or it stops', async () => {
    const prefix = `ha-${randomUUID()}`;
    const table = 'ha_counters';
    const name = 'ha_counter';
    await createCounterTable('read_model', table);
    const pools = { a: createPool(db.url, { max: 4, applicationName: 'runtime-a' }), b: createPool(db.url, { max: 4, applicationName: 'runtime-b' }) };
    const applied = { a: 0, b: 0 };
    const runtimes = {
      a: new ProjectorRuntime({
        store,
        pool: pools.a,
        projections: [counterProjection({ name, table })],
        log,
        batchSize: 50,
        takeoverIntervalMs: 100,
        onCheckpoint: () => applied.a++,
      }),
      b: new ProjectorRuntime({
        store,
        pool: pools.b,
        projections: [counterProjection({ name, table })],
        log,
        batchSize: 50,
        takeoverIntervalMs: 100,
        onCheckpoint: () => applied.b++,
      }),
    };
    const holders = async () => {
      // The lease (docs/design.md "Segmented processors"): held while unexpired, by the follower connection it names.
      const { rows } = await pool.query<{ pid: number; application_name: string }>(
        `SELECT a.pid, a.application_name FROM read_model.projection_leases l JOIN pg_stat_activity a ON a.pid = l.backend_pid
          WHERE l.name = $1 AND l.expires_at > now()`,
        [name],
      );
      return rows;
    };
    try {
      runtimes.a.start();
      await eventually(async () => expect((await holders()).map((h) => h.application_name)).toEqual(['runtime-a']));
      runtimes.b.start();
      let head = await appendLog(prefix, 500);
      await waitForCheckpointIn('read_model', name, head);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(applied.a).toBeGreaterThan(0);
      expect(applied.b).toBe(0);
      const [holder] = await holders();
      expect(holder!.application_name).toBe('runtime-a');
      expect(await holders()).toHaveLength(1);

      // Its connection dies (no crash, no double application): an instance claims the lease again on a new connection.
      await pool.query('SELECT pg_terminate_backend($1)', [holder!.pid]);
      head = await appendLog(prefix, 500);
      await waitForCheckpointIn('read_model', name, head);
      const [next] = await holders();
      expect(next!.pid).not.toBe(holder!.pid);
      expect(await holders()).toHaveLength(1);
      expect(await actualTotals('read_model', table, prefix)).toEqual(await expectedTotals(prefix));

      // The active one stops: the other takes over.
      const active = next!.application_name === 'runtime-a' ? 'a' : 'b';
      const standby = active === 'a' ? 'b' : 'a';
      await runtimes[active].stop();
      const before = applied[standby];
      head = await appendLog(prefix, 500);
      await waitForCheckpointIn('read_model', name, head);
      expect(applied[standby]).toBeGreaterThan(before);
      expect((await holders()).map((h) => h.application_name)).toEqual([`runtime-${standby}`]);
      expect(applied.b).toBeGreaterThan(0);
      expect(await actualTotals('read_model', table, prefix)).toEqual(await expectedTotals(prefix));
    } finally {
      await runtimes.a.stop();
      await runtimes.b.stop();
      await pools.a.end();
      await pools.b.end();
    }
  });

  it('a catch-up racing a follower on the same schema never applies a batch twice', async () => {
    const prefix = `race-${randomUUID()}`;
    const table = 'race_counters';
    const name = 'race_counter';
    await createCounterTable('read_model', table);
    const worker = new ProjectorRuntime({ store, pool, projections: [counterProjection({ name, table })], log, batchSize: 20 });
    const catchUp = new ProjectorRuntime({ store, pool, projections: [counterProjection({ name, table })], log, batchSize: 20 });
    worker.start();
    try {
      let head: Position | null = null;
      for (let round = 0; round < 5; round++) {
        const appended = appendLog(prefix, 200, { streams: 5, perAppend: 20 });
        await Promise.all([appended, catchUp.catchUp(), catchUp.catchUp()]);
        head = await appended;
      }
      await waitForCheckpointIn('read_model', name, head!);
      await catchUp.catchUp();
      expect(await actualTotals('read_model', table, prefix)).toEqual(await expectedTotals(prefix));
    } finally {
      await worker.stop();
    }
  });

  it('catchUp with `until` stops at the first refused event, so a later catch-up has no hole', async () => {
    const prefix = `until-${randomUUID()}`;
    const table = 'until_counters';
    const schema = await freshSchema(table);
    const head = await store.headPosition();
    await appendLog(prefix, 100, { streams: 3, perAppend: 10 });
    const events = await eventually(async () => {
      const visible = (await store.readAll({ after: head, maxCount: 10_000 })).filter((e) => e.streamId.startsWith(prefix));
      expect(visible).toHaveLength(100);
      return visible;
    });
    const cut = events[40]!;
    const runtime = new ProjectorRuntime({ store, pool, projections: [counterProjection({ name: 'until_counter', table })], log, schema, batchSize: 1000 });
    // Refuses one event in the middle (as a time bound can, since recorded times are not in log order).
    await runtime.catchUp({ stopBefore: (e) => e.streamId.startsWith(prefix) && e.id === cut.id });
    expect(await readCheckpoint(pool, schema, 'until_counter')).toEqual(events[39]!.position);
    await runtime.catchUp();
    expect(await actualTotals(schema, table, prefix)).toEqual(await expectedTotals(prefix));
  });
});

describe('CheckpointWatcher', () => {
  it('waitForCheckpoint resolves once the projector passes a position, and times out otherwise', async () => {
    const prefix = `watch-${randomUUID()}`;
    const table = 'watch_counters';
    const name = 'watch_counter';
    await createCounterTable('read_model', table);
    const watcher = new CheckpointWatcher(pool, db.url, [name], 'read_model', 50);
    await watcher.start();
    // The runtime does not tell the watcher: it learns from the database, as another process would.
    const runtime = new ProjectorRuntime({ store, pool, projections: [counterProjection({ name, table })], log, batchSize: 100 });
    let second: ProjectorRuntime | null = null;
    try {
      runtime.start();
      const { position } = await store.appendToStream(`${prefix}-0`, [counted(7)]);
      await watcher.waitForCheckpoint(position, { timeoutMs: 30_000 });
      // Read-your-writes: the row is there.
      expect(await actualTotals('read_model', table, prefix)).toEqual(new Map([[`${prefix}-0`, { events: 1, total: 7 }]]));
      // Already passed: resolves at once.
      await watcher.waitForCheckpoint(position, { timeoutMs: 1 });

      await runtime.stop();
      const late = await store.appendToStream(`${prefix}-0`, [counted(8)]);
      const started = Date.now();
      const error = await rejectionOf(watcher.waitForCheckpoint(late.position, { timeoutMs: 300 }));
      expect(error).toBeInstanceOf(CheckpointTimeoutError);
      expect((error as Error).message).toContain(name);
      expect(Date.now() - started).toBeGreaterThanOrEqual(290);
      expect(Date.now() - started).toBeLessThan(3_000);

      // A waiter resolves when a projector comes back and passes the position.
      const waiting = watcher.waitForCheckpoint(late.position, { timeoutMs: 30_000 });
      second = new ProjectorRuntime({ store, pool, projections: [counterProjection({ name, table })], log });
      second.start();
      await waiting;
      expect(await actualTotals('read_model', table, prefix)).toEqual(new Map([[`${prefix}-0`, { events: 2, total: 15 }]]));
    } finally {
      await runtime.stop();
      await second?.stop();
      await watcher.stop();
    }
  });

  it('a batch of only foreign event types moves the checkpoint, told to other processes, without calling the projection', async () => {
    const prefix = `foreign-${randomUUID()}`;
    const table = 'foreign_counters';
    const name = 'foreign_counter';
    await createCounterTable('read_model', table);
    const watcher = new CheckpointWatcher(pool, db.url, [name], 'read_model', 1_000_000);
    await watcher.start();
    let writes = 0;
    const projection = counterProjection({ name, table, afterWrites: async () => void writes++ });
    const runtime = new ProjectorRuntime({ store, pool, projections: [projection], log, batchSize: 100 });
    try {
      runtime.start();
      const counted1 = await store.appendToStream(`${prefix}-0`, [counted(1)]);
      await watcher.waitForCheckpoint(counted1.position, { timeoutMs: 30_000 });
      // (The log holds earlier tests' events too: count batch transactions from here on.)
      expect(writes).toBeGreaterThan(0);
      writes = 0;
      // Only events the projection does not read: the checkpoint still reaches them (seen through
      // NOTIFY: the watcher's poll interval is far too long to be what wakes it), the projection is
      // not called, and the read model is untouched.
      const foreign = await store.appendToStream(`${prefix}-1`, [{ id: randomUUID(), type: 'Ignored', data: { n: 5 } }]);
      await watcher.waitForCheckpoint(foreign.position, { timeoutMs: 10_000 });
      expect(comparePositions(await readCheckpoint(pool, 'read_model', name), foreign.position)).toBe(0);
      expect(writes).toBe(0);
      expect(await actualTotals('read_model', table, prefix)).toEqual(new Map([[`${prefix}-0`, { events: 1, total: 1 }]]));
      // A later relevant batch still applies on top of the moved checkpoint.
      const counted2 = await store.appendToStream(`${prefix}-0`, [counted(2)]);
      await watcher.waitForCheckpoint(counted2.position, { timeoutMs: 30_000 });
      expect(await actualTotals('read_model', table, prefix)).toEqual(new Map([[`${prefix}-0`, { events: 2, total: 3 }]]));
    } finally {
      await runtime.stop();
      await watcher.stop();
    }
  });
});

interface Child {
  process: ChildProcess;
  lines: string[];
  exited: Promise<number | null>;
  waitForLine(text: string, timeoutMs?: number): Promise<void>;
}

const CHILD_SCRIPT = fileURLToPath(new URL('./projector-child.ts', import.meta.url));

function startChild(env: Record<string, string>): Child {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD_SCRIPT], {
    env: { ...process.env, DATABASE_URL: db.url, PROJECTION: 'kill_counter', TABLE: 'kill_counters', BATCH_SIZE: '200', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  let stderr = '';
  let buffered = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    const parts = buffered.split('\n');
    buffered = parts.pop()!;
    lines.push(...parts);
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    process: child,
    lines,
    exited,
    waitForLine(text, timeoutMs = 60_000) {
      return eventually(
        () => {
          if (child.exitCode !== null) throw new Error(`projector child exited (${child.exitCode}): ${stderr}`);
          expect(lines).toContain(text);
        },
        timeoutMs,
        10,
      );
    },
  };
}
