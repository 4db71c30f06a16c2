/**
 * The alerts subscriber under load (issue 35; docs/design.md "Alerts"): a world of 10 sites of 10
 * docks each (a reader per dock), BENCH_ALERTS_ASSETS tagged assets (default 2,000) and 100 rules
 * (`entered`, `left`, `dwell_exceeded`, `not_seen` on sites and docks, a fifth of them for a list
 * of 100 assets), the service as two processes of its own (`ingest` over a real Kafka broker, and
 * `projector`, which runs the tracking projection and the alerts subscriber side by side), and from
 * the rate run on a third (`webhooks`, which follows the alerts' outbox; no endpoint). Every
 * read is a move: an asset read at a dock other than its own.
 *
 * 1. Latency: BENCH_ALERTS_MOVES_PER_SECOND moves/s (default 1,000) for BENCH_ALERTS_SECONDS
 *    (default 30) offered through Kafka, and among them, every 100 ms, a probe asset read for the
 *    first time, into a zone of its own (PROBE) that one more `entered` rule watches; scan → alert visible is the
 *    time from the probe's publish to its alert's row in `read_model.alerts` (polled every 20 ms
 *    by the rule's index). Target: p99 < 1 s. Run in two reader shapes (SHAPES below): tiny reports
 *    every 50 ms, and reports of 10–20 reads, so that the cost per event of the first is seen apart.
 * 2. Rate: BENCH_ALERTS_READS more moves (default 200,000) published and projected; then, the
 *    projector stopped, `projections rebuild tracking` and `projections rebuild alerts` run one
 *    after the other as the CLI, alone, over the same log: reads/s of each (the whole command), and
 *    CPU per read of the CLI process and of Postgres. Target: alerts ≥ 50 % of tracking. The
 *    rebuilt alerts must equal the live ones (ids, status, times), or the run fails.
 *    BENCH_ALERTS_COMPARE=<dir>: also the alerts rebuild by another checkout's CLI, A B B A.
 */
import { Kafka, logLevel, type Producer } from 'kafkajs';
import { closeContext, openContext } from '../../services/open-context.js';
import { loadConfig } from '../../shared/config.js';
import { createAlertRule } from '../../shared/domain/alerts/commands.js';
import { createAsset } from '../../shared/domain/assets/commands.js';
import { createLocation } from '../../shared/domain/locations/commands.js';
import { createOrg } from '../../shared/domain/orgs-and-keys/commands.js';
import { assignScanPoint, registerReader } from '../../shared/domain/readers/commands.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import type { ScanSource } from '../../shared/domain/scans/events.js';
import { readKey } from '../../shared/domain/scans/read-codec.js';
import { createLogger } from '../../shared/logger.js';
import { projectionStatuses } from '../../shared/projection/status.js';
import { startPrivateKafkaBroker } from '../support/kafka-broker.js';
import { cliRebuild, type CliRebuild } from './cli-rebuild.js';
import { postmasterOf } from './proc.js';
import { childNamed, cpuShare, cpuSnapshot, sleep, startRole, visibleReads, type ServiceProcess } from './reader-load.js';
import type { BenchContext, BenchRow } from './types.js';

const NAME = 'alerts';
const SITES = 10;
const DOCKS_PER_SITE = 10;
const LOAD = {
  assets: Number(process.env.BENCH_ALERTS_ASSETS ?? 2_000),
  movesPerSecond: Number(process.env.BENCH_ALERTS_MOVES_PER_SECOND ?? 1_000),
  seconds: Number(process.env.BENCH_ALERTS_SECONDS ?? 30),
  reads: Number(process.env.BENCH_ALERTS_READS ?? 200_000),
};
/**
 * How the readers report in the latency run (BENCH_ALERTS_SHAPE; both, one after the other, when
 * unset): `ticks`, every 50 ms each reader that read something reports what it read (one or two
 * reads a report at 1,000 moves/s over 100 readers: the cost per event at its highest); `reports`,
 * each reader reports once it holds its report's size (drawn from 10 to 20) or a second after its
 * last report, whichever comes first: the fixed readers' real shape.
 */
