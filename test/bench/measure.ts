/**
 * What the benches measure an HTTP case and its baseline with: CPU from /proc (Linux) of this
 * process and of the Postgres server with all its backends; the load generator (load.ts) in a
 * process of its own; the baseline as `connections` loops of the same work through pg, for the
 * same time after the same warm-up (BENCH_SECONDS, default 10; BENCH_WARMUP_SECONDS, default 3).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { Session } from 'node:inspector/promises';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import Fastify from 'fastify';
import type pg from 'pg';
import type { LoadResult, LoadSpec } from './load.js';
import { postgresCpuUs, postmasterOf } from './proc.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
/** When set, the benches write CPU profiles of their own process here (.cpuprofile). */
const PROFILE_DIR = process.env.BENCH_PROFILE_DIR;

export interface Cpu {
  /** This process (the service, and the bench driving it), microseconds. */
  nodeUs: number;
  /** The postmaster and every backend, including backends that exited meanwhile, microseconds. */
  pgUs: number;
}

export class CpuMeter {
  private constructor(private readonly postmaster: number) {}

  /** Null where /proc cannot tell (not Linux, or another host's Postgres). */
  static async open(pool: pg.Pool): Promise<CpuMeter | null> {
    try {
      const { rows } = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const meter = new CpuMeter(postmasterOf(rows[0]!.pid));
      meter.snapshot();
      return meter;
    } catch {
      return null;
    }
  }

  snapshot(): Cpu {
    const own = process.cpuUsage();
    return { nodeUs: own.user + own.system, pgUs: postgresCpuUs(this.postmaster) };
  }

  static since(before: Cpu, after: Cpu): Cpu {
    return { nodeUs: after.nodeUs - before.nodeUs, pgUs: after.pgUs - before.pgUs };
  }
}

