import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, type Pool } from '../../shared/db/pool.js';
import { comparePositions, type Position } from '../../shared/event-store/port.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { readCheckpoint } from '../../shared/projection/checkpoints.js';
import { eventually } from '../event-store/conformance.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { COUNTED, counterTableSql } from './counter-projection.js';

/**
 * Fencing (docs/design.md "Segmented processors"), with real processes: a projector paused
 * (SIGSTOP) inside a batch, past its lease, loses the projection to another process, which claims
 * it within the lease; resumed (SIGCONT), its batch's commit carries the old epoch and is refused:
 * it writes nothing, and the read model is the log's, every event once.
 */

const CHILD_SCRIPT = fileURLToPath(new URL('./projector-child.ts', import.meta.url));
const LEASE_MS = 1_500;
const NAME = 'fence_counter';
const TABLE = 'fence_counters';
let db: TestDatabase;
let pool: Pool;
let store: PostgresEventStore;

beforeAll(async () => {
  db = await createTestDatabase('projector_fencing');
  pool = createPool(db.url, { max: 5 });
  store = new PostgresEventStore(pool, db.url, { pollIntervalMs: 50 });
  await pool.query(counterTableSql('read_model', TABLE));
});

afterAll(async () => {
  await store?.close();
  await pool?.end();
  await db?.drop();
});

interface Child {
  process: ChildProcess;
  lines: string[];
  checkpoints(): number;
}

function startChild(env: Record<string, string>): Child {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD_SCRIPT], {
    env: { ...process.env, DATABASE_URL: db.url, PROJECTION: NAME, TABLE, BATCH_SIZE: '100', LEASE_MS: String(LEASE_MS), ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines: string[] = [];
  let buffered = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    const parts = buffered.split('\n');
    buffered = parts.pop()!;
    lines.push(...parts);
  });
  return { process: child, lines, checkpoints: () => lines.filter((l) => l.startsWith('checkpoint ')).length };
}

async function appendCounted(count: number): Promise<Position> {
  let last: Position | null = null;
  for (let done = 0; done < count; done += 50) {
    const events = Array.from({ length: Math.min(50, count - done) }, (_, i) => ({ id: randomUUID(), type: COUNTED, data: { n: done + i } }));
    last = (await store.appendToStream(`fence-${done % 500}`, events)).position;
  }
  return last!;
}

async function lease(): Promise<{ owner: string; epoch: number }> {
  const { rows } = await pool.query<{ owner: string; epoch: string }>(`SELECT owner, epoch::text FROM read_model.projection_leases WHERE name = $1`, [NAME]);
  return { owner: rows[0]!.owner, epoch: Number(rows[0]!.epoch) };
}

describe('fencing', () => {
  it('a projector paused past its lease is taken over, and once resumed its batch commits nothing', async () => {
    let head = await appendCounted(1_000);
    // A holds the projection; in its third batch it sleeps inside the transaction, and is paused there.
    const a = startChild({ SLEEP_AT_BATCH: '3', SLEEP_SECONDS: '5' });
    let b: Child | null = null;
    try {
      await eventually(() => expect(a.lines).toContain('holding'), 60_000, 10);
      a.process.kill('SIGSTOP');
      b = startChild({});
      const paused = Date.now();
      const before = await lease();
      expect(before.owner).toContain(`:${a.process.pid}:`);
      const committedByA = a.checkpoints();
      expect(committedByA).toBe(2);

      // B claims it once A's lease has run out (within the lease plus 5 s).
      const standby = b;
      await eventually(async () => expect((await lease()).owner).toContain(`:${standby.process.pid}:`), LEASE_MS + 5_000, 20);
      expect(Date.now() - paused).toBeLessThan(LEASE_MS + 5_000);
      expect((await lease()).epoch).toBeGreaterThan(before.epoch);

      // A goes on while its statement still runs: its batch reaches the checkpoint move with the old epoch.
      a.process.kill('SIGCONT');
      head = await appendCounted(500);
      await eventually(async () => expect(comparePositions(await readCheckpoint(pool, 'read_model', NAME), head)).toBe(0), 60_000, 50);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(a.checkpoints(), 'checkpoints A committed after it lost the lease').toBe(committedByA);
      expect(standby.checkpoints()).toBeGreaterThan(0);

      // Every event once: the counters are the log's.
      const { rows } = await pool.query<{ events: number; total: string }>(`SELECT sum(events)::int AS events, sum(total)::text AS total FROM read_model.${TABLE}`);
      const expected = await pool.query<{ events: number; total: string }>(
        `SELECT count(*)::int AS events, sum((data->>'n')::int)::text AS total FROM event_store.events WHERE type = $1`,
        [COUNTED],
      );
      expect(rows[0]).toEqual(expected.rows[0]);
    } finally {
      a.process.kill('SIGCONT');
      a.process.kill('SIGKILL');
      b?.process.kill('SIGKILL');
    }
  }, 180_000);
});
