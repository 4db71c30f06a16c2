import { randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { eventually } from '../support/kafka.js';
import { scanner } from '../support/scans.js';
import { startTestService, type TestService } from '../support/service.js';
import { webhookReceiver, type Received, type WebhookReceiver } from '../support/webhook-receiver.js';
import { client } from '../master-data/http.js';

/**
 * Signed movement webhooks (docs/api.md "Webhooks") end to end: a real service, real HTTP to a
 * receiver in this process, real Postgres. Retries are scaled down (WEBHOOK_RETRY_SCALE, a
 * test-only variable) and the timeout shortened (WEBHOOK_TIMEOUT_MS).
 */

let svc: TestService;
let receiver: WebhookReceiver;
let n = 0;
const unique = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${++n}`;

beforeAll(async () => {
  svc = await startTestService('webhooks', { WEBHOOK_RETRY_SCALE: '0.0001', WEBHOOK_TIMEOUT_MS: '1500' });
  receiver = await webhookReceiver();
});
afterAll(async () => {
  await svc?.stop();
  await receiver?.close();
});

const ALL_TYPES = ['asset.first_seen', 'asset.moved', 'asset.not_seen', 'asset.seen_again'];
/** The tests' reads are mostly observed in the past: endpoints that do not want asset.not_seen for them. */
const MOVES = ['asset.first_seen', 'asset.moved'];

/** An org with a key of every scope, three locations and `assets` assets with barcode tags. */
async function world(assetCount = 2) {
  const ctx = svc.service.ctx;
  const orgId = (await createOrg(ctx, unique('org'))).id;
  const key = await mintApiKey(ctx, { orgId, scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read', 'webhooks:read', 'webhooks:write'] });
  const api = client(svc.apiUrl, key.token);
  const locations: Array<{ id: number; external_key: string }> = [];
  for (const name of ['DOCK', 'AISLE', 'YARD']) {
    const reply = await api<{ data: { id: number; external_key: string } }>('POST', '/locations', { body: { name, external_key: unique(name) } });
    expect(reply.status, reply.text).toBe(201);
    locations.push(reply.body.data);
  }
  const assets: Array<{ id: number; external_key: string; tag: string }> = [];
  for (let i = 0; i < assetCount; i++) {
    const tag = unique('SN');
    const reply = await api<{ data: { id: number; external_key: string } }>('POST', '/assets', { body: { name: 'pallet', external_key: unique('PAL'), tags: [{ tag_type: 'barcode', value: tag }] } });
    expect(reply.status, reply.text).toBe(201);
    assets.push({ ...reply.body.data, tag });
  }
  const scans = await scanner(svc, orgId);
  return { orgId, api, locations, assets, scans, token: key.token };
}

type World = Awaited<ReturnType<typeof world>>;

async function createEndpoint(w: World, path: string, body: Record<string, unknown> = {}) {
  const reply = await w.api<{ data: { id: number; secret: string } }>('POST', '/webhook-endpoints', { body: { url: receiver.url(path), event_types: MOVES, ...body } });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data;
}

const at = (s: number) => new Date(Date.UTC(2026, 4, 25, 14, 0, s)).toISOString();

interface Delivery {
  id: number;
  webhook_id: string;
  event_type: string;
  attempt: number;
  status: string;
  response_status: number | null;
  duration_ms: number | null;
  error: string | null;
  next_attempt_at: string | null;
}

async function deliveriesOf(w: World, endpointId: number): Promise<Delivery[]> {
  const reply = await w.api<{ data: Delivery[] }>('GET', `/webhook-endpoints/${endpointId}/deliveries?limit=200`);
  expect(reply.status, reply.text).toBe(200);
  return reply.body.data;
}

/** The distinct webhook-ids of `requests`, in the order each first came. */
function distinctIds(requests: Received[]): string[] {
  return [...new Set(requests.map((r) => r.headers['webhook-id'] as string))];
}

/** The events as (type, from, to) for one asset, from its requests (each event once). */
function movesOf(requests: Received[]): string[] {
  const firsts = new Map<string, Received>();
  for (const r of requests) if (!firsts.has(r.headers['webhook-id'] as string)) firsts.set(r.headers['webhook-id'] as string, r);
  return [...firsts.values()].map((r) => {
    const d = r.json.data;
    return r.json.type === 'asset.moved' ? `moved ${String(d.from_location_id)}>${String(d.to_location_id)}` : `${r.json.type.slice(6)} ${String(d.location_id)}`;
  });
}

/** An id reappearing after a later one began would be an event sent out of order. */
function expectInOrder(requests: Received[]): void {
  const ids = requests.map((r) => r.headers['webhook-id'] as string);
  const order = distinctIds(requests);
  for (let i = 1; i < ids.length; i++) expect(order.indexOf(ids[i]!)).toBeGreaterThanOrEqual(order.indexOf(ids[i - 1]!));
}

describe('webhooks, end to end', () => {
  it('a handheld read places an asset (asset.first_seen), a later one moves it (asset.moved), a late one sends nothing; signed, verified by standardwebhooks', async () => {
    const w = await world(1);
    const path = `/${randomUUID()}`;
    const endpoint = await createEndpoint(w, path);
    expect(endpoint.secret).toMatch(/^whsec_/);
    const [dock, aisle, yard] = w.locations;
    const asset = w.assets[0]!;
    await w.scans.scan({ id: dock!.id }, [{ tag_type: 'barcode', value: asset.tag, observed_at: at(0) }]);
    await w.scans.scan({ id: aisle!.id }, [{ tag_type: 'barcode', value: asset.tag, observed_at: at(10) }]);
    // Late: observed before the current read, elsewhere. History takes it; the current location does not change.
    await w.scans.scan({ id: yard!.id }, [{ tag_type: 'barcode', value: asset.tag, observed_at: at(5) }]);
    await w.scans.scan({ id: yard!.id }, [{ tag_type: 'barcode', value: asset.tag, observed_at: at(20) }]);
    await eventually(async () => expect(receiver.to(path)).toHaveLength(3), 20_000);
    const [first, moved, again] = receiver.to(path);
    const wh = new Webhook(endpoint.secret);
    for (const r of [first!, moved!, again!]) {
      wh.verify(r.body, r.headers as Record<string, string>);
      expect(r.headers['content-type']).toBe('application/json');
      expect(r.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/=]+$/);
      expect(Object.keys(r.json)).toEqual(['type', 'timestamp', 'data']);
    }
    expect(() => new Webhook(`whsec_${Buffer.alloc(32, 7).toString('base64')}`).verify(first!.body, first!.headers as Record<string, string>)).toThrow();
    expect(first!.json).toMatchObject({
      type: 'asset.first_seen',
      data: { asset_id: asset.id, asset_external_key: asset.external_key, location_id: dock!.id, location_external_key: dock!.external_key, observed_at: at(0), source: { kind: 'handheld', device_id: 'test-handheld' } },
    });
    expect(moved!.json).toEqual({
      type: 'asset.moved',
      timestamp: expect.any(String),
      data: {
        asset_id: asset.id,
        asset_external_key: asset.external_key,
        from_location_id: dock!.id,
        from_location_external_key: dock!.external_key,
        to_location_id: aisle!.id,
        to_location_external_key: aisle!.external_key,
        observed_at: at(10),
        source: { kind: 'handheld', device_id: 'test-handheld' },
      },
    });
    expect(again!.json.data).toMatchObject({ from_location_id: aisle!.id, to_location_id: yard!.id, observed_at: at(20) });
    // The report agrees: the asset is where the last event put it.
    const report = await w.api<{ data: Array<{ location_id: number }> }>('GET', `/reports/asset-locations?asset_id=${asset.id}`);
    expect(report.body.data[0]!.location_id).toBe(yard!.id);
    const listed = await deliveriesOf(w, endpoint.id);
    expect(listed.map((d) => [d.event_type, d.status, d.attempt, d.response_status, d.next_attempt_at])).toEqual([
      ['asset.moved', 'succeeded', 1, 200, null],
      ['asset.moved', 'succeeded', 1, 200, null],
      ['asset.first_seen', 'succeeded', 1, 200, null],
    ]);
    expect(listed.map((d) => d.webhook_id)).toEqual([again, moved, first].map((r) => r!.headers['webhook-id']));
    const ready = (await (await fetch(`${svc.opsUrl}/readyz`)).json()) as { checks: Record<string, string> };
    expect(ready.checks.webhooks).toBe('ok');
  });

  it('a receiver answering 500: the event is retried under the same webhook-id, and the asset\'s later events wait for it', async () => {
    const w = await world(1);
    const path = `/${randomUUID()}`;
    let refusals = 3;
    receiver.answer(path, () => (refusals-- > 0 ? { status: 500 } : { status: 200 }));
    const endpoint = await createEndpoint(w, path);
    const [dock, aisle, yard] = w.locations;
    const tag = w.assets[0]!.tag;
    await w.scans.scan({ id: dock!.id }, [{ tag_type: 'barcode', value: tag, observed_at: at(0) }]);
    await w.scans.scan({ id: aisle!.id }, [{ tag_type: 'barcode', value: tag, observed_at: at(10) }]);
    await w.scans.scan({ id: yard!.id }, [{ tag_type: 'barcode', value: tag, observed_at: at(20) }]);
    await eventually(async () => expect(distinctIds(receiver.to(path))).toHaveLength(3), 30_000);
    await eventually(async () => expect(receiver.to(path)).toHaveLength(6), 10_000);
    const requests = receiver.to(path);
    expect(requests.slice(0, 4).map((r) => r.json.type)).toEqual(['asset.first_seen', 'asset.first_seen', 'asset.first_seen', 'asset.first_seen']);
    expect(new Set(requests.slice(0, 4).map((r) => r.headers['webhook-id'])).size).toBe(1);
    // Every attempt is the same bytes, signed afresh.
    expect(new Set(requests.slice(0, 4).map((r) => r.body)).size).toBe(1);
    expectInOrder(requests);
    expect(movesOf(requests)).toEqual([`first_seen ${dock!.id}`, `moved ${dock!.id}>${aisle!.id}`, `moved ${aisle!.id}>${yard!.id}`]);
    const first = (await deliveriesOf(w, endpoint.id)).at(-1)!;
    expect(first).toMatchObject({ event_type: 'asset.first_seen', status: 'succeeded', attempt: 4, response_status: 200, error: null });
  });

  it('the receiver down, then up: everything is delivered, in order per asset', { timeout: 90_000 }, async () => {
    const own = await webhookReceiver();
    try {
      const w = await world(3);
      const reply = await w.api<{ data: { id: number } }>('POST', '/webhook-endpoints', { body: { url: own.url('/down'), event_types: ['asset.first_seen', 'asset.moved'] } });
      expect(reply.status).toBe(201);
      await own.close();
      const expected = new Map<number, string[]>();
      let previous = new Map<number, number>();
      for (let step = 0; step < 6; step++) {
        const next = new Map<number, number>();
        for (const [i, asset] of w.assets.entries()) {
          const location = w.locations[(step + i) % 3]!.id;
          await w.scans.scan({ id: location }, [{ tag_type: 'barcode', value: asset.tag, observed_at: at(step * 10 + i) }]);
          const from = previous.get(asset.id);
          expected.set(asset.id, [...(expected.get(asset.id) ?? []), from === undefined ? `first_seen ${location}` : `moved ${from}>${location}`]);
          next.set(asset.id, location);
        }
        previous = next;
      }
      await new Promise((r) => setTimeout(r, 4000));
      expect(own.received).toHaveLength(0);
      // The queue waits, and the metrics say how long.
      const pending = (await (await fetch(`${svc.opsUrl}/metrics`)).text()).match(/^tracking_webhook_oldest_pending_seconds (\S+)$/m);
      expect(Number(pending![1])).toBeGreaterThan(3);
      await own.listen();
      await eventually(async () => expect(distinctIds(own.received)).toHaveLength(18), 60_000, 200);
      for (const asset of w.assets) {
        const mine = own.received.filter((r) => r.json.data.asset_id === asset.id);
        expectInOrder(mine);
        expect(movesOf(mine)).toEqual(expected.get(asset.id));
      }
    } finally {
      await own.close().catch(() => undefined);
    }
  });

  it('a slow receiver (past the timeout) is a failure, and the event goes again under the same webhook-id', async () => {
    const w = await world(1);
    const path = `/${randomUUID()}`;
    let first = true;
    receiver.answer(path, () => {
      const slow = first;
      first = false;
      return slow ? { status: 200, delayMs: 3000 } : { status: 200 };
    });
    const endpoint = await createEndpoint(w, path);
    await w.scans.scan({ id: w.locations[0]!.id }, [{ tag_type: 'barcode', value: w.assets[0]!.tag, observed_at: at(0) }]);
    await eventually(async () => expect(receiver.to(path)).toHaveLength(2), 20_000);
    const [slow, fast] = receiver.to(path);
    expect(fast!.headers['webhook-id']).toBe(slow!.headers['webhook-id']);
    expect(fast!.at - slow!.at).toBeGreaterThanOrEqual(1400);
    await eventually(async () => expect((await deliveriesOf(w, endpoint.id))[0]).toMatchObject({ status: 'succeeded', attempt: 2 }));
  });

  it('a redirect is not followed: retried, then given up; the endpoint is disabled, in the API and the metrics', { timeout: 90_000 }, async () => {
    const w = await world(1);
    const path = `/${randomUUID()}`;
    receiver.answer(path, () => ({ status: 302, location: receiver.url('/elsewhere') }));
    const endpoint = await createEndpoint(w, path);
    await w.scans.scan({ id: w.locations[0]!.id }, [{ tag_type: 'barcode', value: w.assets[0]!.tag, observed_at: at(0) }]);
    await w.scans.scan({ id: w.locations[1]!.id }, [{ tag_type: 'barcode', value: w.assets[0]!.tag, observed_at: at(1) }]);
    const disabled = await eventually(
      async () => {
        const got = (await w.api<{ data: { is_active: boolean; disabled_reason: string | null } }>('GET', `/webhook-endpoints/${endpoint.id}`)).body.data;
        expect(got.is_active).toBe(false);
        return got;
      },
      75_000,
      500,
    );
    expect(disabled.disabled_reason).toMatch(/^disabled after 10 failed attempts to deliver msg_\w+ \(last: redirect to .*\/elsewhere not followed\)$/);
    expect(receiver.to('/elsewhere')).toHaveLength(0);
    expect(receiver.to(path)).toHaveLength(10);
    expect(new Set(receiver.to(path).map((r) => r.json.type))).toEqual(new Set(['asset.first_seen']));
    const [moved, given] = await deliveriesOf(w, endpoint.id);
    expect(given).toMatchObject({ event_type: 'asset.first_seen', status: 'failed', attempt: 10, response_status: 302, next_attempt_at: null });
    // The later event waits for the endpoint to be enabled again, and then goes.
    expect(moved).toMatchObject({ event_type: 'asset.moved', status: 'pending', attempt: 0 });
    const metrics = await (await fetch(`${svc.opsUrl}/metrics`)).text();
    expect(metrics).toMatch(/^tracking_webhook_endpoints_disabled_total [1-9]/m);
    expect(metrics).toMatch(/^tracking_webhook_deliveries_total\{outcome="gave_up"\} [1-9]/m);
    receiver.answer(path, () => ({ status: 204 }));
    const enabled = await w.api<{ data: { is_active: boolean; disabled_reason: string | null } }>('PATCH', `/webhook-endpoints/${endpoint.id}`, { body: { is_active: true } });
    expect(enabled.body.data).toMatchObject({ is_active: true, disabled_reason: null });
    await eventually(async () => expect(receiver.to(path).at(-1)!.json.type).toBe('asset.moved'));
  });

  it('rotate-secret: both secrets sign for a while, and standardwebhooks verifies with either', async () => {
    const w = await world(1);
    const path = `/${randomUUID()}`;
    const endpoint = await createEndpoint(w, path);
    const rotated = await w.api<{ data: { id: number; secret: string } }>('POST', `/webhook-endpoints/${endpoint.id}/rotate-secret`);
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.body.data.secret).toMatch(/^whsec_/);
    expect(rotated.body.data.secret).not.toBe(endpoint.secret);
    await w.scans.scan({ id: w.locations[0]!.id }, [{ tag_type: 'barcode', value: w.assets[0]!.tag, observed_at: at(0) }]);
    await eventually(async () => expect(receiver.to(path)).toHaveLength(1));
    const [got] = receiver.to(path);
    expect((got!.headers['webhook-signature'] as string).split(' ')).toHaveLength(2);
    for (const secret of [endpoint.secret, rotated.body.data.secret]) {
      expect(new Webhook(secret).verify(got!.body, got!.headers as Record<string, string>)).toMatchObject({ type: 'asset.first_seen' });
    }
    // The secret is shown only when it is made.
    const read = await w.api<{ data: Record<string, unknown> }>('GET', `/webhook-endpoints/${endpoint.id}`);
    expect(read.body.data).not.toHaveProperty('secret');
    expect(read.text).not.toContain(rotated.body.data.secret.slice(6));
  });

  it('redeliver: 202, and the event goes again with the same webhook-id and body', async () => {
    const w = await world(1);
    const path = `/${randomUUID()}`;
    const endpoint = await createEndpoint(w, path);
    await w.scans.scan({ id: w.locations[0]!.id }, [{ tag_type: 'barcode', value: w.assets[0]!.tag, observed_at: at(0) }]);
    await eventually(async () => expect(receiver.to(path)).toHaveLength(1));
    const [delivered] = await deliveriesOf(w, endpoint.id);
    const again = await w.api<{ data: Delivery }>('POST', `/webhook-endpoints/${endpoint.id}/deliveries/${delivered!.id}/redeliver`);
    expect(again.status, again.text).toBe(202);
    expect(again.body.data).toMatchObject({ webhook_id: delivered!.webhook_id, status: 'pending', attempt: 0, event_type: 'asset.first_seen' });
    await eventually(async () => expect(receiver.to(path)).toHaveLength(2));
    const [one, two] = receiver.to(path);
    expect(two!.headers['webhook-id']).toBe(one!.headers['webhook-id']);
    expect(two!.body).toBe(one!.body);
    expect((await w.api('POST', `/webhook-endpoints/${endpoint.id}/deliveries/2147483647/redeliver`)).status).toBe(404);
  });

  it('asset.not_seen once per silence, then asset.seen_again at the next read', { timeout: 60_000 }, async () => {
    const w = await world(1);
    const path = `/${randomUUID()}`;
    await createEndpoint(w, path, { event_types: ALL_TYPES, not_seen_after_seconds: 3600 });
    const [dock, aisle] = w.locations;
    const asset = w.assets[0]!;
    const twoHoursAgo = new Date(Date.now() - 2 * 3600_000).toISOString();
    await w.scans.scan({ id: dock!.id }, [{ tag_type: 'barcode', value: asset.tag, observed_at: twoHoursAgo }]);
    await eventually(async () => expect(receiver.to(path).map((r) => r.json.type)).toEqual(['asset.first_seen', 'asset.not_seen']), 20_000, 200);
    expect(receiver.to(path)[1]!.json.data).toEqual({
      asset_id: asset.id,
      asset_external_key: asset.external_key,
      location_id: dock!.id,
      location_external_key: dock!.external_key,
      last_seen: twoHoursAgo,
      not_seen_after_seconds: 3600,
    });
    // Another sweep or two: still once.
    await new Promise((r) => setTimeout(r, 11_000));
    expect(receiver.to(path)).toHaveLength(2);
    const now = new Date().toISOString();
    await w.scans.scan({ id: aisle!.id }, [{ tag_type: 'barcode', value: asset.tag, observed_at: now }]);
    await eventually(async () => expect(receiver.to(path).map((r) => r.json.type)).toEqual(['asset.first_seen', 'asset.not_seen', 'asset.seen_again', 'asset.moved']), 20_000);
    const seen = receiver.to(path)[2]!.json.data;
    expect(seen).toMatchObject({ asset_id: asset.id, location_id: aisle!.id, location_external_key: aisle!.external_key, observed_at: now });
    expect(seen.silent_seconds as number).toBeGreaterThanOrEqual(7200);
    expect(seen.silent_seconds as number).toBeLessThan(7200 + 60);
  });
});
