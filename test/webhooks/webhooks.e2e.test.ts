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
  svc = await startTestService('webhooks', { WEBHOOK_RETRY_SCALE: '0.0002', WEBHOOK_TIMEOUT_MS: '1500' });
  receiver = await webhookReceiver();
});
afterAll(async () => {
  await svc?.stop();
  await receiver?.close();
});

const ALL_TYPES = ['asset.first_seen', 'asset.moved', 'asset.not_seen', 'asset.seen_again'];

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
  const reply = await w.api<{ data: { id: number; secret: string } }>('POST', '/webhook-endpoints', { body: { url: receiver.url(path), event_types: ALL_TYPES, ...body } });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data;
}

const at = (s: number) => new Date(Date.UTC(2026, 4, 25, 14, 0, s)).toISOString();
const to = (path: string) => (r: Received) => r.headers.host !== undefined && r.body.length > 0 && pathOf(r) === path;
const pathOf = (r: Received) => (r as Received & { path?: string }).path;

describe('webhooks, end to end', () => {
  it('a handheld read places an asset (asset.first_seen), another moves it (asset.moved); signed, verified by standardwebhooks', async () => {
    const w = await world(1);
    const path = `/${randomUUID()}`;
    const endpoint = await createEndpoint(w, path);
    expect(endpoint.secret).toMatch(/^whsec_/);
    const [dock, aisle] = w.locations;
    const asset = w.assets[0]!;
    await w.scans.scan({ id: dock!.id }, [{ tag_type: 'barcode', value: asset.tag, observed_at: at(0) }]);
    await w.scans.scan({ id: aisle!.id }, [{ tag_type: 'barcode', value: asset.tag, observed_at: at(10) }]);
    const mine = () => receiver.received.filter((r) => r.json.data.asset_id === asset.id);
    await eventually(async () => expect(mine()).toHaveLength(2), 20_000);
    const [first, moved] = mine();
    const wh = new Webhook(endpoint.secret);
    for (const r of [first!, moved!]) wh.verify(r.body, r.headers as Record<string, string>);
    expect(first!.json).toMatchObject({
      type: 'asset.first_seen',
      data: { asset_id: asset.id, asset_external_key: asset.external_key, location_id: dock!.id, location_external_key: dock!.external_key, observed_at: at(0), source: { kind: 'handheld', device_id: 'test-handheld' } },
    });
    expect(moved!.json).toMatchObject({
      type: 'asset.moved',
      data: {
        asset_id: asset.id,
        from_location_id: dock!.id,
        from_location_external_key: dock!.external_key,
        to_location_id: aisle!.id,
        to_location_external_key: aisle!.external_key,
        observed_at: at(10),
        source: { kind: 'handheld', device_id: 'test-handheld' },
      },
    });
    void to;
  });
});
