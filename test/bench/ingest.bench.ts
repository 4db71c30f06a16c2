/**
 * Fixed readers through Kafka (issue 11, "Measure"): one org with TAGS assets, each with an RFID
 * tag, parked in the fields of READERS readers (one capture point and location each); gateways
 * publish reader reports of READS_PER_MESSAGE reads, keyed by reader id, half in the canonical
 * shape and half in the CS463 reader's native one, to a Kafka-protocol broker (librdkafka's mock
 * cluster through kcat, as in the tests).
 *
 * The service runs as two processes of its own, as in production: a projector (`ROLES=projector`,
 * started first; it projects the seed too) and an ingest consumer (`ROLES=ingest`), so that the
 * CPU and the peak RSS of each can be read off /proc. Measured:
 * - sustained rate: SUSTAINED_READS reads published before the ingest process starts, then
 *   consumed, appended and projected; reads/s from the first read visible (a row of `scan_reads`,
 *   written in the same transaction as the report's `asset_locations`) to the last, next to a
 *   bare kafkajs consumer (no parsing) reading and discarding the same topic in the same run;
 * - publish→visible latency at an offered load of OFFERED reads/s for LATENCY_SECONDS: each
 *   message's first read is looked up by its read key until the projection has written it (the
 *   oldest WATCHED pending messages every 20 ms);
 * - event-store bytes per read over the sustained run (parked tags only);
 * - peak RSS (VmHWM) of the ingest process, and CPU per read of each process and of Postgres.
 *
 * Every read is unique and the run checks that each shows exactly once.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kafka, logLevel, type Producer } from 'kafkajs';
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
import { startPrivateKafkaBroker } from '../support/kafka-broker.js';
import { TICK_US, postgresCpuUs, postmasterOf, statFields } from './proc.js';
import { printStatements, resetStatements } from './statements.js';
import type { BenchContext, BenchRow } from './types.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TAGS = Number(process.env.BENCH_INGEST_TAGS ?? 2_000);
const READERS = Number(process.env.BENCH_INGEST_READERS ?? 20);
const READS_PER_MESSAGE = Number(process.env.BENCH_INGEST_READS_PER_MESSAGE ?? 20);
// librdkafka's mock broker drops the oldest messages of a long topic (4,800 of 5,000 of these were
// left once, 5,850 of 10,000 another time): the pre-filled topic stays at 3,000 messages.
const SUSTAINED_READS = Number(process.env.BENCH_INGEST_READS ?? 60_000);
const OFFERED = Number(process.env.BENCH_INGEST_OFFERED ?? 5_000);
const LATENCY_SECONDS = Number(process.env.BENCH_INGEST_LATENCY_SECONDS ?? 30);

const RATE_TARGET = 20_000;
const RATIO_TARGET = 0.5;
const P99_TARGET_MS = 1_000;
const BYTES_TARGET = 40;
const START_US = Date.UTC(2026, 0, 1) * 1000;
/** Pending messages looked up per poll of the latency run. */
const WATCHED = 100;

// ---------------------------------------------------------------------------------------------
// /proc accounting (Linux).

/** CPU time of one process (utime + stime), microseconds. */
function processCpuUs(pid: number): number {
  const f = statFields(pid);
  return (Number(f[11]) + Number(f[12])) * TICK_US;
}

/** Peak resident set (VmHWM) of a process, bytes. */
function peakRss(pid: number): number {
  const match = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) * 1024 : 0;
}

interface CpuSnapshot {
  ingest: number;
  projector: number;
  postgres: number;
  bench: number;
}

// ---------------------------------------------------------------------------------------------
// The service's processes.

interface ServiceProcess {
  child: ChildProcess;
  pid: number;
  stop(): Promise<void>;
}

