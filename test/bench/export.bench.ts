/**
 * The export of a large list (docs/api.md "Export"): `GET /reports/asset-locations` with
 * `Accept: text/csv` over BENCH_EXPORT_ROWS report rows (1,000,000 by default), served by the api
 * role as a process of its own, against `COPY (<the same SELECT>) TO STDOUT (FORMAT csv)` of the
 * same rows through pg-copy-streams in the same run. Targets: at least 50,000 rows/s, at least 50 %
 * of COPY's rate, and the service process's resident memory (/proc/<pid>/status VmRSS, sampled
 * every 20 ms, and VmHWM) growing by less than 64 MiB over the download.
 *
 * Where the time goes: the CPU of the api process (/proc/<pid>/stat), of the Postgres server with
 * all its backends and of this client process, over the COPY and over the export, logged as seconds
 * and microseconds per row. The XLSX of the same rows is measured too (BENCH_EXPORT_XLSX=0 skips
 * it), without a target (docs/api.md "Export": the CSV is the fast form).
 *
 * The rows are seeded with SQL straight into the read model (assets, locations, asset_locations:
 * what the report reads), not through events and projections: the bench measures the export,
 * and generating a million assets' events would take most of its time.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { Readable, Writable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { pipeline } from 'node:stream/promises';
import pg from 'pg';
import copyStreams from 'pg-copy-streams';
import { loadConfig } from '../../shared/config.js';
import { createLogger } from '../../shared/logger.js';
import { startService } from '../../services/service.js';
import { reportExportQuery } from '../../projections/tracking/queries.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { seedReport } from '../export/support.js';
import { startRole } from './reader-load.js';
import { TICK_US, postgresCpuUs, postmasterOf, statFields } from './proc.js';
import type { BenchContext, BenchRow } from './types.js';

const ROWS = Number(process.env.BENCH_EXPORT_ROWS ?? 1_000_000);
const XLSX = process.env.BENCH_EXPORT_XLSX !== '0';
const MIB = 1024 * 1024;
const XLSX_TYPE = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';

/** CPU so far, microseconds: a process's (utime + stime), the Postgres server's, this process's. */
interface Cpu {
  service: number;
  postgres: number;
  client: number;
}

function cpuOf(servicePid: number | null, postmaster: number): Cpu {
  const own = process.cpuUsage();
  const f = servicePid === null ? null : statFields(servicePid);
  return {
    service: f ? (Number(f[11]) + Number(f[12])) * TICK_US : 0,
    postgres: postgresCpuUs(postmaster),
    client: own.user + own.system,
  };
}

/** The CPU spent between two readings, as a log line: seconds and microseconds per row of each. */
function cpuLine(label: string, before: Cpu, after: Cpu, rows: number, seconds: number): string {
  const part = (name: string, us: number) => `${name} ${(us / 1e6).toFixed(2)} s (${(us / rows).toFixed(1)} µs/row, ${((us / 1e6 / seconds) * 100).toFixed(0)} % of a core)`;
  return `${label} CPU over ${seconds.toFixed(2)} s: ${part('service', after.service - before.service)}; ${part('Postgres', after.postgres - before.postgres)}; ${part('client', after.client - before.client)}`;
}

/** VmRSS and VmHWM of a process, bytes. */
function memoryOf(pid: number): { rss: number; hwm: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kib('VmRSS'), hwm: kib('VmHWM') };
}

/** Counts bytes and line ends of a stream. */
function counter(): { sink: Writable; bytes: () => number; lines: () => number } {
  let bytes = 0;
  let lines = 0;
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      bytes += chunk.length;
      for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++;
      done();
    },
  });
  return { sink, bytes: () => bytes, lines: () => lines };
}