type Shape = 'ticks' | 'reports';
const SHAPES: Shape[] = process.env.BENCH_ALERTS_SHAPE ? [process.env.BENCH_ALERTS_SHAPE as Shape] : ['ticks', 'reports'];
if (!SHAPES.every((shape) => shape === 'ticks' || shape === 'reports')) throw new Error(`BENCH_ALERTS_SHAPE: ticks or reports, not ${process.env.BENCH_ALERTS_SHAPE}`);
/** A probe asset for each 100 ms of each latency run: each is read once, into PROBE (a first sighting). */
const PROBES = SHAPES.length * (LOAD.seconds * 10 + 10);
const TARGETS = { p99Ms: 1_000, ratio: 0.5 };
const READS_PER_MESSAGE = 20;

interface World {
  orgId: number;
  /** Dock index → its reader. */
  docks: string[];
  tags: string[];
  probeTags: string[];
  probeRuleId: number;
}

const epc = (prefix: string, i: number) => `${prefix}${i.toString(16).toUpperCase().padStart(12, '0')}`;
const readerOf = (dock: number) => `reader-${Math.floor(dock / DOCKS_PER_SITE)}-${dock % DOCKS_PER_SITE}`;
const PROBE_READER = 'reader-probe';

async function seed(url: string, log: (message: string) => void): Promise<World> {
  const ctx = await openContext(loadConfig({ DATABASE_URL: url, LOG_LEVEL: 'silent', ROLES: 'ingest' }), url, createLogger('silent'));
  try {
    const orgId = (await createOrg(ctx, 'Alerts bench')).id;
    log(`seeding ${SITES} sites of ${DOCKS_PER_SITE} docks (a reader each), ${LOAD.assets} tagged assets and 100 rules …`);
    const place = async (key: string, parent: string | null, reader: string) => {
      await createLocation(ctx, orgId, {
        externalKey: key,
        name: key,
        description: null,
        parent: parent === null ? null : { field: 'parent_external_key', externalKey: parent },
        isActive: true,
        validFrom: null,
        validTo: null,
        tags: [],
      });
      await registerReader(ctx, orgId, reader);
      await assignScanPoint(ctx, { orgId, readerId: reader, capturePoint: `${reader}-ant1`, locationExternalKey: key });
    };
    const docks: string[] = [];
    for (let s = 0; s < SITES; s++) {
      await createLocation(ctx, orgId, { externalKey: `SITE-${s}`, name: `Site ${s}`, description: null, parent: null, isActive: true, validFrom: null, validTo: null, tags: [] });
      for (let d = 0; d < DOCKS_PER_SITE; d++) {
        const dock = s * DOCKS_PER_SITE + d;
        await place(`DOCK-${s}-${d}`, `SITE-${s}`, readerOf(dock));
        docks.push(readerOf(dock));
      }
    }
    await place('PROBE', null, PROBE_READER);
    const tags = Array.from({ length: LOAD.assets }, (_, i) => epc('E2801160', i));
    const probeTags = Array.from({ length: PROBES }, (_, i) => epc('E2809999', i));
    const ids: number[] = [];
    const all = [...tags.map((tag, i) => ({ tag, key: `AL-${i}` })), ...probeTags.map((tag, i) => ({ tag, key: `PROBE-${i}` }))];
    for (let start = 0; start < all.length; start += 20) {
      ids.push(
        ...(await Promise.all(
          all.slice(start, start + 20).map(({ tag, key }) => createAsset(ctx, orgId, { name: key, external_key: key, tags: [{ tag_type: 'rfid', value: tag }] })),
        )),
      );
    }
    // 99 rules on the sites and docks, every kind; a fifth of them for 100 assets only.
    const kinds = ['entered', 'left', 'dwell_exceeded', 'not_seen'] as const;
    for (let i = 0; i < 99; i++) {
      const kind = kinds[i % kinds.length]!;
      const zone = i < 40 ? `SITE-${i % SITES}` : `DOCK-${i % SITES}-${Math.floor(i / SITES) % DOCKS_PER_SITE}`;
      await createAlertRule(ctx, orgId, {
        name: `Rule ${i}`,
        kind,
        zone: { field: 'location_external_key', externalKey: zone },
        threshold_seconds: kind === 'dwell_exceeded' || kind === 'not_seen' ? 3_600 : null,
        asset_ids: i % 5 === 0 ? ids.slice((i * 100) % (LOAD.assets - 100), ((i * 100) % (LOAD.assets - 100)) + 100) : null,
        is_active: true,
      });
    }
    const probeRuleId = await createAlertRule(ctx, orgId, {
      name: 'Probe',
      kind: 'entered',
      zone: { field: 'location_external_key', externalKey: 'PROBE' },
      threshold_seconds: null,
      asset_ids: null,
      is_active: true,
    });
    return { orgId, docks, tags, probeTags, probeRuleId };
  } finally {
    await closeContext(ctx);
  }
}

