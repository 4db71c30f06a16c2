import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { closeContext, openContext } from '../../services/open-context.js';
import { loadConfig } from '../../shared/config.js';
import { createLogger } from '../../shared/logger.js';
import type { ServiceContext } from '../../shared/service-context.js';
import { createTestDatabase, type TestDatabase } from './database.js';
import { guardResponses, unguardResponses } from './openapi-guard.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY } from './service.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** One `services/main.ts` child process, as a deployment runs a role set. */
export interface ServiceProcess {
  child: ChildProcess;
  /** The listeners it printed when ready: `api`, `ingest`, `ops`. */
  urls: Record<string, string>;
  exited: Promise<number | null>;
  /** Everything it printed so far, stdout and stderr. */
  output(): string;
}

/**
 * Service processes of one test file on one database (`ROLES=api`, `ROLES=projector`, …), each
 * started as the README starts the service and ready once it prints so; every answer of their
 * public listeners is checked against the document each publishes (openapi-guard.ts).
 */
export class ServiceProcesses {
  private readonly running: ServiceProcess[] = [];

  constructor(
    private readonly databaseUrl: () => string,
    private readonly env: Record<string, string> = {},
  ) {}

  start(roles: string): Promise<ServiceProcess> {
    const child = spawn(process.execPath, ['--import', 'tsx', 'services/main.ts'], {
      cwd: ROOT,
      env: {
        ...process.env,
        ...this.env,
        DATABASE_URL: this.databaseUrl(),
        SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY,
        ROLES: roles,
        PORT: '0',
        OPS_PORT: '0',
        INGEST_PORT: '0',
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${roles} not ready in time:\n${out}`)), 120_000);
      void exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`${roles} exited with ${code}:\n${out}`));
      });
      child.stdout!.on('data', () => {
        if (!out.includes('tracking service ready')) return;
        clearTimeout(timer);
        const urls: Record<string, string> = {};
        for (const name of ['api', 'ingest', 'ops']) {
          const match = new RegExp(`${name}:\\s+(http://\\S+?)(?:/healthz)?(?:\\s|$)`).exec(out);
          if (match) urls[name] = match[1]!;
        }
        const started = { child, urls, exited, output: () => out };
        this.running.push(started);
        const listeners = [urls.api, urls.ingest].filter((u): u is string => u !== undefined);
        Promise.all(listeners.map((base) => guardResponses(base, new URL('/openapi/v1.json', base).href))).then(() => resolve(started), reject);
      });
    });
  }

  async stop(started: ServiceProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    for (const base of [started.urls.api, started.urls.ingest]) if (base) unguardResponses(base);
    if (started.child.exitCode === null && started.child.signalCode === null) started.child.kill(signal);
    await started.exited;
    this.running.splice(this.running.indexOf(started), 1);
  }

  /** Every process still running, killed outright (a test file's afterAll). */
  async stopAll(): Promise<void> {
    for (const started of [...this.running]) await this.stop(started, 'SIGKILL');
  }
}

/** What a test file of service processes works with: its database, a context on it, its processes. */
export interface ProcessWorld {
  db: TestDatabase;
  /** The domain on the file's database, for setting up (organizations, keys, people) and checking. */
  ctx: ServiceContext;
  processes: ServiceProcesses;
}

/**
 * A fresh database named `database` and a context on it, made before the file's tests; the
 * processes killed, the context closed and the database dropped after them. The fields are there
 * once the file's `beforeAll` has run (`processes` at once, started by the tests).
 */
export function processWorld(database: string, timeoutMs: number): ProcessWorld {
  const world = {} as ProcessWorld;
  world.processes = new ServiceProcesses(() => world.db.url);
  beforeAll(async () => {
    world.db = await createTestDatabase(database);
    world.ctx = await openContext(
      loadConfig({ DATABASE_URL: world.db.url, LOG_LEVEL: 'silent', ROLES: 'api', SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY }),
      world.db.url,
      createLogger('silent'),
    );
  }, timeoutMs);
  afterAll(async () => {
    await world.processes.stopAll();
    if (world.ctx) await closeContext(world.ctx);
    await world.db?.drop();
  }, timeoutMs);
  return world;
}
