/**
 * The webhook delivery claim as the queue fills and drains (docs/design.md "Webhooks"): the
 * claim and outcome statements of the senders (`claimDeliveries`, `recordOutcomes`), run
 * directly on the bench's Postgres, no HTTP. For a backlog of BENCH_WEBHOOK_CLAIM_BACKLOG
 * deliveries queued by the subscriber's `enqueue` (distinct assets of one endpoint), claims of 32
 * each followed by the outcome of all 32 (succeeded) until the queue is empty, then claims on the
 * empty queue. The claim should cost the same whatever the backlog and whatever was just sent.
 */
import { generateKeyEncryptionKey, KeyRing } from '../../shared/auth/key-encryption.js';
import { claimDeliveries, recordOutcomes } from '../../services/webhooks/queue.js';
import { createEndpoint } from '../../services/webhooks/endpoints.js';
import { enqueue, type DerivedEvent } from '../../services/webhooks/movements.js';
import type { BenchContext, BenchRow } from './types.js';

const NAME = 'webhook-claim';
const BATCH = 32;
const IDLE_CLAIMS = 200;

function mean(values: number[]): number {
  return values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);
}

export async function run(bench: BenchContext): Promise<BenchRow[]> {
  const backlog = Number(process.env.BENCH_WEBHOOK_CLAIM_BACKLOG ?? 20_000);
  const pool = bench.pool;
  const keys = new KeyRing([generateKeyEncryptionKey()]);
  const orgId = 1;
  await createEndpoint(pool, keys, orgId, { url: 'http://127.0.0.1:9/claim', description: null, eventTypes: ['asset.moved'], notSeenAfterSeconds: 3600 });

  const timed = async <T>(work: () => Promise<T>): Promise<[T, number]> => {
    const t0 = performance.now();
    const result = await work();
    return [result, performance.now() - t0];
  };
  const idleClaims = async () => {
    const times: number[] = [];
    for (let i = 0; i < IDLE_CLAIMS; i++) times.push((await timed(() => claimDeliveries(pool, BATCH, 60_000)))[1]);
    return mean(times);
  };

  const emptyMs = await idleClaims();

  bench.log(`${NAME}: queuing ${backlog} deliveries`);
  const recordedAt = new Date();
  for (let from = 0; from < backlog; from += 5000) {
    const events: DerivedEvent[] = Array.from({ length: Math.min(5000, backlog - from) }, (_, i) => ({
      orgId,
      assetId: 1_000_000 + from + i,
      type: 'asset.moved',
      recordedAt,
      data: { asset_id: 1_000_000 + from + i },
    }));
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await enqueue(client, events);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  }

  bench.log(`${NAME}: draining`);
  const drain: number[] = [];
  const started = performance.now();
  for (;;) {
    const [claimed, ms] = await timed(() => claimDeliveries(pool, BATCH, 60_000));
    if (claimed.length === 0) break;
    drain.push(ms);
    await recordOutcomes(
      pool,
      claimed.map((c) => ({ id: c.id, endpointId: c.endpoint_id, assetId: c.asset_id, made: c.attempt + 1, attempt: { ok: true, status: 200, durationMs: 1, error: null }, delayMs: null })),
    );
  }
  const drainSeconds = (performance.now() - started) / 1000;
  const afterMs = await idleClaims();
  const firstTenth = drain.slice(0, Math.ceil(drain.length / 10));
  const lastTenth = drain.slice(-Math.ceil(drain.length / 10));

  const row = (label: string, ms: number, over: number): BenchRow => ({ bench: NAME, case: label, events: over, seconds: 0, quantity: `${ms.toFixed(2)} ms` });
  return [
    row('claim of 32, empty queue and history', emptyMs, IDLE_CLAIMS),
    row(`claim of 32, first tenth of draining ${backlog}`, mean(firstTenth), firstTenth.length),
    row(`claim of 32, last tenth of draining ${backlog}`, mean(lastTenth), lastTenth.length),
    row(`claim of 32, empty queue just after ${backlog} sent`, afterMs, IDLE_CLAIMS),
    { bench: NAME, case: `claims and outcomes, ${backlog} deliveries`, events: backlog, seconds: drainSeconds },
  ];
}
