import { Writable } from 'node:stream';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../shared/config.js';
import { startService, type RunningService } from '../../services/service.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY } from '../support/service.js';

// issue 15: when the database goes away for good, the process says so (a log line at error
// level) and /healthz answers 503 once it has been gone for DB_OUTAGE_UNHEALTHY_SECONDS, so a
// supervisor restarts it; it is healthy again when the database comes back. A short bound here.

const BOUND_SECONDS = 2;

let db: TestDatabase;
let service: RunningService;
const logs: Array<{ level: number; msg: string }> = [];

async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: inject('postgresAdminUrl') });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  db = await createTestDatabase('db_gone');
  const config = loadConfig({ PORT: '0', OPS_PORT: '0', INGEST_PORT: '0', DB_OUTAGE_UNHEALTHY_SECONDS: String(BOUND_SECONDS), SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY });
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) logs.push(JSON.parse(line) as { level: number; msg: string });
      done();
    },
  });
  service = await startService(config, db.url, pino({ level: 'info' }, sink));
});

afterAll(async () => {
  await admin((c) => c.query(`ALTER DATABASE ${pg.escapeIdentifier(db.name)} ALLOW_CONNECTIONS true`)).catch(() => undefined);
  await service?.stop();
  await db?.drop();
});

async function healthz(): Promise<{ status: number; body: { status: string; checks?: Record<string, string> } }> {
  const response = await fetch(`${service.urls.ops}/healthz`);
  return { status: response.status, body: (await response.json()) as { status: string; checks?: Record<string, string> } };
}

async function until<T>(probe: () => Promise<T>, done: (value: T) => boolean, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('database gone for good', () => {
  it('/healthz turns 503 after the bound with an error logged, and back to 200 when the database returns', async () => {
    expect((await healthz()).status).toBe(200);

    const name = pg.escapeIdentifier(db.name);
    await admin(async (c) => {
      await c.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
      await c.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [db.name]);
    });

    const unhealthy = await until(healthz, (h) => h.status === 503, 30_000);
    expect(unhealthy.status).toBe(503);
    expect(unhealthy.body).toEqual({ status: 'unhealthy', checks: { database: expect.stringMatching(/^unreachable for \d+ s$/) } });
    // Not before the bound: the outage counts from the database's last answer.
    expect(Number(/\d+/.exec(unhealthy.body.checks!.database!)![0])).toBeGreaterThanOrEqual(BOUND_SECONDS);
    expect(logs.some((l) => l.level === 40 && l.msg === 'database unreachable')).toBe(true);
    expect(logs.filter((l) => l.level === 50 && /^database unreachable for \d+ s: \/healthz answers 503/.test(l.msg))).toHaveLength(1);

    await admin((c) => c.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`));
    const healthy = await until(healthz, (h) => h.status === 200, 30_000);
    expect(healthy).toEqual({ status: 200, body: { status: 'ok' } });
    expect(logs.some((l) => l.level === 30 && l.msg === 'database reachable again')).toBe(true);
  });
});
