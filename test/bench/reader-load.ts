import type { Producer } from 'kafkajs';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { openContext, closeContext } from '../../services/open-context.js';
import { loadConfig } from '../../shared/config.js';
import { createAsset } from '../../shared/domain/assets/commands.js';
import { createLocation } from '../../shared/domain/locations/commands.js';
import { createOrg } from '../../shared/domain/orgs-and-keys/commands.js';
import { assignScanPoint, registerReader } from '../../shared/domain/readers/commands.js';
import type { ScanSource } from '../../shared/domain/scans/events.js';
import { readKey } from '../../shared/domain/scans/read-codec.js';
import { createLogger } from '../../shared/logger.js';
import { TICK_US, postgresCpuUs, statFields } from './proc.js';
import type { BenchContext, BenchRow } from './types.js';

/**
 * What the fixed-reader benchmarks (ingest.bench.ts over Kafka, mqtt.bench.ts over MQTT) share:
 * the world (one org, TAGS tagged assets parked in the fields of READERS readers), the reader
 * reports gateways publish, the service run as two processes of its own, the baseline writer, and
 * the two measurements (sustained rate, latency at an offered load), so that both transports are
 * measured the same way.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export const LOAD = {
  tags: Number(process.env.BENCH_INGEST_TAGS ?? 2_000),
  readers: Number(process.env.BENCH_INGEST_READERS ?? 20),
  readsPerMessage: Number(process.env.BENCH_INGEST_READS_PER_MESSAGE ?? 20),
  /** Reads published before the consumer starts (the sustained run). */
  sustainedReads: Number(process.env.BENCH_INGEST_READS ?? 200_000),
  offered: Number(process.env.BENCH_INGEST_OFFERED ?? 5_000),
  latencySeconds: Number(process.env.BENCH_INGEST_LATENCY_SECONDS ?? 30),
};

/** Issue 22, item 6. */
export const TARGETS = { rate: 25_000, ratio: 0.5, p99Ms: 500, bytesPerRead: 40 };

const START_US = Date.UTC(2026, 0, 1) * 1000;
/** Pending messages looked up per poll of the latency run. */
const WATCHED = 100;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// /proc accounting (Linux).

/** CPU time of one process (utime + stime), microseconds. */
export function processCpuUs(pid: number): number {
  const f = statFields(pid);
  return (Number(f[11]) + Number(f[12])) * TICK_US;
}

/** Peak resident set (VmHWM) of a process, bytes. */
export function peakRss(pid: number): number {
  const match = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) * 1024 : 0;
}

/** A child of this process whose command name is `comm` (the broker a support helper started). */
export function childNamed(comm: string): number | null {
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (name === comm && Number(statFields(Number(entry))[1]) === process.pid) return Number(entry);
    } catch {
      // exited meanwhile
    }
  }
  return null;
}

const CPU_PARTS = ['ingest', 'projector', 'postgres', 'broker', 'bench'] as const;
type CpuPart = (typeof CPU_PARTS)[number];
export type CpuSnapshot = Record<CpuPart, number>;

/** CPU per read of each part between two snapshots, e.g. "ingest 14.2 µs, projector …" (parts that spent nothing left out). */
export function cpuPerRead(from: CpuSnapshot, to: CpuSnapshot, reads: number, names: Partial<Record<CpuPart, string>> = {}): string {
  return CPU_PARTS.filter((part) => to[part] > from[part])
    .map((part) => `${names[part] ?? part} ${((to[part] - from[part]) / reads).toFixed(1)} µs`)
    .join(', ');
}

/** Share of a core each part used between two snapshots, over `seconds`. */
export function cpuShare(from: CpuSnapshot, to: CpuSnapshot, seconds: number): string {
  return CPU_PARTS.filter((part) => to[part] > from[part])
    .map((part) => `${part === 'bench' ? 'gateway' : part} ${(((to[part] - from[part]) / seconds / 1e6) * 100).toFixed(0)}%`)
    .join(', ');
}

// ---------------------------------------------------------------------------------------------
// The service's processes.

export interface ServiceProcess {
  child: ChildProcess;
  pid: number;
  /** The ops listener, http://host:port. */
  ops: string;
  /** The public API's base URL (…/api/v1), when the process serves it. */
  api: string;
  stop(): Promise<void>;
}

