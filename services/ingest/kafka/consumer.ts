import { createHash } from 'node:crypto';
import client from 'prom-client';
import type { ServiceContext } from '../../../shared/service-context.js';
import { recordReaderScans } from '../../../shared/domain/scans/commands.js';
import type { ReaderMessage } from '../../../shared/domain/scans/decider.js';
import { parseReaderMessage } from '../../../shared/domain/scans/reader-messages.js';
import { isTransient } from '../../../shared/errors.js';
import { untilDone } from '../../../shared/retry.js';
import { metricsRegistry } from '../../ops/metrics.js';
import type { IngestMetrics } from '../metrics.js';
import type { ConsumerSession, IncomingBatch, KafkaIngestClient, OutgoingMessage } from './client.js';

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
const unreadableBatches = new client.Counter({
  name: 'tracking_kafka_unreadable_batches_total',
  help: 'Record batches of the scan topic that could not be read (checksum, codec), each sent whole to the dead-letter topic',
  registers: [metricsRegistry],
});

const consumerRunning = new client.Gauge({
  name: 'tracking_kafka_consumer_running',
  help: 'Whether the fixed-reader Kafka consumer is consuming (1) or stopped, waiting to restart (0)',
  registers: [metricsRegistry],
});
const consumerRestarts = new client.Counter({
  name: 'tracking_kafka_consumer_restarts_total',
  help: 'Times the fixed-reader Kafka consumer stopped by itself and was started again',
  registers: [metricsRegistry],
});

/** Pause before the n-th restart in a row: 1 s, 2 s, 4 s, ... up to 30 s. */
export function restartBackoffMs(attempt: number): number {
  return Math.min(1_000 * 2 ** Math.max(0, attempt - 1), 30_000);
}
/** A consumer that ran this long before it stopped starts the backoff again from its first step. */
const STABLE_MS = 60_000;

export type ConsumerState = { running: true } | { running: false; reason: string; sinceMs: number };