/** CPU per unit (read, request) in microseconds, as a label part. */
export function cpuPer(cpu: Cpu | null, count: number, unit: string): string {
  if (!cpu || count === 0) return '';
  const f = (us: number) => (us >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${us.toFixed(1)} µs`);
  return `; CPU/${unit} node ${f(cpu.nodeUs / count)} + pg ${f(cpu.pgUs / count)}`;
}

export interface Measured {
  requests: number;
  seconds: number;
  p50: number;
  p99: number;
  cpu: Cpu | null;
}

const LOAD_SCRIPT = fileURLToPath(new URL('./load.ts', import.meta.url));

/** One autocannon run in its own process; CPU is taken from when its load starts to when it ends. */
export function runLoad(spec: LoadSpec, meter: CpuMeter | null): Promise<Measured> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', LOAD_SCRIPT, JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let before: Cpu | null = null;
    let cpu: Cpu | null = null;
    let result: LoadResult | null = null;
    readline.createInterface({ input: child.stdout }).on('line', (line) => {
      if (line === 'started') {
        before = meter?.snapshot() ?? null;
      } else {
        if (meter && before) cpu = CpuMeter.since(before, meter.snapshot());
        result = JSON.parse(line) as LoadResult;
      }
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0 || !result) return reject(new Error(`load generator exited with ${code}`));
      const r: LoadResult = result;
      if (r.non2xx > 0 || r.errors > 0) return reject(new Error(`${spec.method ?? 'GET'} ${spec.url}: ${r.non2xx} non-2xx, ${r.errors} errors`));
      resolve({ requests: r.requests, seconds: r.seconds, p50: r.p50, p99: r.p99, cpu });
    });
  });
}

export async function drive(spec: Omit<LoadSpec, 'seconds'>, meter: CpuMeter | null): Promise<Measured> {
  if (WARMUP_SECONDS > 0) await runLoad({ ...spec, seconds: WARMUP_SECONDS }, null);
  return runLoad({ ...spec, seconds: SECONDS }, meter);
}

/** The same statement as raw SQL through pg, `connections` loops for the same time (after the same warm-up). */
export async function driveSql(connections: number, query: () => Promise<unknown>, meter: CpuMeter | null): Promise<Measured> {
  if (WARMUP_SECONDS > 0) await loop(connections, WARMUP_SECONDS, query, null);
  return loop(connections, SECONDS, query, meter);
}

async function loop(connections: number, seconds: number, query: () => Promise<unknown>, meter: CpuMeter | null): Promise<Measured> {
  const latencies: number[] = [];
  const before = meter?.snapshot();
  const started = performance.now();
  const end = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        await query();
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  const cpu = meter && before ? CpuMeter.since(before, meter.snapshot()) : null;
  latencies.sort((a, b) => a - b);
  const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))]!;
  return { requests: latencies.length, seconds: elapsed, p50: at(0.5), p99: at(0.99), cpu };
}

export const ms = (n: number) => `${n.toFixed(1)} ms`;

/**
 * The HTTP floor of a read: a bare Fastify server in this process that answers every request
 * with the service's own response to `url` (fetched once, the same bytes), with nothing behind it.
 * Driven by the same load generator at the same concurrency, it measures what HTTP, the load
 * generator and the machine's scheduling cost without the service's work or Postgres's: the part
 * of a read's cost that no service answering over HTTP here can remove. `drive` gets the floor
 * server's url (same path and query); the server is closed after it.
 */
export async function onHttpFloor<T>(url: string, headers: Record<string, string>, drive: (floorUrl: string) => Promise<T>): Promise<T> {
  const response = await fetch(url, { headers });
  if (!response.ok) throw new Error(`GET ${url}: ${response.status}`);
  const contentType = response.headers.get('content-type') ?? 'application/json';
  const body = await response.text();
  const app = Fastify({ logger: false });
  app.get('/*', (_request, reply) => reply.type(contentType).send(body));
  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  const { pathname, search } = new URL(url);
  try {
    return await drive(`${address}${pathname}${search}`);
  } finally {
    await app.close();
  }
}

/** A read's HTTP floor with this module's load generator (`drive`). */
export function driveHttpFloor(spec: Omit<LoadSpec, 'seconds'>, meter: CpuMeter | null): Promise<Measured> {
  return onHttpFloor(spec.url, spec.headers ?? {}, (url) => drive({ ...spec, url }, meter));
}

/**
 * What a read could serve here if it cost exactly its raw statement plus the HTTP floor, each
 * measured alone on the same cores (both saturate them): 1 / (1/raw + 1/floor) requests a second,
 * and the label of a row that compares the service with it.
 */
function ceilingOf(raw: { requests: number; seconds: number }, floor: { requests: number; seconds: number }): number {
  return 1 / (raw.seconds / raw.requests + floor.seconds / floor.requests);
}

export function floorLabel(http: { requests: number; seconds: number }, raw: { requests: number; seconds: number }, floor: { requests: number; seconds: number }): string {
  const rate = (m: { requests: number; seconds: number }) => m.requests / m.seconds;
  const ceiling = ceilingOf(raw, floor);
  const pct = (n: number) => `${Math.round(n * 100)} %`;
  return `; HTTP floor ${Math.round(rate(floor))} req/s, raw + floor ${Math.round(ceiling)} req/s = ${pct(ceiling / rate(raw))} of raw SQL, service ${pct(rate(http) / ceiling)} of it`;
}

/** Starts the V8 sampling profiler of this process when BENCH_PROFILE_DIR is set; `stop` writes `<name>.cpuprofile` there. */
export async function startProfile(name: string): Promise<{ stop(): Promise<void> }> {
  if (!PROFILE_DIR) return { stop: async () => undefined };
  const dir = PROFILE_DIR;
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 250 });
  await session.post('Profiler.start');
  return {
    async stop() {
      const { profile } = await session.post('Profiler.stop');
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, `${name}.cpuprofile`), JSON.stringify(profile));
      session.disconnect();
    },
  };
}

/** Transactions committed on the server and, with pg_stat_statements loaded (`--statements`), statements run. */
export async function serverWork(pool: pg.Pool): Promise<{ xacts: number; statements: number | null }> {
  const { rows } = await pool.query<{ xacts: string }>('SELECT sum(xact_commit + xact_rollback)::text AS xacts FROM pg_stat_database');
  let statements: number | null = null;
  try {
    const result = await pool.query<{ calls: string }>('SELECT sum(calls)::text AS calls FROM public.pg_stat_statements');
    statements = Number(result.rows[0]!.calls);
  } catch {
    statements = null;
  }
  return { xacts: Number(rows[0]!.xacts), statements };
}

/** Transactions and statements per request between two serverWork readings (pg_stat_database lags by up to its stats interval: read after a pause). */
export function workPer(before: { xacts: number; statements: number | null }, after: { xacts: number; statements: number | null }, requests: number, unit = 'submission'): string {
  const xacts = (after.xacts - before.xacts) / requests;
  const statements = before.statements !== null && after.statements !== null ? `, ${((after.statements - before.statements) / requests).toFixed(1)} statements (those of functions included)` : '';
  return `; per ${unit} ${xacts.toFixed(1)} transactions${statements}`;
}
