/**
 * `npm run bench [-- [--quick] [--statements] name...]`: starts its own embedded Postgres with durable settings (fsync on, as
 * in production), applies the migrations, runs the bench modules (all, or only those named) and
 * prints one table. To add a bench, write `test/bench/<name>.bench.ts` exporting
 * `run(ctx): Promise<BenchRow[]>` and add it to `modules` below. Exits non-zero when a row
 * misses its target. `--statements` loads pg_stat_statements and prints, after each module, the
 * statements that took the most of the server's time (where a bench's Postgres time goes).
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres } from '../../shared/db/embedded.js';
import { applyAllMigrations } from '../../shared/db/migrate.js';
import { createPool } from '../../shared/db/pool.js';
import { printStatements } from './statements.js';
import type { BenchContext, BenchModule, BenchRow } from './types.js';

/** `named`: run only when named (`npm run bench -- kafka-clients`), not in a run of every module. */
const modules: Array<{ name: string; load: () => Promise<BenchModule>; named?: boolean }> = [
  { name: 'event-store', load: () => import('./event-store.bench.js') },
  { name: 'auth', load: () => import('./auth.bench.js') },
  { name: 'master-data', load: () => import('./master-data.bench.js') },
  { name: 'embedded-tags', load: () => import('./embedded-tags.bench.js') },
  { name: 'commands', load: () => import('./commands.bench.js') },
  { name: 'tracking', load: () => import('./tracking.bench.js') },
  { name: 'replay', load: () => import('./replay.bench.js') },
  { name: 'archive', load: () => import('./archive.bench.js') },
  { name: 'ingest', load: () => import('./ingest.bench.js') },
  { name: 'projectors', load: () => import('./projectors.bench.js') },
  { name: 'alerts', load: () => import('./alerts.bench.js') },
  { name: 'alerts-moves', load: () => import('./alerts-moves.bench.js') },
  { name: 'mqtt', load: () => import('./mqtt.bench.js') },
  { name: 'webhooks', load: () => import('./webhooks.bench.js') },
  { name: 'webhook-claim', load: () => import('./webhook-claim.bench.js') },
  { name: 'import', load: () => import('./import.bench.js') },
  { name: 'export', load: () => import('./export.bench.js') },
  { name: 'counts', load: () => import('./counts.bench.js') },
  // A comparison of two Kafka clients (issue 22) that restarts its own broker: minutes, and run when a client changes.
  { name: 'kafka-clients', load: () => import('./kafka-clients.bench.js'), named: true },
  // A year of scans (issue 25): 50 million reads generated into log and read models by default, tens of minutes.
  { name: 'scale', load: () => import('./scale.bench.js'), named: true },
];

