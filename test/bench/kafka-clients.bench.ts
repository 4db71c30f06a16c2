/**
 * The Kafka client, chosen by measurement (issue 22, item 3): kafkajs (the product's client,
 * services/ingest/kafka/client.ts, with its pure-JavaScript codecs) next to
 * `@confluentinc/kafka-javascript` (librdkafka, through its KafkaJS-compatible API, written to the
 * same port in confluent-ingest-client.ts), on one real Apache Kafka 4.4 broker of the bench's own
 * (test/support/kafka-broker.ts), with the same scenarios and the product's way of consuming: one
 * batch at a time per partition, its offsets committed after it was processed.
 *
 * 1. codecs: gzip, snappy, lz4 and zstd batches from Apache Kafka's Java producer (the tests'
 *    gateway); every record read back with its exact key and value;
 * 2. transactions: records of aborted and committed transactions; read committed, aborted never seen;
 * 3. rebalance: a live stream read by one consumer, a second joins at a quarter, the first leaves
 *    at 60 %: every message processed, duplicates counted;
 * 4. broker restart: the broker stopped cleanly and started again at 30 % of a backlog: does the
 *    consumer go on by itself (if it stops, it is started again, as the ingest supervisor does, and
 *    counted), lost and duplicated messages;
 * 5. corrupt batch: three gzip batches, the broker stopped, bytes of the second batch's compressed
 *    payload flipped in the segment file, the broker started again: what the client does (stops
 *    with an error naming topic, partition and offset, skips the batch, stalls) in CORRUPT_SECONDS;
 * 6. throughput: THROUGHPUT_MESSAGES pre-published messages of about 400 bytes on 4 partitions
 *    consumed RUNS times per client: messages/s from the first message to the last, and the CPU
 *    time of this process from connect to the last message (median, range).
 *
 * The Confluent client runs only where it loads: `CONFLUENT_KAFKA_JAVASCRIPT=<folder of a built
 * package>` or an installed `@confluentinc/kafka-javascript` (docs/scan-ingestion.md says how it
 * was built); otherwise its rows say it was not measured.
 */
import { spawn } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { Kafka, logLevel } from 'kafkajs';
import { createKafkaIngestClient, type ConsumerSession, type IncomingBatch, type KafkaIngestClient } from '../../services/ingest/kafka/client.js';
import { createLogger } from '../../shared/logger.js';
import { GATEWAY_SOURCE, KAFKA_BROKER_LIB, kafkaBrokerUnavailable, startKafkaBroker, type KafkaBroker } from '../support/kafka-broker.js';
import { createConfluentIngestClient, loadConfluentPackage, type ConfluentLogger } from './confluent-ingest-client.js';
import type { BenchContext, BenchRow } from './types.js';

const PARTITIONS = 4;
const CODEC_RECORDS = Number(process.env.BENCH_KAFKA_CODEC_RECORDS ?? 500);
const STREAM_MESSAGES = Number(process.env.BENCH_KAFKA_STREAM_MESSAGES ?? 20_000);
/** Work per message of the rebalance and restart streams, so that they last long enough to be interrupted. */
const STREAM_MS_PER_MESSAGE = Number(process.env.BENCH_KAFKA_STREAM_MS_PER_MESSAGE ?? 0.5);
/** Messages per second of the rebalance's live stream. */
const STREAM_RATE = Number(process.env.BENCH_KAFKA_STREAM_RATE ?? 1_000);
const THROUGHPUT_MESSAGES = Number(process.env.BENCH_KAFKA_THROUGHPUT_MESSAGES ?? 200_000);
const MESSAGE_BYTES = 400;
const RUNS = Number(process.env.BENCH_KAFKA_RUNS ?? 3);
const CORRUPT_SECONDS = Number(process.env.BENCH_KAFKA_CORRUPT_SECONDS ?? 30);
/** The Confluent client's `js.consumer.max.batch.size`: -1 hands a batch what a fetch brought, as kafkajs does; the package's default is 32. */
const CONFLUENT_MAX_BATCH = Number(process.env.BENCH_CONFLUENT_MAX_BATCH ?? -1);
const BENCH = 'kafka-clients';