function startRole(roles: string, env: Record<string, string>): Promise<ServiceProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'services/main.ts'], {
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

// ---------------------------------------------------------------------------------------------
// The world and its messages.

interface World {
  orgId: number;
  readers: string[];
  /** Tags parked in each reader's field. */
  tagsOf: string[][];
}

function epc(i: number): string {
  return `E28011606000020${i.toString(16).toUpperCase().padStart(9, '0')}`;
}

async function seed(url: string, log: (message: string) => void): Promise<World> {
  const config = loadConfig({ DATABASE_URL: url, LOG_LEVEL: 'silent', ROLES: 'ingest' });
  const ctx = await openContext(config, url, createLogger('silent'));
  try {
    const orgId = (await createOrg(ctx, 'Ingest bench')).id;
    log(`seeding ${READERS} readers with a location each and ${TAGS} tagged assets …`);
    const readers: string[] = [];
    for (let r = 0; r < READERS; r++) {
      const externalKey = `DOCK-${r}`;
      await createLocation(ctx, orgId, { externalKey, name: `Dock ${r}`, description: null, parent: null, isActive: true, validFrom: null, validTo: null, tags: [] });
      const reader = `reader-${r}`;
      await registerReader(ctx, orgId, reader);
      await assignScanPoint(ctx, { orgId, readerId: reader, capturePoint: `${reader}-ant1`, locationExternalKey: externalKey });
      readers.push(reader);
    }
    const tagsOf: string[][] = readers.map(() => []);
    for (let start = 0; start < TAGS; start += 20) {
      await Promise.all(
        Array.from({ length: Math.min(20, TAGS - start) }, (_, k) => {
          const i = start + k;
          tagsOf[i % READERS]!.push(epc(i));
          return createAsset(ctx, orgId, { name: `Asset ${i}`, external_key: `ING-${i}`, tags: [{ tag_type: 'rfid', value: epc(i) }] });
        }),
      );
    }
    return { orgId, readers, tagsOf };
  } finally {
    await closeContext(ctx);
  }
}

interface Message {
  key: string;
  value: string;
  /** The read key of its first read: visible once the projection has written it. */
  probe: string;
  reads: number;
}

/**
 * Reader reports in time order: reader `r`'s n-th message reads the next READS_PER_MESSAGE tags
 * of its field, round robin, each at its own microsecond.
 */
class Reports {
  private readonly next: number[];
  private readonly clock: number[];
  private count = 0;

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
    for (let k = 0; k < READS_PER_MESSAGE; k++) {
      this.clock[r]! += 1_000 + (k % 7);
      reads.push({ epc: tags[this.next[r]! % tags.length]!, us: this.clock[r]! });
      this.next[r]!++;
    }
    const first = reads[0]!;
    const source = { kind: 'reader', reader_id: reader } as ScanSource;
    const probe = readKey(this.world.orgId, source, { tag_type: 'rfid', value: first.epc, observedUs: first.us, rssi: null, capturePoint: point });
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
    return { key: reader, value: JSON.stringify(value), probe, reads: reads.length };
  }
}

/** RFC 3339 with microseconds. */
function isoMicros(us: number): string {
  const ms = Math.floor(us / 1000);
  return new Date(ms).toISOString().replace('Z', `${String(us % 1000).padStart(3, '0')}Z`);
}

async function publishAll(producer: Producer, topic: string, reports: Reports, reads: number): Promise<number> {
  let published = 0;
  while (published < reads) {
    const messages = [];
    for (let i = 0; i < 500 && published < reads; i++) {
      const m = reports.message();
      messages.push({ key: m.key, value: m.value });
      published += m.reads;
    }
    await producer.send({ topic, messages });
  }
  return published;
}

async function visibleReads(pool: pg.Pool, orgId: number): Promise<number> {
  return (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM read_model.scan_reads WHERE org_id = $1', [orgId])).rows[0]!.n;
}

async function storeBytes(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ bytes: string }>(
    `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::text AS bytes FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'event_store' AND c.relkind IN ('r', 'p')`,
  );
  return Number(rows[0]!.bytes);
}

