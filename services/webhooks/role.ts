import type { RoleFactory } from '../role.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import { projectionStatuses } from '../../shared/projection/status.js';
import { DeliveryWorker } from './delivery.js';
import { oldestPendingSeconds, pruneDeliveries } from './queue.js';
import { reportOldestPending } from './metrics.js';
import { announceSilences, movementSubscriber } from './movements.js';

/** How often a webhooks process looks for assets that fell silent (asset.not_seen). */
const SILENCE_SWEEP_MS = 5_000;
/** How often a webhooks process deletes the finished deliveries past WEBHOOK_DELIVERY_RETENTION_DAYS. */
const PRUNE_MS = 3_600_000;
/** /readyz: the subscriber is behind when an event has waited longer for it (as for a projection). */
const READY_LAG_SECONDS = 30;

/**
 * The webhooks role (docs/design.md "Webhooks"): a subscriber of the log that queues deliveries
 * (one active instance across processes, as a projection), a delivery worker (every process,
 * sharing the queue), the not_seen sweep, and the pruning of old finished deliveries.
 */
export const webhooksRole: RoleFactory = (ctx) => {
  const log = ctx.log.child({ role: 'webhooks' });
  const worker = new DeliveryWorker({
    pool: ctx.pool,
    keys: ctx.keyEncryption.keys,
    log,
    allowPrivate: ctx.config.WEBHOOK_ALLOW_PRIVATE_TARGETS,
    timeoutMs: ctx.config.WEBHOOK_TIMEOUT_MS,
    retryScale: ctx.config.WEBHOOK_RETRY_SCALE,
    concurrency: ctx.config.WEBHOOK_CONCURRENCY,
  });
  const runtime = new ProjectorRuntime({
    store: ctx.store,
    pool: ctx.pool,
    projections: [movementSubscriber()],
    log,
    // After each committed batch: what it queued is due now.
    onCheckpoint: () => worker.wake(),
  });
  let sweep: NodeJS.Timeout | null = null;
  let sweeping: Promise<void> = Promise.resolve();
  let prune: NodeJS.Timeout | null = null;
  let pruning: Promise<void> = Promise.resolve();
  const retentionDays = ctx.config.WEBHOOK_DELIVERY_RETENTION_DAYS;
  const pruneOnce = () => {
    if (retentionDays === null) return;
    pruning = pruneDeliveries(ctx.pool, retentionDays)
      .then((deleted) => {
        if (deleted > 0) log.info({ deleted, retention_days: retentionDays }, 'deleted finished webhook deliveries past their retention');
      })
      .catch((error: unknown) => log.error({ err: error }, 'finished webhook deliveries could not be pruned; trying again later'));
  };
  return {
    name: 'webhooks',
    async start() {
      runtime.start();
      worker.start();
      reportOldestPending(() => oldestPendingSeconds(ctx.pool));
      sweep = setInterval(() => {
        sweeping = announceSilences(ctx.pool)
          .then((announced) => {
            if (announced > 0) worker.wake();
          })
          .catch((error: unknown) => log.error({ err: error }, 'silent assets could not be announced; trying again'));
      }, SILENCE_SWEEP_MS);
      pruneOnce();
      prune = setInterval(pruneOnce, PRUNE_MS);
    },
    async stop() {
      if (sweep) clearInterval(sweep);
      if (prune) clearInterval(prune);
      await Promise.all([sweeping, pruning]);
      reportOldestPending(null);
      await runtime.stop();
      await worker.stop();
    },
    urls: () => ({}),
    async readiness() {
      const [status] = await projectionStatuses(ctx.store, ctx.pool, ['webhooks'], { countLimit: 0 });
      return { webhooks: status!.lag_seconds > READY_LAG_SECONDS ? `behind by ${Math.round(status!.lag_seconds)}s` : 'ok' };
    },
  };
};