// ---------------------------------------------------------------------------------------------
// Messages: each value starts with its id, the rest is half text, half hash bytes.

function messageValue(id: number, bytes = MESSAGE_BYTES): Buffer {
  const head = Buffer.from(`id:${String(id).padStart(9, '0')};reader:dock-door-${id % 20};`);
  const text = Buffer.from('{"capture_point":"dock-door-3-1","tag_type":"rfid","rssi":-67}'.repeat(4));
  const parts = [head, text.subarray(0, Math.max(0, (bytes - head.length) / 2))];
  for (let i = 0; Buffer.concat(parts).length < bytes; i++) parts.push(createHash('sha256').update(`${id}/${i}`).digest());
  return Buffer.concat(parts).subarray(0, bytes);
}

function idOf(value: Buffer | null): number | null {
  const match = value ? /^id:(\d{9});/.exec(value.subarray(0, 13).toString('latin1')) : null;
  return match ? Number(match[1]) : null;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

type Compression = 'none' | 'gzip' | 'snappy' | 'lz4' | 'zstd';

/** Apache Kafka's Java producer (test/support/kafka-broker/Gateway.java) sends `ids` as one run. */
async function javaGateway(
  brokers: string,
  topic: string,
  ids: number[],
  compression: Compression,
  mode: 'plain' | 'commit' | 'abort' = 'plain',
  /** Messages per second, for a live stream; all at once without. */
  pace?: number,
): Promise<void> {
  const child = spawn('java', ['-Xmx256m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1', '-cp', path.join(KAFKA_BROKER_LIB, '*'), GATEWAY_SOURCE, brokers, topic, compression, mode], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  // Streamed in chunks (the throughput topic's lines are some 100 MB), or paced: a tenth of a second's worth every 100 ms.
  const chunk = pace ? Math.max(1, Math.round(pace / 10)) : 5_000;
  const started = performance.now();
  for (let i = 0; i < ids.length; i += chunk) {
    if (pace) await sleep(started + (i / pace) * 1000 - performance.now());
    const lines = ids.slice(i, i + chunk).map((id) => `${Buffer.from(`reader-${id % 97}`).toString('base64')}\t${messageValue(id).toString('base64')}\t`);
    if (!child.stdin.write(`${lines.join('\n')}\n`)) await new Promise((resolve) => child.stdin.once('drain', resolve));
  }
  child.stdin.end();
  const code = await exited;
  if (code !== 0 || !out.includes(`sent ${ids.length}`)) throw new Error(`the Java gateway failed (${code}):\n${out.slice(-3000)}`);
}

const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);

// ---------------------------------------------------------------------------------------------
// The clients, each behind the product's port.

interface ClientLog {
  /** Warnings and errors the client logged, one line each. */
  lines: string[];
}

interface Candidate {
  name: string;
  create(brokers: string, groupId: string, log: ClientLog): KafkaIngestClient;
}

function kafkajsCandidate(): Candidate {
  return {
    name: 'kafkajs 2.2.4',
    create(brokers, groupId, log) {
      const sink = new Writable({
        write(chunk: Buffer, _encoding, done) {
          for (const line of chunk.toString().split('\n').filter(Boolean)) {
            const entry = JSON.parse(line) as { msg?: string; error?: string; topic?: string; partition?: number; offset?: string };
            log.lines.push([entry.msg, entry.error, entry.topic && `topic=${entry.topic}`, entry.partition !== undefined && `partition=${entry.partition}`].filter(Boolean).join(' '));
          }
          done();
        },
      });
      return createKafkaIngestClient({ brokers: [brokers], groupId, clientId: 'bench-kafkajs', log: createLogger('warn', 'bench', sink) });
    },
  };
}

function confluentCandidate(): Candidate | { missing: string } {
  const loaded = loadConfluentPackage();
  if ('missing' in loaded) return loaded;
  const pkg = loaded.package;
  return {
    name: `@confluentinc/kafka-javascript (librdkafka ${pkg.librdkafkaVersion}${CONFLUENT_MAX_BATCH === -1 ? '' : `, batches of ${CONFLUENT_MAX_BATCH}`})`,
    create(brokers, groupId, log) {
      const logger: ConfluentLogger = {
        info: () => undefined,
        debug: () => undefined,
        warn: (message) => log.lines.push(message),
        error: (message) => log.lines.push(message),
        namespace: () => logger,
        setLogLevel: () => undefined,
      };
      return createConfluentIngestClient(pkg, { brokers: [brokers], groupId, clientId: 'bench-confluent', logger, maxBatchSize: CONFLUENT_MAX_BATCH });
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Consuming as the product does, and counting.

interface Tally {
  /** Deliveries per message id (values that carry none are counted in `unreadable`). */
  deliveries: Map<number, number>;
  /** Messages delivered with a value other than the one sent. */
  wrong: number;
  unreadable: number;
  batches: number;
  processed: number;
}

function newTally(): Tally {
  return { deliveries: new Map(), wrong: 0, unreadable: 0, batches: 0, processed: 0 };
}

function record(tally: Tally, batch: IncomingBatch, checkValues: boolean): void {
  tally.batches++;
  for (const message of batch.messages) {
    tally.processed++;
    const id = idOf(message.value);
    if (id === null) {
      tally.unreadable++;
      continue;
    }
    tally.deliveries.set(id, (tally.deliveries.get(id) ?? 0) + 1);
    if (checkValues && (!message.value!.equals(messageValue(id)) || message.key?.toString() !== `reader-${id % 97}`)) tally.wrong++;
  }
}

/**
 * A consumer as the ingest runs one: each batch processed (`workMs` per message, heart beating),
 * then committed unless it stopped being ours. When the consumer stops by itself it is started
 * again after a second, as the ingest supervisor does; `restarts` counts those.
 */
class Member {
  readonly log: ClientLog = { lines: [] };
  restarts = 0;
  /** Messages this member processed. */
  processed = 0;
  stopCauses: string[] = [];
  private readonly client: KafkaIngestClient;
  private session: ConsumerSession | null = null;
  private leaving = false;

  constructor(
    candidate: Candidate,
    brokers: string,
    groupId: string,
    private readonly topic: string,
    private readonly tally: Tally,
    private readonly options: { workMs?: number; checkValues?: boolean; restartOnStop?: boolean } = {},
  ) {
    this.client = candidate.create(brokers, groupId, this.log);
  }

  async start(): Promise<void> {
    const session = await this.client.consume(this.topic, (batch) => this.handle(batch));
    this.session = session;
    void session.stopped.then(async (cause) => {
      this.stopCauses.push(cause.message);
      if (this.leaving || this.options.restartOnStop === false) return;
      await sleep(1_000);
      if (this.leaving) return;
      this.restarts++;
      await this.start().catch((error: unknown) => this.stopCauses.push(`restart failed: ${String(error)}`));
    });
  }

  private async handle(batch: IncomingBatch): Promise<void> {
    const workMs = this.options.workMs ?? 0;
    if (workMs > 0) {
      // Work in slices of 50 ms with a heartbeat between, as the ingest does while Postgres works.
      let left = batch.messages.length * workMs;
      while (left > 0) {
        await sleep(Math.min(50, left));
        left -= 50;
        await batch.heartbeat().catch(() => undefined);
      }
    }
    record(this.tally, batch, this.options.checkValues ?? false);
    this.processed += batch.messages.length;
    const last = batch.messages[batch.messages.length - 1]?.offset;
    if (last === undefined || !batch.isActive()) return;
    await batch.commit(last);
  }

  async leave(): Promise<void> {
    this.leaving = true;
    await this.client.close();
  }

  get stoppedNow(): boolean {
    return this.stopCauses.length > this.restarts;
  }
}

/** Waits until `done()` or the deadline; true when done. */
async function until(done: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
  return true;
}

function counts(tally: Tally, ids: number[]): { lost: number; duplicates: number; foreign: number } {
  const expected = new Set(ids);
  let lost = 0;
  let duplicates = 0;
  for (const id of ids) {
    const n = tally.deliveries.get(id) ?? 0;
    if (n === 0) lost++;
    else duplicates += n - 1;
  }
  const foreign = [...tally.deliveries.keys()].filter((id) => !expected.has(id)).length;
  return { lost, duplicates, foreign };
}

// ---------------------------------------------------------------------------------------------

interface Setup {
  brokers: string;
  broker: KafkaBroker;
  /** The broker's log folder (`log.dirs`): a partition's segments are in `<topic>-<partition>/`. */
  logDir: string;
  admin: ReturnType<Kafka['admin']>;
}

async function createTopic(setup: Setup, topic: string, partitions = PARTITIONS): Promise<void> {
  await setup.admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }] });
}