export async function run(bench: BenchContext): Promise<BenchRow[]> {
  const keyEncryptionKey = randomBytes(32).toString('base64');
  // The org and its key through the service's own commands (their projections must run): an
  // in-process service for the setup only, stopped before the measured api process starts.
  const config = loadConfig({
    DATABASE_URL: bench.url,
    PORT: '0',
    OPS_PORT: '0',
    INGEST_PORT: '0',
    LOG_LEVEL: 'silent',
    ROLES: 'api,projector',
    SIGNING_KEY_ENCRYPTION_KEY: keyEncryptionKey,
  });
  const setup = await startService(config, bench.url, createLogger('silent'));
  let orgId: number;
  let token: string;
  try {
    orgId = (await createOrg(setup.ctx, 'Export bench')).id;
    token = (await mintApiKey(setup.ctx, { orgId, scopes: ['tracking:read'] })).token;
  } finally {
    await setup.stop();
  }
  bench.log(`seeding ${ROWS.toLocaleString('en-US')} report rows with SQL into the read model …`);
  // On a connection of its own, without the pool's statement and read timeouts: a batch of the seed
  // may take longer than those on a loaded machine.
  const seeder = new pg.Client({ connectionString: bench.url });
  await seeder.connect();
  try {
    await seedReport(seeder, orgId, ROWS, { locations: 1000 });
  } finally {
    await seeder.end();
  }
  await bench.pool.query('VACUUM ANALYZE read_model.assets, read_model.asset_locations, read_model.locations');

  // The baseline: Postgres writing the same SELECT as CSV itself (the org is its only parameter).
  const statement = reportExportQuery(orgId, {});
  // The org inlined (COPY takes no parameters) and the read model's tables named with their schema.
  const select = statement.text.replace(/\$1\b/g, String(orgId)).replace(/\b(FROM|JOIN) (asset_locations|assets|locations)\b/g, '$1 read_model.$2');
  if (/\$\d/.test(select)) throw new Error('the report export takes more parameters than the org');
  const client = await bench.pool.connect();
  const postmaster = postmasterOf((await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
  let copy: { seconds: number; lines: number; bytes: number };
  try {
    const cpu = cpuOf(null, postmaster);
    const started = process.hrtime.bigint();
    const count = counter();
    await pipeline(client.query(copyStreams.to(`COPY (${select}) TO STDOUT WITH (FORMAT csv, HEADER)`)), count.sink);
    copy = { seconds: Number(process.hrtime.bigint() - started) / 1e9, lines: count.lines(), bytes: count.bytes() };
    bench.log(cpuLine('COPY', cpu, cpuOf(null, postmaster), ROWS, copy.seconds));
  } finally {
    client.release();
  }
  if (copy.lines !== ROWS + 1) throw new Error(`COPY wrote ${copy.lines} lines, not ${ROWS + 1}`);

  const service = await startRole('api', {
    DATABASE_URL: bench.url,
    SIGNING_KEY_ENCRYPTION_KEY: keyEncryptionKey,
    PG_POOL_SIZE: '10',
    RATE_LIMIT_PER_MINUTE: '100000000',
    RATE_LIMIT_BURST: '100000000',
  });
  try {
    const headers = { authorization: `Bearer ${token}`, accept: 'text/csv' };
    // Warm-up: a small export (one location's rows) loads and compiles the export's code.
    const warm = await fetch(`${service.api}/reports/asset-locations?location_external_key=SEED-LOC-00001`, { headers });
    await warm.arrayBuffer();
    const before = memoryOf(service.pid);
    let peak = before.rss;
    const sampler = setInterval(() => {
      peak = Math.max(peak, memoryOf(service.pid).rss);
    }, 20);
    const cpu = cpuOf(service.pid, postmaster);
    const started = process.hrtime.bigint();
    const response = await fetch(`${service.api}/reports/asset-locations`, { headers });
    if (response.status !== 200) throw new Error(`the export answered ${response.status}: ${await response.text()}`);
    const count = counter();
    await pipeline(Readable.fromWeb(response.body! as WebReadableStream<Uint8Array>), count.sink);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    bench.log(cpuLine('CSV export', cpu, cpuOf(service.pid, postmaster), ROWS, seconds));
    clearInterval(sampler);
    const after = memoryOf(service.pid);
    peak = Math.max(peak, after.rss, after.hwm > before.hwm ? after.hwm : 0);
    if (count.lines() !== ROWS + 1) throw new Error(`the export wrote ${count.lines()} lines, not ${ROWS + 1}`);
    const growth = peak - before.rss;
    const rate = ROWS / seconds;
    const copyRate = ROWS / copy.seconds;
    const size = `${ROWS.toLocaleString('en-US')} report rows`;
    bench.log(`export: ${seconds.toFixed(2)} s, ${(count.bytes() / MIB).toFixed(1)} MiB; COPY: ${copy.seconds.toFixed(2)} s, ${(copy.bytes / MIB).toFixed(1)} MiB; RSS ${(before.rss / MIB).toFixed(0)} → peak ${(peak / MIB).toFixed(0)} MiB`);
    const rows: BenchRow[] = [
      {
        bench: 'export',
        case: `GET /reports/asset-locations, Accept: text/csv, ${size} (api process, rows/s)`,
        events: ROWS,
        seconds,
        baseline: { label: 'COPY (same SELECT) TO STDOUT, pg-copy-streams', events: ROWS, seconds: copy.seconds },
        target: { label: '≥ 50,000 rows/s and ≥ 50 % of COPY', met: rate >= 50_000 && rate >= 0.5 * copyRate },
      },
      {
        bench: 'export',
        case: `the api process's RSS growth over that export (peak VmRSS/VmHWM less VmRSS before, ${(before.rss / MIB).toFixed(0)} MiB)`,
        events: ROWS,
        seconds,
        quantity: `${(growth / MIB).toFixed(1)} MiB`,
        target: { label: '< 64 MiB', met: growth < 64 * MIB },
      },
    ];
    if (XLSX) {
      const xlsxCpu = cpuOf(service.pid, postmaster);
      const xlsxStarted = process.hrtime.bigint();
      const xlsx = await fetch(`${service.api}/reports/asset-locations`, { headers: { ...headers, accept: XLSX_TYPE } });
      if (xlsx.status !== 200) throw new Error(`the XLSX export answered ${xlsx.status}: ${await xlsx.text()}`);
      const xlsxCount = counter();
      await pipeline(Readable.fromWeb(xlsx.body! as WebReadableStream<Uint8Array>), xlsxCount.sink);
      const xlsxSeconds = Number(process.hrtime.bigint() - xlsxStarted) / 1e9;
      bench.log(`XLSX export: ${xlsxSeconds.toFixed(2)} s, ${(xlsxCount.bytes() / MIB).toFixed(1)} MiB`);
      bench.log(cpuLine('XLSX export', xlsxCpu, cpuOf(service.pid, postmaster), ROWS, xlsxSeconds));
      rows.push({
        bench: 'export',
        case: `GET /reports/asset-locations, Accept: XLSX, ${size} (api process, rows/s; no target)`,
        events: ROWS,
        seconds: xlsxSeconds,
        baseline: { label: 'COPY (same SELECT) TO STDOUT, pg-copy-streams', events: ROWS, seconds: copy.seconds },
      });
    }
    return rows;
  } finally {
    await service.stop();
  }
}
