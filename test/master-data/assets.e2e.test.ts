import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey, mintSession } from '../support/auth.js';
import { scanner } from '../support/scans.js';
import { startTestService, type TestService } from '../support/service.js';
import { client, errorOf, fieldCodes, type Reply } from './http.js';

/**
 * Contract tests of the asset endpoints over real HTTP. Each test names the section of docs/api.md
 * that states the rule it checks.
 */

interface Tag {
  id: number;
  tag_type: string;
  value: string;
  is_active: boolean;
  valid_from: string | null;
  valid_to: string | null;
  created_at: string;
}
interface Asset {
  id: number;
  external_key: string;
  name: string;
  description: string | null;
  location_id: number | null;
  location_external_key: string | null;
  is_active: boolean;
  valid_from: string | null;
  valid_to: string | null;
  metadata: Record<string, unknown>;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
  tags: Tag[];
}
interface One {
  data: Asset;
}
interface Many {
  data: Asset[];
  limit: number;
  offset: number;
  total_count: number;
}

let svc: TestService;
let call: ReturnType<typeof client>;
let readOnlyToken: string;
let otherOrgCall: ReturnType<typeof client>;
let sessionToken: string;
let orglessSessionToken: string;

const VIEW_FIELDS = [
  'id',
  'external_key',
  'name',
  'description',
  'location_id',
  'location_external_key',
  'is_active',
  'valid_from',
  'valid_to',
  'metadata',
  'created_at',
  'updated_at',
  'deleted_at',
  'tags',
];
const RFC3339_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
let seq = 0;
const uniqueKey = (prefix = 'K') => `${prefix}-${Date.now().toString(36)}-${++seq}`;