const fresh = (label: string) => `${label}-${randomUUID().slice(0, 8)}`;

function row(candidate: string, scenario: string, passed: boolean | null, detail: string, events = 0, seconds = 0): BenchRow {
  return {
    bench: BENCH,
    case: `${candidate}: ${scenario}`,
    events,
    seconds,
    quantity: detail,
    ...(passed === null ? {} : { target: { label: 'every message, exact, once committed', met: passed } }),
  };
}

async function codecs(setup: Setup, candidates: Candidate[]): Promise<BenchRow[]> {
  const topic = fresh('codecs');
  await createTopic(setup, topic);
  const codecsUsed: Compression[] = ['gzip', 'snappy', 'lz4', 'zstd'];
  const ids = codecsUsed.flatMap((_, i) => range(i * CODEC_RECORDS, CODEC_RECORDS));
  for (const [i, compression] of codecsUsed.entries()) await javaGateway(setup.brokers, topic, range(i * CODEC_RECORDS, CODEC_RECORDS), compression);
  const rows: BenchRow[] = [];
  for (const candidate of candidates) {
    const tally = newTally();
    const member = new Member(candidate, setup.brokers, fresh('g-codecs'), topic, tally, { checkValues: true, restartOnStop: false });
    const started = performance.now();
    await member.start();
    await until(() => tally.deliveries.size >= ids.length || member.stoppedNow, 60_000);
    const seconds = (performance.now() - started) / 1000;
    await member.leave();
    const { lost, duplicates } = counts(tally, ids);
    const passed = lost === 0 && tally.wrong === 0 && tally.unreadable === 0;
    const stop = member.stopCauses[0] ? `; stopped: ${member.stopCauses[0].slice(0, 120)}` : '';
    rows.push(row(candidate.name, `codecs gzip, snappy, lz4, zstd (${ids.length} records)`, passed, `${passed ? 'pass' : 'FAIL'}: ${ids.length - lost}/${ids.length} read, ${tally.wrong} wrong, ${duplicates} twice${stop}`, ids.length, seconds));
  }
  return rows;
}

