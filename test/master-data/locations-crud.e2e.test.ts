import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../support/service.js';
import { mintApiKey } from '../support/auth.js';
import { scanner } from '../support/scans.js';
import { client } from './http.js';
import { fieldCodes, newClient, uniqueKey, type Client, type LocationJson } from './locations.support.js';

/**
 * Contract tests of the location resource over real HTTP (docs/api.md "Locations", "POST
 * /locations", "Changing a record: PATCH", "Renaming: a new external_key", "Deleting" and "Lists:
 * paging, sorting, filters, search").
 */

let svc: TestService;
let api: Client;
let other: Client;

const VIEW_FIELDS = [
  'id',
  'external_key',
  'name',
  'description',
  'parent_id',
  'parent_external_key',
  'is_active',
  'valid_from',
  'valid_to',
  'created_at',
  'updated_at',
  'deleted_at',
  'tags',
];

beforeAll(async () => {
  svc = await startTestService('locations_crud', process.env.TEST_LOG ? { LOG_LEVEL: 'error' } : {});
  api = await newClient(svc, 'crud');
  other = await newClient(svc, 'other-org');
});
afterAll(async () => {
  await svc?.stop();
});

describe('POST /locations (docs/api.md "POST /locations")', () => {
  it('201 with a Location header and every view field present, null when unset, no metadata', async () => {
    const reply = await api.post('/locations', { name: 'Warehouse' });
    expect(reply.status).toBe(201);
    const view = reply.body.data as LocationJson;
    expect(reply.headers.get('location')).toBe(`/api/v1/locations/${view.id}`);
    expect(Object.keys(view).sort()).toEqual([...VIEW_FIELDS].sort());
    expect(view).toMatchObject({ description: null, parent_id: null, parent_external_key: null, is_active: true, valid_from: null, valid_to: null, deleted_at: null, tags: [] });
    expect(view.created_at).toMatch(/Z$/);
    expect(view.updated_at).toBe(view.created_at);
    const read = await api.get(`/locations/${view.id}`);
    expect(read.body.data).toEqual(view);
  });

  it('auto-mints LOC-NNNN only when external_key is absent (docs/api.md "Requests and responses")', async () => {
    const a = await api.create({ name: 'minted' });
    expect(a.external_key).toMatch(/^LOC-\d{4,}$/);
    expect(fieldCodes(await api.post('/locations', { name: 'x', external_key: '' }))).toEqual(['external_key:too_short']);
    expect(fieldCodes(await api.post('/locations', { name: 'x', external_key: '   ' }))).toEqual(['external_key:too_short']);
    expect(fieldCodes(await api.post('/locations', { name: 'x', external_key: null }))).toEqual(['external_key:invalid_value']);
  });

  it('minting skips a key a caller already holds', async () => {
    const next = await api.create({ name: 'probe' });
    const n = Number(next.external_key.slice(4));
    const taken = `LOC-${String(n + 1).padStart(4, '0')}`;
    await api.create({ name: 'squatter', external_key: taken });
    const minted = await api.create({ name: 'after' });
    expect(minted.external_key).not.toBe(taken);
  });

  it('refuses reserved characters and overlong keys in external_key (docs/api.md "Requests and responses")', async () => {
    for (const bad of ['a.b', 'a_b', 'a b', 'a/b', 'a:b', 'ä']) {
      expect(fieldCodes(await api.post('/locations', { name: 'x', external_key: bad }))).toEqual(['external_key:invalid_value']);
    }
    expect(fieldCodes(await api.post('/locations', { name: 'x', external_key: 'k'.repeat(256) }))).toEqual(['external_key:too_long']);
  });

  it('a duplicate key of an existing location is 409; keys are case-sensitive; delete frees the key (docs/api.md "Requests and responses")', async () => {
    const key = uniqueKey('Dup');
    const first = await api.create({ name: 'one', external_key: key });
    const dup = await api.post('/locations', { name: 'two', external_key: key });
    expect(dup.status).toBe(409);
    expect(dup.body.error.type).toBe('conflict');
    await api.create({ name: 'lower', external_key: key.toLowerCase() });
    expect((await api.del(`/locations/${first.id}`)).status).toBe(204);
    const again = await api.create({ name: 'again', external_key: key });
    expect(again.id).not.toBe(first.id);
  });

  it('the same key in another org is independent (docs/api.md "Requests and responses": unique per organization)', async () => {
    const key = uniqueKey('Org');
    const mine = await api.create({ name: 'mine', external_key: key });
    const theirs = await other.create({ name: 'theirs', external_key: key });
    expect(theirs.id).not.toBe(mine.id);
    // Both rows exist, and each org sees only its own, by key and by id.
    for (const [own, row, name, foreign] of [
      [api, mine, 'mine', theirs],
      [other, theirs, 'theirs', mine],
    ] as const) {
      const listed = await own.get(`/locations?external_key=${key}`);
      expect(listed.body).toMatchObject({ total_count: 1, data: [{ id: row.id, name, external_key: key }] });
      expect(listed.body.data).toHaveLength(1);
      expect((await own.get(`/locations/${row.id}`)).body.data).toMatchObject({ id: row.id, name, external_key: key });
      expect((await own.get(`/locations/${foreign.id}`)).status).toBe(404);
      // The key stays taken within each org.
      expect((await own.post('/locations', { name: 'again', external_key: key })).status).toBe(409);
    }
  });

  it('name is required; {} → required on name (docs/api.md "POST /locations")', async () => {
    const reply = await api.post('/locations', {});
    expect(fieldCodes(reply)).toEqual(['name:required']);
    expect(reply.body.error.detail).toBe(reply.body.error.fields[0].message);
  });

  it('lengths and control characters of name and description (docs/api.md "What text the service accepts")', async () => {
    const reply = await api.post('/locations', { name: '', description: 'd'.repeat(1025) });
    expect(fieldCodes(reply)).toEqual(['name:too_short', 'description:too_long']);
    expect(reply.body.error.fields[1].params).toEqual({ max_length: 1024 });
    expect(reply.body.error.detail).toMatch(/\(and 1 more validation errors\)$/);
    expect(fieldCodes(await api.post('/locations', { name: 'n'.repeat(256) }))).toEqual(['name:too_long']);
    expect(fieldCodes(await api.post('/locations', { name: 'a\u0007b' }))).toEqual(['name:invalid_value']);
    const ok = await api.create({ name: 'tab\tnew\nline\r', description: 'x' });
    expect(ok.name).toBe('tab\tnew\nline\r');
  });

  it('metadata and other unknown keys → unknown_field (docs/api.md "POST /locations": a location has no metadata)', async () => {
    expect(fieldCodes(await api.post('/locations', { name: 'x', metadata: {} }))).toEqual(['metadata:unknown_field']);
  });

  it('a wrong JSON type → bad_request naming the field (docs/api.md "Errors")', async () => {
    const reply = await api.post('/locations', { name: 12 });
    expect(reply.status).toBe(400);
    expect(reply.body.error.type).toBe('bad_request');
    expect(reply.body.error.detail).toBe('Body field "name" could not be decoded as the expected type');
  });

  it('valid_to must be later than valid_from (docs/api.md "Currently effective")', async () => {
    const reply = await api.post('/locations', { name: 'x', valid_from: '2030-01-01T00:00:00Z', valid_to: '2029-01-01T00:00:00Z' });
    expect(fieldCodes(reply)).toEqual(['valid_to:invalid_value']);
    expect(fieldCodes(await api.post('/locations', { name: 'x', valid_from: 'yesterday' }))).toEqual(['valid_from:invalid_value']);
  });

  it('parent by id or by key; both → ambiguous_fields, one entry each (docs/api.md "POST /locations")', async () => {
    const parent = await api.create({ name: 'P', external_key: uniqueKey('P') });
    const byId = await api.create({ name: 'c1', parent_id: parent.id });
    expect(byId).toMatchObject({ parent_id: parent.id, parent_external_key: parent.external_key });
    const byKey = await api.create({ name: 'c2', parent_external_key: parent.external_key });
    expect(byKey).toMatchObject({ parent_id: parent.id, parent_external_key: parent.external_key });
    const both = await api.post('/locations', { name: 'c3', parent_id: parent.id, parent_external_key: parent.external_key });
    expect(fieldCodes(both)).toEqual(['parent_id:ambiguous_fields', 'parent_external_key:ambiguous_fields']);
    const disagree = await api.post('/locations', { name: 'c3', parent_id: byId.id, parent_external_key: parent.external_key });
    expect(fieldCodes(disagree)).toEqual(['parent_id:ambiguous_fields', 'parent_external_key:ambiguous_fields']);
  });

  it('a missing, soft-deleted or other-org parent → fk_not_found naming the form sent (docs/api.md "POST /locations")', async () => {
    const gone = await api.create({ name: 'gone', external_key: uniqueKey('G') });
    expect((await api.del(`/locations/${gone.id}`)).status).toBe(204);
    expect(fieldCodes(await api.post('/locations', { name: 'x', parent_id: gone.id }))).toEqual(['parent_id:fk_not_found']);
    expect(fieldCodes(await api.post('/locations', { name: 'x', parent_external_key: gone.external_key }))).toEqual(['parent_external_key:fk_not_found']);
    expect(fieldCodes(await api.post('/locations', { name: 'x', parent_id: 2147483000 }))).toEqual(['parent_id:fk_not_found']);
    const foreign = await other.create({ name: 'foreign', external_key: uniqueKey('F') });
    expect(fieldCodes(await api.post('/locations', { name: 'x', parent_id: foreign.id }))).toEqual(['parent_id:fk_not_found']);
    expect(fieldCodes(await api.post('/locations', { name: 'x', parent_external_key: foreign.external_key }))).toEqual(['parent_external_key:fk_not_found']);
    expect(fieldCodes(await api.post('/locations', { name: 'x', parent_id: 2147483648 }))).toEqual(['parent_id:too_large']);
    expect(fieldCodes(await api.post('/locations', { name: 'x', parent_external_key: 'a.b' }))).toEqual(['parent_external_key:invalid_value']);
  });

  it('embedded tags are created with the location and shown (docs/api.md "POST /locations")', async () => {
    const value = uniqueKey('tag');
    const loc = await api.create({ name: 'tagged', tags: [{ tag_type: 'rfid', value }] });
    expect(loc.tags).toHaveLength(1);
    expect(loc.tags[0]).toMatchObject({ tag_type: 'rfid', value, is_active: true });
    const dup = await api.post('/locations', { name: 'dup tag', tags: [{ tag_type: 'rfid', value }] });
    expect(dup.status).toBe(409);
  });

  it('415 for a wrong content type (docs/api.md "Requests and responses")', async () => {
    const reply = await api.request('POST', '/locations', { name: 'x' }, 'application/merge-patch+json');
    expect(reply.status).toBe(415);
    expect(reply.body.error.detail).toBe('Content-Type must be application/json');
  });
});

