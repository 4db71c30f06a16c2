import type pg from 'pg';
import type { KeyRing } from '../../shared/auth/key-encryption.js';
import type { Logger } from '../../shared/logger.js';
import { sleep } from '../../shared/projection/apply-batch.js';
import { attemptSeconds, deliveryAttempts, deliveryLatency, endpointsDisabled } from './metrics.js';
import { openSecrets, type StoredSecrets } from './secrets.js';
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

export interface Claimed extends Omit<StoredSecrets, 'id'> {
  id: number;
  endpoint_id: number;
  webhook_id: string;
  body: string;
  attempt: number;
  created_at: Date;
  url: string;
}

export class DeliveryWorker {
  private readonly abort = new AbortController();
  private readonly inflight = new Set<Promise<void>>();
  private wakeUp: (() => void) | null = null;
  private woken = false;
  private loop: Promise<void> | null = null;
  private readonly outcomes: Array<{ outcome: Outcome; resolve: () => void; reject: (error: unknown) => void }> = [];
  private writing: Promise<void> | null = null;

  constructor(private readonly options: DeliveryWorkerOptions) {}

  start(): void {
    this.loop = this.run();
  }

  /** Something may be due now (a batch queued, an attempt finished). */
  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  /** Stops claiming, and lets the attempts in flight finish (each within the timeout). */
  async stop(): Promise<void> {
    this.abort.abort();
    this.wake();
    await this.loop;
    await Promise.allSettled([...this.inflight]);
  }

  private async run(): Promise<void> {
    const { concurrency, log } = this.options;
    let backoffMs = 250;
    while (!this.abort.signal.aborted) {
      this.woken = false;
      const free = concurrency - this.inflight.size;
      let claimed: Claimed[] = [];
      // Claims in batches: one claim per finished attempt would scan the queue once per delivery.
      if (free > 0 && (free >= Math.ceil(concurrency / 4) || this.inflight.size === 0)) {
        try {
          claimed = await this.claim(free);
          backoffMs = 250;
        } catch (error) {
          log.error({ err: error }, 'webhook deliveries could not be claimed; trying again');
          await sleep(backoffMs, this.abort.signal);
          backoffMs = Math.min(backoffMs * 2, 10_000);
          continue;
        }
        for (const delivery of claimed) {
          const attempt: Promise<void> = this.deliver(delivery)
            .catch((error: unknown) => log.error({ err: error, delivery: delivery.id }, 'webhook delivery outcome not recorded; its lease runs out and it is sent again'))
            .finally(() => {
              this.inflight.delete(attempt);
              this.wake();
            });
          this.inflight.add(attempt);
        }
      }
      if (claimed.length > 0 && claimed.length === free) continue;
      if (this.woken) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, this.options.pollMs ?? 250);
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.wakeUp = done;
      });
      this.wakeUp = null;
    }
  }

  private claim(limit: number): Promise<Claimed[]> {
    return claimDeliveries(this.options.pool, limit, this.options.timeoutMs * 2 + 5000);
  }

  private async deliver(delivery: Claimed): Promise<void> {
    const { pool, log, allowPrivate, timeoutMs, retryScale } = this.options;
    const { secret, previous } = openSecrets({ ...delivery, id: delivery.endpoint_id }, this.options.keys);
    const secrets = previous ? [secret, previous] : [secret];
    const attempt = await sendWebhook(delivery.url, delivery.webhook_id, delivery.body, secrets, { allowPrivate, timeoutMs });
    attemptSeconds.observe({ outcome: attempt.ok ? 'succeeded' : 'failed' }, attempt.durationMs / 1000);
    const made = delivery.attempt + 1;
    if (attempt.ok || made < MAX_ATTEMPTS) {
      await this.record({ id: delivery.id, made, attempt, delayMs: attempt.ok ? null : retryDelayMs(made, retryScale) });
      deliveryAttempts.inc({ outcome: attempt.ok ? 'succeeded' : 'failed' });
      if (attempt.ok) deliveryLatency.observe(Math.max(0, (Date.now() - delivery.created_at.getTime()) / 1000));
      else log.debug({ delivery: delivery.id, endpoint: delivery.endpoint_id, attempt: made, error: attempt.error }, 'webhook delivery failed; retrying later');
      return;
    }
    const reason = `disabled after ${made} failed attempts to deliver ${delivery.webhook_id} (last: ${attempt.error ?? 'failed'})`;
    await pool.query(
      `WITH failed AS (
         UPDATE service.webhook_deliveries SET status = 'failed', attempt = $2, response_status = $3, duration_ms = $4, error = $5, leased_until = NULL
          WHERE id = $1 AND status = 'pending' RETURNING endpoint_id)
       UPDATE service.webhook_endpoints e SET is_active = false, disabled_reason = $6, updated_at = now() FROM failed WHERE e.id = failed.endpoint_id`,
      [delivery.id, made, attempt.status, attempt.durationMs, attempt.error, reason],
    );
    deliveryAttempts.inc({ outcome: 'gave_up' });
    endpointsDisabled.inc();
    log.warn({ endpoint: delivery.endpoint_id, delivery: delivery.id, webhook_id: delivery.webhook_id, error: attempt.error }, 'webhook endpoint disabled: the last retry of a delivery failed');
  }

  /**
   * Records an outcome (a success, or a failure to retry after `delayMs`). Outcomes that finish
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

export interface Outcome {
  id: number;
  made: number;
  attempt: Attempt;
  /** Null: delivered. */
  delayMs: number | null;
}