function formatRate(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** A row's value: its rate, or the number its quantity starts with. */
function valueOf(r: BenchRow): number {
  if (r.quantity === undefined) return r.events / r.seconds;
  const match = /^(-?[\d.,]+)/.exec(r.quantity);
  return match ? Number(match[1]!.replace(/,/g, '')) : NaN;
}

function printTable(rows: BenchRow[]): void {
  const header = ['bench', 'case', 'count', 'seconds', 'per second', 'baseline per second', 'ratio', 'target', 'met'];
  const lines = rows.map((r) => [
    r.bench,
    r.case,
    String(r.events),
    r.quantity === undefined ? r.seconds.toFixed(2) : '',
    r.quantity ?? formatRate(r.events / r.seconds),
    r.baseline ? `${r.quantity === undefined ? formatRate(r.baseline.events / r.baseline.seconds) : (r.baseline.events / r.baseline.seconds).toFixed(1)} (${r.baseline.label})` : '',
    r.baseline ? `${((valueOf(r) / (r.baseline.events / r.baseline.seconds)) * 100).toFixed(0)}%` : '',
    r.target?.label ?? '',
    r.target ? (r.target.met ? 'yes' : 'NO') : '',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const format = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  console.log(format(header));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const line of lines) console.log(format(line));
}

/** A fresh, migrated database per module, so that no bench reads (or projects) another's data. */
async function moduleDatabase(serverUrl: string, name: string, statements: boolean): Promise<{ url: string; pool: pg.Pool }> {
  const database = `bench_${name.replace(/[^a-z0-9]/gi, '_').toLowerCase()}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(database)}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  const pool = createPool(url.toString(), { max: 20, applicationName: 'bench' });
  await applyAllMigrations(pool);
  if (statements) await pool.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements; SELECT pg_stat_statements_reset()');
  return { url: url.toString(), pool };
}

/**
 * `--quick`: every module at a small size (under three minutes in all on this 2-core machine),
 * for a check that the benchmarks run and roughly where they stand. Variables set by the caller win.
 */
const QUICK: Record<string, string> = {
  BENCH_AUTH_REQUESTS: '1000',
  BENCH_TAG_REQUESTS: '50',
  BENCH_ROUNDS: '1',
  BENCH_ROUND_SECONDS: '1',
  BENCH_READ_EVENTS: '20000',
  BENCH_ASSETS: '5000',
  BENCH_LOCATIONS: '1000',
  BENCH_READS: '50000',
  BENCH_SECONDS: '1',
  BENCH_WARMUP_SECONDS: '0.5',
  BENCH_CONNECTIONS: '8',
  BENCH_REPLAY_EVENTS: '20000',
  BENCH_ARCHIVE_READS: '40000',
  BENCH_INGEST_TAGS: '400',
  BENCH_INGEST_READS: '20000',
  BENCH_INGEST_OFFERED: '1000',
  BENCH_INGEST_LATENCY_SECONDS: '3',
  BENCH_KAFKA_STREAM_MESSAGES: '6000',
  BENCH_KAFKA_STREAM_RATE: '2000',
  BENCH_KAFKA_THROUGHPUT_MESSAGES: '20000',
  BENCH_KAFKA_RUNS: '1',
  BENCH_KAFKA_CORRUPT_SECONDS: '10',
  BENCH_WEBHOOK_SECONDS: '3',
  BENCH_WEBHOOK_BACKLOG: '2000',
  BENCH_SCALE_READS: '1000000',
  BENCH_SCALE_BASELINE_READS: '200000',
  BENCH_IMPORT_ROWS: '5000',
  BENCH_EXPORT_ROWS: '50000',
};

/** The results file (`bench-results.json` at the project root): one row per line of the table. */
interface ResultRow {
  name: string;
  workload: string;
  value: number;
  unit: string;
  baseline: number | null;
  ratio: number | null;
  target: string | null;
  pass: boolean | null;
}

function resultRow(r: BenchRow): ResultRow {
  const value = valueOf(r);
  let unit = 'per second';
  if (r.quantity !== undefined) {
    const match = /^(-?[\d.,]+)\s*(.*)$/.exec(r.quantity);
    unit = match ? match[2]! : r.quantity;
  }
  const baseline = r.baseline ? r.baseline.events / r.baseline.seconds : null;
  return {
    name: r.bench,
    workload: r.case,
    value: Number(value.toFixed(3)),
    unit,
    baseline: baseline === null ? null : Number(baseline.toFixed(3)),
    ratio: baseline === null ? null : Number((value / baseline).toFixed(3)),
    target: r.target?.label ?? null,
    pass: r.target ? r.target.met : null,
  };
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const quick = args.includes('--quick');
  if (quick) for (const [name, value] of Object.entries(QUICK)) process.env[name] ??= value;
  const statements = args.includes('--statements');
  const only = args.filter((a) => a !== '--quick' && a !== '--statements');
  const unknown = only.filter((name) => !modules.some((m) => m.name === name));
  if (unknown.length > 0) throw new Error(`no bench named ${unknown.join(', ')} (have: ${modules.map((m) => m.name).join(', ')})`);
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tracking-bench-'));
  const settings = statements ? ['shared_preload_libraries=pg_stat_statements', 'pg_stat_statements.track=all'] : [];
  const server = await startEmbeddedPostgres({ dataDir, database: 'bench', settings });
  const rows: BenchRow[] = [];
  try {
    for (const entry of modules) {
      if (only.length > 0 ? !only.includes(entry.name) : entry.named) continue;
      console.error(`running ${entry.name} …`);
      const { url, pool } = await moduleDatabase(server.url, entry.name, statements);
      try {
        const ctx: BenchContext = { url, pool, log: (message) => console.error(message) };
        const mod = await entry.load();
        rows.push(...(await mod.run(ctx)));
        if (statements) await printStatements(pool, entry.name);
      } finally {
        await pool.end();
      }
    }
  } finally {
    await server.stop();
    await fs.rm(dataDir, { recursive: true, force: true });
  }
  printTable(rows);
  const file = path.resolve(import.meta.dirname, '../../bench-results.json');
  await fs.writeFile(file, `${JSON.stringify({ quick, at: new Date().toISOString(), rows: rows.map(resultRow) }, null, 2)}\n`);
  console.error(`results written to bench-results.json${quick ? ' (--quick: small sizes)' : ''}`);
  if (rows.some((r) => r.target && !r.target.met)) process.exitCode = 1;
}

await main();
