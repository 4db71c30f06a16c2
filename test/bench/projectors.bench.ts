/**
 * Live tracking with one projector process and with two (issue 34; docs/operations.md "Several
 * projector processes", "Capacity"): the ingest bench's world, reader reports and Kafka broker
 * (reader-load.ts), the tracking projection split in PROJECTION_SEGMENTS=2 throughout, so that only
 * the number of processes changes. Two phases, in one run:
 * 1. one `ROLES=projector` process (it holds both segments);
 * 2. two (each holds one, checked in `projection_leases` before the phase starts).
 * Each phase: BENCH_INGEST_READS reads published to the topic while no ingest process runs, then
 * one `ROLES=ingest` process started, and the backlog drained, Kafka → visible, timed from the
 * first read visible to the last (as the ingest bench's sustained rate). Reported per phase: reads/s,
 * CPU per read of each part (the projectors summed), and the share of a core each part used, so
 * that the table says what bound the phase; then phase 2 against phase 1 (target: at least 1.6 ×).
 * Every read is unique, and each phase checks that each shows exactly once.
 */
import { Kafka, logLevel } from 'kafkajs';
import { startPrivateKafkaBroker } from '../support/kafka-broker.js';
import { postmasterOf } from './proc.js';
import { LOAD, Reports, childNamed, cpuPerRead, cpuShare, cpuSnapshot, drainBacklog, publishReports, seed, sleep, startRole, visibleReads, type ServiceProcess } from './reader-load.js';
import type { BenchContext, BenchRow } from './types.js';

const NAME = 'projectors';
const SEGMENTS = 2;
const TOPIC_PARTITIONS = Number(process.env.BENCH_INGEST_PARTITIONS ?? 4);
const TARGET = 1.6;

/** Waits until the live tracking segments are held by exactly these processes, evenly. */
async function heldBy(bench: BenchContext, pids: number[]): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const { rows } = await bench.pool.query<{ owner: string }>(
      `SELECT owner FROM read_model.projection_leases WHERE name LIKE 'tracking#%' AND expires_at > now()`,
    );
    const owners = rows.map((r) => Number(r.owner.split(':').at(-2)));
    const even = rows.length === SEGMENTS && pids.every((pid) => owners.filter((o) => o === pid).length === SEGMENTS / pids.length);
    if (even) return;
    if (Date.now() > deadline) throw new Error(`tracking segments held by ${owners.join(', ')}, not evenly by ${pids.join(', ')}, after 60 s`);
    await sleep(100);
  }
}

export async function run(bench: BenchContext): Promise<BenchRow[]> {
  const kafkaBroker = await startPrivateKafkaBroker();
  const kafka = new Kafka({ clientId: 'bench-gateway', brokers: [kafkaBroker.brokers], logLevel: logLevel.NOTHING });
  const topic = 'scans.fixed.projectors';
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ waitForLeaders: true, topics: [topic, `${topic}.dlq`].map((t) => ({ topic: t, numPartitions: TOPIC_PARTITIONS, replicationFactor: 1 })) });
  await admin.disconnect();
  const producer = kafka.producer();
  await producer.connect();
  const postmaster = postmasterOf((await bench.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
  const env = { DATABASE_URL: bench.url, KAFKA_BROKERS: kafkaBroker.brokers, PROJECTION_SEGMENTS: String(SEGMENTS) };
  const ingestEnv = { ...env, KAFKA_SCAN_TOPIC: topic, KAFKA_DLQ_TOPIC: `${topic}.dlq`, KAFKA_GROUP_ID: 'tracking-projectors-bench' };
  const projectors: ServiceProcess[] = [await startRole('projector', env)];
  let ingest: ServiceProcess | null = null;
  const rows: BenchRow[] = [];
  try {
    const world = await seed(bench.url, bench.log);
    const reports = new Reports(world);
    const cpu = cpuSnapshot({ ingest: () => ingest?.pid ?? null, projector: () => projectors.map((p) => p.pid), postmaster, broker: childNamed('java') });
    const rates: number[] = [];
    for (const count of [1, 2]) {
      while (projectors.length < count) projectors.push(await startRole('projector', env));
      await heldBy(
        bench,
        projectors.map((p) => p.pid),
      );
      bench.log(`${count} projector process${count > 1 ? 'es' : ''}: publishing ${LOAD.sustainedReads} reads with no consumer running …`);
      const published = await publishReports(producer, topic, reports, LOAD.sustainedReads);
      const lastProbes = [...reports.lastOf.values()].map((m) => m.lastProbe);
      const before = await visibleReads(bench.pool, world.orgId);
      ingest = await startRole('ingest', ingestEnv);
      const drained = await drainBacklog(bench.pool, world, before, published, lastProbes, cpu);
      const visible = (await visibleReads(bench.pool, world.orgId)) - before;
      if (visible !== published) throw new Error(`${visible} reads visible, ${published} published`);
      await ingest.stop();
      ingest = null;
      const rate = drained.reads / drained.seconds;
      rates.push(rate);
      const perRead = cpuPerRead(drained.cpuStart, drained.cpuEnd, drained.reads, { bench: 'gateway' });
      const shares = cpuShare(drained.cpuStart, drained.cpuEnd, drained.seconds);
      bench.log(`  ${Math.round(rate)} reads/s; CPU/read: ${perRead}; cores: ${shares}`);
      rows.push({
        bench: NAME,
        case: `Kafka → visible, ${count} projector process${count > 1 ? 'es' : ''}, ${SEGMENTS} segments (CPU/read: ${perRead}; share of a core: ${shares})`,
        events: drained.reads,
        seconds: drained.seconds,
      });
    }
    rows.push({
      bench: NAME,
      case: `Kafka → visible: 2 projector processes against 1, same run`,
      events: rows[1]!.events,
      seconds: rows[1]!.seconds,
      baseline: { label: '1 projector process', events: rows[0]!.events, seconds: rows[0]!.seconds },
      target: { label: `>= ${TARGET}x 1 process`, met: rates[1]! >= TARGET * rates[0]! },
    });
    return rows;
  } finally {
    await ingest?.stop();
    for (const p of projectors) await p.stop();
    await producer.disconnect();
    await kafkaBroker.stop();
  }
}
