import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../support/service.js';
import { fieldCodes, newClient, uniqueKey, type Client, type LocationJson } from './locations.support.js';

/**
 * The location tree over real HTTP (docs/api.md "Locations", "The tree: ancestors, children,
 * descendants", "Changing a record: PATCH" (re-parenting, a cycle → 409) and "Lists: paging,
 * sorting, filters, search").
 */

let svc: TestService;
let other: Client;

beforeAll(async () => {
  svc = await startTestService('locations_tree');
  other = await newClient(svc, 'tree-other');
});
afterAll(async () => {
  await svc?.stop();
});

const ids = (reply: { body: { data: Array<{ id: number }> } }) => reply.body.data.map((l) => l.id);
const keys = (reply: { body: { data: Array<{ external_key: string }> } }) => reply.body.data.map((l) => l.external_key);

/** R → {A → {A1, A2 → {A2x}}, B}; keys chosen so key order differs from creation order. */
async function buildTree(api: Client) {
  const p = uniqueKey('T');
  const R = await api.create({ name: 'R', external_key: `${p}-R` });
  const B = await api.create({ name: 'B', external_key: `${p}-R-b`, parent_id: R.id });
  const A = await api.create({ name: 'A', external_key: `${p}-R-a`, parent_external_key: R.external_key });
  const A2 = await api.create({ name: 'A2', external_key: `${p}-R-a-2`, parent_id: A.id });
  const A1 = await api.create({ name: 'A1', external_key: `${p}-R-a-1`, parent_id: A.id });
  const A2x = await api.create({ name: 'A2x', external_key: `${p}-R-a-2-x`, parent_id: A2.id });
  return { R, A, B, A1, A2, A2x };
}

