import type { RoleFactory } from '../role.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import { projectionStatuses } from '../../shared/projection/status.js';
import { DeliveryWorker } from './delivery.js';
import { oldestPendingSeconds, pruneDeliveries } from './queue.js';
import { reportOldestPending } from './metrics.js';
import { announceSilences, movementSubscriber } from './movements.js';
import { AlertOutboxFollower, alertSegmentNames, pruneAlertOutbox } from './alerts.js';
import { NotificationListener } from '../../shared/db/listener.js';
import { READ_MODEL_SCHEMA } from '../../shared/db/migrate.js';
import { CHECKPOINT_CHANNEL } from '../../shared/projection/checkpoints.js';
import { parseSegmentName } from '../../shared/projection/segments.js';

/** How often a webhooks process looks for assets that fell silent (asset.not_seen). */
const SILENCE_SWEEP_MS = 5_000;
/** How often a webhooks process deletes the finished deliveries past WEBHOOK_DELIVERY_RETENTION_DAYS. */
const PRUNE_MS = 3_600_000;
/** /readyz: the subscriber is behind when an event has waited longer for it (as for a projection). */
const READY_LAG_SECONDS = 30;

/**
 * The webhooks role (docs/design.md "Webhooks"): a subscriber of the log that queues deliveries
 * (one active instance across processes, as a projection), the follower of the alerts' outbox
 * (alert.raised, alert.resolved; woken when an `alerts` segment's checkpoint moves), a delivery
 * worker (every process, sharing the queue), the not_seen sweep, and the pruning of old finished
 * deliveries and of the outbox rows already followed.
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
  const alertSegments = alertSegmentNames(ctx.config.PROJECTION_SEGMENTS);
  const alerts = new AlertOutboxFollower({
    pool: ctx.pool,
    segments: alertSegments,
    onQueued: () => worker.wake(),
    onError: (error) => log.error({ err: error }, 'alert changes could not be queued for delivery; trying again'),
  });
  const checkpoints = new NotificationListener({
    connectionString: ctx.databaseUrl,
    channels: [CHECKPOINT_CHANNEL],
    onNotification: (message) => {
      const [schema, name] = (message.payload ?? '').split(' ');
      if (schema === READ_MODEL_SCHEMA && name && (parseSegmentName(name)?.base ?? name) === 'alerts') alerts.wake();
    },
    // Notifications missed while (re)connecting: the poll finds what they would have said, this pass sooner.
    onListening: () => alerts.wake(),
  });
  let sweep: NodeJS.Timeout | null = null;
  let sweeping: Promise<void> = Promise.resolve();
  let prune: NodeJS.Timeout | null = null;
  let pruning: Promise<void> = Promise.resolve();
  const retentionDays = ctx.config.WEBHOOK_DELIVERY_RETENTION_DAYS;
  const pruneOnce = () => {
    const outbox = pruneAlertOutbox(ctx.pool)
      .then((deleted) => {
        if (deleted > 0) log.info({ deleted }, 'deleted the alert outbox rows already followed');
      })
      .catch((error: unknown) => log.error({ err: error }, 'the alert outbox could not be pruned; trying again later'));
    if (retentionDays === null) {
      pruning = outbox;
      return;
    }
    const deliveries = pruneDeliveries(ctx.pool, retentionDays)
      .then((deleted) => {
        if (deleted > 0) log.info({ deleted, retention_days: retentionDays }, 'deleted finished webhook deliveries past their retention');
      })
      .catch((error: unknown) => log.error({ err: error }, 'finished webhook deliveries could not be pruned; trying again later'));
    pruning = Promise.all([outbox, deliveries]).then(() => undefined);
  };
  return {
    name: 'webhooks',
    async start() {
      runtime.start();
      worker.start();
      alerts.start();
      await checkpoints.startInBackground();
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
      await checkpoints.stop();
      await alerts.stop();
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