async function transactions(setup: Setup, candidates: Candidate[]): Promise<BenchRow[]> {
  const topic = fresh('transactions');
  await createTopic(setup, topic);
  const n = 100;
  const runs: Array<{ ids: number[]; compression: Compression; mode: 'commit' | 'abort' }> = [
    { ids: range(0, n), compression: 'lz4', mode: 'abort' },
    { ids: range(n, n), compression: 'zstd', mode: 'commit' },
    { ids: range(2 * n, n), compression: 'none', mode: 'abort' },
    { ids: range(3 * n, n), compression: 'none', mode: 'commit' },
  ];
  for (const run of runs) await javaGateway(setup.brokers, topic, run.ids, run.compression, run.mode);
  const committed = runs.filter((r) => r.mode === 'commit').flatMap((r) => r.ids);
  const aborted = runs.filter((r) => r.mode === 'abort').flatMap((r) => r.ids);
  const rows: BenchRow[] = [];
  for (const candidate of candidates) {
    const tally = newTally();
    const member = new Member(candidate, setup.brokers, fresh('g-tx'), topic, tally, { checkValues: true, restartOnStop: false });
    await member.start();
    await until(() => committed.every((id) => tally.deliveries.has(id)) || member.stoppedNow, 60_000);
    // Anything aborted would come with or soon after the committed records.
    await sleep(3_000);
    await member.leave();
    const { lost } = counts(tally, committed);
    const seenAborted = aborted.filter((id) => tally.deliveries.has(id)).length;
    const passed = lost === 0 && seenAborted === 0 && tally.wrong === 0;
    rows.push(row(candidate.name, `transactions, read committed (${committed.length} committed, ${aborted.length} aborted)`, passed, `${passed ? 'pass' : 'FAIL'}: ${committed.length - lost}/${committed.length} committed read, ${seenAborted} aborted seen`, committed.length));
  }
  return rows;
}

