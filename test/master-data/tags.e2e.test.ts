import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { client, errorOf, fieldCodes } from './http.js';

/**
 * Contract tests of the tag sub-resource of assets and locations (docs/api.md "Tags"), over
 * real HTTP.
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
interface Owner {
  id: number;
  external_key: string;
  tags: Tag[];
}

let svc: TestService;
let call: ReturnType<typeof client>;
let other: ReturnType<typeof client>;
let assetsReadOnly: string;
let locationsOnly: string;
let n = 0;
const unique = (p: string) => `${p}-${Date.now().toString(36)}-${++n}`;

beforeAll(async () => {
  svc = await startTestService('tags_contract');
  const ctx = svc.service.ctx;
  const org = await createOrg(ctx, 'Tags Org');
  const otherOrg = await createOrg(ctx, 'Other');
  const all = ['assets:read', 'assets:write', 'locations:read', 'locations:write'];
  call = client(svc.apiUrl, (await mintApiKey(ctx, { orgId: org.id, scopes: all })).token);
  other = client(svc.apiUrl, (await mintApiKey(ctx, { orgId: otherOrg.id, scopes: all })).token);
  assetsReadOnly = (await mintApiKey(ctx, { orgId: org.id, scopes: ['assets:read'] })).token;
  locationsOnly = (await mintApiKey(ctx, { orgId: org.id, scopes: ['locations:read', 'locations:write'] })).token;
});

afterAll(async () => {
  await svc?.stop();
});

async function asset(body: Record<string, unknown> = {}): Promise<Owner> {
  const reply = await call<{ data: Owner }>('POST', '/assets', { body: { name: 'tagged asset', ...body } });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data;
}

async function location(body: Record<string, unknown> = {}): Promise<Owner> {
  const reply = await call<{ data: Owner }>('POST', '/locations', { body: { name: 'tagged location', ...body } });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data;
}

async function attach(path: string, body: Record<string, unknown>) {
  return call<{ data: Tag }>('POST', `${path}/tags`, { body });
}

describe('POST /assets/{asset_id}/tags', () => {
  it('docs/api.md "Tags" and "Requests and responses": 201, Location names the tag, view fields', async () => {
    const a = await asset();
    const value = unique('E280');
    const reply = await attach(`/assets/${a.id}`, { tag_type: 'rfid', value, valid_to: '2999-01-01T00:00:00+01:00' });
    expect(reply.status, reply.text).toBe(201);
    const tag = reply.body.data;
    expect(reply.headers.get('location')).toBe(`/api/v1/assets/${a.id}/tags/${tag.id}`);
    expect(tag).toEqual({
      id: tag.id,
      tag_type: 'rfid',
      value,
      is_active: true,
      valid_from: null,
      valid_to: '2998-12-31T23:00:00.000Z',
      created_at: expect.stringMatching(/Z$/),
    });
    const embedded = await call<{ data: Owner }>('GET', `/assets/${a.id}`);
    expect(embedded.body.data.tags).toEqual([tag]);
  });

  it('docs/api.md "Tags" and "Errors": unknown tag_type → invalid_value with allowed_values; value rules (controls, length; tab allowed)', async () => {
    const a = await asset();
    let reply = await attach(`/assets/${a.id}`, { tag_type: 'nfc', value: 'x' });
    expect(fieldCodes(reply)).toEqual([['tag_type', 'invalid_value']]);
    expect(errorOf(reply).fields![0]!.params).toEqual({ allowed_values: ['rfid', 'ble', 'barcode'] });
    reply = await attach(`/assets/${a.id}`, { tag_type: 'ble', value: 'bad\u0000' });
    expect(fieldCodes(reply)).toEqual([['value', 'invalid_value']]);
    reply = await attach(`/assets/${a.id}`, { tag_type: 'ble', value: 'v'.repeat(256) });
    expect(fieldCodes(reply)).toEqual([['value', 'too_long']]);
    reply = await attach(`/assets/${a.id}`, { tag_type: 'ble', value: '' });
    expect(fieldCodes(reply)).toEqual([['value', 'too_short']]);
    reply = await attach(`/assets/${a.id}`, { tag_type: 'ble' });
    expect(fieldCodes(reply)).toEqual([['value', 'required']]);
    reply = await attach(`/assets/${a.id}`, { tag_type: 'ble', value: 'x', colour: 'red' });
    expect(fieldCodes(reply)).toEqual([['colour', 'unknown_field']]);
    // A tag value may hold characters an external_key may not.
    const ok = await attach(`/assets/${a.id}`, { tag_type: 'barcode', value: `${unique('a b')}\t/ü.` });
    expect(ok.status).toBe(201);
  });

  it('docs/api.md "Tags": (tag_type, value) unique per org across assets and locations; 409 names where it is attached', async () => {
    const a = await asset();
    const b = await asset();
    const value = unique('SN');
    expect((await attach(`/assets/${a.id}`, { tag_type: 'barcode', value })).status).toBe(201);
    const dup = await attach(`/assets/${b.id}`, { tag_type: 'barcode', value });
    expect(dup.status).toBe(409);
    expect(errorOf(dup).type).toBe('conflict');
    expect(errorOf(dup).detail).toContain(`asset ${a.id}`);
    expect(errorOf(dup).detail).toContain(a.external_key);
    // Same value under another tag_type is a different tag.
    expect((await attach(`/assets/${b.id}`, { tag_type: 'ble', value })).status).toBe(201);
    // Barcode values are case-sensitive.
    expect((await attach(`/assets/${b.id}`, { tag_type: 'barcode', value: value.toLowerCase() })).status).toBe(201);
    // Another org may use the same value.
    const theirs = await other<{ data: Owner }>('POST', '/assets', { body: { name: 'theirs', tags: [{ tag_type: 'barcode', value }] } });
    expect(theirs.status).toBe(201);
  });

  it('RFID values are unique case-insensitively (ingest matches EPCs case-insensitively); the stored value keeps its case', async () => {
    const a = await asset();
    const b = await asset();
    const epc = unique('e2801160abc');
    const first = await attach(`/assets/${a.id}`, { tag_type: 'rfid', value: epc });
    expect(first.body.data.value).toBe(epc);
    const dup = await attach(`/assets/${b.id}`, { tag_type: 'rfid', value: epc.toUpperCase() });
    expect(dup.status).toBe(409);
  });

  it('docs/api.md "POST /assets": embedded tags in a create body are all-or-nothing (a taken value → 409, nothing created)', async () => {
    const holder = await asset();
    const taken = unique('TAKEN');
    await attach(`/assets/${holder.id}`, { tag_type: 'ble', value: taken });
    const key = unique('AON');
    const reply = await call('POST', '/assets', {
      body: { name: 'all or nothing', external_key: key, tags: [{ tag_type: 'ble', value: unique('FREE') }, { tag_type: 'ble', value: taken }] },
    });
    expect(reply.status).toBe(409);
    expect(errorOf(reply).detail).toContain(`asset ${holder.id}`);
    const list = await call<{ data: Owner[] }>('GET', `/assets?external_key=${key}&include_deleted=true`);
    expect(list.body.data).toEqual([]);
    // The same value twice in one body is a conflict too.
    const twice = unique('TWICE');
    const dupInBody = await call('POST', '/assets', {
      body: { name: 'n', tags: [{ tag_type: 'rfid', value: twice }, { tag_type: 'rfid', value: twice.toLowerCase() }] },
    });
    expect(dupInBody.status).toBe(409);
    // Field errors of embedded tags carry their path.
    const bad = await call('POST', '/assets', { body: { name: 'n', tags: [{ tag_type: 'rfid', value: 'ok' }, { tag_type: 'x', value: '' }] } });
    expect(fieldCodes(bad)).toEqual([
      ['tags[1].tag_type', 'invalid_value'],
      ['tags[1].value', 'too_short'],
    ]);
  });
});

describe('GET and DELETE /assets/{asset_id}/tags', () => {
  it('docs/api.md "Tags": list envelope of existing tags (active or not), newest last', async () => {
    const a = await asset();
    const values = [unique('L1'), unique('L2'), unique('L3')];
    for (const [i, value] of values.entries()) await attach(`/assets/${a.id}`, { tag_type: 'barcode', value, is_active: i !== 1 });
    const reply = await call<{ data: Tag[]; limit: number; offset: number; total_count: number }>('GET', `/assets/${a.id}/tags`);
    expect(reply.status).toBe(200);
    expect(reply.body.data.map((t) => t.value)).toEqual(values);
    expect(reply.body).toMatchObject({ limit: 50, offset: 0, total_count: 3 });
    const page = await call<{ data: Tag[]; total_count: number }>('GET', `/assets/${a.id}/tags?limit=1&offset=2`);
    expect(page.body.data.map((t) => t.value)).toEqual([values[2]]);
    expect(page.body.total_count).toBe(3);
  });

  it('docs/api.md "Tags": DELETE → 204, then 404; the value is free again; a tag of another owner or org → 404', async () => {
    const a = await asset();
    const b = await asset();
    const value = unique('DEL');
    const tag = (await attach(`/assets/${a.id}`, { tag_type: 'ble', value })).body.data;
    expect((await call('DELETE', `/assets/${b.id}/tags/${tag.id}`)).status).toBe(404);
    expect((await other('DELETE', `/assets/${a.id}/tags/${tag.id}`)).status).toBe(404);
    expect((await call('GET', `/assets/${a.id}/tags/${tag.id}`)).status).toBe(200);
    const del = await call('DELETE', `/assets/${a.id}/tags/${tag.id}`);
    expect(del.status).toBe(204);
    expect((await call('DELETE', `/assets/${a.id}/tags/${tag.id}`)).status).toBe(404);
    expect((await call('GET', `/assets/${a.id}/tags/${tag.id}`)).status).toBe(404);
    expect((await call<{ data: Tag[] }>('GET', `/assets/${a.id}/tags`)).body.data).toEqual([]);
    expect((await attach(`/assets/${b.id}`, { tag_type: 'ble', value })).status).toBe(201);
    // Path ids are validated like every id.
    expect(fieldCodes(await call('DELETE', `/assets/${a.id}/tags/2147483648`))).toEqual([['tag_id', 'too_large']]);
  });

  it('docs/api.md "Tags", scopes: GET needs the read scope, POST and DELETE the write scope of the owner', async () => {
    const a = await asset();
    const tag = (await attach(`/assets/${a.id}`, { tag_type: 'ble', value: unique('SC') })).body.data;
    expect((await call('GET', `/assets/${a.id}/tags`, { token: assetsReadOnly })).status).toBe(200);
    const post = await call('POST', `/assets/${a.id}/tags`, { token: assetsReadOnly, body: { tag_type: 'ble', value: unique('SC') } });
    expect(post.status).toBe(403);
    expect(errorOf(post).detail).toBe('Missing required scope: assets:write');
    expect((await call('DELETE', `/assets/${a.id}/tags/${tag.id}`, { token: assetsReadOnly })).status).toBe(403);
    expect((await call('GET', `/assets/${a.id}/tags`, { token: locationsOnly })).status).toBe(403);
  });

  it('docs/api.md "Errors" (not_found): another org’s asset behaves like a missing one on the tag routes', async () => {
    const a = await asset();
    expect((await other('GET', `/assets/${a.id}/tags`)).status).toBe(404);
    expect((await other('POST', `/assets/${a.id}/tags`, { body: { tag_type: 'ble', value: unique('X') } })).status).toBe(404);
  });
});

describe('/locations/{location_id}/tags', () => {
  it('docs/api.md "Tags": attach, list, uniqueness across assets and locations, detach', async () => {
    const loc = await location();
    const value = unique('SHELF');
    const reply = await attach(`/locations/${loc.id}`, { tag_type: 'barcode', value });
    expect(reply.status, reply.text).toBe(201);
    expect(reply.headers.get('location')).toBe(`/api/v1/locations/${loc.id}/tags/${reply.body.data.id}`);
    const a = await asset();
    const clash = await attach(`/assets/${a.id}`, { tag_type: 'barcode', value });
    expect(clash.status).toBe(409);
    expect(errorOf(clash).detail).toContain(`location ${loc.id}`);
    const list = await call<{ data: Tag[] }>('GET', `/locations/${loc.id}/tags`, { token: locationsOnly });
    expect(list.body.data.map((t) => t.value)).toEqual([value]);
    const view = await call<{ data: Owner }>('GET', `/locations/${loc.id}`);
    expect(view.body.data.tags.map((t) => t.value)).toEqual([value]);
    expect((await call('POST', `/locations/${loc.id}/tags`, { token: assetsReadOnly, body: { tag_type: 'ble', value: 'x' } })).status).toBe(403);
    expect((await call('DELETE', `/locations/${loc.id}/tags/${reply.body.data.id}`)).status).toBe(204);
    expect((await attach(`/assets/${a.id}`, { tag_type: 'barcode', value })).status).toBe(201);
  });

  it('docs/api.md "Tags" and "Errors" (not_found): missing location, another org’s location, an asset tag id under a location → 404', async () => {
    const loc = await location();
    expect((await call('GET', '/locations/2147483000/tags')).status).toBe(404);
    expect((await other('GET', `/locations/${loc.id}/tags`)).status).toBe(404);
    const a = await asset();
    const tag = (await attach(`/assets/${a.id}`, { tag_type: 'ble', value: unique('AT') })).body.data;
    expect((await call('DELETE', `/locations/${loc.id}/tags/${tag.id}`)).status).toBe(404);
  });

  it('docs/api.md "Deleting": deleting a location retires its tags (values free again); its tag routes then 404', async () => {
    const value = unique('RETIRE');
    const loc = await location({ tags: [{ tag_type: 'rfid', value }] });
    expect(loc.tags.map((t) => t.value)).toEqual([value]);
    expect((await call('DELETE', `/locations/${loc.id}`)).status).toBe(204);
    expect((await call('GET', `/locations/${loc.id}/tags`)).status).toBe(404);
    expect((await attach(`/locations/${loc.id}`, { tag_type: 'ble', value: unique('X') })).status).toBe(404);
    const a = await asset();
    expect((await attach(`/assets/${a.id}`, { tag_type: 'rfid', value: value.toLowerCase() })).status).toBe(201);
  });
});
