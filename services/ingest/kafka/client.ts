import { createRequire } from 'node:module';
import { decompress as zstdDecompress } from 'fzstd';
import kafkajs, { Kafka, logLevel, type Admin, type Consumer, type Producer } from 'kafkajs';
import type { Logger } from '../../../shared/logger.js';
import { guardCodecTable, unreadableBatchOf, type UnreadableBatch } from './record-batches.js';

// kafkajs decodes gzip itself; the other codecs a gateway may use are plugged in here. Only
// decoding is needed: the dead letters this service produces are sent uncompressed.
// kafkajs-snappy (snappyjs, pure JavaScript) reads Kafka's xerial-framed snappy; lz4js reads the
// LZ4 frames Kafka writes; fzstd decodes zstd frames. Their codec packages with native parts
// (kafkajs-lz4 on lz4 0.6, @kafkajs/zstd on cppzst) do not build on Node 20.
const require = createRequire(import.meta.url);
const snappyCodec = require('kafkajs-snappy') as () => { compress(encoder: { buffer: Buffer }): Promise<Buffer>; decompress(buffer: Buffer): Promise<Buffer> };
const lz4 = require('lz4js') as { decompress(src: Uint8Array): Uint8Array };
const decodeOnly = (name: string, decode: (buffer: Buffer) => Uint8Array) => () => ({
  compress: () => Promise.reject(new Error(`${name} compression is not used by this service`)),
  decompress: async (buffer: Buffer) => {
    const out = decode(buffer);
    return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
  },
});
// kafkajs is CommonJS: its codec table is reached through the default export under Node's ESM.
const { CompressionCodecs, CompressionTypes } = kafkajs;
CompressionCodecs[CompressionTypes.Snappy] = snappyCodec;
CompressionCodecs[CompressionTypes.LZ4] = decodeOnly('lz4', (buffer) => lz4.decompress(buffer));
CompressionCodecs[CompressionTypes.ZSTD] = decodeOnly('zstd', (buffer) => zstdDecompress(buffer));
// Every entry, "none" included, checks its batch and stands in for one that cannot be read (record-batches.ts).
guardCodecTable(CompressionCodecs as unknown as Parameters<typeof guardCodecTable>[0]);

/**
 * The one module that knows the Kafka client. kafkajs is the design card's client (pure
 * JavaScript, no native build). The rest of ingest sees only these small interfaces, so the
 * KafkaJS-compatible API of `@confluentinc/kafka-javascript` (librdkafka underneath) could replace
 * it here alone: the same `Kafka`/consumer/producer/admin calls, with its config under `kafkaJS`.
 */

export interface IncomingMessage {
  key: Buffer | null;
  value: Buffer | null;
  offset: string;
}

export type { UnreadableBatch };

export interface IncomingBatch {
  topic: string;
  partition: number;
  /** The records, in offset order, without those of `unreadable` batches. */
  messages: IncomingMessage[];
  /** Record batches of this fetch that cannot be read (a checksum, a codec), in offset order. */
  unreadable: UnreadableBatch[];
  /** The last offset the batch covers, an unreadable batch's included: commit this. */
  lastOffset: string;
  /** Offset of the next message the broker will have (lag = highWatermark - next offset to read). */
  highWatermark: string;
  /** Keeps this consumer's membership alive during a long batch. */
  heartbeat(): Promise<void>;
  /** False once the consumer is stopping or the partition was taken away (rebalance): do not commit then. */
  isActive(): boolean;
  /** Commits the batch's offsets: the next read of this partition starts after `lastOffset`. */
  commit(lastOffset: string): Promise<void>;
}

export interface OutgoingMessage {
  key: Buffer | null;
  value: Buffer | null;
  headers: Record<string, string>;
}

/** One running consumer: from joining the group until it stops, by `stop()` or by itself. */
export interface ConsumerSession {
  /** Settles with the cause once the consumer stopped by itself (a crash, a fatal error, the group lost); never after `stop()`. */
  readonly stopped: Promise<Error>;
  /** Finishes the batch in flight (its handler returns), commits nothing more, leaves the group. */
  stop(): Promise<void>;
}

export interface KafkaIngestClient {
  /** Joins the group, subscribes, and hands every batch to `handle` (one at a time per partition). */
  consume(topic: string, handle: (batch: IncomingBatch) => Promise<void>): Promise<ConsumerSession>;
  produce(topic: string, messages: OutgoingMessage[]): Promise<void>;
  /** Reachability of the cluster, for /readyz. */
  ping(timeoutMs: number): Promise<void>;
  /** Members of the consumer group right now: 0 when no ingest process consumes for it. */
  groupMembers(): Promise<number>;
  /** Finishes the batch in flight (its handler returns), commits nothing more, leaves the group. */
  close(): Promise<void>;
}

