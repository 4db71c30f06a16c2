import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey, personWithToken } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { scanner } from '../support/scans.js';
import { eventually } from '../support/kafka.js';
import { client, errorOf, fieldCodes } from '../master-data/http.js';

/**
 * The counts API (docs/api.md "Counts") over real HTTP, with real reads: handheld submissions to
 * the ingest listener, placed by the tracking path and counted by the `counts` subscriber. A read
 * after the start counts; a late upload of a read observed before the close counts; a read
 * observed after the close does not; repeats count once; another organization's count is 404.
 * Reads observed ahead of the service's clock (a handheld's clock ahead) count by their observed
 * time: one that arrives before the start counts, one that arrives while open and is observed
 * after the close counts while open and no longer once closed.
 */

let svc: TestService;

beforeAll(async () => {
  svc = await startTestService('counts_api', { ROLES: 'api,ingest,projector' });
});
afterAll(async () => {
  await svc?.stop();
});

const SCOPES = ['counts:read', 'counts:write', 'assets:read', 'assets:write', 'locations:read', 'locations:write', 'audit:read'];
type Count = { id: number; name: string | null; status: string; location_id: number; location_external_key: string | null; started_at: string; closed_at: string | null; expected: number; found: number; missing: number; misplaced: number; unexpected: number };
type Item = { asset_id: number; asset_external_key: string | null; status: string; seen_location_id: number | null; seen_location_external_key: string | null; last_seen_at: string | null };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function org() {
  const ctx = svc.service.ctx;
  const orgId = (await createOrg(ctx, `org-${randomUUID()}`)).id;
  const key = await mintApiKey(ctx, { orgId, scopes: SCOPES });
  const api = client(svc.apiUrl, key.token);
  const location = async (name: string, external_key: string, parent_id?: number) =>
    (await api<{ data: { id: number } }>('POST', '/locations', { body: { name, external_key, ...(parent_id ? { parent_id } : {}) } })).body.data.id;
  const cage = await location('Cage', 'CAGE');
  const shelf = await location('Shelf', 'SHELF', cage);
  const dock = await location('Dock', 'DOCK');
  const asset = async (key: string) => {
    const reply = await api<{ data: { id: number } }>('POST', '/assets', { body: { name: key, external_key: key, tags: [{ tag_type: 'rfid', value: `E-${key}` }] } });
    expect(reply.status, reply.text).toBe(201);
    return reply.body.data.id;
  };
  const ids = { a: await asset('A'), b: await asset('B'), c: await asset('C'), d: await asset('D'), e: await asset('E') };
  const handheld = await scanner(svc, orgId);
  const read = (key: string, at?: string) => ({ tag_type: 'rfid', value: `E-${key}`, ...(at ? { observed_at: at } : {}) });
  return { orgId, key, api, cage, shelf, dock, ids, handheld, read };
}

