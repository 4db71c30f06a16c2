import type pg from 'pg';
import type { KeyRing } from '../../shared/auth/key-encryption.js';
import type { Logger } from '../../shared/logger.js';
import { sleep } from '../../shared/retry.js';
import { attemptSeconds, deliveryAttempts, deliveryLatency, endpointsDisabled } from './metrics.js';
import { claimDeliveries, recordOutcomes, type Claimed, type Outcome } from './queue.js';
import { OpenedSecrets } from './secrets.js';
import { sendWebhook, type Attempt } from './send.js';

/**
 * Sends the queued deliveries (docs/design.md "Webhooks"). Any number of processes run this: a
 * worker claims due deliveries with `FOR UPDATE SKIP LOCKED` and holds each with a lease (a
 * crashed worker's lease runs out and another sends it again, under the same webhook-id: at least
 * once). Only the first pending delivery of each (endpoint, asset) is ever due, so an asset's
 * later event waits while an earlier one is retried, and goes once it succeeded or was given up.
 */

/** Delays before each retry, after the attempt before it (about 3 days in all); ±20 % jitter. */
export const RETRY_DELAYS_SECONDS = [5, 300, 1800, 7200, 18_000, 36_000, 50_400, 72_000, 86_400] as const;
export const MAX_ATTEMPTS = RETRY_DELAYS_SECONDS.length + 1;

/** Most attempts answered whose outcomes wait to be written, before a worker stops sending more. */
const MAX_UNRECORDED = 1000;

/** The delay before the next attempt, after `attemptsMade` failed ones (1 or more). */
export function retryDelayMs(attemptsMade: number, scale = 1, random: () => number = Math.random): number {
  const base = RETRY_DELAYS_SECONDS[Math.min(attemptsMade, RETRY_DELAYS_SECONDS.length) - 1]! * 1000;
  return Math.round(base * scale * (0.8 + 0.4 * random()));
}

export interface DeliveryWorkerOptions {
  pool: pg.Pool;
  /** Opens the endpoints' sealed secrets (services/webhooks/secrets.ts). */
  keys: KeyRing | null;
  log: Logger;
  allowPrivate: boolean;
  timeoutMs: number;
  retryScale: number;
  concurrency: number;
  /** How often an idle worker looks for due deliveries (a wake-up comes sooner). */
  pollMs?: number;
}

export class DeliveryWorker {
  private readonly abort = new AbortController();
  private readonly inflight = new Set<Promise<void>>();
  private wakeUp: (() => void) | null = null;
  private woken = false;
  private nudged = false;
  private loop: Promise<void> | null = null;
  private readonly outcomes: Array<{ outcome: Outcome; resolve: () => void; reject: (error: unknown) => void }> = [];
  private writing: Promise<void> | null = null;
  /** Attempts made whose outcome is not committed yet (their heads stay leased meanwhile). */
  private readonly recording = new Set<Promise<void>>();
  private readonly opened = new OpenedSecrets();
  /** Claimed, waiting for a free slot. */
  private readonly ready: Claimed[] = [];
  private claiming: Promise<void> | null = null;

  constructor(private readonly options: DeliveryWorkerOptions) {}

  start(): void {
    this.loop = this.run();
  }

  /** Something may be due now (a batch queued, an attempt finished). */
  wake(): void {
    this.nudged = true;
    this.rouse();
  }