/** One read: a tag seen by a reader at an observed time (µs). */
interface Read {
  reader: string;
  tag: string;
  us: number;
}

/** Moves: each read names an asset at a dock other than the one it was last read at. */
class Moves {
  private readonly at: number[];
  private lastUs = 0;

  constructor(private readonly world: World) {
    this.at = world.tags.map((_, i) => i % world.docks.length);
  }

  /** An observed time after every one given so far: now, or a microsecond later. */
  nowUs(): number {
    this.lastUs = Math.max(this.lastUs + 1, Date.now() * 1000);
    return this.lastUs;
  }

  next(): Read {
    const i = Math.floor(Math.random() * this.world.tags.length);
    const step = 1 + Math.floor(Math.random() * (this.world.docks.length - 1));
    this.at[i] = (this.at[i]! + step) % this.world.docks.length;
    return { reader: this.world.docks[this.at[i]!]!, tag: this.world.tags[i]!, us: this.nowUs() };
  }

  /** Every asset read where it starts. */
  placements(): Read[] {
    return this.world.tags.map((tag, i) => ({ reader: this.world.docks[this.at[i]!]!, tag, us: this.nowUs() }));
  }
}

/** The read key the service gives a probe read (the key the tracking read model keeps). */
function probeReadKey(orgId: number, read: Read): string {
  const source = { kind: 'reader', reader_id: read.reader } as ScanSource;
  return readKey(orgId, source, { tag_type: 'rfid', value: read.tag, observedUs: read.us, rssi: null, capturePoint: `${read.reader}-ant1` });
}

function isoMicros(us: number): string {
  return new Date(Math.floor(us / 1000)).toISOString().replace('Z', `${String(us % 1000).padStart(3, '0')}Z`);
}

/** Reader reports (the canonical shape), up to READS_PER_MESSAGE reads each, in the reads' order per reader. */
function messagesOf(reads: Read[]): Array<{ key: string; value: string }> {
  const byReader = new Map<string, Read[]>();
  for (const read of reads) {
    const list = byReader.get(read.reader) ?? [];
    list.push(read);
    byReader.set(read.reader, list);
  }
  const messages: Array<{ key: string; value: string }> = [];
  for (const [reader, list] of byReader) {
    for (let start = 0; start < list.length; start += READS_PER_MESSAGE) {
      const value = {
        reader_id: reader,
        reads: list
          .slice(start, start + READS_PER_MESSAGE)
          .map((r) => ({ capture_point: `${reader}-ant1`, tag_type: 'rfid', value: r.tag, observed_at: isoMicros(r.us), rssi: -60 })),
      };
      messages.push({ key: reader, value: JSON.stringify(value) });
    }
  }
  return messages;
}

async function publish(producer: Producer, topic: string, reads: Read[]): Promise<void> {
  // 2,000 reads a send: a produce request under the broker's 1 MB.
  for (let start = 0; start < reads.length; start += 2_000) {
    await producer.send({ topic, messages: messagesOf(reads.slice(start, start + 2_000)) });
  }
}

/** Waits until `reads` more reads than `before` are visible in the tracking read model. */
async function waitVisible(bench: BenchContext, orgId: number, target: number): Promise<void> {
  const deadline = Date.now() + 15 * 60_000;
  for (let n = await visibleReads(bench.pool, orgId); n < target; n = await visibleReads(bench.pool, orgId)) {
    if (Date.now() > deadline) throw new Error(`${n} of ${target} reads visible after 15 minutes`);
    await sleep(100);
  }
}