describe('counts: the API with real reads', () => {
  it('expected at the start, reads in the window from any time of arrival, repeats once, close idempotent, items and exports', async () => {
    const { api, cage, shelf, dock, ids, handheld, read, key } = await org();
    // Before the start: A at the cage, B on the shelf (in the zone), C at the cage, D at the dock.
    await handheld.scan({ id: cage }, [read('A'), read('C')]);
    await handheld.scan({ id: shelf }, [read('B')]);
    await handheld.scan({ id: dock }, [read('D')]);

    const started = await api<{ data: Count }>('POST', '/counts', { body: { location_external_key: 'CAGE', name: 'Weekly' } });
    expect(started.status, started.text).toBe(201);
    const count = started.body.data;
    expect(started.headers.get('location')).toBe(`/api/v1/counts/${count.id}`);
    expect(count).toMatchObject({ name: 'Weekly', status: 'open', location_id: cage, location_external_key: 'CAGE', closed_at: null, expected: 3, found: 0, missing: 3, misplaced: 0, unexpected: 0 });

    await sleep(5);
    // A on the shelf (found), twice and in two submissions; D at the cage (unexpected); B at the dock (misplaced).
    const aAt = new Date().toISOString();
    await handheld.scan({ id: shelf }, [read('A', aAt), read('A', aAt)]);
    await handheld.scan({ id: shelf }, [read('A', aAt)]);
    await handheld.scan({ id: cage }, [read('D')]);
    await handheld.scan({ id: dock }, [read('B')]);
    const cAt = new Date().toISOString();
    await sleep(5);
    await eventually(async () => {
      const now = (await api<{ data: Count }>('GET', `/counts/${count.id}`)).body.data;
      expect(now).toMatchObject({ expected: 3, found: 1, missing: 1, misplaced: 1, unexpected: 1 });
    });

    const closed = await api<{ data: Count }>('POST', `/counts/${count.id}/close`);
    expect(closed.status, closed.text).toBe(200);
    expect(closed.body.data.status).toBe('closed');
    expect(closed.body.data.closed_at).not.toBeNull();
    // Again: the same count, unchanged (no second event: the audit log has one close).
    const again = await api<{ data: Count }>('POST', `/counts/${count.id}/close`);
    expect(again.body.data).toEqual(closed.body.data);

    // After the close: C's read observed before it arrives late and counts; E read now does not.
    await sleep(5);
    await handheld.scan({ id: cage }, [read('C', cAt), read('E')]);
    const final = await eventually(async () => {
      const now = (await api<{ data: Count }>('GET', `/counts/${count.id}`)).body.data;
      expect(now).toMatchObject({ expected: 3, found: 2, missing: 0, misplaced: 1, unexpected: 1 });
      return now;
    });
    expect(final.closed_at).toBe(closed.body.data.closed_at);

    const items = await api<{ data: Item[]; total_count: number }>('GET', `/counts/${count.id}/items`);
    expect(items.status, items.text).toBe(200);
    expect(items.body.total_count).toBe(4);
    const byAsset = new Map(items.body.data.map((i) => [i.asset_id, i]));
    expect(byAsset.get(ids.a)).toEqual({ asset_id: ids.a, asset_external_key: 'A', status: 'found', seen_location_id: shelf, seen_location_external_key: 'SHELF', last_seen_at: aAt });
    expect(byAsset.get(ids.c)).toMatchObject({ status: 'found', seen_location_id: cage, last_seen_at: cAt });
    expect(byAsset.get(ids.b)).toMatchObject({ status: 'misplaced', seen_location_id: dock, seen_location_external_key: 'DOCK' });
    expect(byAsset.get(ids.d)).toMatchObject({ status: 'unexpected', seen_location_id: cage });
    expect(byAsset.has(ids.e)).toBe(false);
    const misplaced = await api<{ data: Item[]; total_count: number }>('GET', `/counts/${count.id}/items?status=misplaced`);
    expect(misplaced.body.data.map((i) => i.asset_id)).toEqual([ids.b]);
    const paged = await api<{ data: Item[]; total_count: number }>('GET', `/counts/${count.id}/items?limit=2&offset=2`);
    expect(paged.body.data.map((i) => i.asset_id)).toEqual([...byAsset.keys()].sort((x, y) => x - y).slice(2));

    // The export, as every list: the same rows as CSV.
    const csv = await fetch(`${svc.apiUrl}/counts/${count.id}/items?status=found`, { headers: { authorization: `Bearer ${key.token}`, accept: 'text/csv' } });
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toMatch(/^text\/csv/);
    const lines = (await csv.text()).trim().split(/\r?\n/);
    expect(lines[0]).toBe('asset_id,asset_external_key,status,seen_location_id,seen_location_external_key,last_seen_at');
    expect(lines.slice(1).map((l) => Number(l.split(',')[0]))).toEqual([ids.a, ids.c].sort((x, y) => x - y));

    // The audit log: one start, one close.
    const audit = await api<{ data: Array<{ action: string; resource_id: string }> }>('GET', `/audit-events?resource_type=count`);
    expect(audit.body.data.filter((e) => e.resource_id === String(count.id)).map((e) => e.action).sort()).toEqual(['count.closed', 'count.started']);
  });

  it('reads observed ahead of the service’s clock: before the start they count, observed after the close they stop counting at the close', async () => {
    const { api, cage, shelf, dock, ids, handheld, read } = await org();
    // A and C at the cage, D at the dock; then, before the start, D read at the cage by a handheld
    // whose clock is 20 seconds ahead: its current location is the cage (expected), and its read,
    // observed after the start (and before the close), counts (found), though it reached the
    // service before the start. (The lead is what the start may take under load; the close waits
    // for the read's observed time.)
    await handheld.scan({ id: cage }, [read('A'), read('C')]);
    await handheld.scan({ id: dock }, [read('D')]);
    const dAt = new Date(Date.now() + 20_000).toISOString();
    await handheld.scan({ id: cage }, [read('D', dAt)]);
    await sleep(5);
    const count = (await api<{ data: Count }>('POST', '/counts', { body: { location_id: cage } })).body.data;
    // The start answers the count as its subscriber wrote it: D found at once.
    expect(count).toMatchObject({ expected: 3, found: 1, missing: 2 });
    expect(Date.parse(count.started_at)).toBeLessThan(Date.parse(dAt));

    // While open: A on the shelf now (found); C at the dock and E on the shelf observed 4 minutes
    // ahead (after the close to come): while open they count (the window has no end yet).
    await sleep(5);
    const aAt = new Date().toISOString();
    const later = new Date(Date.now() + 4 * 60_000).toISOString();
    await handheld.scan({ id: shelf }, [read('A', aAt), read('E', later)]);
    await handheld.scan({ id: dock }, [read('C', later)]);
    await eventually(async () => {
      const now = (await api<{ data: Count }>('GET', `/counts/${count.id}`)).body.data;
      expect(now).toMatchObject({ expected: 3, found: 2, missing: 0, misplaced: 1, unexpected: 1 });
    });

    // The close (after D's observed time): C's and E's reads were observed after it, so they no longer count.
    await sleep(Math.max(0, Date.parse(dAt) + 10 - Date.now()));
    const closed = await api<{ data: Count }>('POST', `/counts/${count.id}/close`);
    expect(closed.status, closed.text).toBe(200);
    expect(Date.parse(closed.body.data.closed_at!)).toBeGreaterThan(Date.parse(dAt));
    expect(Date.parse(closed.body.data.closed_at!)).toBeLessThan(Date.parse(later));
    await eventually(async () => {
      const now = (await api<{ data: Count }>('GET', `/counts/${count.id}`)).body.data;
      expect(now).toMatchObject({ status: 'closed', expected: 3, found: 2, missing: 1, misplaced: 0, unexpected: 0 });
    });
    const items = await api<{ data: Item[]; total_count: number }>('GET', `/counts/${count.id}/items`);
    expect(items.body.total_count).toBe(3);
    const byAsset = new Map(items.body.data.map((i) => [i.asset_id, i]));
    expect(byAsset.get(ids.a)).toMatchObject({ status: 'found', seen_location_id: shelf, last_seen_at: aAt });
    expect(byAsset.get(ids.d)).toMatchObject({ status: 'found', seen_location_id: cage, last_seen_at: dAt });
    expect(byAsset.get(ids.c)).toMatchObject({ status: 'missing', seen_location_id: null, last_seen_at: null });
    expect(byAsset.has(ids.e)).toBe(false);
    // The five numbers are the items' (a later GET, the lists by status).
    const missing = await api<{ data: Item[] }>('GET', `/counts/${count.id}/items?status=missing`);
    expect(missing.body.data.map((i) => i.asset_id)).toEqual([ids.c]);
    expect((await api<{ data: Item[] }>('GET', `/counts/${count.id}/items?status=unexpected`)).body.data).toEqual([]);
  }, 120_000);

  it('the list and its filters (the Scan page asks for the open counts of a zone)', async () => {
    const { api, cage, dock } = await org();
    const one = (await api<{ data: Count }>('POST', '/counts', { body: { location_id: cage } })).body.data;
    const two = (await api<{ data: Count }>('POST', '/counts', { body: { location_id: dock } })).body.data;
    const three = (await api<{ data: Count }>('POST', '/counts', { body: { location_id: cage } })).body.data;
    expect(one.name).toBeNull();
    await api('POST', `/counts/${three.id}/close`);
    const ids = async (query: string) => {
      const reply = await api<{ data: Count[]; total_count: number }>('GET', `/counts${query}`);
      expect(reply.status, reply.text).toBe(200);
      return reply.body.data.map((c) => c.id);
    };
    expect(await ids('')).toEqual([three.id, two.id, one.id]);
    expect(await ids(`?status=open&location_id=${cage}`)).toEqual([one.id]);
    expect(await ids('?status=closed')).toEqual([three.id]);
    expect(await ids(`?location_id=${dock}`)).toEqual([two.id]);
    expect(fieldCodes(await api('GET', '/counts?status=done'))).toEqual([['status', 'invalid_value']]);
  });

  it('member roles: every member reads, operators and admins start and close', async () => {
    const { orgId, cage } = await org();
    const ctx = svc.service.ctx;
    const viewer = client(svc.apiUrl, (await personWithToken(ctx, orgId, 'viewer')).token);
    const operator = client(svc.apiUrl, (await personWithToken(ctx, orgId, 'operator')).token);
    const refused = await viewer<{ error: { detail: string } }>('POST', '/counts', { body: { location_id: cage } });
    expect([refused.status, refused.body.error.detail]).toEqual([403, 'Your role (viewer) does not allow this']);
    const started = await operator<{ data: Count }>('POST', '/counts', { body: { location_id: cage } });
    expect(started.status, started.text).toBe(201);
    expect((await viewer('GET', `/counts/${started.body.data.id}`)).status).toBe(200);
    expect((await viewer('GET', `/counts/${started.body.data.id}/items`)).status).toBe(200);
    expect((await viewer('POST', `/counts/${started.body.data.id}/close`)).status).toBe(403);
    expect((await operator('POST', `/counts/${started.body.data.id}/close`)).status).toBe(200);
  });

  it('validation, unknown and deleted zones, and another organization’s count is 404', async () => {
    const { api, cage, dock } = await org();
    expect(fieldCodes(await api('POST', '/counts', { body: {} }))).toEqual([['location_id', 'required']]);
    expect(fieldCodes(await api('POST', '/counts', { body: { location_id: cage, location_external_key: 'CAGE' } }))).toEqual([
      ['location_id', 'ambiguous_fields'],
      ['location_external_key', 'ambiguous_fields'],
    ]);
    expect(fieldCodes(await api('POST', '/counts', { body: { location_id: 999_999_999 } }))).toEqual([['location_id', 'fk_not_found']]);
    expect(fieldCodes(await api('POST', '/counts', { body: { location_external_key: 'NOPE' } }))).toEqual([['location_external_key', 'fk_not_found']]);
    expect(fieldCodes(await api('POST', '/counts', { body: { location_id: cage, name: '' } }))[0]![0]).toBe('name');
    expect(fieldCodes(await api('POST', '/counts', { body: { location_id: cage, extra: 1 } }))[0]![0]).toBe('extra');
    expect((await api('DELETE', `/locations/${dock}`)).status).toBe(204);
    expect(fieldCodes(await api('POST', '/counts', { body: { location_id: dock } }))).toEqual([['location_id', 'fk_not_found']]);

    const mine = (await api<{ data: Count }>('POST', '/counts', { body: { location_id: cage } })).body.data;
    const other = await org();
    for (const [method, path] of [
      ['GET', `/counts/${mine.id}`],
      ['POST', `/counts/${mine.id}/close`],
      ['GET', `/counts/${mine.id}/items`],
    ] as const) {
      const reply = await other.api(method, path);
      expect(reply.status, `${method} ${path}`).toBe(404);
      expect(errorOf(reply).detail).toBe('Count not found');
    }
    expect((await api<{ data: Count }>('GET', `/counts/${mine.id}`)).body.data.status).toBe('open');
    expect((await api('GET', '/counts/2147483647')).status).toBe(404);
    expect((await other.api<{ total_count: number }>('GET', '/counts')).body.total_count).toBe(0);
    // HEAD answers as GET without a body; another method is 405; the scope is named.
    expect((await api('HEAD', `/counts/${mine.id}`)).status).toBe(200);
    const wrong = await api('DELETE', `/counts/${mine.id}`);
    expect(wrong.status).toBe(405);
    const reader = await mintApiKey(svc.service.ctx, { orgId: other.orgId, scopes: ['assets:read'] });
    const refused = await client(svc.apiUrl, reader.token)('GET', '/counts');
    expect(refused.status).toBe(403);
    // The document names each operation's scope (x-required-scopes).
    const doc = (await (await fetch(`${new URL(svc.apiUrl).origin}/openapi/v1.json`)).json()) as { paths: Record<string, Record<string, { 'x-required-scopes': string[] }>> };
    expect(doc.paths['/counts']!.get!['x-required-scopes']).toEqual(['counts:read']);
    expect(doc.paths['/counts']!.post!['x-required-scopes']).toEqual(['counts:write']);
    expect(doc.paths['/counts/{count_id}/close']!.post!['x-required-scopes']).toEqual(['counts:write']);
    expect(doc.paths['/counts/{count_id}/items']!.get!['x-required-scopes']).toEqual(['counts:read']);
  });
});