  /** The loop has something to look at (a slot freed, a claim's rows), nothing new due. */
  private rouse(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  /** Stops claiming, and lets the attempts in flight finish (each within the timeout). */
  async stop(): Promise<void> {
    this.abort.abort();
    this.wake();
    await this.loop;
    await Promise.allSettled([...this.inflight]);
    await Promise.allSettled([...this.recording]);
  }

  private async run(): Promise<void> {
    const { concurrency, log } = this.options;
    // Claims in batches, one claim per quarter of the slots: one per finished attempt would scan
    // the queue once per delivery. The next batch is claimed while the attempts go, so that a slot
    // freed finds a delivery ready rather than waiting for a claim: up to a quarter of the slots'
    // worth is held claimed, not started yet (their leases run meanwhile, as the attempts' do).
    const batch = Math.max(1, Math.ceil(concurrency / 4));
    let backoffMs = 250;
    // The last claim found fewer than it asked: claim again only once woken or after a poll.
    let drained = false;
    while (!this.abort.signal.aborted) {
      this.woken = false;
      if (this.nudged) drained = false;
      this.nudged = false;
      while (this.ready.length > 0 && this.inflight.size < concurrency) this.send(this.ready.shift()!);
      // An attempt's slot is free once its answer came; its outcome is written behind, with others,
      // while the next attempts go. Outcomes waiting to be written are bounded: past the bound, the
      // worker claims nothing more until they are written.
      const room = concurrency + batch - this.inflight.size - this.ready.length;
      if (!this.claiming && !drained && room >= batch && this.recording.size < MAX_UNRECORDED) {
        this.claiming = this.claim(room).then(
          (claimed) => {
            this.ready.push(...claimed);
            drained = claimed.length < room;
            backoffMs = 250;
          },
          async (error: unknown) => {
            log.error({ err: error }, 'webhook deliveries could not be claimed; trying again');
            await sleep(backoffMs, this.abort.signal);
            backoffMs = Math.min(backoffMs * 2, 10_000);
          },
        );
        void this.claiming.finally(() => {
          this.claiming = null;
          this.rouse();
        });
      }
      if (this.woken) continue;
      // Woken by a slot freed, a claim's end, something that may have made a delivery due (a
      // batch queued, an outcome written: `nudged`), or the poll.
      const polled = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(true), this.options.pollMs ?? 250);
        this.wakeUp = () => {
          clearTimeout(timer);
          resolve(false);
        };
      });
      this.wakeUp = null;
      if (polled) drained = false;
    }
    await this.claiming;
    // Claimed, not started: sent now, as the attempts in flight finish (their leases would only
    // delay them).
    for (const delivery of this.ready.splice(0)) this.send(delivery);
  }

  private send(delivery: Claimed): void {
    const attempt: Promise<void> = this.deliver(delivery)
      .catch((error: unknown) => this.options.log.error({ err: error, delivery: delivery.id }, 'webhook delivery not attempted; its lease runs out and it is tried again'))
      .finally(() => {
        this.inflight.delete(attempt);
        this.rouse();
      });
    this.inflight.add(attempt);
  }

  private claim(limit: number): Promise<Claimed[]> {
    return claimDeliveries(this.options.pool, limit, this.options.timeoutMs * 2 + 5000);
  }

  /** Sends one attempt; resolves once it has its answer, and leaves its outcome to be recorded. */
  private async deliver(delivery: Claimed): Promise<void> {
    const { allowPrivate, timeoutMs } = this.options;
    const { secret, previous } = this.opened.open(delivery, this.options.keys);
    const secrets = previous ? [secret, previous] : [secret];
    const attempt = await sendWebhook(delivery.url, delivery.webhook_id, delivery.body, secrets, { allowPrivate, timeoutMs });
    attemptSeconds.observe({ outcome: attempt.ok ? 'succeeded' : 'failed' }, attempt.durationMs / 1000);
    const recorded: Promise<void> = this.recordAttempt(delivery, attempt)
      .catch((error: unknown) => this.options.log.error({ err: error, delivery: delivery.id }, 'webhook delivery outcome not recorded; its lease runs out and it is sent again'))
      .finally(() => {
        this.recording.delete(recorded);
        this.wake();
      });
    this.recording.add(recorded);
  }

  private async recordAttempt(delivery: Claimed, attempt: Attempt): Promise<void> {
    const { log, retryScale } = this.options;
    const made = delivery.attempt + 1;
    const outcome = { id: delivery.id, endpointId: delivery.endpoint_id, assetId: delivery.asset_id, made, attempt };
    if (attempt.ok || made < MAX_ATTEMPTS) {
      await this.record({ ...outcome, delayMs: attempt.ok ? null : retryDelayMs(made, retryScale) });
      deliveryAttempts.inc({ outcome: attempt.ok ? 'succeeded' : 'failed' });
      if (attempt.ok) deliveryLatency.observe(Math.max(0, (Date.now() - delivery.created_at.getTime()) / 1000));
      else log.debug({ delivery: delivery.id, endpoint: delivery.endpoint_id, attempt: made, error: attempt.error }, 'webhook delivery failed; retrying later');
      return;
    }
    const reason = `disabled after ${made} failed attempts to deliver ${delivery.webhook_id} (last: ${attempt.error ?? 'failed'})`;
    await this.record({ ...outcome, delayMs: null, disable: reason });
    deliveryAttempts.inc({ outcome: 'gave_up' });
    endpointsDisabled.inc();
    log.warn({ endpoint: delivery.endpoint_id, delivery: delivery.id, webhook_id: delivery.webhook_id, error: attempt.error }, 'webhook endpoint disabled: the last retry of a delivery failed');
  }

  /**
   * Records an outcome (a success, a failure to retry after `delayMs`, or the last). Outcomes that finish
   * while one statement writes others are written together by the next: one statement per batch,
   * not per delivery. Resolves once its outcome is committed.
   */
  private record(outcome: Outcome): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.outcomes.push({ outcome, resolve, reject });
      if (!this.writing) this.writing = this.writeOutcomes();
    });
  }

  private async writeOutcomes(): Promise<void> {
    while (this.outcomes.length > 0) {
      const batch = this.outcomes.splice(0, 500);
      try {
        await recordOutcomes(this.options.pool, batch.map((b) => b.outcome));
        for (const b of batch) b.resolve();
      } catch (error) {
        for (const b of batch) b.reject(error);
      }
    }
    this.writing = null;
  }
}