/** One line: the error's class and message. */
function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name !== 'Error' ? `${error.name}: ` : ''}${error.message}`.replace(/\s+/g, ' ').trim();
  return String(error).replace(/\s+/g, ' ').trim();
}

/** At most this many dead letters sent whose batch is not committed yet are remembered, so that a redelivery to this process does not send them again. */
const REMEMBERED_DEAD_LETTERS = 10_000;

/** What a dead letter stands for: where it was read and what it holds. */
function deadLetterIdentity(letter: OutgoingMessage): string {
  const digest = createHash('sha256');
  if (letter.key) digest.update(letter.key);
  digest.update('\0');
  if (letter.value) digest.update(letter.value);
  const h = letter.headers;
  return `${h['x-original-topic']}/${h['x-original-partition']}/${h['x-original-offset']}/${digest.digest('base64url')}`;
}

/**
 * The fixed-reader consumer (docs/scan-ingestion.md "Fixed readers over Kafka"). Each batch: messages parsed; the
 * good ones resolved and appended as scan events in one atomic append; those that are not JSON or
 * match neither shape sent to the dead-letter topic unchanged, with the reason, and so is each
 * record batch that could not be read, whole ("A batch that cannot be read"); then the offsets
 * committed, past those batches too. While Postgres (or the log) is unreachable the same batch is tried again, with a
 * growing pause, and nothing is committed; a consumer that stops or loses the partition leaves
 * the batch uncommitted, to be delivered again (the read models count a read once by its key).
 */
export class ScanConsumer {
  private state: ConsumerState = { running: false, reason: 'not started', sinceMs: Date.now() };
  private session: ConsumerSession | null = null;
  private closing = false;
  private wake: () => void = () => undefined;
  private loop: Promise<void> | null = null;
  private closeRequested: () => void = () => undefined;
  /** Identities of dead letters sent whose batch is not committed yet (deadLetterIdentity). */
  private readonly sentNotCommitted = new Set<string>();
  /** Settles when stop() is called: the supervisor stops waiting on a session then. */
  private readonly closed = new Promise<void>((resolve) => {
    this.closeRequested = resolve;
  });

  constructor(
    private readonly ctx: ServiceContext,
    private readonly kafka: KafkaIngestClient,
    private readonly topics: { scans: string; deadLetters: string },
    private readonly metrics: IngestMetrics,
    private readonly backoffMs: (attempt: number) => number = restartBackoffMs,
  ) {
    consumerRunning.set(0);
  }

  /**
   * Starts the consumer and keeps it going: whatever stops it (a crash, a fatal broker error, the
   * group lost, a broker that cannot be reached at start) is logged at error with its cause, and
   * the consumer is started again after a growing pause. Resolves once the first start has either
   * joined the group or failed (and so is being retried): the process starts either way.
   */
  async start(): Promise<void> {
    let first: () => void = () => undefined;
    const firstTry = new Promise<void>((resolve) => {
      first = resolve;
    });
    this.loop = this.supervise(first);
    await firstTry;
  }

  /** Running, or why not and since when: /readyz and /healthz read it. */
  status(): ConsumerState {
    return this.state;
  }

  async stop(): Promise<void> {
    this.closing = true;
    this.closeRequested();
    this.wake();
    await this.session?.stop();
    await this.loop;
  }

  private stoppedBecause(reason: string): void {
    this.state = { running: false, reason, sinceMs: this.state.running ? Date.now() : this.state.sinceMs };
    consumerRunning.set(0);
  }

  private async supervise(firstTried: () => void): Promise<void> {
    for (let attempt = 1; !this.closing; ) {
      const startedAt = Date.now();
      let cause: unknown;
      try {
        this.session = await this.kafka.consume(this.topics.scans, (batch) => this.handle(batch));
        if (this.closing) break;
        this.state = { running: true };
        consumerRunning.set(1);
        firstTried();
        cause = await Promise.race([this.session.stopped, this.closed]);
        if (this.closing) break;
        await this.session.stop();
      } catch (error) {
        cause = error;
      }
      this.session = null;
      if (this.closing) break;
      const reason = describe(cause);
      this.stoppedBecause(reason);
      firstTried();
      if (Date.now() - startedAt >= STABLE_MS) attempt = 1;
      const pause = this.backoffMs(attempt++);
      this.ctx.log.error({ err: cause, topic: this.topics.scans, restartInMs: pause }, `kafka: consumer stopped: ${reason}; restarting in ${pause} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, pause);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      if (this.closing) break;
      consumerRestarts.inc();
    }
    this.session = null;
    this.stoppedBecause('stopped');
  }

  private async handle(batch: IncomingBatch): Promise<void> {
    if (batch.messages.length === 0 && batch.unreadable.length === 0) return;
    const firstOffset = [batch.messages[0]?.offset, batch.unreadable[0]?.firstOffset]
      .filter((offset): offset is string => offset !== undefined)
      .map(BigInt)
      .reduce((a, b) => (a < b ? a : b));
    // Until it is committed, the batch itself is behind: a consumer stuck on it (Postgres down)
    // shows at least its backlog instead of the last committed batch's.
    this.lag(batch, firstOffset - 1n);
    const good: ReaderMessage[] = [];
    const dead: OutgoingMessage[] = [];
    const origin = (offset: string) => ({ 'x-original-topic': batch.topic, 'x-original-partition': String(batch.partition), 'x-original-offset': offset });
    for (const message of batch.messages) {
      const parsed = parseReaderMessage(message.value);
      if (parsed.ok) good.push({ readerId: parsed.readerId, reads: parsed.reads });
      else dead.push({ key: message.key, value: message.value, headers: { 'x-dlq-reason': parsed.reason, ...origin(message.offset) } });
    }
    // A batch that cannot be read goes whole, as the broker sent it, under its first offset (record-batches.ts).
    for (const unreadable of batch.unreadable) {
      dead.push({ key: null, value: unreadable.bytes, headers: { 'x-dlq-reason': unreadable.reason, ...origin(unreadable.firstOffset), 'x-original-last-offset': unreadable.lastOffset } });
    }
    const identities = dead.map(deadLetterIdentity);
    const unsent = dead.filter((_, i) => !this.sentNotCommitted.has(identities[i]!));
    if (good.length > 0 && !(await this.appendUntilDone(batch, good))) return;
    if (unsent.length > 0) {
      if (!batch.isActive()) return;
      if (!(await this.untilDone(batch, () => this.kafka.produce(this.topics.deadLetters, unsent), () => true))) return;
      for (const identity of identities) this.remember(identity);
      deadLetters.inc(unsent.length);
      for (const letter of unsent) {
        const last = letter.headers['x-original-last-offset'];
        if (last === undefined) continue;
        unreadableBatches.inc();
        this.ctx.log.error(
          { topic: batch.topic, partition: batch.partition, firstOffset: letter.headers['x-original-offset'], lastOffset: last, bytes: letter.value?.length, deadLetterTopic: this.topics.deadLetters },
          `kafka: ${letter.headers['x-dlq-reason']}; offsets ${letter.headers['x-original-offset']} to ${last} of ${batch.topic}/${batch.partition} sent to ${this.topics.deadLetters}`,
        );
      }
    }
    if (!batch.isActive()) return;
    await batch.commit(batch.lastOffset);
    for (const identity of identities) this.sentNotCommitted.delete(identity);
    this.lag(batch, BigInt(batch.lastOffset));
  }

  private remember(identity: string): void {
    this.sentNotCommitted.add(identity);
    if (this.sentNotCommitted.size > REMEMBERED_DEAD_LETTERS) this.sentNotCommitted.delete(this.sentNotCommitted.values().next().value!);
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
      // Failures that pass (the log or Postgres unreachable, contention): the batch is tried again, never dead-lettered for them.
      isTransient,
    );
  }

  /** Runs `work` until it succeeds; false when the batch stopped being ours first. */
  private untilDone(batch: IncomingBatch, work: () => Promise<void>, retryable: (error: unknown) => boolean): Promise<boolean> {
    return untilDone(work, {
      retryable,
      onRetry: (error, attempt) => this.ctx.log.warn({ err: error, attempt, topic: batch.topic, partition: batch.partition }, 'scan batch not recorded yet; trying again'),
      wanted: () => batch.isActive(),
      beforePause: () => batch.heartbeat(),
    });
  }

}