/** Waits until `name` (one segment: PROJECTION_SEGMENTS is 1 here) has followed the log to its head. */
async function caughtUp(bench: BenchContext, store: PostgresEventStore, name: string): Promise<void> {
  const deadline = Date.now() + 15 * 60_000;
  for (;;) {
    const [status] = await projectionStatuses(store, bench.pool, [name], { countLimit: 1 });
    if (status!.lag_events === 0) return;
    if (Date.now() > deadline) throw new Error(`${name} not caught up after 15 minutes`);
    await sleep(100);
  }
}

/** Until the webhooks role's cursor has passed every row of the alerts' outbox. */
async function outboxFollowed(bench: BenchContext): Promise<void> {
  const deadline = Date.now() + 15 * 60_000;
  for (;;) {
    const { rows } = await bench.pool.query<{ followed: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM service.webhook_alert_cursor) AND NOT EXISTS (
                SELECT 1 FROM read_model.alert_outbox a, service.webhook_alert_cursor c
                 WHERE (a.position_commit, a.position_prepare, a.org_id, a.alert_id, a.change) > (c.position_commit, c.position_prepare, c.org_id, c.alert_id, c.change)) AS followed`,
    );
    if (rows[0]!.followed) return;
    if (Date.now() > deadline) throw new Error('the webhooks role did not follow the alerts outbox in 15 minutes');
    await sleep(200);
  }
}

async function alertsDigest(bench: BenchContext, orgId: number): Promise<{ count: number; digest: string }> {
  const { rows } = await bench.pool.query<{ count: number; digest: string }>(
    `SELECT count(*)::int AS count, coalesce(md5(string_agg(alert_id || status || raised_at_rfc3339 || coalesce(resolved_at_rfc3339, ''), ',' ORDER BY alert_id)), '') AS digest
       FROM read_model.alerts WHERE org_id = $1`,
    [orgId],
  );
  return rows[0]!;
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** The `reports` shape: each reader's reads held until it reports (10 to 20 of them, or a second after its last report). */
class HeldReports {
  private readonly held = new Map<string, { reads: Read[]; size: number; lastMs: number }>();

  add(read: Read, nowMs: number): void {
    let reader = this.held.get(read.reader);
    if (!reader) this.held.set(read.reader, (reader = { reads: [], size: HeldReports.size(), lastMs: nowMs }));
    reader.reads.push(read);
  }

  /** The reads of every reader whose report is due (all of them when `all`), one report each. */
  due(nowMs: number, all = false): Read[][] {
    const reports: Read[][] = [];
    for (const reader of this.held.values()) {
      if (reader.reads.length === 0 || (!all && reader.reads.length < reader.size && nowMs - reader.lastMs < 1_000)) continue;
      reports.push(reader.reads.splice(0, reader.size));
      reader.size = HeldReports.size();
      reader.lastMs = nowMs;
    }
    return reports;
  }

  private static size(): number {
    return 10 + Math.floor(Math.random() * 11);
  }
}

/** The probes handed out so far (each latency run takes the next ones). */
const probesUsed = { n: 0 };

/**
 * Phase 1: moves at the offered rate, probes every 100 ms, scan → alert visible of each probe
 * (from the publish of the report that carries it: a read held by its reader waits in the reader,
 * not in the service).
 */
async function latency(
  bench: BenchContext,
  store: PostgresEventStore,
  world: World,
  moves: Moves,
  producer: Producer,
  topic: string,
  shape: Shape,
): Promise<{ latencies: number[]; readLatencies: number[]; moves: number; seconds: number; reports: number; reads: number }> {
  const pending = new Map<string, number>();
  const latencies: number[] = [];
  // The same probe reads visible in the tracking read model (by read key): the baseline.
  const pendingReads = new Map<string, number>();
  const readLatencies: number[] = [];
  let stop = false;
  let oldestUs = Number.MAX_SAFE_INTEGER;
  const watcher = (async () => {
    while (!stop || pending.size > 0 || pendingReads.size > 0) {
      await sleep(20);
      if (pending.size + pendingReads.size === 0) continue;
      const { rows } = await bench.pool.query<{ asset: string; us: string }>(
        `SELECT a.external_key AS asset, (extract(epoch FROM al.raised_at) * 1000000)::bigint::text AS us
           FROM read_model.alerts al JOIN read_model.assets a ON a.org_id = al.org_id AND a.id = al.asset_id
          WHERE al.org_id = $1 AND al.rule_id = $2 AND al.raised_at >= to_timestamp($3::double precision / 1000000)`,
        [world.orgId, world.probeRuleId, oldestUs],
      );
      const now = performance.now();
      for (const row of rows) {
        const key = `${row.asset}@${row.us}`;
        const sentAt = pending.get(key);
        if (sentAt === undefined) continue;
        latencies.push(now - sentAt);
        pending.delete(key);
      }
      oldestUs = Math.min(...[...pending.keys()].map((k) => Number(k.split('@')[1])), Number.MAX_SAFE_INTEGER);
      if (pendingReads.size === 0) continue;
      const seen = await bench.pool.query<{ read_key: string }>('SELECT DISTINCT read_key FROM read_model.scan_read_keys WHERE read_key = ANY($1::uuid[])', [[...pendingReads.keys()]]);
      const seenAt = performance.now();
      for (const { read_key } of seen.rows) {
        readLatencies.push(seenAt - pendingReads.get(read_key)!);
        pendingReads.delete(read_key);
      }
    }
  })();
  const tickMs = 50;
  const startedAt = performance.now();
  let sent = 0;
  let tick = 0;
  let reports = 0;
  let published = 0;
  const probesEnd = probesUsed.n + LOAD.seconds * 10 + 10;
  const probeNames = new Map<Read, string>();
  const held = new HeldReports();
  const sends: Array<Promise<unknown>> = [];
  const send = (batch: Read[][]) => {
    const messages = batch.flatMap((reads) => messagesOf(reads));
    if (messages.length === 0) return;
    const now = performance.now();
    for (const read of batch.flat()) {
      const name = probeNames.get(read);
      if (name === undefined) continue;
      if (oldestUs === Number.MAX_SAFE_INTEGER) oldestUs = read.us;
      pending.set(`${name}@${read.us}`, now);
      pendingReads.set(probeReadKey(world.orgId, read), now);
    }
    reports += messages.length;
    published += batch.reduce((n, reads) => n + reads.length, 0);
    // Not awaited: a broker slow to acknowledge must not lower the offered load.
    const sending = producer.send({ topic, messages });
    sending.catch(() => undefined);
    sends.push(sending);
  };
  while (performance.now() - startedAt < LOAD.seconds * 1000) {
    const owed = Math.floor(((performance.now() - startedAt) / 1000) * LOAD.movesPerSecond) - sent;
    const reads: Read[] = [];
    for (let k = 0; k < owed; k++) reads.push(moves.next());
    sent += reads.length;
    // Every other tick (100 ms), a probe asset never read before is read at PROBE: its first
    // sighting, an `entered` alert of the probe rule whatever else the log holds.
    if (tick % 2 === 0 && probesUsed.n < probesEnd) {
      const read = { reader: PROBE_READER, tag: world.probeTags[probesUsed.n]!, us: moves.nowUs() };
      reads.push(read);
      probeNames.set(read, `PROBE-${probesUsed.n}`);
      probesUsed.n++;
    }
    tick++;
    if (shape === 'ticks') {
      send([reads]);
    } else {
      for (const read of reads) held.add(read, performance.now());
      send(held.due(performance.now()));
    }
    const nextTick = startedAt + Math.ceil((performance.now() - startedAt + 1) / tickMs) * tickMs;
    await sleep(Math.max(0, nextTick - performance.now()));
  }
  const seconds = (performance.now() - startedAt) / 1000;
  send(held.due(performance.now(), true));
  await Promise.all(sends);
  stop = true;
  await Promise.race([
    watcher,
    sleep(120_000).then(async () => {
      const statuses = await projectionStatuses(store, bench.pool, ['tracking', 'alerts'], { countLimit: 100_000 });
      const lags = statuses.map((s) => `${s.name} ${s.lag_events} events behind`).join(', ');
      throw new Error(`${pending.size} probe alerts never became visible (${lags}): ${[...pending.keys()].slice(0, 5).join(', ')}`);
    }),
  ]);
  return { latencies: latencies.sort((a, b) => a - b), readLatencies: readLatencies.sort((a, b) => a - b), moves: sent, seconds, reports, reads: published };
}

export async function run(bench: BenchContext): Promise<BenchRow[]> {
  const kafkaBroker = await startPrivateKafkaBroker();
  const kafka = new Kafka({ clientId: 'bench-gateway', brokers: [kafkaBroker.brokers], logLevel: logLevel.NOTHING });
  // One partition, as one gateway of a site publishes: the moves reach the service in the order read.
  const topic = 'scans.fixed.alerts';
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ waitForLeaders: true, topics: [topic, `${topic}.dlq`].map((t) => ({ topic: t, numPartitions: 1, replicationFactor: 1 })) });
  await admin.disconnect();
  const producer = kafka.producer();
  await producer.connect();
  const postmaster = postmasterOf((await bench.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
  const store = new PostgresEventStore(bench.pool, bench.url);
  const env = { DATABASE_URL: bench.url, KAFKA_BROKERS: kafkaBroker.brokers };
  let projector: ServiceProcess | null = null;
  let ingest: ServiceProcess | null = null;
  let webhooks: ServiceProcess | null = null;
  const rows: BenchRow[] = [];
  try {
    // The seed's commands wait for the projections: the projector runs first.
    projector = await startRole('projector', env);
    const world = await seed(bench.url, bench.log);
    ingest = await startRole('ingest', { ...env, KAFKA_SCAN_TOPIC: topic, KAFKA_DLQ_TOPIC: `${topic}.dlq`, KAFKA_GROUP_ID: 'alerts-bench' });
    const moves = new Moves(world);
    const placements = moves.placements();
    await publish(producer, topic, placements);
    await waitVisible(bench, world.orgId, placements.length);
    await caughtUp(bench, store, 'alerts');

    const cpu = cpuSnapshot({ ingest: () => ingest?.pid ?? null, projector: () => (projector ? [projector.pid] : []), postmaster, broker: childNamed('java') });
    for (const shape of SHAPES) {
      bench.log(`latency (${shape}): ${LOAD.movesPerSecond} moves/s for ${LOAD.seconds} s, a probe every 100 ms …`);
      const cpuStart = cpu();
      const measured = await latency(bench, store, world, moves, producer, topic, shape);
      const shares = cpuShare(cpuStart, cpu(), measured.seconds);
      const [p50, p99] = [quantile(measured.latencies, 0.5), quantile(measured.latencies, 0.99)];
      const [readP50, readP99] = [quantile(measured.readLatencies, 0.5), quantile(measured.readLatencies, 0.99)];
      const offered = `${Math.round(measured.moves / measured.seconds).toLocaleString('en-US')} moves/s`;
      const perReport = (measured.reads / measured.reports).toFixed(1);
      const shaped = shape === 'ticks' ? `every 50 ms, ${perReport} reads a report` : `reports of 10–20 reads, ${perReport} a report`;
      bench.log(
        `  alert p50 ${p50.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms; read visible p50 ${readP50.toFixed(0)} ms, p99 ${readP99.toFixed(0)} ms; ${measured.latencies.length} probes at ${offered}, ${measured.reports} reports (${perReport} reads each); share of a core: ${shares}`,
      );
      rows.push(
        { bench: NAME, case: `scan → alert visible p50 at ${offered}, 100 rules, ${shaped} (share of a core: ${shares})`, events: measured.latencies.length, seconds: 1, quantity: `${p50.toFixed(0)} ms` },
        {
          bench: NAME,
          case: `scan → alert visible p99 at ${offered}, 100 rules, ${shaped}`,
          events: measured.latencies.length,
          seconds: 1,
          quantity: `${p99.toFixed(0)} ms`,
          target: { label: `< ${TARGETS.p99Ms} ms`, met: p99 < TARGETS.p99Ms },
        },
        { bench: NAME, case: `baseline: the same probe reads, scan → visible in tracking, p50 / p99 (${shape})`, events: measured.readLatencies.length, seconds: 1, quantity: `${readP50.toFixed(0)} / ${readP99.toFixed(0)} ms` },
      );
      // The next shape starts from a service that has caught up.
      await caughtUp(bench, store, 'tracking');
      await caughtUp(bench, store, 'alerts');
    }

    // The webhooks role, as a default installation runs it, from here on (after the latency runs,
    // which measure the projector alone): its cursor follows the alerts' outbox, and a rebuild
    // writes only the rows it has not passed (docs/design.md "Alerts and webhooks").
    webhooks = await startRole('webhooks', env);
    bench.log(`rate: ${LOAD.reads} more moves published and projected …`);
    const bulk = Array.from({ length: LOAD.reads }, () => moves.next());
    const before = await visibleReads(bench.pool, world.orgId);
    await publish(producer, topic, bulk);
    await waitVisible(bench, world.orgId, before + bulk.length);
    await caughtUp(bench, store, 'alerts');
    await outboxFollowed(bench);
    await webhooks.stop();
    webhooks = null;
    await ingest.stop();
    ingest = null;
    await projector.stop();
    projector = null;
    const live = await alertsDigest(bench, world.orgId);
    const reads = await visibleReads(bench.pool, world.orgId);
    bench.log(`  ${reads} reads in the log, ${live.count} alerts; rebuilding tracking, then alerts …`);
    const rebuilt: Record<string, CliRebuild> = {};
    for (const name of ['tracking', 'alerts']) rebuilt[name] = await cliRebuild(bench.url, postmaster, { names: [name] });
    const again = await alertsDigest(bench, world.orgId);
    if (again.count !== live.count || again.digest !== live.digest) throw new Error(`the rebuild gave ${again.count} alerts (${again.digest}), live ${live.count} (${live.digest})`);
    // BENCH_ALERTS_COMPARE=<dir>: the same rebuild by another checkout's CLI (older code) on the
    // same log, alternated with this one's, A B B A after the first: the machine's drift falls on both.
    const compare = process.env.BENCH_ALERTS_COMPARE;
    const compared: Record<'this' | 'that', CliRebuild[]> = { this: [], that: [] };
    if (compare) {
      for (const which of ['that', 'that', 'this'] as const) {
        compared[which].push(await cliRebuild(bench.url, postmaster, { names: ['alerts'], root: which === 'that' ? compare : undefined }));
        const again = await alertsDigest(bench, world.orgId);
        if (again.count !== live.count || again.digest !== live.digest) throw new Error(`the ${which} rebuild gave ${again.count} alerts (${again.digest}), live ${live.count} (${live.digest})`);
      }
      compared.this.unshift(rebuilt.alerts!);
    }
    const perRead = (us: number) => `${(us / reads).toFixed(1)} µs`;
    const rebuildRow = (name: string): BenchRow => {
      const r = rebuilt[name]!;
      return {
        bench: NAME,
        case: `projections rebuild ${name}: reads/s (CPU/read: CLI ${perRead(r.cpu.cli)}, postgres ${perRead(r.cpu.postgres)})`,
        events: reads,
        seconds: r.result.seconds,
      };
    };
    rows.push(rebuildRow('tracking'), rebuildRow('alerts'));
    for (const which of compare ? (['this', 'that'] as const) : []) {
      const runs = compared[which];
      const sum = (f: (r: CliRebuild) => number) => runs.reduce((n, r) => n + f(r), 0);
      rows.push({
        bench: NAME,
        case: `projections rebuild alerts, ${which === 'this' ? 'this code' : "BENCH_ALERTS_COMPARE's"}, ${runs.length} runs (A B B A): reads/s (CPU/read: CLI ${perRead(sum((r) => r.cpu.cli) / runs.length)}, postgres ${perRead(sum((r) => r.cpu.postgres) / runs.length)})`,
        events: reads * runs.length,
        seconds: sum((r) => r.result.seconds),
      });
    }
    rows.push({
      bench: NAME,
      case: `the alerts subscriber against the tracking projection, same log, same run (${live.count} alerts, equal after the rebuild)`,
      events: reads,
      seconds: rebuilt.alerts!.result.seconds,
      baseline: { label: 'rebuild tracking', events: reads, seconds: rebuilt.tracking!.result.seconds },
      target: { label: `≥ ${TARGETS.ratio * 100}% of tracking`, met: rebuilt.tracking!.result.seconds / rebuilt.alerts!.result.seconds >= TARGETS.ratio },
    });
    return rows;
  } finally {
    await ingest?.stop();
    await webhooks?.stop();
    await projector?.stop();
    await producer.disconnect();
    await kafkaBroker.stop();
  }
}