describe('ancestors, children, descendants (docs/api.md "The tree: ancestors, children, descendants")', () => {
  let api: Client;
  beforeAll(async () => {
    api = await newClient(svc, 'tree-reads');
  });

  it('ancestors: nearest parent first up to the root; a root has none', async () => {
    const t = await buildTree(api);
    const reply = await api.get(`/locations/${t.A2x.id}/ancestors`);
    expect(reply.status).toBe(200);
    expect(ids(reply)).toEqual([t.A2.id, t.A.id, t.R.id]);
    expect(reply.body).toMatchObject({ limit: 50, offset: 0, total_count: 3 });
    expect(reply.body.data[0].parent_external_key).toBe(t.A.external_key);
    const paged = await api.get(`/locations/${t.A2x.id}/ancestors?limit=1&offset=1`);
    expect(ids(paged)).toEqual([t.A.id]);
    expect(paged.body).toMatchObject({ limit: 1, offset: 1, total_count: 3 });
    const root = await api.get(`/locations/${t.R.id}/ancestors`);
    expect(root.body).toMatchObject({ data: [], total_count: 0 });
  });

  it('children: immediate only, by external_key then id; equals GET /locations?parent_id', async () => {
    const t = await buildTree(api);
    const reply = await api.get(`/locations/${t.R.id}/children`);
    expect(ids(reply)).toEqual([t.A.id, t.B.id]);
    expect(reply.body.total_count).toBe(2);
    const viaList = await api.get(`/locations?parent_id=${t.R.id}`);
    expect(viaList.body.data).toEqual(reply.body.data);
    const viaKey = await api.get(`/locations?parent_external_key=${t.R.external_key}`);
    expect(viaKey.body.data).toEqual(reply.body.data);
    expect((await api.get(`/locations/${t.A2x.id}/children`)).body).toMatchObject({ data: [], total_count: 0 });
  });

  it('descendants: the full subtree without the node, by external_key then id; deleted rows excluded', async () => {
    const t = await buildTree(api);
    const reply = await api.get(`/locations/${t.R.id}/descendants`);
    expect(ids(reply)).toEqual([t.A.id, t.A1.id, t.A2.id, t.A2x.id, t.B.id]);
    expect(keys(reply)).toEqual([...keys(reply)].sort());
    expect(reply.body.total_count).toBe(5);
    const page = await api.get(`/locations/${t.R.id}/descendants?limit=2&offset=2`);
    expect(ids(page)).toEqual([t.A2.id, t.A2x.id]);
    expect(page.body.total_count).toBe(5);
    expect((await api.del(`/locations/${t.A1.id}`)).status).toBe(204);
    expect(ids(await api.get(`/locations/${t.R.id}/descendants`))).toEqual([t.A.id, t.A2.id, t.A2x.id, t.B.id]);
    expect(ids(await api.get(`/locations/${t.A.id}/children`))).toEqual([t.A2.id]);
  });

  it('descendants total_count: every existing, currently effective row of the subtree, and nothing of the next subtree (docs/api.md "Currently effective")', async () => {
    const p = uniqueKey('C');
    const hour = 3_600_000;
    const at = (offset: number) => new Date(Date.now() + offset).toISOString();
    // Two roots created back to back, so their ids are (usually) adjacent: the count of one must
    // not reach into the other's paths.
    const R = await api.create({ name: 'R', external_key: `${p}-R` });
    const R2 = await api.create({ name: 'R2', external_key: `${p}-S` });
    await api.create({ name: 'R2 child', external_key: `${p}-S-1`, parent_id: R2.id });
    const A = await api.create({ name: 'A', external_key: `${p}-R-a`, parent_id: R.id });
    const plain = await api.create({ name: 'plain', external_key: `${p}-R-a-1`, parent_id: A.id });
    const windowNow = await api.create({ name: 'now', external_key: `${p}-R-a-2`, parent_id: A.id, valid_to: at(hour) });
    const around = await api.create({ name: 'around', external_key: `${p}-R-a-2a`, parent_id: A.id, valid_from: at(-hour), valid_to: at(hour) });
    await api.create({ name: 'future', external_key: `${p}-R-a-3`, parent_id: A.id, valid_from: at(hour) });
    await api.create({ name: 'expired', external_key: `${p}-R-a-4`, parent_id: A.id, valid_to: at(-1) });
    const deleted = await api.create({ name: 'deleted', external_key: `${p}-R-a-5`, parent_id: A.id });
    expect((await api.del(`/locations/${deleted.id}`)).status).toBe(204);
    const B = await api.create({ name: 'B', external_key: `${p}-R-b`, parent_id: R.id });

    const subtree = async (id: number) => {
      const reply = await api.get(`/locations/${id}/descendants?limit=200`);
      expect(reply.body.total_count).toBe(reply.body.data.length);
      return ids(reply);
    };
    expect(await subtree(R.id)).toEqual([A.id, plain.id, windowNow.id, around.id, B.id]);
    expect(await subtree(A.id)).toEqual([plain.id, windowNow.id, around.id]);
    expect(await subtree(R2.id)).toHaveLength(1);
    // A window ended, a window dropped, a subtree moved: the count follows each.
    const ended = await api.patch(`/locations/${windowNow.id}`, { valid_to: at(-1) });
    expect(ended.status, JSON.stringify(ended.body)).toBe(200);
    expect(await subtree(A.id)).toEqual([plain.id, around.id]);
    const reopened = await api.patch(`/locations/${windowNow.id}`, { valid_to: null });
    expect(reopened.status, JSON.stringify(reopened.body)).toBe(200);
    expect(await subtree(A.id)).toEqual([plain.id, windowNow.id, around.id]);
    expect((await api.patch(`/locations/${A.id}`, { parent_id: R2.id })).status).toBe(200);
    expect(await subtree(R.id)).toEqual([B.id]);
    expect(await subtree(R2.id)).toHaveLength(5);
    expect(await subtree(A.id)).toEqual([plain.id, windowNow.id, around.id]);
  });

  it('404 for a missing, deleted or other-org node; 400 for bad ids and query keys', async () => {
    const t = await buildTree(api);
    for (const segment of ['ancestors', 'children', 'descendants']) {
      expect((await other.get(`/locations/${t.A.id}/${segment}`)).status).toBe(404);
      expect((await api.get(`/locations/2147483000/${segment}`)).status).toBe(404);
      expect(fieldCodes(await api.get(`/locations/2147483648/${segment}`))).toEqual(['location_id:too_large']);
      expect(fieldCodes(await api.get(`/locations/${t.A.id}/${segment}?depth=2`))).toEqual(['depth:unknown_field']);
      expect(fieldCodes(await api.get(`/locations/${t.A.id}/${segment}?limit=0`))).toEqual(['limit:too_small']);
      expect(fieldCodes(await api.get(`/locations/${t.A.id}/${segment}?limit=201`))).toEqual(['limit:too_large']);
    }
    expect((await api.del(`/locations/${t.A2x.id}`)).status).toBe(204);
    expect((await api.get(`/locations/${t.A2x.id}/ancestors`)).status).toBe(404);
  });

  it('405 with Allow for a wrong method (docs/api.md "Requests and responses")', async () => {
    const t = await buildTree(api);
    const reply = await api.request('POST', `/locations/${t.A.id}/ancestors`, {});
    expect(reply.status).toBe(405);
    expect(reply.headers.get('allow')).toBe('GET, HEAD');
  });
});