async function backlog(setup: Setup, label: string, count: number, compression: Compression = 'none'): Promise<{ topic: string; ids: number[] }> {
  const topic = fresh(label);
  await createTopic(setup, topic);
  const ids = range(0, count);
  await javaGateway(setup.brokers, topic, ids, compression);
  return { topic, ids };
}

async function rebalance(setup: Setup, candidates: Candidate[]): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  for (const candidate of candidates) {
    // A live stream (STREAM_RATE messages/s from the Java gateway), so that batches stay small and
    // the join and the leave fall in the middle of it; each client gets a topic of its own.
    const topic = fresh('rebalance');
    await createTopic(setup, topic);
    const ids = range(0, STREAM_MESSAGES);
    const tally = newTally();
    const groupId = fresh('g-rebalance');
    const first = new Member(candidate, setup.brokers, groupId, topic, tally, { workMs: STREAM_MS_PER_MESSAGE });
    const second = new Member(candidate, setup.brokers, groupId, topic, tally, { workMs: STREAM_MS_PER_MESSAGE });
    const started = performance.now();
    await first.start();
    const published = javaGateway(setup.brokers, topic, ids, 'none', 'plain', STREAM_RATE);
    await until(() => tally.deliveries.size >= ids.length * 0.25, 120_000);
    const joinedAt = tally.deliveries.size;
    await second.start();
    await until(() => tally.deliveries.size >= ids.length * 0.6, 120_000);
    const leftAt = tally.deliveries.size;
    await first.leave();
    await published;
    const done = await until(() => tally.deliveries.size >= ids.length, 180_000);
    const seconds = (performance.now() - started) / 1000;
    // Late duplicates of the hand-over arrive right after.
    await sleep(2_000);
    await second.leave();
    const { lost, duplicates } = counts(tally, ids);
    const restarts = first.restarts + second.restarts;
    const passed = done && lost === 0;
    rows.push(
      row(
        candidate.name,
        `rebalance: ${ids.length} messages at ${STREAM_RATE}/s, 2nd consumer joins at ${joinedAt}, 1st leaves at ${leftAt}`,
        passed,
        `${passed ? 'pass' : 'FAIL'}: ${lost} lost, ${duplicates} duplicates, ${restarts} restarts, ${tally.batches} batches; processed by the 1st ${first.processed}, by the 2nd ${second.processed}`,
        ids.length,
        seconds,
      ),
    );
  }
  return rows;
}

async function brokerRestart(setup: Setup, candidates: Candidate[]): Promise<BenchRow[]> {
  const { topic, ids } = await backlog(setup, 'restart', STREAM_MESSAGES);
  const rows: BenchRow[] = [];
  for (const candidate of candidates) {
    const tally = newTally();
    const member = new Member(candidate, setup.brokers, fresh('g-restart'), topic, tally, { workMs: STREAM_MS_PER_MESSAGE });
    const started = performance.now();
    await member.start();
    await until(() => tally.deliveries.size >= ids.length * 0.3, 120_000);
    const restartedAt = tally.deliveries.size;
    const down = performance.now();
    await setup.broker.restart();
    const downSeconds = (performance.now() - down) / 1000;
    const done = await until(() => tally.deliveries.size >= ids.length, 180_000);
    const seconds = (performance.now() - started) / 1000;
    await sleep(2_000);
    await member.leave();
    const { lost, duplicates } = counts(tally, ids);
    const passed = done && lost === 0;
    const stops = member.stopCauses.length > 0 ? `; stopped by itself ${member.stopCauses.length}× (${member.stopCauses[0]!.slice(0, 100)}), started again by the bench as the supervisor does` : '; went on by itself';
    rows.push(
      row(candidate.name, `broker restart at ${restartedAt} of ${ids.length} (broker down ${downSeconds.toFixed(1)} s)`, passed, `${passed ? 'pass' : 'FAIL'}: ${lost} lost, ${duplicates} duplicates${stops}`, ids.length, seconds),
    );
  }
  return rows;
}

