import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../../services/webhooks/delivery.js';
import { createEndpoint } from '../../services/webhooks/endpoints.js';
import { enqueue, type DerivedEvent } from '../../services/webhooks/movements.js';
import { OpenedSecrets, sealSecrets } from '../../services/webhooks/secrets.js';
import { createLogger } from '../../shared/logger.js';
import { seededRandom } from '../../shared/random.js';
import { eventually } from '../support/kafka.js';
import { startTestService, type TestService } from '../support/service.js';
import { webhookReceiver } from '../support/webhook-receiver.js';

/**
 * The senders (services/webhooks/delivery.ts) on real Postgres and a real receiver, no webhooks
 * role running: an attempt's slot is free once it is answered, its outcome written behind; what a
 * worker claimed is sent before it stops; and with outcomes written behind, an asset's later
 * event still never goes before an earlier one has succeeded, in random mixes of failures and
 * slow answers.
 */

const SEED = Number(process.env.PROPERTY_SEED ?? Date.now() % 1_000_000);
let svc: TestService;
let receiver: Awaited<ReturnType<typeof webhookReceiver>>;
let org = 70_000;

beforeAll(async () => {
  svc = await startTestService('webhook_worker', { ROLES: 'projector' });
  receiver = await webhookReceiver();
});
afterAll(async () => {
  await receiver?.close();
  await svc?.stop();
});