describe('GET /locations/{id} (docs/api.md "Currently effective": reads by id)', () => {
  it('skips effectiveness, 404s deleted, other org and missing ids; 400 for bad path ids', async () => {
    const future = await api.create({ name: 'future', valid_from: '2999-01-01T00:00:00Z' });
    expect((await api.get(`/locations/${future.id}`)).status).toBe(200);
    expect((await other.get(`/locations/${future.id}`)).status).toBe(404);
    expect((await api.get('/locations/2147483000')).status).toBe(404);
    expect(fieldCodes(await api.get('/locations/2147483648'))).toEqual(['location_id:too_large']);
    expect((await api.get('/locations/0')).status).toBe(400);
    expect((await api.get('/locations/abc')).status).toBe(400);
    expect((await api.del(`/locations/${future.id}`)).status).toBe(204);
    const gone = await api.get(`/locations/${future.id}`);
    expect(gone.status).toBe(404);
    expect(gone.body.error.type).toBe('not_found');
  });

  it('HEAD behaves as GET without a body (docs/api.md "Requests and responses")', async () => {
    const loc = await api.create({ name: 'head' });
    const reply = await api.request('HEAD', `/locations/${loc.id}`);
    expect(reply.status).toBe(200);
    expect(reply.body).toBeUndefined();
    expect((await api.request('HEAD', '/locations/2147483000')).status).toBe(404);
  });

  it('needs locations:read (docs/api.md "Authentication")', async () => {
    const assetsOnly = await newClient(svc, 'assets-only', ['assets:read']);
    const reply = await assetsOnly.get('/locations');
    expect(reply.status).toBe(403);
    expect(reply.body.error.detail).toBe('Missing required scope: locations:read');
    const readOnly = await newClient(svc, 'read-only', ['locations:read']);
    const write = await readOnly.post('/locations', { name: 'x' });
    expect(write.status).toBe(403);
    expect(write.body.error.detail).toBe('Missing required scope: locations:write');
  });
});

