import { randomUUID } from 'node:crypto';
import { Kafka, logLevel, type Consumer, type Producer } from 'kafkajs';
import { inject } from 'vitest';

/** The run's Kafka-protocol broker (global-setup), a topic per test, and a producer as gateways use. */

export function kafkaBrokers(): string {
  return inject('kafkaBrokers');
}

/** Which broker the run has (global-setup): Apache Kafka, or the mock cluster where Java is missing. */
export function kafkaBrokerKind(): 'apache-kafka' | 'mock' {
  return inject('kafkaBrokerKind');
}

/** True where the run has no real broker: tests of what only Apache Kafka does skip, and are counted as skipped. */
export const withoutRealBroker = (): boolean => kafkaBrokerKind() !== 'apache-kafka';

export const TEST_TOPIC_PARTITIONS = 4;

/** Creates topics of TEST_TOPIC_PARTITIONS partitions (as gateways' topics have several). */
export async function createTopics(...topics: string[]): Promise<void> {
  const admin = client().admin();
  await admin.connect();
  try {
    await admin.createTopics({ waitForLeaders: true, topics: topics.map((topic) => ({ topic, numPartitions: TEST_TOPIC_PARTITIONS, replicationFactor: 1 })) });
  } finally {
    await admin.disconnect();
  }
}

/** Fresh topic, dead-letter topic and group for one test (both topics created), as service environment. */
export async function kafkaEnv(label: string): Promise<{ KAFKA_BROKERS: string; KAFKA_SCAN_TOPIC: string; KAFKA_DLQ_TOPIC: string; KAFKA_GROUP_ID: string }> {
  const id = `${label}-${randomUUID().slice(0, 8)}`;
  const env = { KAFKA_BROKERS: kafkaBrokers(), KAFKA_SCAN_TOPIC: `scans-${id}`, KAFKA_DLQ_TOPIC: `dlq-${id}`, KAFKA_GROUP_ID: `group-${id}` };
  await createTopics(env.KAFKA_SCAN_TOPIC, env.KAFKA_DLQ_TOPIC);
  return env;
}

let kafka: Kafka | null = null;
function client(): Kafka {
  kafka ??= new Kafka({ clientId: 'test-gateway', brokers: [kafkaBrokers()], logLevel: logLevel.NOTHING });
  return kafka;
}

export async function gateway(): Promise<{ publish(topic: string, key: string, value: string | object): Promise<void>; close(): Promise<void> }> {
  const producer: Producer = client().producer({ allowAutoTopicCreation: true });
  await producer.connect();
  return {
    async publish(topic, key, value) {
      await producer.send({ topic, messages: [{ key, value: typeof value === 'string' ? value : JSON.stringify(value) }] });
    },
    close: () => producer.disconnect(),
  };
}

export interface DeadLetter {
  key: string | null;
  value: string | null;
  /** The value's bytes as sent (an unreadable record batch is binary). */
  bytes: Buffer | null;
  headers: Record<string, string>;
}

/** Reads the dead-letter topic from the start until `count` messages arrived (or the timeout); `brokers` for a broker other than the run's. */
export async function readDeadLetters(topic: string, count: number, timeoutMs = 30_000, brokers?: string): Promise<DeadLetter[]> {
  const kafka = brokers ? new Kafka({ clientId: 'test-dlq-reader', brokers: [brokers], logLevel: logLevel.NOTHING }) : client();
  const consumer: Consumer = kafka.consumer({ groupId: `dlq-reader-${randomUUID()}`, maxWaitTimeInMs: 100 });
  const found: DeadLetter[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${found.length} of ${count} dead letters in ${timeoutMs} ms`)), timeoutMs);
      void consumer.run({
        eachMessage: async ({ message }) => {
          const headers: Record<string, string> = {};
          for (const [k, v] of Object.entries(message.headers ?? {})) headers[k] = String(v);
          found.push({ key: message.key?.toString() ?? null, value: message.value?.toString() ?? null, bytes: message.value, headers });
          if (found.length >= count) {
            clearTimeout(timer);
            resolve();
          }
        },
      });
    });
  } finally {
    await consumer.disconnect();
  }
  return found;
}

/** Polls `check` until it returns without throwing. */
export async function eventually<T>(check: () => Promise<T>, timeoutMs = 30_000, intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  }
}

export type Compression = 'none' | 'gzip' | 'snappy' | 'lz4' | 'zstd';

export interface GatewayRecord {
  key: string | Buffer | null;
  value: string | Buffer | object | null;
  headers?: Record<string, string>;
}

const b64 = (v: string | Buffer) => (typeof v === 'string' ? Buffer.from(v) : v).toString('base64');

/**
 * Publishes records as a gateway with Apache Kafka's own Java producer (test/support/kafka-broker/
 * Gateway.java, run from the broker's jars): batches compressed with `compression`, headers, null
 * keys and values, and, with `transaction`, all of them in one transaction that is committed or aborted.
 */
export async function javaGateway(topic: string, records: GatewayRecord[], options: { compression?: Compression; transaction?: 'commit' | 'abort'; brokers?: string } = {}): Promise<void> {
  const { spawn } = await import('node:child_process');
  const path = await import('node:path');
  const { GATEWAY_SOURCE: source, KAFKA_BROKER_LIB } = await import('./kafka-broker.js');
  const lines = records.map((r) => {
    const value = r.value === null ? '-' : b64(Buffer.isBuffer(r.value) || typeof r.value === 'string' ? r.value : JSON.stringify(r.value));
    const headers = Object.entries(r.headers ?? {}).map(([k, v]) => `${k}=${b64(v)}`).join(',');
    return `${r.key === null ? '-' : b64(r.key)}\t${value}\t${headers}`;
  });
  const child = spawn('java', ['-Xmx256m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1', '-cp', path.join(KAFKA_BROKER_LIB, '*'), source, options.brokers ?? kafkaBrokers(), topic, options.compression ?? 'none', options.transaction ?? 'plain'], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  child.stdin.end(lines.join('\n') + '\n');
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0 || !out.includes(`sent ${records.length}`)) throw new Error(`the Java gateway failed (${code}):\n${out.slice(-3000)}`);
}