beforeAll(async () => {
  svc = await startTestService('assets_contract');
  const ctx = svc.service.ctx;
  const org = await createOrg(ctx, 'Assets Org');
  const other = await createOrg(ctx, 'Other Org');
  const rw = await mintApiKey(ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write'] });
  readOnlyToken = (await mintApiKey(ctx, { orgId: org.id, scopes: ['assets:read'] })).token;
  const otherKey = await mintApiKey(ctx, { orgId: other.id, scopes: ['assets:read', 'assets:write'] });
  call = client(svc.apiUrl, rw.token);
  sessionToken = (await mintSession(ctx, { user: 'ops@example.com', orgId: org.id })).token;
  orglessSessionToken = (await mintSession(ctx, { user: 'ops@example.com' })).token;
  otherOrgCall = client(svc.apiUrl, otherKey.token);
});

afterAll(async () => {
  await svc?.stop();
});

async function create(body: Record<string, unknown>): Promise<Asset> {
  const reply = await call<One>('POST', '/assets', { body });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data;
}

async function get(id: number): Promise<Reply<One>> {
  return call<One>('GET', `/assets/${id}`);
}

describe('POST /assets', () => {
  it('docs/api.md "Requests and responses": 201, Location header, every field present, RFC 3339 Z timestamps', async () => {
    const reply = await call<One>('POST', '/assets', { body: { name: 'Pallet jack' } });
    expect(reply.status).toBe(201);
    const asset = reply.body.data;
    expect(reply.headers.get('location')).toBe(`/api/v1/assets/${asset.id}`);
    expect(Object.keys(asset).sort()).toEqual([...VIEW_FIELDS].sort());
    expect(asset).toMatchObject({
      name: 'Pallet jack',
      description: null,
      location_id: null,
      location_external_key: null,
      is_active: true,
      valid_from: null,
      valid_to: null,
      metadata: {},
      deleted_at: null,
      tags: [],
    });
    expect(asset.created_at).toMatch(RFC3339_Z);
    expect(asset.updated_at).toBe(asset.created_at);
    // A key left out on create is minted (docs/api.md "Requests and responses").
    expect(asset.external_key).toMatch(/^ASSET-\d{4,}$/);
    expect((await get(asset.id)).body).toEqual(reply.body);
  });

  it('docs/api.md "POST /assets": {} → 400 with only name required', async () => {
    const reply = await call('POST', '/assets', { body: {} });
    expect(fieldCodes(reply)).toEqual([['name', 'required']]);
    expect(errorOf(reply).detail).toBe('name is required');
  });

  it('docs/api.md "What text the service accepts": empty → too_short, over → too_long, controls → invalid_value; tab/newline allowed', async () => {
    let reply = await call('POST', '/assets', { body: { name: '' } });
    expect(fieldCodes(reply)).toEqual([['name', 'too_short']]);
    expect(errorOf(reply).fields![0]!.params).toEqual({ min_length: 1 });
    reply = await call('POST', '/assets', { body: { name: 'x'.repeat(256) } });
    expect(fieldCodes(reply)).toEqual([['name', 'too_long']]);
    expect(errorOf(reply).fields![0]!.params).toEqual({ max_length: 255 });
    reply = await call('POST', '/assets', { body: { name: 'ok', description: 'd'.repeat(1025) } });
    expect(fieldCodes(reply)).toEqual([['description', 'too_long']]);
    expect(errorOf(reply).fields![0]!.params).toEqual({ max_length: 1024 });
    reply = await call('POST', '/assets', { body: { name: 'bad\u0007bell' } });
    expect(fieldCodes(reply)).toEqual([['name', 'invalid_value']]);
    reply = await call('POST', '/assets', { body: { name: 'del\u007f' } });
    expect(fieldCodes(reply)).toEqual([['name', 'invalid_value']]);
    const ok = await create({ name: 'x'.repeat(255), description: 'line\tone\r\nline two' });
    expect(ok.description).toBe('line\tone\r\nline two');
  });

  it('docs/api.md "Requests and responses" (identifiers): external_key pattern, blank → too_short, case-sensitive, collision → 409 naming the key', async () => {
    for (const bad of ['a.b', 'a_b', 'a b', 'a/b', 'a:b', 'ké']) {
      const reply = await call('POST', '/assets', { body: { name: 'n', external_key: bad } });
      expect(fieldCodes(reply), bad).toEqual([['external_key', 'invalid_value']]);
    }
    for (const blank of ['', '   ']) {
      const reply = await call('POST', '/assets', { body: { name: 'n', external_key: blank } });
      expect(fieldCodes(reply)).toEqual([['external_key', 'too_short']]);
    }
    const long = await call('POST', '/assets', { body: { name: 'n', external_key: 'k'.repeat(256) } });
    expect(fieldCodes(long)).toEqual([['external_key', 'too_long']]);
    const key = uniqueKey('ab');
    await create({ name: 'lower', external_key: key });
    await create({ name: 'upper', external_key: key.toUpperCase() });
    const dup = await call('POST', '/assets', { body: { name: 'again', external_key: key } });
    expect(dup.status).toBe(409);
    expect(errorOf(dup).type).toBe('conflict');
    expect(errorOf(dup).detail).toContain(key);
  });

  it('docs/api.md "POST /assets": location_id / location_external_key on POST → read_only, one entry per field', async () => {
    let reply = await call('POST', '/assets', { body: { name: 'n', location_id: 1 } });
    expect(fieldCodes(reply)).toEqual([['location_id', 'read_only']]);
    expect(errorOf(reply).fields![0]!.message).toContain('scan-event ingestion');
    reply = await call('POST', '/assets', { body: { name: 'n', location_id: 1, location_external_key: 'L-1' } });
    expect(fieldCodes(reply)).toEqual([
      ['location_id', 'read_only'],
      ['location_external_key', 'read_only'],
    ]);
    reply = await call('POST', '/assets', { body: { name: 'n', location_external_key: null } });
    expect(fieldCodes(reply)).toEqual([['location_external_key', 'read_only']]);
  });

  it('docs/api.md "Errors": one entry per field, detail = first message + (and N more validation errors)', async () => {
    const reply = await call('POST', '/assets', { body: { external_key: 'bad key', name: '', metadata: [], bogus: 1 } });
    expect(fieldCodes(reply)).toEqual([
      ['external_key', 'invalid_value'],
      ['name', 'too_short'],
      ['metadata', 'invalid_value'],
      ['bogus', 'unknown_field'],
    ]);
    const error = errorOf(reply);
    expect(error.detail).toBe(`${error.fields![0]!.message} (and 3 more validation errors)`);
    expect(error.title).toBe('Validation failed');
    expect(error.status).toBe(400);
    expect(error.instance).toBe('/api/v1/assets');
    expect(error.request_id).toBe(reply.headers.get('x-request-id'));
  });

  it('docs/api.md "Errors": a JSON value of the wrong type → 400 bad_request naming the field, no fields[]', async () => {
    const reply = await call('POST', '/assets', { body: { name: 5 } });
    expect(reply.status).toBe(400);
    expect(errorOf(reply).type).toBe('bad_request');
    expect(errorOf(reply).detail).toBe('Body field "name" could not be decoded as the expected type');
    expect(errorOf(reply).fields).toBeUndefined();
    const flag = await call('POST', '/assets', { body: { name: 'n', is_active: 'yes' } });
    expect(errorOf(flag).detail).toBe('Body field "is_active" could not be decoded as the expected type');
  });

  it('docs/api.md "Errors": invalid JSON, wrong top-level type, 415 content type', async () => {
    let reply = await call('POST', '/assets', { raw: '{"name":' });
    expect(errorOf(reply)).toMatchObject({ type: 'bad_request', detail: 'Request body is not valid JSON' });
    reply = await call('POST', '/assets', { raw: '[1]' });
    expect(errorOf(reply)).toMatchObject({ type: 'bad_request', detail: 'Request body could not be decoded as the expected type' });
    reply = await call('POST', '/assets', { body: { name: 'n' }, contentType: 'application/merge-patch+json' });
    expect(reply.status).toBe(415);
    expect(errorOf(reply).detail).toBe('Content-Type must be application/json');
  });

  it('docs/api.md "POST /assets": metadata must be an object; scalars, arrays, booleans and null → invalid_value', async () => {
    for (const bad of [5, 'x', [], true, null]) {
      const reply = await call('POST', '/assets', { body: { name: 'n', metadata: bad } });
      expect(fieldCodes(reply), JSON.stringify(bad)).toEqual([['metadata', 'invalid_value']]);
    }
    const ok = await create({ name: 'n', metadata: { nested: { a: [1, 2] }, flag: false } });
    expect(ok.metadata).toEqual({ nested: { a: [1, 2] }, flag: false });
  });

  it('docs/api.md "What text the service accepts": over 1 MiB → 413 payload_too_large in the envelope', async () => {
    const reply = await call('POST', '/assets', { body: { name: 'n', metadata: { blob: 'x'.repeat(1024 * 1024) } } });
    expect(reply.status).toBe(413);
    expect(errorOf(reply).type).toBe('payload_too_large');
  });

  it('docs/api.md "Currently effective": valid_to must be later than valid_from → invalid_value on valid_to; bad timestamp → invalid_value', async () => {
    let reply = await call('POST', '/assets', { body: { name: 'n', valid_from: '2030-01-01T00:00:00Z', valid_to: '2030-01-01T00:00:00Z' } });
    expect(fieldCodes(reply)).toEqual([['valid_to', 'invalid_value']]);
    reply = await call('POST', '/assets', { body: { name: 'n', valid_from: '2030-01-01' } });
    expect(fieldCodes(reply)).toEqual([['valid_from', 'invalid_value']]);
    const ok = await create({ name: 'n', valid_from: '2020-01-01T02:00:00+02:00', valid_to: '2999-01-01T00:00:00Z' });
    expect(ok.valid_from).toBe('2020-01-01T00:00:00.000Z');
  });

  it('docs/api.md "Authentication" (scopes): a key without assets:write → 403 Missing required scope', async () => {
    const reply = await call('POST', '/assets', { body: { name: 'n' }, token: readOnlyToken });
    expect(reply.status).toBe(403);
    expect(errorOf(reply).detail).toBe('Missing required scope: assets:write');
  });
});

describe('GET /assets/{asset_id}', () => {
  it('docs/api.md "Ids": path ids must be 1..2147483647 (400, too_large with params.max), not 404', async () => {
    let reply = await call('GET', '/assets/2147483648');
    expect(fieldCodes(reply)).toEqual([['asset_id', 'too_large']]);
    expect(errorOf(reply).fields![0]!.params).toEqual({ max: 2147483647 });
    for (const bad of ['0', '-1', 'abc']) {
      reply = await call('GET', `/assets/${bad}`);
      expect(reply.status, bad).toBe(400);
    }
    reply = await call('GET', '/assets/2147483647');
    expect(reply.status).toBe(404);
    expect(errorOf(reply).type).toBe('not_found');
  });

  it('docs/api.md "Errors" (not_found): another org’s id behaves exactly like a missing one', async () => {
    const asset = await create({ name: 'mine' });
    const reply = await otherOrgCall('GET', `/assets/${asset.id}`);
    expect(reply.status).toBe(404);
    const patch = await otherOrgCall('PATCH', `/assets/${asset.id}`, { body: { name: 'theirs' } });
    expect(patch.status).toBe(404);
    const del = await otherOrgCall('DELETE', `/assets/${asset.id}`);
    expect(del.status).toBe(404);
    const list = await otherOrgCall<Many>('GET', `/assets?external_key=${asset.external_key}`);
    expect(list.body.data).toEqual([]);
  });

  it('docs/api.md "Currently effective": read by id skips effectiveness (a not-yet-effective asset is readable)', async () => {
    const future = await create({ name: 'future', valid_from: '2999-01-01T00:00:00Z' });
    expect((await get(future.id)).status).toBe(200);
  });

  it('docs/api.md "Requests and responses": HEAD behaves as GET without a body; wrong method → 405 with Allow', async () => {
    const asset = await create({ name: 'head' });
    const head = await call('HEAD', `/assets/${asset.id}`);
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
    const put = await call('PUT', `/assets/${asset.id}`, { body: {} });
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('GET, HEAD, PATCH, DELETE');
  });
});

describe('PATCH /assets/{asset_id}', () => {
  it('docs/api.md "Changing a record: PATCH": {} is a no-op, 200, updated_at unchanged', async () => {
    const asset = await create({ name: 'noop' });
    const reply = await call<One>('PATCH', `/assets/${asset.id}`, { body: {} });
    expect(reply.status).toBe(200);
    expect(reply.body.data).toEqual(asset);
  });

  it('docs/api.md "Changing a record: PATCH": a verbatim GET→PATCH round trip succeeds and changes nothing (valid_from null included)', async () => {
    const asset = await create({ name: 'round trip', metadata: { a: 1 }, tags: [{ tag_type: 'barcode', value: uniqueKey('RT') }] });
    const before = (await get(asset.id)).body.data;
    expect(before.valid_from).toBeNull();
    const reply = await call<One>('PATCH', `/assets/${asset.id}`, { body: before });
    expect(reply.status, reply.text).toBe(200);
    expect(reply.body.data).toEqual(before);
  });

  it('docs/api.md "Changing a record: PATCH": timestamps match by instant in any RFC 3339 form', async () => {
    const asset = await create({ name: 'instants', valid_from: '2020-05-01T10:00:00Z' });
    const shifted = (iso: string) => {
      const d = new Date(new Date(iso).getTime() + 2 * 3600_000);
      return `${d.toISOString().slice(0, 23)}000+02:00`;
    };
    const reply = await call<One>('PATCH', `/assets/${asset.id}`, {
      body: { created_at: shifted(asset.created_at), updated_at: shifted(asset.updated_at), valid_from: '2020-05-01T12:00:00+02:00', deleted_at: null },
    });
    expect(reply.status, reply.text).toBe(200);
    expect(reply.body.data.updated_at).toBe(asset.updated_at);
  });

  it('docs/api.md "Changing a record: PATCH": differing read-only fields → read_only with the right write path, one entry each', async () => {
    const asset = await create({ name: 'ro' });
    const reply = await call('PATCH', `/assets/${asset.id}`, {
      body: {
        id: asset.id + 1,
        external_key: 'OTHER-KEY',
        location_id: 5,
        location_external_key: 'L-5',
        created_at: '2001-01-01T00:00:00Z',
        updated_at: '2001-01-01T00:00:00Z',
        deleted_at: '2001-01-01T00:00:00Z',
        tags: [{ tag_type: 'rfid', value: 'X' }],
      },
    });
    expect(fieldCodes(reply)).toEqual([
      ['id', 'read_only'],
      ['external_key', 'read_only'],
      ['location_id', 'read_only'],
      ['location_external_key', 'read_only'],
      ['created_at', 'read_only'],
      ['updated_at', 'read_only'],
      ['deleted_at', 'read_only'],
      ['tags', 'read_only'],
    ]);
    const messages = Object.fromEntries(errorOf(reply).fields!.map((f) => [f.field, f.message]));
    expect(messages.id).toContain('server-managed');
    expect(messages.deleted_at).toContain('DELETE');
    expect(messages.external_key).toContain('POST /assets/{id}/rename');
    expect(messages.location_id).toContain('scan-event ingestion');
    expect(messages.tags).toContain('/tags');
    expect(errorOf(reply).detail).toBe(`${messages.id} (and 7 more validation errors)`);
    // Matching scan data (null, null) is accepted.
    const same = await call('PATCH', `/assets/${asset.id}`, { body: { location_id: null, location_external_key: null, external_key: asset.external_key } });
    expect(same.status).toBe(200);
  });

  it('docs/api.md "Changing a record: PATCH": set, clear a writable-nullable field, leave omitted fields; updated_at advances', async () => {
    const asset = await create({ name: 'before', description: 'desc', valid_to: '2999-01-01T00:00:00Z', metadata: { keep: false } });
    await new Promise((r) => setTimeout(r, 5));
    const reply = await call<One>('PATCH', `/assets/${asset.id}`, { body: { name: 'after', description: null, valid_to: null, is_active: false } });
    expect(reply.status).toBe(200);
    expect(reply.body.data).toMatchObject({ name: 'after', description: null, valid_to: null, is_active: false, metadata: { keep: false } });
    expect(Date.parse(reply.body.data.updated_at)).toBeGreaterThan(Date.parse(asset.updated_at));
    expect(reply.body.data.created_at).toBe(asset.created_at);
    expect((await get(asset.id)).body).toEqual(reply.body);
  });

  it('docs/api.md "Changing a record: PATCH": null on a non-nullable field → invalid_value; empty string → too_short', async () => {
    const asset = await create({ name: 'nulls', valid_from: '2020-01-01T00:00:00Z' });
    const reply = await call('PATCH', `/assets/${asset.id}`, { body: { name: null, is_active: null, metadata: null } });
    expect(fieldCodes(reply)).toEqual([
      ['name', 'invalid_value'],
      ['is_active', 'invalid_value'],
      ['metadata', 'invalid_value'],
    ]);
    const validFrom = await call('PATCH', `/assets/${asset.id}`, { body: { valid_from: null } });
    expect(fieldCodes(validFrom)).toEqual([['valid_from', 'invalid_value']]);
    const empty = await call('PATCH', `/assets/${asset.id}`, { body: { description: '' } });
    expect(fieldCodes(empty)).toEqual([['description', 'too_short']]);
    const blankKey = await call('PATCH', `/assets/${asset.id}`, { body: { external_key: ' ' } });
    expect(fieldCodes(blankKey)).toEqual([['external_key', 'too_short']]);
  });

  it('docs/api.md "Errors" on PATCH: schema errors and differing read-only fields in one response', async () => {
    const asset = await create({ name: 'mixed', valid_from: '2020-01-01T00:00:00Z' });
    const reply = await call('PATCH', `/assets/${asset.id}`, {
      body: { tags: [{ id: 1 }], name: '', id: asset.id + 1, valid_from: null, metadata: 3, created_at: asset.created_at, external_key: 'bad key' },
    });
    expect(fieldCodes(reply)).toEqual([
      ['id', 'read_only'],
      ['external_key', 'invalid_value'],
      ['name', 'too_short'],
      ['valid_from', 'invalid_value'],
      ['metadata', 'invalid_value'],
      ['tags', 'read_only'],
    ]);
    expect(errorOf(reply).detail).toMatch(/\(and 5 more validation errors\)$/);
  });

  it('docs/api.md "Changing a record: PATCH": PATCH replaces metadata wholesale; {} clears it; a non-object → invalid_value', async () => {
    const asset = await create({ name: 'meta', metadata: { a: 1, b: 2 } });
    let reply = await call<One>('PATCH', `/assets/${asset.id}`, { body: { metadata: { c: 3 } } });
    expect(reply.body.data.metadata).toEqual({ c: 3 });
    // Same object in another key order: no change.
    const same = await call<One>('PATCH', `/assets/${asset.id}`, { body: { metadata: { c: 3 } } });
    expect(same.body.data.updated_at).toBe(reply.body.data.updated_at);
    reply = await call<One>('PATCH', `/assets/${asset.id}`, { body: { metadata: {} } });
    expect(reply.body.data.metadata).toEqual({});
    const bad = await call('PATCH', `/assets/${asset.id}`, { body: { metadata: [1] } });
    expect(fieldCodes(bad)).toEqual([['metadata', 'invalid_value']]);
  });

  it('docs/api.md "Currently effective" on PATCH: merged valid_to not later than valid_from → invalid_value on valid_to', async () => {
    const asset = await create({ name: 'window', valid_from: '2020-01-01T00:00:00Z' });
    const reply = await call('PATCH', `/assets/${asset.id}`, { body: { valid_to: '2019-01-01T00:00:00Z' } });
    expect(fieldCodes(reply)).toEqual([['valid_to', 'invalid_value']]);
  });

  it('docs/api.md "Changing a record: PATCH": top-level null, unknown keys, application/json on PATCH (415)', async () => {
    const asset = await create({ name: 'bodies' });
    let reply = await call('PATCH', `/assets/${asset.id}`, { raw: 'null' });
    expect(errorOf(reply)).toMatchObject({ type: 'bad_request', detail: 'Request body must be a JSON object (RFC 7396)' });
    reply = await call('PATCH', `/assets/${asset.id}`, { body: { colour: 'red' } });
    expect(fieldCodes(reply)).toEqual([['colour', 'unknown_field']]);
    reply = await call('PATCH', `/assets/${asset.id}`, { body: {}, contentType: 'application/json' });
    expect(reply.status).toBe(415);
    expect(errorOf(reply).detail).toBe('Content-Type must be application/merge-patch+json on PATCH operations');
  });

  it('docs/api.md "Deleting": PATCH, rename or tag changes on a soft-deleted row → 404', async () => {
    const asset = await create({ name: 'gone' });
    expect((await call('DELETE', `/assets/${asset.id}`)).status).toBe(204);
    expect((await call('PATCH', `/assets/${asset.id}`, { body: { name: 'x' } })).status).toBe(404);
    expect((await call('POST', `/assets/${asset.id}/rename`, { body: { external_key: uniqueKey() } })).status).toBe(404);
    expect((await call('POST', `/assets/${asset.id}/tags`, { body: { tag_type: 'ble', value: uniqueKey() } })).status).toBe(404);
  });
});

describe('POST /assets/{asset_id}/rename', () => {
  it('docs/api.md "Renaming: a new external_key": same value → 200, descendant_count_affected 0, updated_at unchanged; a real rename advances it', async () => {
    const asset = await create({ name: 'rename me', external_key: uniqueKey('R') });
    const same = await call<One & { descendant_count_affected: number }>('POST', `/assets/${asset.id}/rename`, { body: { external_key: asset.external_key } });
    expect(same.status).toBe(200);
    expect(same.body.descendant_count_affected).toBe(0);
    expect(same.body.data.updated_at).toBe(asset.updated_at);
    await new Promise((r) => setTimeout(r, 5));
    const next = uniqueKey('R');
    const real = await call<One & { descendant_count_affected: number }>('POST', `/assets/${asset.id}/rename`, { body: { external_key: next } });
    expect(real.status).toBe(200);
    expect(real.body).toMatchObject({ data: { external_key: next }, descendant_count_affected: 0 });
    expect(Date.parse(real.body.data.updated_at)).toBeGreaterThan(Date.parse(asset.updated_at));
    // The old key is free again; the new one is taken.
    await create({ name: 'takes old key', external_key: asset.external_key });
    const clash = await call('POST', '/assets', { body: { name: 'n', external_key: next } });
    expect(clash.status).toBe(409);
  });

  it('docs/api.md "Renaming: a new external_key": pattern enforced; collision with an existing row → 409', async () => {
    const a = await create({ name: 'a', external_key: uniqueKey('A') });
    const b = await create({ name: 'b', external_key: uniqueKey('B') });
    const clash = await call('POST', `/assets/${a.id}/rename`, { body: { external_key: b.external_key } });
    expect(clash.status).toBe(409);
    expect(errorOf(clash).detail).toContain(b.external_key);
    expect(fieldCodes(await call('POST', `/assets/${a.id}/rename`, { body: { external_key: 'no spaces' } }))).toEqual([['external_key', 'invalid_value']]);
    expect(fieldCodes(await call('POST', `/assets/${a.id}/rename`, { body: {} }))).toEqual([['external_key', 'required']]);
    expect(fieldCodes(await call('POST', `/assets/${a.id}/rename`, { body: { external_key: '' } }))).toEqual([['external_key', 'too_short']]);
  });
});

describe('DELETE /assets/{asset_id}', () => {
  it('docs/api.md "Deleting": soft delete → 204; GET and a second DELETE → 404; the key is reusable; its tags are retired', async () => {
    const key = uniqueKey('D');
    const tagValue = uniqueKey('TAG');
    const asset = await create({ name: 'doomed', external_key: key, tags: [{ tag_type: 'barcode', value: tagValue }] });
    const del = await call('DELETE', `/assets/${asset.id}`);
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
    expect((await get(asset.id)).status).toBe(404);
    expect((await call('DELETE', `/assets/${asset.id}`)).status).toBe(404);
    const reborn = await create({ name: 'reborn', external_key: key, tags: [{ tag_type: 'barcode', value: tagValue }] });
    expect(reborn.id).not.toBe(asset.id);
    // include_deleted shows the deleted row with its deleted_at and no existing tags.
    const list = await call<Many>('GET', `/assets?external_key=${key}&include_deleted=true&sort=created_at`);
    expect(list.body.data.map((a) => a.id)).toEqual([asset.id, reborn.id]);
    expect(list.body.data[0]!.deleted_at).toMatch(RFC3339_Z);
    expect(list.body.data[0]!.tags).toEqual([]);
  });
});

describe('GET /assets (lists)', () => {
  let tagPrefix: string;
  let _rows: Asset[];
  beforeAll(async () => {
    tagPrefix = uniqueKey('LST');
    _rows = [
      await create({ name: 'Alpha widget', external_key: `${tagPrefix}-a`, description: 'Has 100% cotton_blend' }),
      await create({ name: 'beta WIDGET', external_key: `${tagPrefix}-b`, is_active: false }),
      await create({ name: 'Gamma', external_key: `${tagPrefix}-c`, tags: [{ tag_type: 'rfid', value: `${tagPrefix}-EPC-Zeta` }] }),
      await create({ name: 'Delta', external_key: `${tagPrefix}-d`, tags: [{ tag_type: 'rfid', value: `${tagPrefix}-EPC-Off`, is_active: false }] }),
      await create({ name: 'Future', external_key: `${tagPrefix}-e`, valid_from: '2999-01-01T00:00:00Z' }),
      await create({ name: 'Expired', external_key: `${tagPrefix}-f`, valid_to: '2001-01-01T00:00:00Z', valid_from: '2000-01-01T00:00:00Z' }),
    ];
  });
  const keysOf = (reply: Reply<Many>) => reply.body.data.map((a) => a.external_key);
  const filter = () => ['a', 'b', 'c', 'd', 'e', 'f'].map((s) => `external_key=${tagPrefix}-${s}`).join('&');

  it('docs/api.md "Currently effective": default scope is existing and currently effective, not is_active; include_deleted lifts it', async () => {
    const reply = await call<Many>('GET', `/assets?${filter()}`);
    expect(reply.status).toBe(200);
    expect(keysOf(reply)).toEqual([`${tagPrefix}-a`, `${tagPrefix}-b`, `${tagPrefix}-c`, `${tagPrefix}-d`]);
    expect(reply.body).toMatchObject({ limit: 50, offset: 0, total_count: 4 });
    const all = await call<Many>('GET', `/assets?${filter()}&include_deleted=true`);
    expect(all.body.total_count).toBe(6);
  });

  it('docs/api.md "GET /assets/{asset_id} and GET /assets": external_key any-of; a miss is an empty list; is_active narrows', async () => {
    expect(keysOf(await call<Many>('GET', `/assets?external_key=${tagPrefix}-c&external_key=${tagPrefix}-a&external_key=NOPE`))).toEqual([
      `${tagPrefix}-a`,
      `${tagPrefix}-c`,
    ]);
    const miss = await call<Many>('GET', '/assets?external_key=DOES-NOT-EXIST');
    expect(miss.status).toBe(200);
    expect(miss.body).toEqual({ data: [], limit: 50, offset: 0, total_count: 0 });
    expect(keysOf(await call<Many>('GET', `/assets?${filter()}&is_active=false`))).toEqual([`${tagPrefix}-b`]);
  });

  it('docs/api.md "Lists: paging, sorting, filters, search": q is case-insensitive over name, key, description and active effective tag values; % _ \\ literal', async () => {
    expect(keysOf(await call<Many>('GET', `/assets?q=${encodeURIComponent('widget')}&${filter()}`))).toEqual([`${tagPrefix}-a`, `${tagPrefix}-b`]);
    expect(keysOf(await call<Many>('GET', `/assets?q=${encodeURIComponent(`${tagPrefix}-epc-zeta`)}`))).toEqual([`${tagPrefix}-c`]);
    // An inactive tag is not searched.
    expect(keysOf(await call<Many>('GET', `/assets?q=${encodeURIComponent(`${tagPrefix}-EPC-Off`)}`))).toEqual([]);
    expect(keysOf(await call<Many>('GET', `/assets?q=${encodeURIComponent('100%')}&${filter()}`))).toEqual([`${tagPrefix}-a`]);
    expect(keysOf(await call<Many>('GET', `/assets?q=${encodeURIComponent('0%')}&${filter()}`))).toEqual([`${tagPrefix}-a`]);
    expect(keysOf(await call<Many>('GET', `/assets?q=${encodeURIComponent('n_b')}&${filter()}`))).toEqual([`${tagPrefix}-a`]);
    expect(keysOf(await call<Many>('GET', `/assets?q=${encodeURIComponent('a%c')}&${filter()}`))).toEqual([]);
    expect(keysOf(await call<Many>('GET', `/assets?q=${encodeURIComponent('\\')}&${filter()}`))).toEqual([]);
  });

  it('docs/api.md "Lists: paging, sorting, filters, search": sort fields with - prefix, id tiebreak; unknown sort → invalid_value "unknown sort field: <name>"', async () => {
    const byName = await call<Many>('GET', `/assets?${filter()}&sort=-name`);
    expect(byName.body.data.map((a) => a.name)).toEqual(['beta WIDGET', 'Gamma', 'Delta', 'Alpha widget']);
    const bad = await call('GET', '/assets?sort=colour');
    expect(fieldCodes(bad)).toEqual([['sort', 'invalid_value']]);
    expect(errorOf(bad).fields![0]!.message).toBe('unknown sort field: colour');
    // Equal sort values fall back to id ascending.
    const twins = [await create({ name: 'Twin', external_key: `${tagPrefix}-t1` }), await create({ name: 'Twin', external_key: `${tagPrefix}-t2` })];
    const tied = await call<Many>('GET', `/assets?external_key=${tagPrefix}-t2&external_key=${tagPrefix}-t1&sort=name`);
    expect(tied.body.data.map((a) => a.id)).toEqual(twins.map((t) => t.id).sort((x, y) => x - y));
  });

  it('docs/api.md "Lists: paging, sorting, filters, search": limit default 50, 0 → too_small params.min, > 200 → too_large params.max; offset pages', async () => {
    let reply = await call('GET', '/assets?limit=0');
    expect(fieldCodes(reply)).toEqual([['limit', 'too_small']]);
    expect(errorOf(reply).fields![0]!.params).toEqual({ min: 1 });
    reply = await call('GET', '/assets?limit=201');
    expect(fieldCodes(reply)).toEqual([['limit', 'too_large']]);
    expect(errorOf(reply).fields![0]!.params).toEqual({ max: 200 });
    const page = await call<Many>('GET', `/assets?${filter()}&limit=2&offset=1`);
    expect(page.body).toMatchObject({ limit: 2, offset: 1, total_count: 4 });
    expect(keysOf(page)).toEqual([`${tagPrefix}-b`, `${tagPrefix}-c`]);
    const past = await call<Many>('GET', `/assets?${filter()}&offset=10`);
    expect(past.body).toMatchObject({ data: [], total_count: 4 });
  });

  it('docs/api.md "Lists: paging, sorting, filters, search": invalid filter values → 400 (never an empty list); unknown keys → unknown_field; ambiguous pair', async () => {
    expect(fieldCodes(await call('GET', '/assets?external_key=bad.key'))).toEqual([['external_key', 'invalid_value']]);
    expect(fieldCodes(await call('GET', '/assets?location_external_key=a_b'))).toEqual([['location_external_key', 'invalid_value']]);
    expect(fieldCodes(await call('GET', '/assets?location_id=0'))).toEqual([['location_id', 'too_small']]);
    expect(fieldCodes(await call('GET', '/assets?location_id=2147483648'))).toEqual([['location_id', 'too_large']]);
    expect(fieldCodes(await call('GET', '/assets?is_active=yes'))).toEqual([['is_active', 'invalid_value']]);
    expect(fieldCodes(await call('GET', '/assets?include_deleted=1'))).toEqual([['include_deleted', 'invalid_value']]);
    expect(fieldCodes(await call('GET', '/assets?limit=5&limit=6'))).toEqual([['limit', 'invalid_value']]);
    expect(fieldCodes(await call('GET', '/assets?colour=red&size=9'))).toEqual([
      ['colour', 'unknown_field'],
      ['size', 'unknown_field'],
    ]);
    const ambiguous = await call('GET', '/assets?location_id=1&location_external_key=L-1');
    expect(fieldCodes(ambiguous)).toEqual([
      ['location_id', 'ambiguous_fields'],
      ['location_external_key', 'ambiguous_fields'],
    ]);
    // Valid location filters with no match are an empty page.
    const none = await call<Many>('GET', '/assets?location_id=1&location_id=2');
    expect(none.body.data).toEqual([]);
  });

  it('docs/api.md "Tags": embedded tags are active, currently effective tags in creation order', async () => {
    const a = await create({
      name: 'tagged',
      tags: [
        { tag_type: 'barcode', value: uniqueKey('E1') },
        { tag_type: 'ble', value: uniqueKey('E2'), is_active: false },
        { tag_type: 'ble', value: uniqueKey('E3'), valid_from: '2999-01-01T00:00:00Z' },
        { tag_type: 'rfid', value: uniqueKey('E4'), valid_to: '2999-01-01T00:00:00Z' },
      ],
    });
    expect(a.tags.map((t) => t.tag_type)).toEqual(['barcode', 'rfid']);
    expect(a.tags[0]!.id).toBeLessThan(a.tags[1]!.id);
    expect(Object.keys(a.tags[0]!).sort()).toEqual(['created_at', 'id', 'is_active', 'tag_type', 'valid_from', 'valid_to', 'value']);
    const all = await call<{ data: Tag[] }>('GET', `/assets/${a.id}/tags`);
    expect(all.body.data).toHaveLength(4);
  });

  it('docs/api.md "Authentication" (scopes): GET /assets needs assets:read; a read key may list', async () => {
    const reply = await call('GET', '/assets?limit=1', { token: readOnlyToken });
    expect(reply.status).toBe(200);
  });
});

describe('session tokens', () => {
  it('docs/api.md "Authentication" (session tokens): a session token is unscoped on public endpoints and sees its own org', async () => {
    const created = await call<One>('POST', '/assets', { token: sessionToken, body: { name: 'by session' } });
    expect(created.status).toBe(201);
    expect((await get(created.body.data.id)).body).toEqual(created.body);
  });

  it('a session without an organization has no org to read or write: refused (403 from the auth slice), never another org', async () => {
    const list = await call('GET', '/assets', { token: orglessSessionToken });
    expect(list.status).toBe(403);
    expect(errorOf(list).type).toBe('forbidden');
    expect((await call('POST', '/assets', { token: orglessSessionToken, body: { name: 'n' } })).status).toBe(403);
  });
});

describe('total_count of the unfiltered default list', () => {
  it('docs/api.md "Lists: paging, sorting, filters, search" and "Currently effective": counts existing, currently effective rows (with and without validity windows) after creates, patches and deletes', async () => {
    const ctx = svc.service.ctx;
    const org = await createOrg(ctx, 'Counting');
    const own = client(svc.apiUrl, (await mintApiKey(ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write'] })).token);
    const make = async (body: Record<string, unknown>) => (await own<One>('POST', '/assets', { body: { name: 'c', ...body } })).body.data;
    const totals = async () => {
      const all = (await own<Many>('GET', '/assets?limit=1')).body.total_count;
      const active = (await own<Many>('GET', '/assets?limit=1&is_active=true')).body.total_count;
      const inactive = (await own<Many>('GET', '/assets?limit=1&is_active=false')).body.total_count;
      const listed = (await own<Many>('GET', '/assets?limit=200')).body.data.length;
      return { all, active, inactive, listed };
    };
    const plain = await make({});
    await make({ is_active: false });
    const windowed = await make({ valid_from: '2020-01-01T00:00:00Z', valid_to: '2999-01-01T00:00:00Z' });
    await make({ valid_from: '2999-01-01T00:00:00Z' });
    await make({ valid_to: '2001-01-01T00:00:00Z', valid_from: '2000-01-01T00:00:00Z' });
    const doomed = await make({});
    expect(await totals()).toEqual({ all: 4, active: 3, inactive: 1, listed: 4 });
    await own('DELETE', `/assets/${doomed.id}`);
    await own('PATCH', `/assets/${plain.id}`, { body: { valid_to: '2001-06-01T00:00:00Z' } });
    await own('PATCH', `/assets/${windowed.id}`, { body: { is_active: false, valid_to: null } });
    expect(await totals()).toEqual({ all: 2, active: 0, inactive: 2, listed: 2 });
    await own('PATCH', `/assets/${plain.id}`, { body: { valid_to: null } });
    expect(await totals()).toEqual({ all: 3, active: 1, inactive: 2, listed: 3 });
  });
});

describe('total_count with include_deleted=true and no other filter', () => {
  it('docs/api.md "Currently effective": include_deleted: deleted and not-yet-effective rows are counted and listed, alone and with is_active', async () => {
    const ctx = svc.service.ctx;
    const org = await createOrg(ctx, 'Counting deleted');
    const own = client(svc.apiUrl, (await mintApiKey(ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write'] })).token);
    const make = async (body: Record<string, unknown>) => (await own<One>('POST', '/assets', { body: { name: 'c', ...body } })).body.data;
    const page = async (query: string) => {
      const reply = await own<Many>('GET', `/assets?${query}`);
      expect(reply.status, reply.text).toBe(200);
      return { total_count: reply.body.total_count, ids: reply.body.data.map((a) => a.id).sort((x, y) => x - y) };
    };
    const [a, b, c] = [await make({}), await make({}), await make({})];
    expect((await own('DELETE', `/assets/${b.id}`)).status).toBe(204);
    expect(await page('include_deleted=true')).toEqual({ total_count: 3, ids: [a.id, b.id, c.id] });
    expect(await page('')).toEqual({ total_count: 2, ids: [a.id, c.id] });

    // Inactive rows, one of them deleted, and an existing row not effective yet (include_deleted lifts
    // the effectiveness scope as well).
    const [d, e] = [await make({ is_active: false }), await make({ is_active: false })];
    expect((await own('DELETE', `/assets/${e.id}`)).status).toBe(204);
    const future = await make({ valid_from: '2999-01-01T00:00:00Z' });
    expect(await page('include_deleted=true&is_active=false')).toEqual({ total_count: 2, ids: [d.id, e.id] });
    expect(await page('include_deleted=true&is_active=true')).toEqual({ total_count: 4, ids: [a.id, b.id, c.id, future.id] });
    expect(await page('include_deleted=true')).toEqual({ total_count: 6, ids: [a.id, b.id, c.id, d.id, e.id, future.id] });
    expect(await page('include_deleted=true&limit=1')).toMatchObject({ total_count: 6 });
    expect(await page('is_active=false')).toEqual({ total_count: 1, ids: [d.id] });
    expect(await page('include_deleted=false')).toEqual({ total_count: 3, ids: [a.id, c.id, d.id] });
  });
});

describe('scan-data location fields', () => {
  it('docs/api.md "Assets" and "Changing a record: PATCH": location fields join the location on read; filters; PATCH accept-if-matches', async () => {
    const loc = (await call<{ data: { id: number; external_key: string } }>('POST', '/locations', { body: { name: 'Dock', external_key: uniqueKey('DOCK') } })).body.data;
    const tag = uniqueKey('EPC');
    const asset = await create({ name: 'placed', tags: [{ tag_type: 'rfid', value: tag }] });
    // A handheld scan places it (the only way an asset's location changes).
    const orgId = (await call<{ data: { id: number } }>('GET', '/orgs/me')).body.data.id;
    await (await scanner(svc, orgId)).scan({ id: loc.id }, [{ tag_type: 'rfid', value: tag }]);
    const view = (await get(asset.id)).body.data;
    expect(view).toMatchObject({ location_id: loc.id, location_external_key: loc.external_key });
    expect((await call<Many>('GET', `/assets?location_id=${loc.id}`)).body.data.map((a) => a.id)).toEqual([asset.id]);
    expect((await call<Many>('GET', `/assets?location_external_key=${loc.external_key}&location_external_key=NOPE`)).body.data.map((a) => a.id)).toEqual([asset.id]);
    // Matching scan data is accepted (both forms, as a verbatim round trip sends them).
    expect((await call('PATCH', `/assets/${asset.id}`, { body: view })).status).toBe(200);
    const differs = await call('PATCH', `/assets/${asset.id}`, { body: { location_id: loc.id + 1000, location_external_key: loc.external_key } });
    expect(fieldCodes(differs)).toEqual([['location_id', 'read_only']]);
    // A rename of the location shows on read, with no change to the asset row.
    const renamedKey = uniqueKey('DOCK');
    expect((await call('POST', `/locations/${loc.id}/rename`, { body: { external_key: renamedKey } })).status).toBe(200);
    const after = (await get(asset.id)).body.data;
    expect(after.location_external_key).toBe(renamedKey);
    expect(after.updated_at).toBe(view.updated_at);
  });
});
