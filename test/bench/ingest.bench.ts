/**
 * Fixed readers through Kafka (issues 11 and 22): one org with BENCH_INGEST_TAGS assets, each with
 * an RFID tag, parked in the fields of BENCH_INGEST_READERS readers (one capture point and
 * location each); gateways (kafkajs producers in this process) publish reader reports of
 * BENCH_INGEST_READS_PER_MESSAGE reads, keyed by reader id, half in the canonical shape and half
 * in the CS463 reader's native one, to a real Apache Kafka 4.4 broker of the bench's own (a KRaft
 * node, test/support/kafka-broker.ts), on a topic of TOPIC_PARTITIONS partitions.
 *
 * The service runs as two processes of its own, as in production: a projector (`ROLES=projector`,
 * started first; it projects the seed too) and an ingest consumer (`ROLES=ingest`), so that the
 * CPU and the peak RSS of each can be read off /proc (test/bench/reader-load.ts). Measured:
 * - sustained rate: BENCH_INGEST_READS reads published before any consumer starts, then consumed,
 *   appended and projected; reads/s from the first read visible (a row of `scan_reads`, written
 *   in the same transaction as the report's `asset_locations`) to the last. The baseline, in the
 *   same run, on the same topic: a bare kafkajs consumer group that parses the same reads, keys
 *   them and writes each batch with one multi-row INSERT into a table with the read key's unique
 *   index (BaselineWriter), committing its offsets after;
 * - publish→visible latency at an offered load of BENCH_INGEST_OFFERED reads/s for
 *   BENCH_INGEST_LATENCY_SECONDS (the consumer caught up);
 * - event-store bytes per read over the sustained run (parked tags only);
 * - peak RSS (VmHWM) of the ingest process, and CPU per read of each process, of Postgres and of
 *   the broker.
 *
 * Every read is unique and the run checks that each shows exactly once.
 */
import { Kafka, logLevel } from 'kafkajs';
import { startPrivateKafkaBroker } from '../support/kafka-broker.js';
import { postmasterOf } from './proc.js';
import {
  BaselineWriter,
  LOAD,
  Reports,
  bytesRow,
  childNamed,
  closingRow,
  cpuPerRead,
  cpuSnapshot,
  drainBacklog,
  measureLatency,
  publishReports,
  seed,
  startRole,
  storeBytes,
  sustainedRow,
  visibleReads,
  type Message,
  type ServiceProcess,
} from './reader-load.js';
import { printStatements, resetStatements } from './statements.js';
import type { BenchContext, BenchRow } from './types.js';

const TOPIC_PARTITIONS = Number(process.env.BENCH_INGEST_PARTITIONS ?? 4);
const NAME = 'ingest';

/** The baseline's consumer: a group of its own, from the start of the topic, one INSERT per batch, offsets committed after it. */
async function bareConsumer(kafka: Kafka, topic: string, writer: BaselineWriter, reads: number): Promise<void> {
  const consumer = kafka.consumer({ groupId: `bare-${topic}`, maxWaitTimeInMs: 100 });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the bare consumer wrote ${writer.reads} of ${reads} reads in 300 s`)), 300_000);
      void consumer.run({
        eachBatch: async ({ batch }) => {
          await writer.write(batch.messages.map((m) => m.value!));
          if (writer.reads >= reads) {
            clearTimeout(timer);
            resolve();
          }
        },
      });
    });
  } finally {
    await consumer.disconnect();
  }
}

export async function run(bench: BenchContext): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const kafkaBroker = await startPrivateKafkaBroker();
  const kafka = new Kafka({ clientId: 'bench-gateway', brokers: [kafkaBroker.brokers], logLevel: logLevel.NOTHING });
  const topic = 'scans.fixed.bench';
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ waitForLeaders: true, topics: [`${topic}`, `${topic}.dlq`].map((t) => ({ topic: t, numPartitions: TOPIC_PARTITIONS, replicationFactor: 1 })) });
  await admin.disconnect();
  const producer = kafka.producer();
  await producer.connect();
  const postmaster = postmasterOf((await bench.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
  const env = { DATABASE_URL: bench.url, KAFKA_BROKERS: kafkaBroker.brokers };
  const projector = await startRole('projector', env);
  let ingest: ServiceProcess | null = null;
  try {
    const world = await seed(bench.url, bench.log);
    const reports = new Reports(world);
    const cpu = cpuSnapshot({ ingest: () => ingest?.pid ?? null, projector: projector.pid, postmaster, broker: childNamed('java') });

    // Sustained: a pre-filled topic, consumed from the start by the baseline, then by the service.
    bench.log(`publishing ${LOAD.sustainedReads} reads in messages of ${LOAD.readsPerMessage} to ${TOPIC_PARTITIONS} partitions …`);
    const published = await publishReports(producer, topic, reports, LOAD.sustainedReads);
    const lastProbes = [...reports.lastOf.values()].map((m) => m.lastProbe);

    bench.log('baseline: bare kafkajs consumer, one multi-row INSERT per batch …');
    const writer = await BaselineWriter.create(bench.pool, world.orgId);
    const baselineStart = cpu();
    await bareConsumer(kafka, topic, writer, published);
    const baselineEnd = cpu();
    const written = await writer.rowCount();
    if (written !== published) throw new Error(`the baseline wrote ${written} reads, ${published} published`);
    const base = writer.result();
    const baselineCpu = cpuPerRead(baselineStart, baselineEnd, published, { bench: 'consumer' });
    bench.log(`  ${Math.round(base.reads / base.seconds)} reads/s (${base.seconds.toFixed(1)} s); CPU/read: ${baselineCpu}`);

    await resetStatements(bench.pool);
    const bytesBefore = await storeBytes(bench.pool);
    const before = await visibleReads(bench.pool, world.orgId);
    bench.log('ingest process: consume, append, project …');
    ingest = await startRole('ingest', { ...env, KAFKA_SCAN_TOPIC: topic, KAFKA_DLQ_TOPIC: `${topic}.dlq`, KAFKA_GROUP_ID: 'tracking-ingest-bench' });
    const drained = await drainBacklog(bench.pool, world, before, published, lastProbes, cpu);
    await printStatements(bench.pool, 'sustained');
    const pipelineCpu = cpuPerRead(drained.cpuStart, drained.cpuEnd, drained.reads, { bench: 'probe' });
    bench.log(`  ${Math.round(drained.reads / drained.seconds)} reads/s; CPU/read: ${pipelineCpu}`);
    rows.push(
      sustainedRow(NAME, 'Kafka', { ...drained, cpu: pipelineCpu }, { label: 'bare kafkajs consumer + multi-row INSERT', ...base, cpu: baselineCpu }),
      bytesRow(NAME, (await storeBytes(bench.pool)) - bytesBefore, published),
    );

    // Latency at a fixed offered load, on the same topic (the consumer is caught up).
    const send = async (batch: Message[]) => {
      await producer.send({ topic, messages: batch.map((m) => ({ key: m.reader, value: m.value })) });
    };
    const latency = await measureLatency(bench, NAME, 'Kafka', world, reports, send, cpu);
    rows.push(...latency.rows);
    // Exactly once: every published read shows once.
    rows.push(await closingRow(bench, NAME, world.orgId, before, published + latency.reads, ingest.pid));
    return rows;
  } finally {
    await ingest?.stop();
    await projector.stop();
    await producer.disconnect();
    await kafkaBroker.stop();
  }
}
