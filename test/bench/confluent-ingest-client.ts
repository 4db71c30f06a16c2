import { createRequire } from 'node:module';
import path from 'node:path';
import type { ConsumerSession, IncomingBatch, KafkaIngestClient } from '../../services/ingest/kafka/client.js';

/**
 * The ingest's Kafka port (`KafkaIngestClient` of services/ingest/kafka/client.ts) written on
 * `@confluentinc/kafka-javascript` (librdkafka underneath) through its KafkaJS-compatible API, with
 * the product's settings: the candidate that test/bench/kafka-clients.bench.ts measures next to the
 * kafkajs client. It is not a dependency of the project: the package is loaded from
 * `CONFLUENT_KAFKA_JAVASCRIPT` (the folder of a built package) or, failing that, resolved by name.
 */

/** The little of the package's KafkaJS API used here (its own types ship with the package). */
interface ConfluentBatchPayload {
  batch: { topic: string; partition: number; highWatermark: string; messages: Array<{ key: Buffer | null; value: Buffer | null; offset: string }> };
  heartbeat(): Promise<void>;
  isRunning(): boolean;
  isStale(): boolean;
  resolveOffset(offset: string): void;
}
interface ConfluentConsumer {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  subscribe(subscription: { topics: string[] }): Promise<void>;
  run(config: { eachBatchAutoResolve: boolean; eachBatch: (payload: ConfluentBatchPayload) => Promise<void> }): Promise<void>;
  commitOffsets(offsets: Array<{ topic: string; partition: number; offset: string }>): Promise<void>;
}
interface ConfluentProducer {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  send(record: { topic: string; messages: Array<{ key: Buffer | null; value: Buffer | null; headers: Record<string, string> }> }): Promise<unknown>;
}
interface ConfluentAdmin {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  listTopics(): Promise<string[]>;
  describeGroups(groups: string[]): Promise<{ groups: Array<{ members: unknown[] }> }>;
}
export interface ConfluentLogger {
  info(message: string, extra?: object): void;
  error(message: string, extra?: object): void;
  warn(message: string, extra?: object): void;
  debug(message: string, extra?: object): void;
  namespace(): ConfluentLogger;
  setLogLevel(): void;
}
interface ConfluentKafka {
  consumer(config: Record<string, unknown>): ConfluentConsumer;
  producer(config: Record<string, unknown>): ConfluentProducer;
  admin(config?: Record<string, unknown>): ConfluentAdmin;
}
export interface ConfluentPackage {
  librdkafkaVersion: string;
  KafkaJS: { Kafka: new (config: Record<string, unknown>) => ConfluentKafka; logLevel: Record<string, number> };
}

/** The package, or why it cannot be loaded here. */
export function loadConfluentPackage(): { package: ConfluentPackage; from: string } | { missing: string } {
  const require = createRequire(import.meta.url);
  const dir = process.env.CONFLUENT_KAFKA_JAVASCRIPT;
  const from = dir ? path.resolve(dir) : '@confluentinc/kafka-javascript';
  try {
    return { package: require(from) as ConfluentPackage, from };
  } catch (error) {
    const reason = error instanceof Error ? error.message.split('\n')[0]! : String(error);
    return { missing: dir ? `CONFLUENT_KAFKA_JAVASCRIPT=${dir} does not load (${reason})` : 'no @confluentinc/kafka-javascript is installed and CONFLUENT_KAFKA_JAVASCRIPT is not set' };
  }
}

export interface ConfluentClientOptions {
  brokers: string[];
  groupId: string;
  clientId: string;
  /** Receives the client's warnings and errors (it reports consume errors only there). */
  logger: ConfluentLogger;
  /** Most messages in one `eachBatch` call: -1 (the default here) hands over what a fetch brought, like kafkajs; the package's own default is 32. */
  maxBatchSize?: number;
}

export function createConfluentIngestClient(pkg: ConfluentPackage, options: ConfluentClientOptions): KafkaIngestClient {
  const { Kafka, logLevel } = pkg.KafkaJS;
  const kafka = new Kafka({ kafkaJS: { clientId: options.clientId, brokers: options.brokers, logLevel: logLevel.WARN, logger: options.logger, retry: { initialRetryTime: 200, retries: 8 } } });
  let producer: ConfluentProducer | null = null;
  let admin: ConfluentAdmin | null = null;
  let stopping = false;
  const sessions = new Set<ConsumerSession>();
  const adminClient = async () => {
    if (!admin) {
      admin = kafka.admin();
      await admin.connect();
    }
    return admin;
  };

  return {
    async consume(topic, handle) {
      // The product's settings (services/ingest/kafka/client.ts); the consumer is read_committed by default.
      const consumer = kafka.consumer({
        kafkaJS: { groupId: options.groupId, sessionTimeout: 10_000, heartbeatInterval: 1_000, maxWaitTimeInMs: 100, allowAutoTopicCreation: false, fromBeginning: true, autoCommit: false },
        'js.consumer.max.batch.size': options.maxBatchSize ?? -1,
      });
      let closing = false;
      let settle: (cause: Error) => void = () => undefined;
      const stopped = new Promise<Error>((resolve) => {
        settle = resolve;
      });
      const session: ConsumerSession = {
        stopped,
        async stop() {
          closing = true;
          await consumer.disconnect().catch(() => undefined);
        },
      };
      sessions.add(session);
      try {
        await consumer.connect();
        await consumer.subscribe({ topics: [topic] });
      } catch (error) {
        sessions.delete(session);
        await session.stop();
        throw error;
      }
      // The package has no crash event: its run loop logs a failed fetch or handler and goes on.
      // run() settles only when the consumer disconnects, or fails to start.
      consumer
        .run({
          eachBatchAutoResolve: false,
          eachBatch: async ({ batch, heartbeat, isRunning, isStale, resolveOffset }) => {
            const incoming: IncomingBatch = {
              topic: batch.topic,
              partition: batch.partition,
              messages: batch.messages.map((m) => ({ key: m.key, value: m.value, offset: m.offset })),
              // librdkafka reads the batches itself: none reaches the handler as unreadable.
              unreadable: [],
              lastOffset: batch.messages[batch.messages.length - 1]!.offset,
              highWatermark: batch.highWatermark,
              heartbeat,
              isActive: () => !stopping && !closing && isRunning() && !isStale(),
              async commit(lastOffset) {
                resolveOffset(lastOffset);
                await consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: (BigInt(lastOffset) + 1n).toString() }]);
              },
            };
            await handle(incoming);
          },
        })
        .catch((error: unknown) => {
          if (!closing) settle(error instanceof Error ? error : new Error(String(error)));
        });
      return session;
    },
    async produce(topic, messages) {
      if (!producer) {
        producer = kafka.producer({ kafkaJS: { allowAutoTopicCreation: true, retry: { retries: 5 } } });
        await producer.connect();
      }
      await producer.send({ topic, messages: messages.map((m) => ({ key: m.key, value: m.value, headers: m.headers })) });
    },
    async ping(timeoutMs) {
      const client = await adminClient();
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          client.listTopics(),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error('kafka did not answer in time')), timeoutMs);
          }),
        ]);
      } finally {
        clearTimeout(timer);
      }
    },
    async groupMembers() {
      const { groups } = await (await adminClient()).describeGroups([options.groupId]);
      return groups[0]?.members.length ?? 0;
    },
    async close() {
      stopping = true;
      for (const session of sessions) await session.stop();
      await producer?.disconnect().catch(() => undefined);
      await admin?.disconnect().catch(() => undefined);
    },
  };
}