/** Age in seconds of the oldest pending delivery of an active endpoint; 0 when none. */
export async function oldestPendingSeconds(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ age: number | null }>(
    `SELECT extract(epoch FROM now() - min(d.created_at))::float8 AS age
       FROM service.webhook_deliveries d JOIN service.webhook_endpoints e ON e.id = d.endpoint_id
      WHERE d.status = 'pending' AND e.is_active`,
  );
  return rows[0]?.age ?? 0;
}

/**
 * Claims up to `limit` due deliveries for `leaseMs`: the first pending delivery of each (endpoint,
 * asset) of an active endpoint, once due and not leased.
 */
export async function claimDeliveries(pool: pg.Pool, limit: number, leaseMs: number): Promise<Claimed[]> {
  const { rows } = await pool.query<Claimed>(
    `WITH next AS (
       SELECT d.id FROM service.webhook_deliveries d
         JOIN service.webhook_endpoints e ON e.id = d.endpoint_id
        WHERE d.status = 'pending' AND d.next_attempt_at <= now() AND (d.leased_until IS NULL OR d.leased_until < now())
          AND e.is_active
          AND NOT EXISTS (SELECT 1 FROM service.webhook_deliveries p
                           WHERE p.endpoint_id = d.endpoint_id AND p.asset_id = d.asset_id AND p.status = 'pending' AND p.id < d.id)
        ORDER BY d.next_attempt_at, d.id
        LIMIT $1
          FOR UPDATE OF d SKIP LOCKED)
     UPDATE service.webhook_deliveries d SET leased_until = now() + $2 * interval '1 millisecond'
       FROM next, service.webhook_endpoints e
      WHERE d.id = next.id AND e.id = d.endpoint_id
     RETURNING d.id, d.endpoint_id, d.webhook_id, d.body, d.attempt, d.created_at, e.url,
               e.secret, e.secret_encrypted, e.encryption_key_id,
               CASE WHEN e.previous_until > now() THEN e.previous_secret END AS previous_secret,
               CASE WHEN e.previous_until > now() THEN e.previous_secret_encrypted END AS previous_secret_encrypted`,
    [limit, leaseMs],
  );
  return rows;
}

/** Writes outcomes in one statement: a success, or a failure to retry after `delayMs`. */
export async function recordOutcomes(pool: pg.Pool, outcomes: readonly Outcome[]): Promise<void> {
  await pool.query(
    `UPDATE service.webhook_deliveries d
        SET status = CASE WHEN o.delay_ms IS NULL THEN 'succeeded' ELSE 'pending' END,
            attempt = o.made, response_status = o.status, duration_ms = o.duration_ms, error = o.error, leased_until = NULL,
            next_attempt_at = CASE WHEN o.delay_ms IS NULL THEN d.next_attempt_at ELSE now() + o.delay_ms * interval '1 millisecond' END
       FROM unnest($1::int[], $2::int[], $3::int[], $4::int[], $5::text[], $6::bigint[]) AS o(id, made, status, duration_ms, error, delay_ms)
      WHERE d.id = o.id AND d.status = 'pending'`,
    [
      outcomes.map((o) => o.id),
      outcomes.map((o) => o.made),
      outcomes.map((o) => o.attempt.status),
      outcomes.map((o) => o.attempt.durationMs),
      outcomes.map((o) => o.attempt.error),
      outcomes.map((o) => o.delayMs),
    ],
  );
}