/**
 * `services/main.ts` with these roles, as a process of its own; ready once it prints so.
 * `BENCH_CPU_PROF=<dir>` writes a V8 CPU profile of every ingest process into `<dir>` (of the roles named
 * in `BENCH_CPU_PROF_ROLES`, comma-separated, instead: `projector` for the projector).
 */
export function startRole(roles: string, env: Record<string, string>): Promise<ServiceProcess> {
  const profiled = (process.env.BENCH_CPU_PROF_ROLES ?? 'ingest').split(',').includes(roles);
  const profile = profiled && process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(process.env.BENCH_CPU_PROF)}`] : [];
  const child = spawn(process.execPath, [...profile, '--import', 'tsx', 'services/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, ROLES: roles, PORT: '0', OPS_PORT: '0', INGEST_PORT: '0', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => process.stderr.write(`[${roles}] ${chunk.toString()}`));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${roles} did not start in time:\n${output}`)), 120_000);
    child.stdout!.on('data', () => {
      if (!output.includes('tracking service ready')) return;
      clearTimeout(timer);
      resolve({
        child,
        pid: child.pid!,
        ops: /ops:\s+(http:\/\/[^/\s]+)/.exec(output)?.[1] ?? '',
        api: /api:\s+(http:\/\/\S+)/.exec(output)?.[1] ?? '',
        stop: () =>
          new Promise<void>((done) => {
            if (child.exitCode !== null) return done();
            child.once('exit', () => done());
            child.kill('SIGTERM');
          }),
      });
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${roles} exited with ${code}:\n${output}`));
    });
  });
}

/** Waits until the process's /readyz answers 200 (its consumer or subscriber is running). */
export async function ready(service: ServiceProcess, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = await fetch(`${service.ops}/readyz`).then((r) => r.status, () => 0);
    if (status === 200) return;
    if (Date.now() > deadline) throw new Error(`${service.ops}/readyz still answers ${status} after ${timeoutMs} ms`);
    await sleep(50);
  }
}

// ---------------------------------------------------------------------------------------------
// The world and its messages.

export interface World {
  orgId: number;
  readers: string[];
  /** Tags parked in each reader's field. */
  tagsOf: string[][];
}

function epc(i: number): string {
  return `E28011606000020${i.toString(16).toUpperCase().padStart(9, '0')}`;
}

export async function seed(url: string, log: (message: string) => void): Promise<World> {
  const config = loadConfig({ DATABASE_URL: url, LOG_LEVEL: 'silent', ROLES: 'ingest' });
  const ctx = await openContext(config, url, createLogger('silent'));
  try {
    const orgId = (await createOrg(ctx, 'Ingest bench')).id;
    log(`seeding ${LOAD.readers} readers with a location each and ${LOAD.tags} tagged assets …`);
    const readers: string[] = [];
    for (let r = 0; r < LOAD.readers; r++) {
      const externalKey = `DOCK-${r}`;
      await createLocation(ctx, orgId, { externalKey, name: `Dock ${r}`, description: null, parent: null, isActive: true, validFrom: null, validTo: null, tags: [] });
      const reader = `reader-${r}`;
      await registerReader(ctx, orgId, reader);
      await assignScanPoint(ctx, { orgId, readerId: reader, capturePoint: `${reader}-ant1`, locationExternalKey: externalKey });
      readers.push(reader);
    }
    const tagsOf: string[][] = readers.map(() => []);
    for (let start = 0; start < LOAD.tags; start += 20) {
      await Promise.all(
        Array.from({ length: Math.min(20, LOAD.tags - start) }, (_, k) => {
          const i = start + k;
          tagsOf[i % LOAD.readers]!.push(epc(i));
          return createAsset(ctx, orgId, { name: `Asset ${i}`, external_key: `ING-${i}`, tags: [{ tag_type: 'rfid', value: epc(i) }] });
        }),
      );
    }
    return { orgId, readers, tagsOf };
  } finally {
    await closeContext(ctx);
  }
}

export interface Message {
  /** The reader id (the Kafka key; the last level of the MQTT topic). */
  reader: string;
  value: string;
  /** The read key of its first read: visible once the projection has written it. */
  probe: string;
  /** The read key of its last read. */
  lastProbe: string;
  reads: number;
}

function keyOfRead(orgId: number, reader: string, point: string, epcValue: string, us: number): string {
  const source = { kind: 'reader', reader_id: reader } as ScanSource;
  return readKey(orgId, source, { tag_type: 'rfid', value: epcValue, observedUs: us, rssi: null, capturePoint: point });
}

/**
 * Reader reports in time order, half in the canonical shape and half in the CS463 reader's
 * native one: reader `r`'s n-th message reads the next readsPerMessage tags of its field, round
 * robin, each at its own microsecond. Every read is unique.
 */
export class Reports {
  private readonly next: number[];
  private readonly clock: number[];
  private count = 0;
  /** The last message of each reader so far. */
  readonly lastOf = new Map<string, Message>();

  constructor(private readonly world: World) {
    this.next = world.readers.map(() => 0);
    this.clock = world.readers.map(() => START_US);
  }

  message(): Message {
    const r = this.count++ % this.world.readers.length;
    const reader = this.world.readers[r]!;
    const tags = this.world.tagsOf[r]!;
    const point = `${reader}-ant1`;
    const reads: Array<{ epc: string; us: number }> = [];
    for (let k = 0; k < LOAD.readsPerMessage; k++) {
      this.clock[r]! += 1_000 + (k % 7);
      reads.push({ epc: tags[this.next[r]! % tags.length]!, us: this.clock[r]! });
      this.next[r]!++;
    }
    const [first, last] = [reads[0]!, reads[reads.length - 1]!];
    const value =
      this.count % 2 === 0
        ? {
            reader_id: reader,
            reads: reads.map((read) => ({ capture_point: point, tag_type: 'rfid', value: read.epc, observed_at: isoMicros(read.us), rssi: -61 })),
          }
        : {
            sequenceNumber: this.count,
            rfidReaderName: reader,
            numberOfTags: reads.length,
            tags: reads.map((read) => ({ epc: read.epc.toLowerCase(), timeStampOfRead: read.us, antennaPort: 1, capturePointName: point, rssi: '-61' })),
          };
    const message = {
      reader,
      value: JSON.stringify(value),
      probe: keyOfRead(this.world.orgId, reader, point, first.epc, first.us),
      lastProbe: keyOfRead(this.world.orgId, reader, point, last.epc, last.us),
      reads: reads.length,
    };
    this.lastOf.set(reader, message);
    return message;
  }
}

/** RFC 3339 with microseconds. */
function isoMicros(us: number): string {
  const ms = Math.floor(us / 1000);
  return new Date(ms).toISOString().replace('Z', `${String(us % 1000).padStart(3, '0')}Z`);
}

/** Microseconds of an RFC 3339 time as isoMicros writes it (UTC, six decimals). */
function microsOf(iso: string): number {
  return Date.parse(`${iso.slice(0, 23)}Z`) * 1000 + Number(iso.slice(23, 26));
}

// ---------------------------------------------------------------------------------------------
// The baseline: the same reads written the plain way.

/**
 * The physical limit of the same work, for a bare consumer of either transport: each message
 * parsed (either shape), each read keyed as the service keys it, and one multi-row INSERT per
 * batch into a table with the read key's unique index (ON CONFLICT DO NOTHING, so a batch
 * delivered again counts once), in the same Postgres. No tag lookup, no event, no projection.
 */
export class BaselineWriter {
  private firstAt = 0;
  private lastAt = 0;
  private firstReads = 0;
  private written = 0;

  private constructor(
    private readonly pool: pg.Pool,
    private readonly orgId: number,
  ) {}

  static async create(pool: pg.Pool, orgId: number): Promise<BaselineWriter> {
    await pool.query(`DROP TABLE IF EXISTS public.bench_baseline_reads;
      CREATE TABLE public.bench_baseline_reads (org_id integer NOT NULL, read_key uuid NOT NULL, observed_at timestamptz NOT NULL, PRIMARY KEY (org_id, read_key))`);
    return new BaselineWriter(pool, orgId);
  }

  /** One batch: parsed, keyed, inserted in one statement. */
  async write(payloads: ReadonlyArray<Buffer | string>): Promise<void> {
    const keys: string[] = [];
    const micros: number[] = [];
    for (const payload of payloads) {
      const body = JSON.parse(payload.toString()) as
        | { reader_id: string; reads: Array<{ capture_point: string; value: string; observed_at: string }> }
        | { rfidReaderName: string; tags: Array<{ epc: string; timeStampOfRead: number; capturePointName: string }> };
      if ('reads' in body) {
        for (const read of body.reads) {
          const us = microsOf(read.observed_at);
          keys.push(keyOfRead(this.orgId, body.reader_id, read.capture_point, read.value, us));
          micros.push(us);
        }
      } else {
        for (const tag of body.tags) {
          keys.push(keyOfRead(this.orgId, body.rfidReaderName, tag.capturePointName, tag.epc, tag.timeStampOfRead));
          micros.push(tag.timeStampOfRead);
        }
      }
    }
    await this.pool.query(
      `INSERT INTO public.bench_baseline_reads (org_id, read_key, observed_at)
       SELECT $1, k, to_timestamp(us / 1e6) FROM unnest($2::uuid[], $3::float8[]) AS r(k, us)
       ON CONFLICT DO NOTHING`,
      [this.orgId, keys, micros],
    );
    const now = performance.now();
    if (this.firstAt === 0) {
      this.firstAt = now;
      this.firstReads = keys.length;
    }
    this.lastAt = now;
    this.written += keys.length;
  }

  get reads(): number {
    return this.written;
  }

  /** Reads written after the first batch, and the seconds from the first batch's commit to the last's: as the pipeline is measured. */
  result(): { reads: number; seconds: number } {
    return { reads: this.written - this.firstReads, seconds: (this.lastAt - this.firstAt) / 1000 };
  }

  async rowCount(): Promise<number> {
    return (await this.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM public.bench_baseline_reads')).rows[0]!.n;
  }
}

// ---------------------------------------------------------------------------------------------
// Measurements.

export async function visibleReads(pool: pg.Pool, orgId: number): Promise<number> {
  return (await pool.query<{ n: number }>('SELECT ((SELECT coalesce(sum(reads), 0) FROM read_model.scan_read_chunks WHERE org_id = $1) + (SELECT coalesce(sum(count), 0) FROM read_model.unknown_reads WHERE org_id = $1))::int AS n', [orgId])).rows[0]!.n;
}

/**
 * The end of a run: every published read shows exactly once (or the run fails), and the ingest
 * process's peak RSS over both measurements.
 */
export async function closingRow(bench: BenchContext, name: string, orgId: number, visibleBefore: number, published: number, ingestPid: number): Promise<BenchRow> {
  const total = await visibleReads(bench.pool, orgId);
  if (total - visibleBefore !== published) throw new Error(`${total - visibleBefore} reads visible, ${published} published`);
  const rss = peakRss(ingestPid);
  return { bench: name, case: 'ingest process peak RSS (VmHWM) over both runs', events: 1, seconds: 1, quantity: `${(rss / 2 ** 20).toFixed(0)} MiB` };
}

/**
 * The keys of `keys` the tracking projection has recorded: one index probe each (LIMIT 1 in a
 * lateral), whatever the planner knows of scan_read_keys. As `read_key = ANY(…)` over the table,
 * planned on the statistics of a table that grows by thousands of rows a second, the probe was
 * a sequential scan of every partition: 56 ms a probe, 45 % of Postgres' time in the latency run,
 * which it then measured.
 */
async function visibleKeys(pool: pg.Pool, orgId: number, keys: string[]): Promise<string[]> {
  const { rows } = await pool.query<{ read_key: string }>(
    'SELECT k::text AS read_key FROM unnest($1::uuid[]) AS k CROSS JOIN LATERAL (SELECT 1 FROM read_model.scan_read_keys s WHERE s.read_key = k LIMIT 1) seen',
    [keys],
  );
  return rows.map((r) => r.read_key);
}

export async function storeBytes(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ bytes: string }>(
    `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::text AS bytes FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'event_store' AND c.relkind IN ('r', 'p')`,
  );
  return Number(rows[0]!.bytes);
}

/**
 * Waits for a backlog of `published` reads (published before the consumer started) to become
 * visible, and answers the rate from the first read visible to the last. The probe is cheap (an
 * index lookup of each reader's last read: a reader's reports are consumed and projected in
 * order), then one count checks that every read is there.
 */
export async function drainBacklog(
  pool: pg.Pool,
  world: World,
  before: number,
  published: number,
  lastProbes: string[],
  cpu: () => CpuSnapshot,
): Promise<{ reads: number; seconds: number; cpuStart: CpuSnapshot; cpuEnd: CpuSnapshot }> {
  const deadline = Date.now() + 15 * 60_000;
  let cpuStart = cpu();
  let firstCount = 0;
  for (;;) {
    if (Date.now() > deadline) throw new Error('no read visible after 15 minutes');
    await sleep(5);
    const n = await visibleReads(pool, world.orgId);
    if (n > before) {
      cpuStart = cpu();
      firstCount = n - before;
      break;
    }
  }
  const firstAt = performance.now();
  let waiting = [...lastProbes];
  while (waiting.length > 0) {
    if (Date.now() > deadline) throw new Error(`the last reads of ${waiting.length} readers not visible after 15 minutes`);
    await sleep(20);
    const seen = new Set(await visibleKeys(pool, world.orgId, waiting));
    waiting = waiting.filter((key) => !seen.has(key));
  }
  let lastAt = performance.now();
  let cpuEnd = cpu();
  for (let visible = await visibleReads(pool, world.orgId); visible - before < published; visible = await visibleReads(pool, world.orgId)) {
    if (Date.now() > deadline) throw new Error(`only ${visible - before} of ${published} reads visible after 15 minutes`);
    await sleep(20);
    lastAt = performance.now();
    cpuEnd = cpu();
  }
  return { reads: published - firstCount, seconds: (lastAt - firstAt) / 1000, cpuStart, cpuEnd };
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/**
 * Publish → visible latency at an offered load of LOAD.offered reads/s for LOAD.latencySeconds,
 * the consumer caught up: each message's first read is looked up by its read key until the
 * projection has written it (the oldest WATCHED pending messages every 20 ms). Answers the rows
 * (p50, p99) and the reads sent.
 */
export async function measureLatency(
  bench: BenchContext,
  name: string,
  transport: string,
  world: World,
  reports: Reports,
  send: (batch: Message[]) => Promise<void>,
  cpu: () => CpuSnapshot,
): Promise<{ rows: BenchRow[]; reads: number }> {
  bench.log(`offered load: ${LOAD.offered} reads/s for ${LOAD.latencySeconds} s …`);
  const perSecond = LOAD.offered / LOAD.readsPerMessage;
  const tickMs = 50;
  const pending = new Map<string, number>();
  const latencies: number[] = [];
  let stop = false;
  const watcher = (async () => {
    while (!stop || pending.size > 0) {
      await sleep(20);
      if (pending.size === 0) continue;
      // The oldest pending messages only (in publish order): a lookup of every pending key each
      // time would load Postgres more than the ingest does. A message newer than these that is
      // visible earlier is measured when it comes up: its latency can only be overstated.
      const seen = await visibleKeys(bench.pool, world.orgId, [...pending.keys()].slice(0, WATCHED));
      const now = performance.now();
      for (const key of seen) {
        latencies.push(now - pending.get(key)!);
        pending.delete(key);
      }
    }
  })();
  const cpuStart = cpu();
  const startedAt = performance.now();
  let sent = 0;
  let reads = 0;
  const sends: Array<Promise<void>> = [];
  while (performance.now() - startedAt < LOAD.latencySeconds * 1000) {
    // What is owed by the clock, not by the ticks run: a tick that wakes late (a loaded machine)
    // sends what the missed ticks would have.
    const owed = Math.floor(((performance.now() - startedAt) / 1000) * perSecond) - sent;
    const batch: Message[] = [];
    while (batch.length < owed) batch.push(reports.message());
    if (batch.length > 0) {
      const at = performance.now();
      for (const m of batch) pending.set(m.probe, at);
      // Not awaited: a broker slow to acknowledge must not lower the offered load.
      const sending = send(batch);
      sending.catch(() => undefined);
      sends.push(sending);
      sent += batch.length;
      reads += batch.reduce((n, m) => n + m.reads, 0);
    }
    const nextTick = startedAt + Math.ceil((performance.now() - startedAt + 1) / tickMs) * tickMs;
    await sleep(Math.max(0, nextTick - performance.now()));
  }
  const seconds = (performance.now() - startedAt) / 1000;
  await Promise.all(sends);
  stop = true;
  await Promise.race([watcher, sleep(60_000).then(() => Promise.reject(new Error(`${pending.size} messages never became visible`)))]);
  const cpuEnd = cpu();
  latencies.sort((a, b) => a - b);
  const p50 = quantile(latencies, 0.5);
  const p99 = quantile(latencies, 0.99);
  const loadNote = `CPU: ${cpuShare(cpuStart, cpuEnd, seconds)} of a core`;
  bench.log(`  p50 ${p50.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms over ${latencies.length} messages; ${loadNote}`);
  const offered = LOAD.offered.toLocaleString('en-US');
  return {
    reads,
    rows: [
      { bench: name, case: `${transport} publish → visible p50 at ${offered} reads/s offered (${loadNote})`, events: sent, seconds: 1, quantity: `${p50.toFixed(0)} ms` },
      {
        bench: name,
        case: `${transport} publish → visible p99 at ${offered} reads/s offered (${Math.round(reads / seconds)} reads/s sent)`,
        events: sent,
        seconds: 1,
        quantity: `${p99.toFixed(0)} ms`,
        target: { label: `< ${TARGETS.p99Ms} ms`, met: p99 < TARGETS.p99Ms },
      },
    ],
  };
}

/** The sustained row: the pipeline's rate next to the baseline's, with the CPU per read of each. */
export function sustainedRow(
  name: string,
  transport: string,
  pipeline: { reads: number; seconds: number; cpu: string },
  baseline: { label: string; reads: number; seconds: number; cpu: string },
): BenchRow {
  const rate = pipeline.reads / pipeline.seconds;
  const baselineRate = baseline.reads / baseline.seconds;
  return {
    bench: name,
    case: `${transport} → visible, sustained (${LOAD.readers} readers, ${LOAD.tags} tags, ${LOAD.readsPerMessage} reads/message; CPU/read: ${pipeline.cpu}; baseline CPU/read: ${baseline.cpu})`,
    events: pipeline.reads,
    seconds: pipeline.seconds,
    baseline: { label: baseline.label, events: baseline.reads, seconds: baseline.seconds },
    target: {
      label: `≥ ${TARGETS.rate.toLocaleString('en-US')} reads/s and ≥ ${TARGETS.ratio * 100}% of baseline`,
      met: rate >= TARGETS.rate && rate >= TARGETS.ratio * baselineRate,
    },
  };
}

export function bytesRow(name: string, bytes: number, reads: number): BenchRow {
  return {
    bench: name,
    case: 'event-store bytes per read, tags parked in the readers’ fields',
    events: reads,
    seconds: 1,
    quantity: `${(bytes / reads).toFixed(1)} B/read`,
    target: { label: `≤ ${TARGETS.bytesPerRead} B/read`, met: bytes / reads <= TARGETS.bytesPerRead },
  };
}

/** Postgres and this process (the gateway, or the bare consumer) in a CPU snapshot, with the service's processes and the broker. */
export function cpuSnapshot(parts: { ingest: () => number | null; projector: number | (() => number[]); postmaster: number; broker: number | null }): () => CpuSnapshot {
  const projectors = typeof parts.projector === 'number' ? [parts.projector] : null;
  return () => {
    const own = process.cpuUsage();
    const ingest = parts.ingest();
    return {
      ingest: ingest === null ? 0 : processCpuUs(ingest),
      // Several projector processes (projectors.bench.ts): their sum.
      projector: (projectors ?? (parts.projector as () => number[])()).reduce((sum, pid) => sum + processCpuUs(pid), 0),
      postgres: postgresCpuUs(parts.postmaster),
      broker: parts.broker === null ? 0 : processCpuUs(parts.broker),
      bench: own.user + own.system,
    };
  };
}

/** Publishes reader reports to a Kafka topic, 500 messages a send, until `reads` reads are out; the reads published. */
export async function publishReports(producer: Producer, topic: string, reports: Reports, reads: number): Promise<number> {
  let published = 0;
  while (published < reads) {
    const messages = [];
    for (let i = 0; i < 500 && published < reads; i++) {
      const m = reports.message();
      messages.push({ key: m.reader, value: m.value });
      published += m.reads;
    }
    await producer.send({ topic, messages });
  }
  return published;
}