describe('PATCH /locations/{id} (docs/api.md "Changing a record: PATCH")', () => {
  it('sets, clears, leaves omitted fields; {} is a no-op keeping updated_at; a real change advances it', async () => {
    const loc = await api.create({ name: 'orig', description: 'desc', valid_to: '2999-01-01T00:00:00Z' });
    const noop = await api.patch(`/locations/${loc.id}`, {});
    expect(noop.status).toBe(200);
    expect(noop.body.data).toEqual(loc);
    const same = await api.patch(`/locations/${loc.id}`, { name: 'orig', description: 'desc', is_active: true });
    expect(same.body.data.updated_at).toBe(loc.updated_at);
    await new Promise((r) => setTimeout(r, 5));
    const changed = await api.patch(`/locations/${loc.id}`, { description: null, valid_to: null, is_active: false });
    expect(changed.status).toBe(200);
    expect(changed.body.data).toMatchObject({ name: 'orig', description: null, valid_to: null, is_active: false });
    expect(Date.parse(changed.body.data.updated_at)).toBeGreaterThan(Date.parse(loc.updated_at));
    expect((await api.get(`/locations/${loc.id}`)).body.data).toEqual(changed.body.data);
  });

  it('null on a non-nullable field → invalid_value; "" → too_short; unknown keys → unknown_field (rules 2, 7, 8)', async () => {
    const loc = await api.create({ name: 'n', valid_from: '2020-01-01T00:00:00Z' });
    expect(fieldCodes(await api.patch(`/locations/${loc.id}`, { name: null }))).toEqual(['name:invalid_value']);
    expect(fieldCodes(await api.patch(`/locations/${loc.id}`, { is_active: null }))).toEqual(['is_active:invalid_value']);
    expect(fieldCodes(await api.patch(`/locations/${loc.id}`, { valid_from: null }))).toEqual(['valid_from:invalid_value']);
    expect(fieldCodes(await api.patch(`/locations/${loc.id}`, { name: '' }))).toEqual(['name:too_short']);
    expect(fieldCodes(await api.patch(`/locations/${loc.id}`, { description: '' }))).toEqual(['description:too_short']);
    expect(fieldCodes(await api.patch(`/locations/${loc.id}`, { metadata: { a: 1 } }))).toEqual(['metadata:unknown_field']);
    expect(fieldCodes(await api.patch(`/locations/${loc.id}`, { external_key: ' ' }))).toEqual(['external_key:too_short']);
    expect(fieldCodes(await api.patch(`/locations/${loc.id}`, { valid_to: '2019-01-01T00:00:00Z' }))).toEqual(['valid_to:invalid_value']);
  });

  it('a top-level null body → bad_request; application/json → 415 (rule 5; Request content types)', async () => {
    const loc = await api.create({ name: 'n' });
    const nullBody = await api.request('PATCH', `/locations/${loc.id}`, 'null');
    expect(nullBody.status).toBe(400);
    expect(nullBody.body.error).toMatchObject({ type: 'bad_request', detail: 'Request body must be a JSON object (RFC 7396)' });
    const json = await api.request('PATCH', `/locations/${loc.id}`, {}, 'application/json');
    expect(json.status).toBe(415);
    expect(json.body.error.detail).toBe('Content-Type must be application/merge-patch+json on PATCH operations');
  });

  it('read-only fields: accept-if-matches, reject-if-differs with the right write path (docs/api.md "Changing a record: PATCH")', async () => {
    const loc = await api.create({ name: 'ro', tags: [{ tag_type: 'barcode', value: uniqueKey('ro') }] });
    const shifted = new Date(Date.parse(loc.created_at)).toISOString().replace('Z', '+00:00');
    const matching = await api.patch(`/locations/${loc.id}`, {
      id: loc.id,
      external_key: loc.external_key,
      created_at: shifted,
      updated_at: loc.updated_at,
      deleted_at: null,
      tags: loc.tags,
    });
    expect(matching.status).toBe(200);
    expect(matching.body.data.updated_at).toBe(loc.updated_at);

    const reply = await api.patch(`/locations/${loc.id}`, {
      tags: [],
      deleted_at: '2020-01-01T00:00:00Z',
      external_key: 'OTHER',
      id: loc.id + 1,
      created_at: '2020-01-01T00:00:00Z',
      updated_at: '2020-01-01T00:00:00Z',
    });
    expect(fieldCodes(reply)).toEqual(['id:read_only', 'external_key:read_only', 'created_at:read_only', 'updated_at:read_only', 'deleted_at:read_only', 'tags:read_only']);
    const messages = Object.fromEntries((reply.body.error.fields as Array<{ field: string; message: string }>).map((f) => [f.field, f.message]));
    expect(messages.external_key).toContain('POST /locations/{id}/rename');
    expect(messages.tags).toContain('/tags');
    expect(messages.deleted_at).toContain('DELETE');
    expect(messages.id).toContain('server-managed');
  });

  it('docs/api.md "Errors" on PATCH: read-only, valid_from null, the window and schema errors in one response', async () => {
    const loc = await api.create({ name: 'all at once', valid_from: '2020-01-01T00:00:00Z' });
    // State errors only (the schema passes): a read-only field that differs and an inverted window.
    let reply = await api.patch(`/locations/${loc.id}`, { valid_to: '2019-01-01T00:00:00Z', id: loc.id + 1 });
    expect(fieldCodes(reply)).toEqual(['id:read_only', 'valid_to:invalid_value']);
    expect(reply.body.error.detail).toMatch(/ \(and 1 more validation errors\)$/);
    reply = await api.patch(`/locations/${loc.id}`, { valid_to: '2019-01-01T00:00:00Z', valid_from: null });
    expect(fieldCodes(reply)).toEqual(['valid_from:invalid_value', 'valid_to:invalid_value']);
    // With schema errors: the state's errors join them, in view order.
    reply = await api.patch(`/locations/${loc.id}`, { tags: [{ id: 1 }], name: '', valid_from: null, id: loc.id + 1, created_at: '2020-01-01T00:00:00Z' });
    expect(reply.status).toBe(400);
    expect(fieldCodes(reply)).toEqual(['id:read_only', 'name:too_short', 'valid_from:invalid_value', 'created_at:read_only', 'tags:read_only']);
    expect(reply.body.error.detail).toMatch(/ \(and 4 more validation errors\)$/);
    // Nothing of it was applied.
    expect((await api.get(`/locations/${loc.id}`)).body.data).toEqual(loc);
  });

  it('a verbatim GET → PATCH round trip succeeds and changes nothing', async () => {
    const parent = await api.create({ name: 'rt parent', external_key: uniqueKey('RTP') });
    const loc = await api.create({ name: 'rt', parent_id: parent.id, description: 'd', valid_from: '2020-01-01T00:00:00.123Z', tags: [{ tag_type: 'ble', value: uniqueKey('rt') }] });
    const got = (await api.get(`/locations/${loc.id}`)).body.data;
    const reply = await api.patch(`/locations/${loc.id}`, got);
    expect(reply.status, JSON.stringify(reply.body)).toBe(200);
    expect(reply.body.data).toEqual(got);
    const root = await api.create({ name: 'rt root' });
    const rootReply = await api.patch(`/locations/${root.id}`, (await api.get(`/locations/${root.id}`)).body.data);
    expect(rootReply.status).toBe(200);
    expect(rootReply.body.data).toEqual(root);
  });

  it('a re-parent and field changes in one body apply together', async () => {
    const parent = await api.create({ name: 'new parent' });
    const loc = await api.create({ name: 'mover' });
    const reply = await api.patch(`/locations/${loc.id}`, { name: 'moved', parent_id: parent.id, description: 'here now' });
    expect(reply.status).toBe(200);
    expect(reply.body.data).toMatchObject({ name: 'moved', description: 'here now', parent_id: parent.id, parent_external_key: parent.external_key });
  });

  it('decides from the latest state after many changes (a stream past ten revisions folds in order)', async () => {
    const loc = await api.create({ name: 'n0' });
    for (let i = 1; i <= 12; i++) expect((await api.patch(`/locations/${loc.id}`, { name: `n${i}` })).status).toBe(200);
    const before = (await api.get(`/locations/${loc.id}`)).body.data;
    expect(before.name).toBe('n12');
    const same = await api.patch(`/locations/${loc.id}`, { name: 'n12' });
    expect(same.body.data.updated_at).toBe(before.updated_at);
  });

  it('PATCH and rename of a deleted or missing location → 404 (docs/api.md "Deleting")', async () => {
    const loc = await api.create({ name: 'x' });
    expect((await api.del(`/locations/${loc.id}`)).status).toBe(204);
    expect((await api.patch(`/locations/${loc.id}`, { name: 'y' })).status).toBe(404);
    expect((await api.post(`/locations/${loc.id}/rename`, { external_key: uniqueKey() })).status).toBe(404);
    expect((await other.patch(`/locations/${(await api.create({ name: 'z' })).id}`, { name: 'y' })).status).toBe(404);
  });
});

