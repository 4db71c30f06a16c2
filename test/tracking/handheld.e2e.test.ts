import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../shared/config.js';
import { createLogger } from '../../shared/logger.js';
import { startService } from '../../services/service.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { handheld, type HandheldReply } from '../support/scans.js';
import { createTestDatabase } from '../support/database.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY, startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';
import { seededRandom } from '../../shared/random.js';

/**
 * Handheld submissions, `POST /ingest/v1/scans` on the ingest listener (docs/scan-ingestion.md "Handheld
 * submissions"), over real HTTP.
 */

let svc: TestService;
let orgId: number;
let submit: ReturnType<typeof handheld>;
let api: ReturnType<typeof client>;
let readerToken: string;
let dock: { id: number; external_key: string };
let shelf: { id: number; external_key: string; tag: string };
let n = 0;
const unique = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${++n}`;

beforeAll(async () => {
  svc = await startTestService('handheld');
  const ctx = svc.service.ctx;
  orgId = (await createOrg(ctx, 'handheld-org')).id;
  const writer = await mintApiKey(ctx, { orgId, scopes: ['scans:write'] });
  submit = handheld(svc, writer.token);
  const admin = await mintApiKey(ctx, { orgId, scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read'] });
  api = client(svc.apiUrl, admin.token);
  readerToken = admin.token;
  dock = (await api<{ data: { id: number; external_key: string } }>('POST', '/locations', { body: { name: 'Dock', external_key: unique('DOCK') } })).body.data;
  const shelfTag = unique('SHELF-LABEL');
  const created = (await api<{ data: { id: number; external_key: string } }>('POST', '/locations', { body: { name: 'Shelf', external_key: unique('SHELF'), tags: [{ tag_type: 'barcode', value: shelfTag }] } })).body.data;
  shelf = { ...created, tag: shelfTag };
});
afterAll(async () => {
  await svc?.stop();
});

async function asset(tags: Array<{ tag_type: string; value: string; is_active?: boolean }>): Promise<{ id: number }> {
  const reply = await api<{ data: { id: number } }>('POST', '/assets', { body: { name: 'a', tags } });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data;
}

function body(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { submission_id: randomUUID(), device_id: 'handheld-07', location: { id: dock.id }, reads: [{ tag_type: 'rfid', value: unique('E28') }], ...overrides };
}

function fields(reply: HandheldReply): Array<[string, string]> {
  expect(reply.status, JSON.stringify(reply.body)).toBe(400);
  expect(reply.body.error!.type).toBe('validation_error');
  return reply.body.error!.fields!.map((f) => [f.field, f.code]);
}

async function locationOf(assetId: number): Promise<{ location_id: number | null; location_external_key: string | null }> {
  return (await api<{ data: { location_id: number | null; location_external_key: string | null } }>('GET', `/assets/${assetId}`)).body.data;
}

describe('POST /ingest/v1/scans', () => {
  it('202 with the counts: placed reads and reads of unknown, retired and location tags', async () => {
    const epc = `000${unique('e2801160').toUpperCase().replace(/[^0-9A-Z]/g, '')}`;
    const placed = await asset([{ tag_type: 'rfid', value: epc }]);
    const retiredValue = unique('RETIRED');
    const holder = await asset([{ tag_type: 'barcode', value: retiredValue }]);
    const tagId = (await api<{ data: Array<{ id: number }> }>('GET', `/assets/${holder.id}/tags`)).body.data[0]!.id;
    expect((await api('DELETE', `/assets/${holder.id}/tags/${tagId}`)).status).toBe(204);
    const inactiveValue = unique('INACTIVE');
    const inactive = await asset([{ tag_type: 'barcode', value: inactiveValue, is_active: false }]);
    const reply = await submit(
      body({
        location: { external_key: dock.external_key },
        reads: [
          { tag_type: 'rfid', value: epc.toLowerCase(), observed_at: '2026-05-25T14:38:11.440Z', rssi: -56 }, // case-insensitive EPC
          { tag_type: 'rfid', value: epc.slice(1) }, // leading zeros are kept: another tag
          { tag_type: 'barcode', value: retiredValue },
          { tag_type: 'barcode', value: inactiveValue },
          { tag_type: 'barcode', value: shelf.tag },
          { tag_type: 'ble', value: unique('never-seen') },
        ],
      }),
    );
    expect(reply.status, JSON.stringify(reply.body)).toBe(202);
    expect(reply.body).toEqual({ data: { accepted: 1, unknown: 5, duplicate: false } });
    expect(await locationOf(placed.id)).toEqual(expect.objectContaining({ location_id: dock.id, location_external_key: dock.external_key }));
    expect((await locationOf(holder.id)).location_id).toBeNull();
    expect((await locationOf(inactive.id)).location_id).toBeNull();
  });

  it('takes the location by id, by external_key, or by its own tag; observed_at defaults to the time of receipt', async () => {
    const tag = unique('E28');
    const a = await asset([{ tag_type: 'rfid', value: tag }]);
    const before = Date.now();
    expect((await submit(body({ location: { tag: { tag_type: 'barcode', value: shelf.tag } }, reads: [{ tag_type: 'rfid', value: tag }] }))).status).toBe(202);
    const after = Date.now();
    expect(await locationOf(a.id)).toMatchObject({ location_id: shelf.id, location_external_key: shelf.external_key });
    const row = (await api<{ data: Array<{ asset_last_seen: string }> }>('GET', `/reports/asset-locations?asset_id=${a.id}`)).body.data[0]!;
    const seen = Date.parse(row.asset_last_seen);
    expect(seen).toBeGreaterThanOrEqual(before - 1);
    expect(seen).toBeLessThanOrEqual(after + 1);
    expect((await submit(body({ location: { external_key: dock.external_key }, reads: [{ tag_type: 'rfid', value: tag }] }))).status).toBe(202);
    expect((await locationOf(a.id)).location_id).toBe(dock.id);
  });

  it('the same submission_id: the first counts again with duplicate: true and nothing changes; another body is a 409', async () => {
    const tag = unique('E28');
    const a = await asset([{ tag_type: 'rfid', value: tag }]);
    const first = body({ reads: [{ tag_type: 'rfid', value: tag, observed_at: '2026-05-25T10:00:00Z' }, { tag_type: 'ble', value: 'x' }] });
    expect((await submit(first)).body).toEqual({ data: { accepted: 1, unknown: 1, duplicate: false } });
    // Keys in another order are the same body.
    const reordered = Object.fromEntries(Object.entries(first).reverse());
    expect((await submit(reordered)).body).toEqual({ data: { accepted: 1, unknown: 1, duplicate: true } });
    const history = await api<{ total_count: number }>('GET', `/assets/${a.id}/history`);
    expect(history.body.total_count).toBe(1);
    const conflict = await submit({ ...first, location: { id: shelf.id } });
    expect(conflict.status).toBe(409);
    expect(conflict.body.error).toMatchObject({ type: 'conflict', detail: 'submission_id was already used with a different body' });
    expect((await locationOf(a.id)).location_id).toBe(dock.id);
  });

  it('concurrent submissions of one submission_id record it once', async () => {
    const tag = unique('E28');
    const a = await asset([{ tag_type: 'rfid', value: tag }]);
    const same = body({ reads: [{ tag_type: 'rfid', value: tag }] });
    const replies = await Promise.all(Array.from({ length: 12 }, () => submit(same)));
    expect(replies.map((r) => r.status)).toEqual(Array(12).fill(202));
    expect(replies.filter((r) => !r.body.data!.duplicate)).toHaveLength(1);
    expect(new Set(replies.map((r) => `${r.body.data!.accepted}/${r.body.data!.unknown}`))).toEqual(new Set(['1/0']));
    expect((await api<{ total_count: number }>('GET', `/assets/${a.id}/history`)).body.total_count).toBe(1);
  });

  it('submissions in flight together (appended together) are each recorded once and each visible when answered', async () => {
    const seed = Number(process.env.PROPERTY_SEED ?? Date.now() % 1_000_000);
    const random = seededRandom(seed);
    const places = [dock, shelf];
    for (let round = 0; round < 3; round++) {
      // 24 submissions at once, at random places, some sent twice: each tag's asset is where its answer put it.
      const items = await Promise.all(
        Array.from({ length: 24 }, async () => {
          const tag = unique('E28');
          const a = await asset([{ tag_type: 'rfid', value: tag }]);
          return { a, tag, place: places[Math.floor(random() * places.length)]!, twice: random() < 0.25 };
        }),
      );
      const sent = items.flatMap((item) => {
        const one = body({ location: { id: item.place.id }, reads: [{ tag_type: 'rfid', value: item.tag }] });
        return item.twice ? [{ item, one }, { item, one }] : [{ item, one }];
      });
      const shuffled = sent.map((x) => ({ x, k: random() })).sort((p, q) => p.k - q.k).map(({ x }) => x);
      const seen = await Promise.all(
        shuffled.map(async ({ item, one }) => {
          const reply = await submit(one);
          expect(reply.status, `seed ${seed}: ${JSON.stringify(reply.body)}`).toBe(202);
          expect(reply.body.data!.accepted).toBe(1);
          // Read-your-writes: the answer comes once the asset shows where it was scanned.
          expect((await locationOf(item.a.id)).location_id, `seed ${seed}`).toBe(item.place.id);
          return reply.body.data!.duplicate;
        }),
      );
      expect(seen.filter((duplicate) => !duplicate)).toHaveLength(items.length);
      for (const item of items) expect((await api<{ total_count: number }>('GET', `/assets/${item.a.id}/history`)).body.total_count).toBe(1);
    }
  });

  it('validates the body with the contract codes, every field at once', async () => {
    expect(fields(await submit({}))).toEqual([
      ['submission_id', 'required'],
      ['device_id', 'required'],
      ['location', 'required'],
      ['reads', 'required'],
    ]);
    expect(fields(await submit(body({ submission_id: '', device_id: 'x'.repeat(256) })))).toEqual([
      ['submission_id', 'too_short'],
      ['device_id', 'too_long'],
    ]);
    expect(fields(await submit(body({ submission_id: 'a\u0001b' })))).toEqual([['submission_id', 'invalid_value']]);
    expect(fields(await submit(body({ reads: [] })))).toEqual([['reads', 'too_short']]);
    const tooMany = await submit(body({ reads: Array.from({ length: 1001 }, (_, i) => ({ tag_type: 'rfid', value: `E${i}` })) }));
    expect(fields(tooMany)).toEqual([['reads', 'too_long']]);
    expect(tooMany.body.error!.fields![0]).toMatchObject({ params: { max_length: 1000 } });
    expect(fields(await submit(body({ location: { id: dock.id, external_key: dock.external_key } })))).toEqual([
      ['location.external_key', 'ambiguous_fields'],
      ['location.id', 'ambiguous_fields'],
    ]);
    expect(fields(await submit(body({ location: {} })))).toEqual([['location', 'required']]);
    expect(fields(await submit(body({ location: { id: 2147483647 } })))).toEqual([['location.id', 'fk_not_found']]);
    expect(fields(await submit(body({ location: { external_key: 'NO-SUCH-PLACE' } })))).toEqual([['location.external_key', 'fk_not_found']]);
    expect(fields(await submit(body({ location: { external_key: 'bad key' } })))).toEqual([['location.external_key', 'invalid_value']]);
    expect(fields(await submit(body({ location: { tag: { tag_type: 'rfid', value: unique('nobody') } } })))).toEqual([['location.tag', 'fk_not_found']]);
    const future = new Date(Date.now() + 6 * 60_000).toISOString();
    const nearFuture = new Date(Date.now() + 60_000).toISOString();
    expect(fields(await submit(body({ reads: [{ tag_type: 'rfid', value: 'E1', observed_at: future }] })))).toEqual([['reads[0].observed_at', 'invalid_value']]);
    expect((await submit(body({ reads: [{ tag_type: 'rfid', value: 'E1', observed_at: nearFuture }] }))).status).toBe(202);
    expect(fields(await submit(body({ reads: [{ tag_type: 'rfid', value: 'E1', observed_at: '2026-05-25 10:00' }] })))).toEqual([['reads[0].observed_at', 'invalid_value']]);
    const badType = await submit(body({ reads: [{ tag_type: 'nfc', value: 'E1' }] }));
    expect(fields(badType)).toEqual([['reads[0].tag_type', 'invalid_value']]);
    expect(badType.body.error!.fields![0]).toMatchObject({ params: { allowed_values: ['rfid', 'ble', 'barcode'] } });
    expect(fields(await submit(body({ reads: [{ tag_type: 'rfid', value: 'E1', antenna: 2 }], extra: 1 })))).toEqual([
      ['reads[0].antenna', 'unknown_field'],
      ['extra', 'unknown_field'],
    ]);
    const wrongType = await submit(body({ reads: [{ tag_type: 'rfid', value: 'E1', rssi: '-56' }] }));
    expect(wrongType.status).toBe(400);
    expect(wrongType.body.error).toMatchObject({ type: 'bad_request', detail: 'Body field "reads[0].rssi" could not be decoded as the expected type' });
  });

  it('uses the public pipeline: 401, 403 without scans:write, 415, 404 and 405 in the error envelope', async () => {
    const url = `${svc.ingestUrl}/scans`;
    const noAuth = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(noAuth.status).toBe(401);
    expect(noAuth.headers.get('www-authenticate')).toBe('Bearer realm="tracking-api"');
    expect(noAuth.headers.get('x-request-id')).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    const forbidden = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${readerToken}`, 'content-type': 'application/json' }, body: JSON.stringify(body()) });
    expect(forbidden.status).toBe(403);
    expect(((await forbidden.json()) as { error: { detail: string } }).error.detail).toBe('Missing required scope: scans:write');
    const writer = await mintApiKey(svc.service.ctx, { orgId, scopes: ['scans:write'] });
    const wrongType = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${writer.token}`, 'content-type': 'text/plain' }, body: '{}' });
    expect(wrongType.status).toBe(415);
    const get = await fetch(url, { headers: { authorization: `Bearer ${writer.token}` } });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    const unknown = await fetch(`${svc.ingestUrl}/nope`, { headers: { authorization: `Bearer ${writer.token}` } });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { detail: string } }).error.detail).toBe('Unknown API route: /ingest/v1/nope');
    // A scans:write key opens no public endpoint that needs another scope.
    const publicCall = await fetch(`${svc.apiUrl}/assets`, { headers: { authorization: `Bearer ${writer.token}` } });
    expect(publicCall.status).toBe(403);
    // The ingest listener is not the public one.
    expect(new URL(svc.ingestUrl).port).not.toBe(new URL(svc.apiUrl).port);
    expect((await fetch(`${svc.apiUrl.replace('/api/v1', '/ingest/v1')}/scans`, { method: 'POST' })).status).toBe(404);
  });

  it('another org cannot place this org’s assets, nor name its locations', async () => {
    const tag = unique('E28');
    const a = await asset([{ tag_type: 'rfid', value: tag }]);
    const other = (await createOrg(svc.service.ctx, 'other-handheld')).id;
    const otherSubmit = handheld(svc, (await mintApiKey(svc.service.ctx, { orgId: other, scopes: ['scans:write'] })).token);
    expect(fields(await otherSubmit(body({ location: { id: dock.id } })))).toEqual([['location.id', 'fk_not_found']]);
    const otherAdmin = client(svc.apiUrl, (await mintApiKey(svc.service.ctx, { orgId: other, scopes: ['locations:write'] })).token);
    const theirs = (await otherAdmin<{ data: { id: number } }>('POST', '/locations', { body: { name: 'theirs' } })).body.data;
    const reply = await otherSubmit(body({ location: { id: theirs.id }, reads: [{ tag_type: 'rfid', value: tag }] }));
    expect(reply.body.data).toEqual({ accepted: 0, unknown: 1, duplicate: false });
    expect((await locationOf(a.id)).location_id).toBeNull();
  });
});

describe('the ingest role', () => {
  it('ROLES=api does not open the ingest listener; ROLES=ingest alone serves it, idempotent across a restart', async () => {
    const db = await createTestDatabase('handheld_roles');
    const base = { PORT: '0', OPS_PORT: '0', INGEST_PORT: '0', LOG_LEVEL: 'silent', SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY };
    const log = createLogger('silent');
    const apiOnly = await startService(loadConfig({ ...base, ROLES: 'api,projector' }), db.url, log);
    try {
      expect(apiOnly.urls.ingest).toBeUndefined();
      expect(apiOnly.urls.api).toBeDefined();
      const ctx = apiOnly.ctx;
      const org = (await createOrg(ctx, 'roles')).id;
      const writer = await mintApiKey(ctx, { orgId: org, scopes: ['scans:write'] });
      const admin = client(apiOnly.urls.api!, (await mintApiKey(ctx, { orgId: org, scopes: ['locations:write'] })).token);
      const location = (await admin<{ data: { id: number } }>('POST', '/locations', { body: { name: 'L' } })).body.data;
      const submission = { submission_id: 'roles-1', device_id: 'd', location: { id: location.id }, reads: [{ tag_type: 'rfid', value: 'E1' }] };
      const post = async (url: string) => {
        const response = await fetch(`${url}/scans`, { method: 'POST', headers: { authorization: `Bearer ${writer.token}`, 'content-type': 'application/json' }, body: JSON.stringify(submission) });
        return { status: response.status, body: (await response.json()) as unknown };
      };
      for (let restart = 0; restart < 2; restart++) {
        const ingestOnly = await startService(loadConfig({ ...base, ROLES: 'ingest' }), db.url, log);
        try {
          expect(ingestOnly.urls.api).toBeUndefined();
          expect(await post(ingestOnly.urls.ingest!)).toEqual({ status: 202, body: { data: { accepted: 0, unknown: 1, duplicate: restart > 0 } } });
        } finally {
          await ingestOnly.stop();
        }
      }
    } finally {
      await apiOnly.stop();
      await db.drop();
    }
  });
});