describe('re-parenting with PATCH (docs/api.md "Changing a record: PATCH")', () => {
  let api: Client;
  beforeAll(async () => {
    api = await newClient(svc, 'tree-moves');
  });

  it('parent_id moves the whole subtree; paths of descendants follow', async () => {
    const t = await buildTree(api);
    await new Promise((r) => setTimeout(r, 5));
    const reply = await api.patch(`/locations/${t.A2.id}`, { parent_id: t.B.id });
    expect(reply.status).toBe(200);
    expect(reply.body.data).toMatchObject({ parent_id: t.B.id, parent_external_key: t.B.external_key });
    expect(Date.parse(reply.body.data.updated_at)).toBeGreaterThan(Date.parse(t.A2.updated_at));
    expect(ids(await api.get(`/locations/${t.A2x.id}/ancestors`))).toEqual([t.A2.id, t.B.id, t.R.id]);
    expect(ids(await api.get(`/locations/${t.A.id}/descendants`))).toEqual([t.A1.id]);
    expect(ids(await api.get(`/locations/${t.B.id}/descendants`))).toEqual([t.A2.id, t.A2x.id]);
    // The moved node's child still points at it, unchanged.
    expect((await api.get(`/locations/${t.A2x.id}`)).body.data).toEqual(t.A2x);
  });

  it('parent_external_key re-parents; null detaches to the root (either form)', async () => {
    const t = await buildTree(api);
    const moved = await api.patch(`/locations/${t.A.id}`, { parent_external_key: t.B.external_key });
    expect(moved.body.data).toMatchObject({ parent_id: t.B.id, parent_external_key: t.B.external_key });
    expect(ids(await api.get(`/locations/${t.A2x.id}/ancestors`))).toEqual([t.A2.id, t.A.id, t.B.id, t.R.id]);
    const detached = await api.patch(`/locations/${t.A.id}`, { parent_external_key: null });
    expect(detached.body.data).toMatchObject({ parent_id: null, parent_external_key: null });
    expect(ids(await api.get(`/locations/${t.A2x.id}/ancestors`))).toEqual([t.A2.id, t.A.id]);
    expect(ids(await api.get(`/locations/${t.R.id}/descendants`))).toEqual([t.B.id]);
    const back = await api.patch(`/locations/${t.A.id}`, { parent_id: t.R.id });
    expect(back.body.data.parent_id).toBe(t.R.id);
    const detachedById = await api.patch(`/locations/${t.A1.id}`, { parent_id: null });
    expect(detachedById.body.data).toMatchObject({ parent_id: null, parent_external_key: null });
  });

  it('both forms agreeing → one re-parent; disagreeing → ambiguous_fields, one entry each', async () => {
    const t = await buildTree(api);
    const agree = await api.patch(`/locations/${t.A1.id}`, { parent_id: t.B.id, parent_external_key: t.B.external_key });
    expect(agree.status).toBe(200);
    expect(agree.body.data.parent_id).toBe(t.B.id);
    const disagree = await api.patch(`/locations/${t.A1.id}`, { parent_id: t.A.id, parent_external_key: t.B.external_key });
    expect(fieldCodes(disagree)).toEqual(['parent_id:ambiguous_fields', 'parent_external_key:ambiguous_fields']);
    const half = await api.patch(`/locations/${t.A1.id}`, { parent_id: null, parent_external_key: t.B.external_key });
    expect(fieldCodes(half)).toEqual(['parent_id:ambiguous_fields', 'parent_external_key:ambiguous_fields']);
    const bothNull = await api.patch(`/locations/${t.A1.id}`, { parent_id: null, parent_external_key: null });
    expect(bothNull.body.data).toMatchObject({ parent_id: null, parent_external_key: null });
  });

  it('fk_not_found names the form sent, for missing, deleted and other-org parents; current parent accepted as is', async () => {
    const t = await buildTree(api);
    const gone = await api.create({ name: 'gone', external_key: uniqueKey('gone') });
    expect((await api.del(`/locations/${gone.id}`)).status).toBe(204);
    const foreign = await other.create({ name: 'foreign', external_key: uniqueKey('foreign') });
    for (const [body, expected] of [
      [{ parent_id: gone.id }, 'parent_id:fk_not_found'],
      [{ parent_external_key: gone.external_key }, 'parent_external_key:fk_not_found'],
      [{ parent_id: foreign.id }, 'parent_id:fk_not_found'],
      [{ parent_external_key: foreign.external_key }, 'parent_external_key:fk_not_found'],
      [{ parent_id: 2147483000 }, 'parent_id:fk_not_found'],
    ] as const) {
      expect(fieldCodes(await api.patch(`/locations/${t.A1.id}`, body))).toEqual([expected]);
    }
    const same = await api.patch(`/locations/${t.A1.id}`, { parent_id: t.A.id, parent_external_key: t.A.external_key });
    expect(same.status).toBe(200);
    expect(same.body.data.updated_at).toBe(t.A1.updated_at);
  });

  it('a move that would create a cycle → 409 naming the location; parent = itself too (docs/api.md "Changing a record: PATCH")', async () => {
    const t = await buildTree(api);
    const cycle = await api.patch(`/locations/${t.R.id}`, { parent_id: t.A2x.id });
    expect(cycle.status).toBe(409);
    expect(cycle.body.error.type).toBe('conflict');
    expect(cycle.body.error.detail).toContain(`location ${t.R.external_key} (id ${t.R.id}) its own ancestor`);
    const self = await api.patch(`/locations/${t.A.id}`, { parent_external_key: t.A.external_key });
    expect(self.status).toBe(409);
    expect(self.body.error.detail).toContain(`location ${t.A.external_key} (id ${t.A.id}) its own ancestor`);
    // Nothing moved.
    expect(ids(await api.get(`/locations/${t.A2x.id}/ancestors`))).toEqual([t.A2.id, t.A.id, t.R.id]);
  });

  it('parent_external_key is recomputed on read and projected for a soft-deleted parent (docs/api.md "Locations")', async () => {
    const p = await api.create({ name: 'p', external_key: uniqueKey('P') });
    const c = await api.create({ name: 'c', parent_id: p.id });
    const renamed = uniqueKey('P2');
    await api.post(`/locations/${p.id}/rename`, { external_key: renamed });
    expect((await api.get(`/locations/${c.id}`)).body.data.parent_external_key).toBe(renamed);
    expect((await api.del(`/locations/${c.id}`)).status).toBe(204);
    expect((await api.del(`/locations/${p.id}`)).status).toBe(204);
    // The deleted parent's key is reused by a new row: the child still shows its own parent's key.
    await api.create({ name: 'reuse', external_key: renamed });
    const listed = await api.get(`/locations?include_deleted=true&id=${c.id}`);
    expect(listed.body.data).toHaveLength(1);
    expect(listed.body.data[0] as LocationJson).toMatchObject({ id: c.id, parent_id: p.id, parent_external_key: renamed });
    expect(listed.body.data[0].deleted_at).not.toBeNull();
  });
});