describe('POST /locations/{id}/rename (docs/api.md "Renaming: a new external_key")', () => {
  it('renames; descendants see the new parent key; count = existing descendants; same value → 0, no updated_at advance', async () => {
    const root = await api.create({ name: 'r', external_key: uniqueKey('R') });
    const a = await api.create({ name: 'a', parent_id: root.id });
    const b = await api.create({ name: 'b', parent_id: a.id });
    const c = await api.create({ name: 'c', parent_id: root.id });
    expect((await api.del(`/locations/${c.id}`)).status).toBe(204);
    const newKey = uniqueKey('R2');
    await new Promise((r) => setTimeout(r, 5));
    const reply = await api.post(`/locations/${root.id}/rename`, { external_key: newKey });
    expect(reply.status).toBe(200);
    expect(reply.body.descendant_count_affected).toBe(2);
    expect(reply.body.data.external_key).toBe(newKey);
    expect(Date.parse(reply.body.data.updated_at)).toBeGreaterThan(Date.parse(root.updated_at));
    expect((await api.get(`/locations/${a.id}`)).body.data.parent_external_key).toBe(newKey);
    expect((await api.get(`/locations/${b.id}`)).body.data.parent_external_key).toBe(a.external_key);

    const same = await api.post(`/locations/${root.id}/rename`, { external_key: newKey });
    expect(same.status).toBe(200);
    expect(same.body.descendant_count_affected).toBe(0);
    expect(same.body.data.updated_at).toBe(reply.body.data.updated_at);

    // The old key is free again.
    await api.create({ name: 'reuse', external_key: root.external_key });
  });

  it('collision → 409; bad key → 400; missing key → required', async () => {
    const a = await api.create({ name: 'a' });
    const b = await api.create({ name: 'b' });
    const clash = await api.post(`/locations/${a.id}/rename`, { external_key: b.external_key });
    expect(clash.status).toBe(409);
    expect(fieldCodes(await api.post(`/locations/${a.id}/rename`, { external_key: 'a b' }))).toEqual(['external_key:invalid_value']);
    expect(fieldCodes(await api.post(`/locations/${a.id}/rename`, { external_key: '' }))).toEqual(['external_key:too_short']);
    expect(fieldCodes(await api.post(`/locations/${a.id}/rename`, {}))).toEqual(['external_key:required']);
  });
});

