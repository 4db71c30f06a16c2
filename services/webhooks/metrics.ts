import client from 'prom-client';
import { metricsRegistry } from '../ops/metrics.js';

/** The webhooks role's metrics (docs/operations.md "Webhooks"), on the process's /metrics. */

export const deliveryAttempts = new client.Counter({
  name: 'tracking_webhook_deliveries_total',
  help: 'Webhook delivery attempts by outcome: succeeded, failed (to be retried), gave_up (the last attempt failed; the endpoint is disabled)',
  labelNames: ['outcome'] as const,
  registers: [metricsRegistry],
});

export const attemptSeconds = new client.Histogram({
  name: 'tracking_webhook_attempt_duration_seconds',
  help: 'Time of one delivery attempt, from the request to the answer (or the failure), by outcome (succeeded, failed)',
  labelNames: ['outcome'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [metricsRegistry],
});

export const deliveryLatency = new client.Histogram({
  name: 'tracking_webhook_delivery_latency_seconds',
  help: 'Time from an event being queued to its successful delivery (retries included)',
  buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600, 86400],
  registers: [metricsRegistry],
});

export const endpointsDisabled = new client.Counter({
  name: 'tracking_webhook_endpoints_disabled_total',
  help: 'Webhook endpoints disabled after the last retry of a delivery failed',
  registers: [metricsRegistry],
});

/** Oldest pending delivery's age, read when scraped from whatever the running role sets. */
let oldestPending: (() => Promise<number | null>) | null = null;

export function reportOldestPending(source: (() => Promise<number | null>) | null): void {
  oldestPending = source;
}

new client.Gauge({
  name: 'tracking_webhook_oldest_pending_seconds',
  help: 'Age of the oldest webhook delivery not yet delivered nor given up (0: none pending)',
  registers: [metricsRegistry],
  async collect() {
    this.reset();
    if (!oldestPending) return;
    const age = await oldestPending().catch(() => null);
    if (age !== null) this.set(age);
  },
});

// Every series from the start (at 0), so dashboards and alerts see them before the first delivery.
for (const outcome of ['succeeded', 'failed', 'gave_up'] as const) deliveryAttempts.inc({ outcome }, 0);
for (const outcome of ['succeeded', 'failed'] as const) attemptSeconds.zero({ outcome });