describe('GET /locations filters, paging and sorting (docs/api.md "GET /locations/{location_id} and GET /locations" and "Lists: paging, sorting, filters, search")', () => {
  let api: Client;
  let rows: LocationJson[];
  beforeAll(async () => {
    api = await newClient(svc, 'tree-lists');
    rows = [];
    rows.push(await api.create({ name: 'delta', external_key: 'K-c', description: 'cold 100% storage' }));
    rows.push(await api.create({ name: 'alpha', external_key: 'K-a', is_active: false }));
    rows.push(await api.create({ name: 'charlie', external_key: 'K-b', description: 'under_score' }));
    rows.push(await api.create({ name: 'bravo', external_key: 'K-B', tags: [{ tag_type: 'barcode', value: 'SHELF-LABEL-7' }] }));
    rows.push(await api.create({ name: 'future', external_key: 'K-future', valid_from: '2999-01-01T00:00:00Z' }));
    rows.push(await api.create({ name: 'expired', external_key: 'K-expired', valid_from: '2000-01-01T00:00:00Z', valid_to: '2001-01-01T00:00:00Z' }));
    rows.push(await api.create({ name: 'gone', external_key: 'K-gone' }));
    rows.push(await api.create({ name: 'inactive tag', external_key: 'K-t', tags: [{ tag_type: 'barcode', value: 'HIDDEN-LABEL', is_active: false }] }));
    expect((await api.del(`/locations/${rows[6]!.id}`)).status).toBe(204);
  });

  it('default scope: existing and currently effective, sorted by external_key (byte order) then id, limit 50', async () => {
    const reply = await api.get('/locations');
    expect(reply.status).toBe(200);
    expect(keys(reply)).toEqual(['K-B', 'K-a', 'K-b', 'K-c', 'K-t']);
    expect(reply.body).toMatchObject({ limit: 50, offset: 0, total_count: 5 });
    const all = await api.get('/locations?include_deleted=true');
    expect(keys(all)).toEqual(['K-B', 'K-a', 'K-b', 'K-c', 'K-expired', 'K-future', 'K-gone', 'K-t']);
  });

  it('sort fields, descending, unknown sort field', async () => {
    expect(keys(await api.get('/locations?sort=name'))).toEqual(['K-a', 'K-B', 'K-b', 'K-c', 'K-t']);
    expect(keys(await api.get('/locations?sort=-name'))).toEqual(['K-t', 'K-c', 'K-b', 'K-B', 'K-a']);
    expect(keys(await api.get('/locations?sort=created_at'))).toEqual(['K-c', 'K-a', 'K-b', 'K-B', 'K-t']);
    expect(keys(await api.get('/locations?sort=-updated_at'))).toEqual(['K-t', 'K-B', 'K-b', 'K-a', 'K-c']);
    const bad = await api.get('/locations?sort=color');
    expect(fieldCodes(bad)).toEqual(['sort:invalid_value']);
    expect(bad.body.error.fields[0].message).toBe('unknown sort field: color');
  });

  it('limit and offset; limit 0 → too_small, 201 → too_large', async () => {
    const page = await api.get('/locations?limit=2&offset=1');
    expect(keys(page)).toEqual(['K-a', 'K-b']);
    expect(page.body).toMatchObject({ limit: 2, offset: 1, total_count: 5 });
    const past = await api.get('/locations?offset=10');
    expect(past.body).toMatchObject({ data: [], total_count: 5 });
    expect(fieldCodes(await api.get('/locations?limit=0'))).toEqual(['limit:too_small']);
    const big = await api.get('/locations?limit=201');
    expect(fieldCodes(big)).toEqual(['limit:too_large']);
    expect(big.body.error.fields[0].params).toMatchObject({ max: 200 });
    expect(fieldCodes(await api.get('/locations?offset=-1'))).toEqual(['offset:too_small']);
  });

  it('external_key: repeatable any-of; a miss is an empty list; an invalid value is 400', async () => {
    expect(keys(await api.get('/locations?external_key=K-a&external_key=K-c&external_key=nope'))).toEqual(['K-a', 'K-c']);
    expect((await api.get('/locations?external_key=nope')).body).toMatchObject({ data: [], total_count: 0 });
    expect(fieldCodes(await api.get('/locations?external_key=a.b'))).toEqual(['external_key:invalid_value']);
    expect(keys(await api.get('/locations?external_key=K-gone'))).toEqual([]);
    expect(keys(await api.get('/locations?external_key=K-gone&include_deleted=true'))).toEqual(['K-gone']);
  });

  it('id with include_deleted inspects one row', async () => {
    const gone = rows[6]!;
    expect((await api.get(`/locations?id=${gone.id}`)).body.data).toEqual([]);
    const reply = await api.get(`/locations?id=${gone.id}&include_deleted=true`);
    expect(ids(reply)).toEqual([gone.id]);
    expect(reply.body.data[0].deleted_at).toMatch(/Z$/);
    expect(fieldCodes(await api.get('/locations?id=2147483648'))).toEqual(['id:too_large']);
  });

  it('is_active narrows; booleans are true or false only', async () => {
    expect(keys(await api.get('/locations?is_active=false'))).toEqual(['K-a']);
    expect(keys(await api.get('/locations?is_active=true'))).toEqual(['K-B', 'K-b', 'K-c', 'K-t']);
    expect(fieldCodes(await api.get('/locations?is_active=yes'))).toEqual(['is_active:invalid_value']);
    expect(fieldCodes(await api.get('/locations?include_deleted=1'))).toEqual(['include_deleted:invalid_value']);
  });

  it('parent_id and parent_external_key: both → ambiguous_fields; invalid values → 400, never an empty list', async () => {
    const both = await api.get(`/locations?parent_id=1&parent_external_key=K-a`);
    expect(fieldCodes(both)).toEqual(['parent_id:ambiguous_fields', 'parent_external_key:ambiguous_fields']);
    expect(fieldCodes(await api.get('/locations?parent_external_key=a_b'))).toEqual(['parent_external_key:invalid_value']);
    expect((await api.get('/locations?parent_id=abc')).status).toBe(400);
    expect(fieldCodes(await api.get('/locations?parent_id=0'))).toEqual(['parent_id:too_small']);
    expect((await api.get('/locations?parent_external_key=K-a')).body).toMatchObject({ data: [], total_count: 0 });
  });

  it('unknown keys → unknown_field (one entry each); a repeated single-valued key → invalid_value', async () => {
    expect(fieldCodes(await api.get('/locations?color=red&size=2'))).toEqual(['color:unknown_field', 'size:unknown_field']);
    expect(fieldCodes(await api.get('/locations?limit=1&limit=2'))).toEqual(['limit:invalid_value']);
  });

  it('q: case-insensitive over name, external_key, description and active effective tag values; % _ \\ literal', async () => {
    expect(keys(await api.get('/locations?q=ALPH'))).toEqual(['K-a']);
    expect(keys(await api.get('/locations?q=k-C'))).toEqual(['K-c']);
    expect(keys(await api.get('/locations?q=storage'))).toEqual(['K-c']);
    expect(keys(await api.get('/locations?q=shelf-label'))).toEqual(['K-B']);
    expect(keys(await api.get('/locations?q=hidden'))).toEqual([]);
    expect(keys(await api.get(`/locations?q=${encodeURIComponent('100%')}`))).toEqual(['K-c']);
    expect(keys(await api.get(`/locations?q=${encodeURIComponent('%')}`))).toEqual(['K-c']);
    expect(keys(await api.get(`/locations?q=${encodeURIComponent('_')}`))).toEqual(['K-b']);
    expect(keys(await api.get(`/locations?q=${encodeURIComponent('\\')}`))).toEqual([]);
  });

  it('another org sees none of these rows', async () => {
    expect((await other.get('/locations?external_key=K-a')).body.data).toEqual([]);
  });
});
