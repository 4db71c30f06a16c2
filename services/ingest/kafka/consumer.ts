import client from 'prom-client';
import type { ServiceContext } from '../../../shared/context.js';
import { isConnectionError } from '../../../shared/db/pool.js';
import { CommandContentionError } from '../../../shared/domain/command.js';
import { recordReaderScans } from '../../../shared/domain/scans/commands.js';
import type { ReaderMessage } from '../../../shared/domain/scans/decider.js';
import { parseReaderMessage } from '../../../shared/domain/scans/payloads.js';
import { EventStoreUnavailableError } from '../../../shared/event-store/port.js';
import { metricsRegistry } from '../../ops/metrics.js';
import type { IngestMetrics } from '../metrics.js';
import type { IncomingBatch, KafkaIngestClient, OutgoingMessage } from './client.js';

const appendSeconds = new client.Histogram({
  name: 'tracking_ingest_append_seconds',
  help: 'Time to resolve and append the scan events of one Kafka batch',
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  registers: [metricsRegistry],
});
const consumerLag = new client.Gauge({
  name: 'tracking_kafka_consumer_lag',
  help: 'Messages of the scan topic not yet consumed, per partition, after the last committed batch',
  labelNames: ['topic', 'partition'] as const,
  registers: [metricsRegistry],
});
const deadLetters = new client.Counter({
  name: 'tracking_ingest_dead_letters_total',
  help: 'Kafka messages sent to the dead-letter topic',
  registers: [metricsRegistry],
});

/** Failures that pass: the batch is tried again, never dead-lettered for them. */
function transient(error: unknown): boolean {
  return error instanceof EventStoreUnavailableError || error instanceof CommandContentionError || isConnectionError(error);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The fixed-reader consumer (INTERFACES.md "Fixed readers"). Each batch: messages parsed; the
 * good ones resolved and appended as scan events in one atomic append; those that are not JSON or
 * match neither shape sent to the dead-letter topic unchanged, with the reason; then the offsets
 * committed. While Postgres (or the log) is unreachable the same batch is tried again, with a
 * growing pause, and nothing is committed; a consumer that stops or loses the partition leaves
 * the batch uncommitted, to be delivered again (the read models count a read once by its key).
 */
export class ScanConsumer {
  constructor(
    private readonly ctx: ServiceContext,
    private readonly kafka: KafkaIngestClient,
    private readonly topics: { scans: string; deadLetters: string },
    private readonly metrics: IngestMetrics,
  ) {}

  start(): Promise<void> {
    return this.kafka.consume(this.topics.scans, (batch) => this.handle(batch));
  }

  private async handle(batch: IncomingBatch): Promise<void> {
    if (batch.messages.length === 0) return;
    // Until it is committed, the batch itself is behind: a consumer stuck on it (Postgres down)
    // shows at least its backlog instead of the last committed batch's.
    this.lag(batch, BigInt(batch.messages[0]!.offset) - 1n);
    const good: ReaderMessage[] = [];
    const dead: OutgoingMessage[] = [];
    for (const message of batch.messages) {
      const parsed = parseReaderMessage(message.value);
      if (parsed.ok) good.push({ readerId: parsed.readerId, reads: parsed.reads });
      else {
        dead.push({
          key: message.key,
          value: message.value,
          headers: {
            'x-dlq-reason': parsed.reason,
            'x-original-topic': batch.topic,
            'x-original-partition': String(batch.partition),
            'x-original-offset': message.offset,
          },
        });
      }
    }
    if (good.length > 0 && !(await this.appendUntilDone(batch, good))) return;
    if (dead.length > 0 && !(await this.untilDone(batch, () => this.kafka.produce(this.topics.deadLetters, dead), () => true))) return;
    deadLetters.inc(dead.length);
    const last = batch.messages[batch.messages.length - 1]!.offset;
    if (!batch.isActive()) return;
    await batch.commit(last);
    this.lag(batch, BigInt(last));
  }

  /** Messages of the batch's partition past `done`, as of the batch's fetch. */
  private lag(batch: IncomingBatch, done: bigint): void {
    consumerLag.set({ topic: batch.topic, partition: String(batch.partition) }, Math.max(0, Number(BigInt(batch.highWatermark) - done - 1n)));
  }

  private async appendUntilDone(batch: IncomingBatch, good: ReaderMessage[]): Promise<boolean> {
    return this.untilDone(
      batch,
      async () => {
        const timer = appendSeconds.startTimer();
        const { counts, unknownByCause } = await recordReaderScans(this.ctx, good);
        timer();
        this.metrics.recorded('kafka', counts.accepted, unknownByCause);
      },
      transient,
    );
  }

  /** Runs `work` until it succeeds; false when the batch stopped being ours first. */
  private async untilDone(batch: IncomingBatch, work: () => Promise<void>, retryable: (error: unknown) => boolean): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      try {
        await work();
        return true;
      } catch (error) {
        if (!retryable(error)) throw error;
        this.ctx.log.warn({ err: error, attempt, topic: batch.topic, partition: batch.partition }, 'scan batch not recorded yet; trying again');
      }
      if (!batch.isActive()) return false;
      await batch.heartbeat().catch(() => undefined);
      await sleep(Math.min(100 * 2 ** attempt, 2_000));
      if (!batch.isActive()) return false;
    }
  }
}