function kafkaLogger(log: Logger) {
  return () =>
    ({ level, log: entry }: { level: number; log: { message: string } & Record<string, unknown> }) => {
      const { message, ...rest } = entry;
      if (level <= logLevel.ERROR) log.error(rest, `kafka: ${message}`);
      else if (level === logLevel.WARN) log.warn(rest, `kafka: ${message}`);
    };
}

export function createKafkaIngestClient(options: { brokers: string[]; groupId: string; clientId: string; log: Logger }): KafkaIngestClient {
  const kafka = new Kafka({
    clientId: options.clientId,
    brokers: options.brokers,
    logLevel: logLevel.WARN,
    logCreator: kafkaLogger(options.log),
    retry: { initialRetryTime: 200, retries: 8 },
  });
  let producer: Producer | null = null;
  let admin: Admin | null = null;
  let stopping = false;
  const sessions = new Set<ConsumerSession>();

  return {
    async consume(topic, handle) {
      // A member that dies without leaving (kill -9) holds its partitions until its session times
      // out: 10 s keeps that hand-over short; batches that wait on Postgres heartbeat meanwhile.
      // The ingest supervisor restarts a stopped consumer itself (with backoff, counted): kafkajs
      // must not restart one on its own, nor keep retrying one that cannot go on.
      const consumer: Consumer = kafka.consumer({
        groupId: options.groupId,
        sessionTimeout: 10_000,
        heartbeatInterval: 1_000,
        maxWaitTimeInMs: 100,
        // The scan topic is the operators' to create: a missing one stops the consumer (said by /readyz), it is not made here.
        allowAutoTopicCreation: false,
        retry: { initialRetryTime: 200, retries: 5, restartOnFailure: async () => false },
      });
      let closing = false;
      let settle: (cause: Error) => void = () => undefined;
      const stopped = new Promise<Error>((resolve) => {
        settle = resolve;
      });
      consumer.on(consumer.events.CRASH, ({ payload }) => settle(payload.error instanceof Error ? payload.error : new Error(String(payload.error))));
      consumer.on(consumer.events.STOP, () => {
        if (!closing) settle(new Error('the consumer stopped'));
      });
      // kafkajs rejoins by itself when the coordinator no longer knows its member (a session that
      // timed out while the process was frozen, a member an administrator removed), under a new
      // member id: a lost group, which the supervisor handles as any other stop.
      let memberId: string | null = null;
      consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
        if (memberId !== null && payload.memberId !== memberId && !closing) {
          settle(new Error(`the group ${options.groupId} lost this member (${memberId}): the coordinator no longer knew it (a session that timed out, or a member removed), and it joined again as another`));
        }
        memberId = payload.memberId;
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
        await consumer.subscribe({ topics: [topic], fromBeginning: true });
      } catch (error) {
        sessions.delete(session);
        await session.stop();
        throw error;
      }
      const current = consumer;
      await current.run({
        autoCommit: false,
        eachBatchAutoResolve: false,
        eachBatch: async ({ batch, heartbeat, isRunning, isStale, resolveOffset }) => {
          const messages: IncomingMessage[] = [];
          const unreadable = new Set<UnreadableBatch>();
          for (const m of batch.messages) {
            const standsFor = unreadableBatchOf(m.value);
            if (standsFor) unreadable.add(standsFor);
            else messages.push({ key: m.key, value: m.value, offset: m.offset });
          }
          await handle({
            topic: batch.topic,
            partition: batch.partition,
            messages,
            unreadable: [...unreadable],
            lastOffset: batch.messages[batch.messages.length - 1]?.offset ?? batch.lastOffset(),
            highWatermark: batch.highWatermark,
            heartbeat,
            isActive: () => !stopping && !closing && isRunning() && !isStale(),
            async commit(lastOffset) {
              // Resolving moves the fetch position past the batch; committing makes it survive us.
              resolveOffset(lastOffset);
              await current.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: (BigInt(lastOffset) + 1n).toString() }]);
            },
          });
        },
      });
      return session;
    },
    async produce(topic, messages) {
      if (!producer) {
        producer = kafka.producer({ allowAutoTopicCreation: true, retry: { retries: 5 } });
        await producer.connect();
      }
      await producer.send({
        topic,
        messages: messages.map((m) => ({ key: m.key, value: m.value, headers: m.headers })),
      });
    },
    async ping(timeoutMs) {
      if (!admin) {
        admin = kafka.admin();
        await admin.connect();
      }
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          admin.describeCluster(),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error('kafka did not answer in time')), timeoutMs);
          }),
        ]);
      } finally {
        clearTimeout(timer);
      }
    },
    async groupMembers() {
      if (!admin) {
        admin = kafka.admin();
        await admin.connect();
      }
      const { groups } = await admin.describeGroups([options.groupId]);
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