/** After a broker start: until a consumer group can be looked up (the group coordinator has loaded). */
async function untilGroupsServed(setup: Setup): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      await setup.admin.describeGroups([fresh('probe')]);
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await sleep(500);
    }
  }
}

/** The record batches of a segment file (v2 format): offset of each in the file, and its length. */
function recordBatches(segment: Buffer): Array<{ at: number; length: number; baseOffset: bigint; records: number }> {
  const batches = [];
  for (let at = 0; at + 61 <= segment.length; ) {
    const length = segment.readInt32BE(at + 8) + 12;
    if (length <= 12 || at + length > segment.length) break;
    batches.push({ at, length, baseOffset: segment.readBigInt64BE(at), records: segment.readInt32BE(at + 57) });
    at += length;
  }
  return batches;
}

async function corruptBatch(setup: Setup, candidates: Candidate[]): Promise<BenchRow[]> {
  const topic = fresh('corrupt');
  await createTopic(setup, topic, 1);
  const per = 20;
  for (let i = 0; i < 3; i++) await javaGateway(setup.brokers, topic, range(i * per, per), 'gzip');
  await setup.broker.stop();
  const file = path.join(setup.logDir, `${topic}-0`, '00000000000000000000.log');
  const segment = await fs.readFile(file);
  const batches = recordBatches(segment);
  const target = batches[1];
  if (batches.length !== 3 || !target) throw new Error(`expected 3 record batches in ${path.basename(file)}, found ${batches.length}`);
  // Flip 16 bytes in the middle of the gzip stream (the records part starts 61 bytes in).
  const middle = target.at + 61 + Math.floor((target.length - 61) / 2);
  for (let i = middle; i < middle + 16; i++) segment[i] = segment[i]! ^ 0xff;
  await fs.writeFile(file, segment);
  await setup.broker.restart();
  await untilGroupsServed(setup);
  const secondFrom = Number(target.baseOffset);
  const rows: BenchRow[] = [];
  for (const candidate of candidates) {
    const tally = newTally();
    // Started again whenever it stops, as the ingest supervisor does: a crash loop shows as many stops.
    const member = new Member(candidate, setup.brokers, fresh('g-corrupt'), topic, tally, { checkValues: true });
    await member.start();
    await until(() => tally.deliveries.size >= 3 * per, CORRUPT_SECONDS * 1000);
    await member.leave();
    const got = (from: number) => range(from, per).filter((id) => tally.deliveries.has(id)).length;
    const [a, b, c] = [got(0), got(per), got(2 * per)];
    const stops = member.stopCauses.filter((cause) => !cause.startsWith('restart failed'));
    const behaviour =
      c > 0
        ? b === per && tally.wrong === 0
          ? 'read every batch (the corruption was not seen)'
          : `skipped the corrupt batch (${b} of its ${per} records delivered, ${tally.wrong + tally.unreadable} with a wrong value) and went on`
        : stops.length > 0
          ? `stopped ${stops.length}× in ${CORRUPT_SECONDS} s, each time on the corrupt batch`
          : `stalled: nothing after batch 1 in ${CORRUPT_SECONDS} s, no stop`;
    const said = [...new Set([...stops, ...member.log.lines].map((l) => l.split('\n')[0]!.slice(0, 220)))];
    const text = said.join(' ');
    const where = `the error names the topic: ${text.includes(topic) ? 'yes' : 'no'}, the partition: ${/partition[^0-9]{0,3}0\b/i.test(text) ? 'yes' : 'no'}, an offset of the batch: ${range(secondFrom, per).some((o) => new RegExp(`offset[^0-9]{0,3}${o}\\b`, 'i').test(text)) ? 'yes' : 'no'}`;
    rows.push(row(candidate.name, `corrupt gzip batch (offsets ${secondFrom}–${secondFrom + per - 1} of 3 batches × ${per})`, null, `batches read ${a}/${b}/${c}; ${behaviour}; ${where}; said: ${said.slice(0, 3).join(' | ') || 'nothing'}`, 3 * per));
  }
  return rows;
}