/** A bare kafkajs consumer: reads the topic from the start and discards every message. */
async function bareConsumer(kafka: Kafka, topic: string, messages: number): Promise<{ seconds: number }> {
  const consumer = kafka.consumer({ groupId: `bare-${topic}`, maxWaitTimeInMs: 100 });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  let seen = 0;
  let first = 0;
  const seconds = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the bare consumer saw ${seen} of ${messages} messages in 120 s`)), 120_000);
    void consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        if (first === 0) first = performance.now();
        seen += batch.messages.length;
        if (seen >= messages) {
          clearTimeout(timer);
          resolve((performance.now() - first) / 1000);
        }
      },
    });
  });
  await consumer.disconnect();
  return { seconds };
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function run(bench: BenchContext): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  // Apache Kafka (a KRaft node from the jars Maven fetches; test/support/kafka-broker.ts), as the tests use.
  const kafkaBroker = await startPrivateKafkaBroker();
  const kafka = new Kafka({ clientId: 'bench-gateway', brokers: [kafkaBroker.brokers], logLevel: logLevel.NOTHING });
  const producer = kafka.producer({ allowAutoTopicCreation: true });
  await producer.connect();
  const postmaster = postmasterOf((await bench.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
  const env = { DATABASE_URL: bench.url, KAFKA_BROKERS: kafkaBroker.brokers };
  const projector = await startRole('projector', env);
  let ingest: ServiceProcess | null = null;
  try {
    const world = await seed(bench.url, bench.log);
    const reports = new Reports(world);
    const cpu = (): CpuSnapshot => {
      const own = process.cpuUsage();
      return { ingest: ingest ? processCpuUs(ingest.pid) : 0, projector: processCpuUs(projector.pid), postgres: postgresCpuUs(postmaster), bench: own.user + own.system };
    };

    // Sustained: a pre-filled topic, consumed from the start.
    const topic = 'scans.fixed.bench';
    bench.log(`publishing ${SUSTAINED_READS} reads in messages of ${READS_PER_MESSAGE} …`);
    const published = await publishAll(producer, topic, reports, SUSTAINED_READS);
    const messageCount = Math.ceil(published / READS_PER_MESSAGE);
    bench.log('bare kafkajs consumer …');
    const bare = await bareConsumer(kafka, topic, messageCount);
    bench.log(`  ${Math.round(published / bare.seconds)} reads/s (${bare.seconds.toFixed(1)} s)`);

    await resetStatements(bench.pool);
    const bytesBefore = await storeBytes(bench.pool);
    const before = await visibleReads(bench.pool, world.orgId);
    bench.log('ingest process: consume, append, project …');
    ingest = await startRole('ingest', { ...env, KAFKA_SCAN_TOPIC: topic, KAFKA_DLQ_TOPIC: `${topic}.dlq`, KAFKA_GROUP_ID: 'tracking-ingest-bench' });
    let firstAt = 0;
    let firstCount = 0;
    let cpuStart = cpu();
    const deadline = Date.now() + 15 * 60_000;
    let visible = before;
    while (visible - before < published) {
      if (Date.now() > deadline) throw new Error(`only ${visible - before} of ${published} reads visible after 15 minutes`);
      await sleep(firstAt === 0 ? 5 : 50);
      visible = await visibleReads(bench.pool, world.orgId);
      if (firstAt === 0 && visible > before) {
        firstAt = performance.now();
        firstCount = visible - before;
        cpuStart = cpu();
      }
    }
    const seconds = (performance.now() - firstAt) / 1000;
    const cpuEnd = cpu();
    const counted = published - firstCount;
    const rate = counted / seconds;
    const perRead = (key: keyof CpuSnapshot) => `${((cpuEnd[key] - cpuStart[key]) / counted).toFixed(1)}`;
    await printStatements(bench.pool, 'sustained');
    const cpuNote = `CPU/read: ingest ${perRead('ingest')} µs, projector ${perRead('projector')} µs, postgres ${perRead('postgres')} µs`;
    bench.log(`  ${Math.round(rate)} reads/s; ${cpuNote}`);
    rows.push({
      bench: 'ingest',
      case: `Kafka → visible, sustained (${READERS} readers, ${TAGS} tags, ${READS_PER_MESSAGE} reads/message; ${cpuNote})`,
      events: counted,
      seconds,
      baseline: { label: 'bare kafkajs consumer', events: published, seconds: bare.seconds },
      target: { label: `≥ ${RATE_TARGET.toLocaleString('en-US')} reads/s and ≥ ${RATIO_TARGET * 100}% of baseline`, met: rate >= RATE_TARGET && rate >= RATIO_TARGET * (published / bare.seconds) },
    });
    const bytes = (await storeBytes(bench.pool)) - bytesBefore;
    rows.push({
      bench: 'ingest',
      case: 'event-store bytes per read, tags parked in the readers’ fields',
      events: published,
      seconds: 1,
      quantity: `${(bytes / published).toFixed(1)} B/read`,
      target: { label: `≤ ${BYTES_TARGET} B/read`, met: bytes / published <= BYTES_TARGET },
    });

    // Latency at a fixed offered load, on the same topic (the consumer is caught up).
    bench.log(`offered load: ${OFFERED} reads/s for ${LATENCY_SECONDS} s …`);
    const perSecond = OFFERED / READS_PER_MESSAGE;
    const tickMs = 50;
    const perTick = perSecond * (tickMs / 1000);
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
        const keys = [...pending.keys()].slice(0, WATCHED);
        const { rows: seen } = await bench.pool.query<{ read_key: string }>('SELECT read_key FROM read_model.scan_reads WHERE org_id = $1 AND read_key = ANY($2::uuid[])', [world.orgId, keys]);
        const now = performance.now();
        for (const { read_key } of seen) {
          latencies.push(now - pending.get(read_key)!);
          pending.delete(read_key);
        }
      }
    })();
    const offeredStart = cpu();
    const startedAt = performance.now();
    let sent = 0;
    let owed = 0;
    let offeredReads = 0;
    while (performance.now() - startedAt < LATENCY_SECONDS * 1000) {
      owed += perTick;
      const batch: Message[] = [];
      while (owed >= 1) {
        batch.push(reports.message());
        owed -= 1;
      }
      if (batch.length > 0) {
        const at = performance.now();
        await producer.send({ topic, messages: batch.map((m) => ({ key: m.key, value: m.value })) });
        for (const m of batch) pending.set(m.probe, at);
        sent += batch.length;
        offeredReads += batch.reduce((n, m) => n + m.reads, 0);
      }
      const nextTick = startedAt + Math.ceil((performance.now() - startedAt + 1) / tickMs) * tickMs;
      await sleep(Math.max(0, nextTick - performance.now()));
    }
    const offeredSeconds = (performance.now() - startedAt) / 1000;
    stop = true;
    await Promise.race([watcher, sleep(60_000).then(() => Promise.reject(new Error(`${pending.size} messages never became visible`)))]);
    const offeredEnd = cpu();
    latencies.sort((a, b) => a - b);
    const p50 = quantile(latencies, 0.5);
    const p99 = quantile(latencies, 0.99);
    const rss = peakRss(ingest.pid);
    const offeredCpu = (key: keyof CpuSnapshot) => ((offeredEnd[key] - offeredStart[key]) / offeredSeconds / 1e6 * 100).toFixed(0);
    const loadNote = `CPU: ingest ${offeredCpu('ingest')}%, projector ${offeredCpu('projector')}%, postgres ${offeredCpu('postgres')}%, gateway ${offeredCpu('bench')}% of a core`;
    bench.log(`  p50 ${p50.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms over ${latencies.length} messages; ${loadNote}; ingest peak RSS ${(rss / 2 ** 20).toFixed(0)} MiB`);
    rows.push({
      bench: 'ingest',
      case: `publish → visible p50 at ${OFFERED.toLocaleString('en-US')} reads/s offered (${loadNote})`,
      events: sent,
      seconds: 1,
      quantity: `${p50.toFixed(0)} ms`,
    });
    rows.push({
      bench: 'ingest',
      case: `publish → visible p99 at ${OFFERED.toLocaleString('en-US')} reads/s offered (${Math.round(offeredReads / offeredSeconds)} reads/s sent)`,
      events: sent,
      seconds: 1,
      quantity: `${p99.toFixed(0)} ms`,
      target: { label: `< ${P99_TARGET_MS} ms`, met: p99 < P99_TARGET_MS },
    });
    rows.push({ bench: 'ingest', case: 'ingest process peak RSS (VmHWM) over both runs', events: 1, seconds: 1, quantity: `${(rss / 2 ** 20).toFixed(0)} MiB` });

    // Exactly once: every published read shows once.
    const total = await visibleReads(bench.pool, world.orgId);
    if (total - before !== published + offeredReads) throw new Error(`${total - before} reads visible, ${published + offeredReads} published`);
    return rows;
  } finally {
    await ingest?.stop();
    await projector.stop();
    await producer.disconnect();
    await kafkaBroker.stop();
  }
}