async function setUp() {
  const ctx = svc.service.ctx;
  const orgId = ++org;
  const path = `/${randomUUID()}`;
  const endpoint = await createEndpoint(ctx.pool, ctx.keyEncryption.keys, orgId, { url: receiver.url(path), description: null, eventTypes: ['asset.moved'], notSeenAfterSeconds: 3600 });
  const queue = async (events: Array<{ assetId: number; n: number }>) => {
    const client = await ctx.pool.connect();
    try {
      await client.query('BEGIN');
      const derived: DerivedEvent[] = events.map(({ assetId, n }) => ({ orgId, assetId, type: 'asset.moved', recordedAt: new Date(), data: { asset_id: assetId, n } }));
      await enqueue(client, derived);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  };
  const worker = (concurrency: number, retryScale = 1) =>
    new DeliveryWorker({ pool: ctx.pool, keys: ctx.keyEncryption.keys, log: createLogger('silent'), allowPrivate: true, timeoutMs: 5_000, retryScale, concurrency, pollMs: 20 });
  const statuses = async () =>
    (await ctx.pool.query<{ asset_id: number; status: string }>('SELECT asset_id, status FROM service.webhook_deliveries WHERE endpoint_id = $1 ORDER BY id', [endpoint.id])).rows;
  return { ctx, endpoint, path, queue, worker, statuses };
}

const n = (r: { json: { data: Record<string, unknown> } }) => r.json.data.n as number;

describe('the webhook senders', () => {
  it("frees an attempt's slot once it is answered: with one slot, deliveries go on while an earlier outcome cannot be written", async () => {
    const { ctx, endpoint, path, queue, worker, statuses } = await setUp();
    await queue([1, 2, 3, 4, 5].map((assetId) => ({ assetId, n: assetId })));
    // Another transaction holds the deliveries' rows: no outcome can be written until it ends.
    const holder = await ctx.pool.connect();
    const sender = worker(1);
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM service.webhook_deliveries WHERE endpoint_id = $1 FOR UPDATE', [endpoint.id]);
      sender.start();
      // With the slot held until its outcome was written, the first delivery would be the only one.
      await eventually(async () => expect(receiver.to(path).map(n).sort()).toEqual([1, 2, 3, 4, 5]), 10_000, 20);
      expect((await statuses()).map((s) => s.status)).toEqual(['pending', 'pending', 'pending', 'pending', 'pending']);
      await holder.query('COMMIT');
      await eventually(async () => expect((await statuses()).map((s) => s.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded', 'succeeded']), 10_000, 20);
      const { rows } = await ctx.pool.query('SELECT 1 FROM service.webhook_queue WHERE endpoint_id = $1', [endpoint.id]);
      expect(rows).toEqual([]);
    } finally {
      holder.release();
      await sender.stop();
    }
  });

  it('stops with nothing claimed left unsent: every delivery is sent and recorded, or due again at once', async () => {
    const random = seededRandom(SEED);
    for (let round = 0; round < 6; round++) {
      const { ctx, endpoint, path, queue, worker } = await setUp();
      const count = 20 + Math.floor(random() * 60);
      await queue(Array.from({ length: count }, (_, i) => ({ assetId: i + 1, n: i })));
      receiver.answer(path, () => ({ status: 200, delayMs: Math.floor(random() * 15) }));
      const sender = worker(1 + Math.floor(random() * 8));
      sender.start();
      const before = Math.floor(random() * count * 0.5);
      await eventually(async () => expect(receiver.to(path).length).toBeGreaterThan(before), 10_000, 5);
      await sender.stop();
      const sent = new Set(receiver.to(path).map(n));
      const { rows } = await ctx.pool.query<{ n: number; status: string; leased: boolean | null }>(
        `SELECT (d.body::json -> 'data' ->> 'n')::int AS n, d.status, q.due_at > now() AS leased
           FROM service.webhook_deliveries d LEFT JOIN service.webhook_queue q ON q.delivery_id = d.id
          WHERE d.endpoint_id = $1`,
        [endpoint.id],
      );
      for (const row of rows) {
        const where = `seed ${SEED}, round ${round}, delivery ${row.n}`;
        if (sent.has(row.n)) expect({ where, status: row.status, leased: row.leased }).toEqual({ where, status: 'succeeded', leased: null });
        else expect({ where, status: row.status, leased: row.leased }).toEqual({ where, status: 'pending', leased: false });
      }
    }
  });

  it("never sends an asset's later event before an earlier one succeeded, with outcomes written behind the attempts (random failures and slow answers)", { timeout: 120_000 }, async () => {
    console.info(`webhook senders: PROPERTY_SEED=${SEED}`);
    for (let round = 0; round < 5; round++) {
      const random = seededRandom(SEED * 31 + round);
      const { path, queue, worker, statuses } = await setUp();
      const assets = 2 + Math.floor(random() * 5);
      const events: Array<{ assetId: number; n: number }> = [];
      for (let i = 0; i < 10 + Math.floor(random() * 30); i++) events.push({ assetId: 1 + Math.floor(random() * assets), n: i });
      // Queued in a few batches, as the subscriber does, while the sender runs.
      const failRate = random() * 0.25;
      receiver.answer(path, () => ({ status: random() < failRate ? 500 : 200, delayMs: Math.floor(random() * 10) }));
      // Retries after 1 ms instead of 5 s, 60 ms instead of 5 minutes, and so on.
      const sender = worker(1 + Math.floor(random() * 8), 0.0002);
      sender.start();
      try {
        for (let i = 0; i < events.length; ) {
          const take = 1 + Math.floor(random() * 8);
          await queue(events.slice(i, i + take));
          sender.wake();
          i += take;
          await new Promise((r) => setTimeout(r, Math.floor(random() * 10)));
        }
        await eventually(async () => expect((await statuses()).every((s) => s.status === 'succeeded')).toBe(true), 30_000, 20);
      } finally {
        await sender.stop();
      }
      // Per asset, the requests in the order they came: each event only once the one before it
      // was answered 2xx; an event sent again (a failure) before the next one starts.
      const got = receiver.to(path);
      for (let assetId = 1; assetId <= assets; assetId++) {
        const expected = events.filter((e) => e.assetId === assetId).map((e) => e.n);
        const seen = got.filter((r) => r.json.data.asset_id === assetId).map(n);
        const firsts = seen.filter((value, i) => seen.indexOf(value) === i);
        expect({ seed: SEED, round, assetId, firsts }).toEqual({ seed: SEED, round, assetId, firsts: expected });
        // Once the next event went, the earlier one is never sent again.
        for (let i = 1; i < seen.length; i++) {
          if (seen[i] !== seen[i - 1]) expect(seen.slice(i).includes(seen[i - 1]!), `seed ${SEED}, round ${round}, asset ${assetId}: ${seen.join(',')}`).toBe(false);
        }
      }
    }
  });

  it("opens an endpoint's sealed secrets once, and again when they change", () => {
    const keys = svc.service.ctx.keyEncryption.keys!;
    const opened = new OpenedSecrets();
    const row = (secret: string, previous: string | null) => ({ endpoint_id: 42, secret: null, previous_secret: null, ...sealSecrets(keys, 42, secret, previous) });
    const first = row('whsec_one', null);
    expect(opened.open(first, keys)).toEqual({ secret: 'whsec_one', previous: null });
    // Without a key ring it can only be the copy opened before.
    expect(opened.open({ ...first }, null)).toEqual({ secret: 'whsec_one', previous: null });
    const rotated = row('whsec_two', 'whsec_one');
    expect(() => opened.open(rotated, null)).toThrow(/WEBHOOK|ENCRYPTION|key/i);
    expect(opened.open(rotated, keys)).toEqual({ secret: 'whsec_two', previous: 'whsec_one' });
    // The previous secret's time over: the claim no longer names it.
    expect(opened.open({ ...rotated, previous_secret_encrypted: null }, keys)).toEqual({ secret: 'whsec_two', previous: null });
  });
});