describe('GET /locations total_count with include_deleted=true and no other filter (docs/api.md "Currently effective")', () => {
  it('deleted and not-yet-effective rows are counted and listed, alone and with is_active', async () => {
    const own = await newClient(svc, 'counting-deleted');
    const page = async (query: string) => {
      const reply = await own.get(`/locations?${query}`);
      expect(reply.status, JSON.stringify(reply.body)).toBe(200);
      return { total_count: reply.body.total_count as number, ids: (reply.body.data as LocationJson[]).map((l) => l.id).sort((x, y) => x - y) };
    };
    const [a, b, c] = [await own.create({ name: 'a' }), await own.create({ name: 'b' }), await own.create({ name: 'c' })];
    expect((await own.del(`/locations/${b.id}`)).status).toBe(204);
    expect(await page('include_deleted=true')).toEqual({ total_count: 3, ids: [a.id, b.id, c.id] });
    expect(await page('')).toEqual({ total_count: 2, ids: [a.id, c.id] });

    const [d, e] = [await own.create({ name: 'd', is_active: false }), await own.create({ name: 'e', is_active: false })];
    expect((await own.del(`/locations/${e.id}`)).status).toBe(204);
    const future = await own.create({ name: 'future', valid_from: '2999-01-01T00:00:00Z' });
    expect(await page('include_deleted=true&is_active=false')).toEqual({ total_count: 2, ids: [d.id, e.id] });
    expect(await page('include_deleted=true&is_active=true')).toEqual({ total_count: 4, ids: [a.id, b.id, c.id, future.id] });
    expect(await page('include_deleted=true')).toEqual({ total_count: 6, ids: [a.id, b.id, c.id, d.id, e.id, future.id] });
    expect(await page('include_deleted=true&limit=1')).toMatchObject({ total_count: 6 });
    expect(await page('is_active=false')).toEqual({ total_count: 1, ids: [d.id] });
    expect(await page('include_deleted=false')).toEqual({ total_count: 3, ids: [a.id, c.id, d.id] });
  });
});