function median(values: number[]): number {
  const sorted = [...values].sort((x, y) => x - y);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

async function throughput(setup: Setup, candidates: Candidate[]): Promise<BenchRow[]> {
  const { topic, ids } = await backlog(setup, 'throughput', THROUGHPUT_MESSAGES);
  const results = new Map<string, Array<{ seconds: number; cpu: number; passed: boolean; join: number }>>();
  // Runs alternate between the clients, so that the other helpers' load falls on both alike.
  for (let run = 0; run < RUNS; run++) {
    for (const candidate of candidates) {
      const tally = newTally();
      const member = new Member(candidate, setup.brokers, fresh('g-throughput'), topic, tally, { restartOnStop: false });
      const cpu = process.cpuUsage();
      const started = performance.now();
      await member.start();
      await until(() => tally.processed > 0 || member.stoppedNow, 60_000);
      const first = performance.now();
      const done = await until(() => tally.deliveries.size >= ids.length || member.stoppedNow, 300_000);
      // From the first message to the last: the group join before it is not the client's reading speed.
      const seconds = (performance.now() - first) / 1000;
      const used = process.cpuUsage(cpu);
      await member.leave();
      const passed = done && counts(tally, ids).lost === 0;
      results.set(candidate.name, [...(results.get(candidate.name) ?? []), { seconds, cpu: (used.user + used.system) / 1e6, passed, join: (first - started) / 1000 }]);
    }
  }
  return candidates.map((candidate) => {
    const runs = results.get(candidate.name)!;
    const rates = runs.map((r) => ids.length / r.seconds);
    const cpus = runs.map((r) => r.cpu);
    const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
    const passed = runs.every((r) => r.passed);
    const label = `throughput, ${ids.length} × ${MESSAGE_BYTES} B on ${PARTITIONS} partitions, median of ${runs.length}: ${fmt(median(rates))} msg/s (${fmt(Math.min(...rates))}–${fmt(Math.max(...rates))}), CPU ${median(cpus).toFixed(2)} s (${Math.min(...cpus).toFixed(2)}–${Math.max(...cpus).toFixed(2)}), first message after ${median(runs.map((r) => r.join)).toFixed(1)} s`;
    return { bench: BENCH, case: `${candidate.name}: ${label}`, events: ids.length, seconds: ids.length / median(rates), target: { label: 'every message read', met: passed } };
  });
}

// ---------------------------------------------------------------------------------------------

export async function run(ctx: BenchContext): Promise<BenchRow[]> {
  const unavailable = kafkaBrokerUnavailable();
  if (unavailable) throw new Error(`the kafka-clients bench needs a real Apache Kafka broker: ${unavailable}`);
  const candidates: Candidate[] = [kafkajsCandidate()];
  const confluent = confluentCandidate();
  const rows: BenchRow[] = [];
  if ('missing' in confluent) {
    ctx.log(`@confluentinc/kafka-javascript: not measured (${confluent.missing})`);
    rows.push(row('@confluentinc/kafka-javascript', `not measured: ${confluent.missing}`, null, 'not measured'));
  } else candidates.push(confluent);

  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tracking-bench-kafka-'));
  const broker = await startKafkaBroker(dir);
  const admin = new Kafka({ clientId: 'bench-admin', brokers: [broker.brokers], logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  const setup: Setup = { brokers: broker.brokers, broker, logDir: path.join(dir, 'data'), admin };
  const only = (process.env.BENCH_KAFKA_SCENARIOS ?? 'codecs,transactions,rebalance,restart,corrupt,throughput').split(',');
  const scenarios: Array<[string, (setup: Setup, candidates: Candidate[]) => Promise<BenchRow[]>]> = [
    ['codecs', codecs],
    ['transactions', transactions],
    ['rebalance', rebalance],
    ['restart', brokerRestart],
    ['corrupt', corruptBatch],
    ['throughput', throughput],
  ];
  try {
    for (const [name, scenario] of scenarios) {
      if (!only.includes(name)) continue;
      ctx.log(`kafka-clients: ${name} …`);
      const found = await scenario(setup, candidates);
      for (const r of found) ctx.log(`  ${r.case} → ${r.quantity ?? `${Math.round(r.events / r.seconds)} per second`}`);
      rows.push(...found);
    }
  } finally {
    await admin.disconnect().catch(() => undefined);
    await broker.stop();
    await fs.rm(dir, { recursive: true, force: true });
  }
  return rows;
}
