import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEndpoint, updateEndpoint } from '../../services/webhooks/endpoints.js';
import { enqueue, type DerivedEvent } from '../../services/webhooks/movements.js';
import { claimDeliveries, pruneDeliveries, recordOutcomes, type Claimed } from '../../services/webhooks/queue.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * The delivery queue and the history's pruning (docs/design.md "Webhooks") on real Postgres, no
 * webhooks role running: only a pair's earliest pending delivery is claimed, a retry keeps its
 * place, a finished one gives way to the next, a paused endpoint is not claimed; finished
 * deliveries past the retention are deleted in batches, pending ones never.
 */

let svc: TestService;
let org = 90_000;

beforeAll(async () => {
  svc = await startTestService('webhook_queue', { ROLES: 'projector' });
});
afterAll(async () => {
  await svc?.stop();
});

async function setUp() {
  const ctx = svc.service.ctx;
  const orgId = ++org;
  const endpoint = await createEndpoint(ctx.pool, ctx.keyEncryption.keys, orgId, { url: 'http://127.0.0.1:9/q', description: null, eventTypes: ['asset.moved'], notSeenAfterSeconds: 3600 });
  const queue = async (assetIds: number[]) => {
    const client = await ctx.pool.connect();
    try {
      await client.query('BEGIN');
      const events: DerivedEvent[] = assetIds.map((assetId, n) => ({ orgId, assetId, type: 'asset.moved', recordedAt: new Date(), data: { n } }));
      await enqueue(client, events);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  };
  // Other tests' heads may be claimed (and leased) too: only this endpoint's are looked at.
  const claim = async (): Promise<Claimed[]> => (await claimDeliveries(ctx.pool, 100, 60_000)).filter((c) => c.endpoint_id === endpoint.id);
  const finish = (claimed: Claimed[], delayMs: number | null = null) =>
    recordOutcomes(
      ctx.pool,
      claimed.map((c) => ({ id: c.id, endpointId: c.endpoint_id, assetId: c.asset_id, made: c.attempt + 1, attempt: { ok: delayMs === null, status: 200, durationMs: 1, error: null }, delayMs })),
    );
  return { ctx, orgId, endpoint, queue, claim, finish };
}

const bodies = (claimed: Claimed[]) => claimed.map((c) => [c.asset_id, (JSON.parse(c.body) as { data: { n: number } }).data.n]).sort();

describe('the webhook delivery queue', () => {
  it("claims only each pair's earliest pending delivery; a retry keeps its place; a finished one gives way to the next", async () => {
    const { queue, claim, finish } = await setUp();
    await queue([1, 1, 2]);
    await queue([1]);
    const first = await claim();
    expect(bodies(first)).toEqual([[1, 0], [2, 2]]);
    // Leased: not claimed again.
    expect(await claim()).toEqual([]);
    // Asset 1's head fails and is retried in a minute; asset 2's succeeds and leaves.
    await finish(first.filter((c) => c.asset_id === 1), 60_000);
    await finish(first.filter((c) => c.asset_id === 2));
    expect(await claim()).toEqual([]);
    // Asset 1 due again: the same delivery, its second attempt.
    await svc.service.ctx.pool.query(`UPDATE service.webhook_queue SET due_at = now() WHERE delivery_id = $1`, [first.find((c) => c.asset_id === 1)!.id]);
    const again = await claim();
    expect(again.map((c) => [c.id, c.attempt])).toEqual([[first.find((c) => c.asset_id === 1)!.id, 1]]);
    await finish(again);
    expect(bodies(await claim())).toEqual([[1, 1]]);
  });

  it("a delivery queued while its pair's head finishes becomes the head: the outcome waits for the queuing transaction", async () => {
    const { ctx, orgId, queue, claim, finish } = await setUp();
    await queue([3]);
    const [head] = await claim();
    // The subscriber's transaction queues asset 3's next event and has not committed yet.
    const subscriber = await ctx.pool.connect();
    try {
      await subscriber.query('BEGIN');
      await enqueue(subscriber, [{ orgId, assetId: 3, type: 'asset.moved', recordedAt: new Date(), data: { n: 1 } }]);
      let finished = false;
      const finishing = finish([head!]).then(() => (finished = true));
      await new Promise((r) => setTimeout(r, 300));
      // The outcome waits on the pair's queue row rather than deciding from what it sees now.
      expect(finished).toBe(false);
      await subscriber.query('COMMIT');
      await finishing;
    } finally {
      subscriber.release();
    }
    expect(bodies(await claim())).toEqual([[3, 1]]);
  });

  it('a paused endpoint is not claimed; resumed, it is', async () => {
    const { ctx, orgId, endpoint, queue, claim } = await setUp();
    await queue([7]);
    await updateEndpoint(ctx.pool, orgId, endpoint.id, { isActive: false });
    expect(await claim()).toEqual([]);
    await updateEndpoint(ctx.pool, orgId, endpoint.id, { isActive: true });
    expect(bodies(await claim())).toEqual([[7, 0]]);
  });

  it('pruning deletes finished deliveries past the retention, in batches; pending ones and recent ones stay', async () => {
    const { ctx, endpoint, queue, claim, finish } = await setUp();
    await queue([1, 2, 3, 4, 5, 6]);
    const claimed = await claim();
    await finish(claimed.filter((c) => c.asset_id <= 5));
    // Asset 6 stays pending; all six were queued 40 days ago, except asset 5's, queued 10 days ago.
    await ctx.pool.query(`UPDATE service.webhook_deliveries SET created_at = now() - interval '40 days' WHERE endpoint_id = $1`, [endpoint.id]);
    await ctx.pool.query(`UPDATE service.webhook_deliveries SET created_at = now() - interval '10 days' WHERE endpoint_id = $1 AND asset_id = 5`, [endpoint.id]);
    await ctx.pool.query(`UPDATE service.webhook_deliveries SET status = 'failed' WHERE endpoint_id = $1 AND asset_id = 4`, [endpoint.id]);
    const deleted = await pruneDeliveries(ctx.pool, 30, 2);
    expect(deleted).toBe(4);
    const { rows } = await ctx.pool.query<{ asset_id: number; status: string }>(`SELECT asset_id, status FROM service.webhook_deliveries WHERE endpoint_id = $1 ORDER BY asset_id`, [endpoint.id]);
    expect(rows).toEqual([
      { asset_id: 5, status: 'succeeded' },
      { asset_id: 6, status: 'pending' },
    ]);
  });
});