describe('DELETE /locations/{id} (docs/api.md "Deleting")', () => {
  it('409 while a descendant exists, then 204, then 404; deleted descendants do not block', async () => {
    const p = await api.create({ name: 'p' });
    const c = await api.create({ name: 'c', parent_id: p.id });
    const blocked = await api.del(`/locations/${p.id}`);
    expect(blocked.status).toBe(409);
    expect(blocked.body.error).toMatchObject({
      type: 'conflict',
      detail: 'location has descendant locations; reassign or remove them before deleting (cascade is not supported)',
    });
    expect((await api.del(`/locations/${c.id}`)).status).toBe(204);
    expect((await api.del(`/locations/${p.id}`)).status).toBe(204);
    expect((await api.del(`/locations/${p.id}`)).status).toBe(404);
    expect((await api.get(`/locations/${p.id}`)).status).toBe(404);
  });

  it('409 for existing assets placed at it, after the descendants check; deleted assets do not block', async () => {
    const p = await api.create({ name: 'p' });
    const c = await api.create({ name: 'c', parent_id: p.id });
    // An asset's location is scan data: a handheld scan places an asset there.
    const tag = uniqueKey('EPC');
    const assets = client(svc.apiUrl, (await mintApiKey(svc.service.ctx, { orgId: api.orgId, scopes: ['assets:write', 'assets:read'] })).token);
    const asset = (await assets<{ data: { id: number } }>('POST', '/assets', { body: { name: 'placed', tags: [{ tag_type: 'rfid', value: tag }] } })).body.data;
    await (await scanner(svc, api.orgId)).scan({ id: p.id }, [{ tag_type: 'rfid', value: tag }]);
    const first = await api.del(`/locations/${p.id}`);
    expect(first.body.error.detail).toBe('location has descendant locations; reassign or remove them before deleting (cascade is not supported)');
    expect((await api.del(`/locations/${c.id}`)).status).toBe(204);
    const second = await api.del(`/locations/${p.id}`);
    expect(second.status).toBe(409);
    expect(second.body.error.detail).toBe('location has assets placed at it; move or remove them before deleting (cascade is not supported)');
    expect((await assets('DELETE', `/assets/${asset.id}`)).status).toBe(204);
    expect((await api.del(`/locations/${p.id}`)).status).toBe(204);
  });

  it('retires the location tags, freeing their values (docs/api.md "Deleting")', async () => {
    const value = uniqueKey('retire');
    const loc = await api.create({ name: 't', tags: [{ tag_type: 'rfid', value }] });
    expect((await api.del(`/locations/${loc.id}`)).status).toBe(204);
    const again = await api.create({ name: 't2', tags: [{ tag_type: 'rfid', value }] });
    expect(again.tags[0]).toMatchObject({ value });
  });
});
