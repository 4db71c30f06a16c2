/**
 * Webhooks (issue 24). The whole service in this process (api, ingest, projector, webhooks) on the
 * bench's Postgres, and a receiver in this process (test/support/webhook-receiver.ts):
 *
 * - **scan → webhook received**: handheld submissions move BENCH_WEBHOOK_MOVES_PER_SECOND assets a
 *   second (one submission per location every 100 ms) for BENCH_WEBHOOK_SECONDS; for each
 *   `asset.moved` the time from sending its submission to the receiver having it. p50 and p99;
 *   target p99 < 1 s at 1,000 moves/s.
 * - **deliveries/s of one process**: BENCH_WEBHOOK_BACKLOG deliveries queued at once (distinct
 *   assets, so none waits for another), sent by the one webhooks process to the local receiver.
 *   Baseline: the same signed POSTs from a bare loop at the same concurrency, without the queue.
 *
 * It logs where a move's time went (submission → queued by the subscriber → received) and the
 * process's CPU over the moves; BENCH_PROFILE_DIR=<dir> writes V8 profiles of the moves
 * (webhooks-latency), the drain (webhooks-deliveries) and the bare loop (webhooks-bare).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { startService } from '../../services/service.js';
import { loadConfig } from '../../shared/config.js';
import { createLogger } from '../../shared/logger.js';
import { sendWebhook } from '../../services/webhooks/send.js';
import { createEndpoint } from '../../services/webhooks/endpoints.js';
import { QUEUE_INSERTED } from '../../services/webhooks/queue.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { webhookReceiver } from '../support/webhook-receiver.js';
import { client } from '../master-data/http.js';
import type { BenchContext, BenchRow } from './types.js';
import { startProfile } from './measure.js';

const NAME = 'webhooks';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export async function run(bench: BenchContext): Promise<BenchRow[]> {
  const movesPerSecond = Number(process.env.BENCH_WEBHOOK_MOVES_PER_SECOND ?? 1000);
  const seconds = Number(process.env.BENCH_WEBHOOK_SECONDS ?? 10);
  const backlog = Number(process.env.BENCH_WEBHOOK_BACKLOG ?? 20_000);
  const concurrency = 32;
  const config = loadConfig({
    SIGNING_KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    PORT: '0',
    OPS_PORT: '0',
    INGEST_PORT: '0',
    LOG_LEVEL: 'silent',
    ROLES: 'api,ingest,projector,webhooks',
    WEBHOOK_CONCURRENCY: String(concurrency),
    RATE_LIMIT_PER_MINUTE: String(1e9),
    RATE_LIMIT_BURST: String(1e9),
  });
  const service = await startService(config, bench.url, createLogger('silent'));
  const receiver = await webhookReceiver();
  try {
    const ctx = service.ctx;
    const orgId = (await createOrg(ctx, 'Bench webhooks')).id;
    const admin = client(service.urls.api!, (await mintApiKey(ctx, { orgId, scopes: ['assets:write', 'locations:write', 'webhooks:write'] })).token);
    const scanKey = (await mintApiKey(ctx, { orgId, scopes: ['scans:write'] })).token;
    const locations: number[] = [];
    for (const name of ['DOCK', 'AISLE', 'YARD']) locations.push((await admin<{ data: { id: number } }>('POST', '/locations', { body: { name, external_key: name } })).body.data.id);
    // Enough assets that each moves at most once a second.
    const assetCount = movesPerSecond;
    bench.log(`webhooks: creating ${assetCount} assets`);
    const tags: string[] = [];
    const assetIds: number[] = [];
    for (let i = 0; i < assetCount; i += 16) {
      const created = await Promise.all(
        Array.from({ length: Math.min(16, assetCount - i) }, async (_, j) => {
          const tag = `BENCH-${i + j}`;
          const reply = await admin<{ data: { id: number } }>('POST', '/assets', { body: { name: 'pallet', tags: [{ tag_type: 'barcode', value: tag }] } });
          return { tag, id: reply.body.data.id };
        }),
      );
      for (const c of created) {
        tags.push(c.tag);
        assetIds.push(c.id);
      }
    }
    const endpoint = await admin('POST', '/webhook-endpoints', { body: { url: receiver.url('/bench'), event_types: ['asset.first_seen', 'asset.moved'] } });
    if (endpoint.status !== 201) throw new Error(`endpoint: ${endpoint.text}`);

    const submit = async (location: number, reads: Array<{ tag: string; at: string }>) => {
      const response = await fetch(`${service.urls.ingest}/scans`, {
        method: 'POST',
        headers: { authorization: `Bearer ${scanKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ submission_id: randomUUID(), device_id: 'bench', location: { id: location }, reads: reads.map((r) => ({ tag_type: 'barcode', value: r.tag, observed_at: r.at })) }),
      });
      if (response.status !== 202) throw new Error(`submission answered ${response.status}`);
      await response.arrayBuffer();
    };

    // Every asset placed once (asset.first_seen), all delivered before the measured run.
    const where = assetIds.map((_, i) => i % 3);
    const placedAt = new Date(Date.now() - 60_000).toISOString();
    for (const [l, location] of locations.entries()) {
      const here = tags.filter((_, i) => where[i] === l);
      for (let i = 0; i < here.length; i += 500) await submit(location, here.slice(i, i + 500).map((tag) => ({ tag, at: placedAt })));
    }
    while (receiver.to('/bench').length < assetCount) await sleep(50);

    bench.log(`webhooks: ${movesPerSecond} moves/s for ${seconds} s`);
    const sentAt = new Map<string, number>();
    const perTick = Math.round(movesPerSecond / 10);
    let next = 0;
    const latencyProfile = await startProfile('webhooks-latency');
    const cpu0 = process.cpuUsage();
    const started = performance.now();
    const submissions: Array<Promise<void>> = [];
    for (let tick = 0; tick < seconds * 10; tick++) {
      const due = started + tick * 100;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const at = new Date().toISOString();
      const byLocation = new Map<number, Array<{ tag: string; at: string }>>();
      for (let k = 0; k < perTick; k++, next++) {
        const i = next % assetCount;
        where[i] = (where[i]! + 1) % 3;
        const location = locations[where[i]!]!;
        byLocation.set(location, [...(byLocation.get(location) ?? []), { tag: tags[i]!, at }]);
        sentAt.set(`${assetIds[i]}@${at}`, performance.now());
      }
      for (const [location, reads] of byLocation) submissions.push(submit(location, reads));
    }
    await Promise.all(submissions);
    const moves = sentAt.size;
    const deadline = Date.now() + 120_000;
    const movedReceived = () => receiver.to('/bench').filter((r) => r.json.type === 'asset.moved');
    while (new Set(movedReceived().map((r) => r.headers['webhook-id'])).size < moves) {
      if (Date.now() > deadline) throw new Error(`received ${movedReceived().length} of ${moves} moves`);
      await sleep(50);
    }
    {
      const used = process.cpuUsage(cpu0);
      bench.log(`webhooks: the moves took ${((performance.now() - started) / 1000).toFixed(1)} s until the last was received, the process's CPU ${((used.user + used.system) / 1e6).toFixed(1)} s`);
    }
    await latencyProfile.stop();
    // The receiver's clock is Date.now(); the sender's performance.now(): the same origin.
    const offset = Date.now() - performance.now();
    const latencies = movedReceived()
      .map((r) => r.at - offset - sentAt.get(`${String(r.json.data.asset_id)}@${String(r.json.data.observed_at)}`)!)
      .filter((ms) => Number.isFinite(ms))
      .sort((a, b) => a - b);
    // Where the time went: the subscriber queued a delivery at its transaction's start (created_at).
    {
      const { rows: made } = await ctx.pool.query<{ webhook_id: string; created: number }>("SELECT webhook_id, extract(epoch FROM created_at)::float8 * 1000 AS created FROM service.webhook_deliveries WHERE event_type = 'asset.moved'");
      const createdOf = new Map(made.map((r) => [r.webhook_id, r.created]));
      const toQueue: number[] = [];
      const toSend: number[] = [];
      for (const r of movedReceived()) {
        const sent = sentAt.get(`${String(r.json.data.asset_id)}@${String(r.json.data.observed_at)}`);
        const created = createdOf.get(r.headers['webhook-id'] as string);
        if (sent === undefined || created === undefined) continue;
        toQueue.push(created - offset - sent);
        toSend.push(r.at - created);
      }
      toQueue.sort((a, b) => a - b);
      toSend.sort((a, b) => a - b);
      bench.log(`webhooks: submission → queued p50 ${percentile(toQueue, 50).toFixed(0)} p99 ${percentile(toQueue, 99).toFixed(0)}; queued → received p50 ${percentile(toSend, 50).toFixed(0)} p99 ${percentile(toSend, 99).toFixed(0)}`);
    }
    const p50 = percentile(latencies, 50);
    const p99 = percentile(latencies, 99);

    bench.log(`webhooks: ${backlog} deliveries queued at once`);
    const { rows } = await ctx.pool.query<{ id: number }>('SELECT id FROM service.webhook_endpoints WHERE org_id = $1', [orgId]);
    const endpointId = rows[0]!.id;
    const body = JSON.stringify({ type: 'asset.moved', timestamp: new Date().toISOString(), data: { asset_id: 1 } });
    const before = receiver.received.length;
    const deliveryProfile = await startProfile('webhooks-deliveries');
    const t0 = performance.now();
    await ctx.pool.query(
      `WITH inserted AS (
         INSERT INTO service.webhook_deliveries (endpoint_id, org_id, asset_id, webhook_id, event_type, body)
         SELECT $1, $2, 1000000 + g, 'msg_bench_' || g, 'asset.moved', $3 FROM generate_series(1, $4) AS g
         RETURNING id, endpoint_id, asset_id, next_attempt_at),
       ${QUEUE_INSERTED}
       SELECT 1`,
      [endpointId, orgId, body, backlog],
    );
    while (receiver.received.length - before < backlog) await sleep(20);
    const deliverySeconds = (performance.now() - t0) / 1000;
    await deliveryProfile.stop();

    // Baseline: the same signed POSTs, `concurrency` at a time, no queue.
    const secret = (await createEndpoint(ctx.pool, ctx.keyEncryption.keys, orgId + 1, { url: receiver.url('/bare'), description: null, eventTypes: ['asset.moved'], notSeenAfterSeconds: 3600 })).secret;
    let sent = 0;
    const bareProfile = await startProfile('webhooks-bare');
    const b0 = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (sent < backlog) {
          sent++;
          const attempt = await sendWebhook(receiver.url('/bare'), `msg_bare_${sent}`, body, [secret], { allowPrivate: true, timeoutMs: 10_000 });
          if (!attempt.ok) throw new Error(attempt.error ?? 'failed');
        }
      }),
    );
    const bareSeconds = (performance.now() - b0) / 1000;
    await bareProfile.stop();

    const target = movesPerSecond >= 1000;
    return [
      { bench: NAME, case: `scan → webhook received, p50 at ${movesPerSecond} moves/s`, events: latencies.length, seconds: 0, quantity: `${p50.toFixed(0)} ms` },
      {
        bench: NAME,
        case: `scan → webhook received, p99 at ${movesPerSecond} moves/s`,
        events: latencies.length,
        seconds: 0,
        quantity: `${p99.toFixed(0)} ms`,
        target: target ? { label: 'p99 < 1 s', met: p99 < 1000 } : undefined,
      },
      { bench: NAME, case: `deliveries of one process (${concurrency} at a time), local receiver`, events: backlog, seconds: deliverySeconds, baseline: { label: 'bare signed POSTs', events: backlog, seconds: bareSeconds } },
    ];
  } finally {
    await service.stop();
    await receiver.close();
  }
}
