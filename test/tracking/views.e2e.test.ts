import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { handheld, type ListPage, type ReportRow } from '../support/scans.js';
import { startTestService, type TestService } from '../support/service.js';
import { client, fieldCodes } from '../master-data/http.js';

/**
 * The tracking views over real HTTP: `GET /reports/asset-locations`, `GET /assets/{id}/history`
 * and the asset views' scan-data fields (docs/api.md "GET /reports/asset-locations", "Currently
 * effective", "Tracking: where assets are and have been" and "Lists: paging, sorting, filters, search").
 */

let svc: TestService;
let orgId: number;
let api: ReturnType<typeof client>;
let submit: ReturnType<typeof handheld>;
let n = 0;
const unique = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${++n}`;

interface Loc {
  id: number;
  external_key: string;
}
interface Visit {
  location_id: number;
  location_external_key: string | null;
  event_observed_at: string;
  last_observed_at: string;
  duration_seconds: number | null;
}

beforeAll(async () => {
  svc = await startTestService('tracking_views');
  const ctx = svc.service.ctx;
  orgId = (await createOrg(ctx, 'views')).id;
  api = client(svc.apiUrl, (await mintApiKey(ctx, { orgId, scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read'] })).token);
  submit = handheld(svc, (await mintApiKey(ctx, { orgId, scopes: ['scans:write'] })).token);
});
afterAll(async () => {
  await svc?.stop();
});

async function location(body: Record<string, unknown> = {}): Promise<Loc> {
  const reply = await api<{ data: Loc }>('POST', '/locations', { body: { name: 'L', external_key: unique('LOC'), ...body } });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data;
}

async function asset(body: Record<string, unknown> = {}): Promise<{ id: number; external_key: string; tag: string }> {
  const tag = unique('E28');
  const reply = await api<{ data: { id: number; external_key: string } }>('POST', '/assets', { body: { name: 'A', external_key: unique('AST'), tags: [{ tag_type: 'rfid', value: tag }], ...body } });
  expect(reply.status, reply.text).toBe(201);
  return { ...reply.body.data, tag };
}

/** Reads of one asset's tag at one location, at the given times. */
async function scan(loc: Loc, tag: string, ...times: string[]): Promise<void> {
  const reply = await submit({ submission_id: randomUUID(), device_id: 'h', location: { id: loc.id }, reads: times.map((observed_at) => ({ tag_type: 'rfid', value: tag, observed_at })) });
  expect(reply.status, JSON.stringify(reply.body)).toBe(202);
}

const t = (minute: number, second = 0) => `2026-05-25T10:${String(minute).padStart(2, '0')}:${String(second).padStart(2, '0')}.000Z`;

async function report(query = ''): Promise<ListPage<ReportRow>> {
  const reply = await api<ListPage<ReportRow>>('GET', `/reports/asset-locations${query}`);
  expect(reply.status, reply.text).toBe(200);
  return reply.body;
}

async function history(assetId: number, query = ''): Promise<ListPage<Visit>> {
  const reply = await api<ListPage<Visit>>('GET', `/assets/${assetId}/history${query}`);
  expect(reply.status, reply.text).toBe(200);
  return reply.body;
}

describe('GET /assets/{asset_id}/history', () => {
  it('one row per visit, newest first: first and last read, seconds until the next visit began', async () => {
    const [a, b] = [await location(), await location()];
    const x = await asset();
    await scan(a, x.tag, t(0), t(1), t(2));
    await scan(b, x.tag, t(5, 30));
    await scan(a, x.tag, t(10), t(12, 15));
    const page = await history(x.id);
    expect(page).toMatchObject({ limit: 50, offset: 0, total_count: 3 });
    expect(page.data).toEqual([
      { location_id: a.id, location_external_key: a.external_key, event_observed_at: t(10), last_observed_at: t(12, 15), duration_seconds: null },
      { location_id: b.id, location_external_key: b.external_key, event_observed_at: t(5, 30), last_observed_at: t(5, 30), duration_seconds: 270 },
      { location_id: a.id, location_external_key: a.external_key, event_observed_at: t(0), last_observed_at: t(2), duration_seconds: 330 },
    ]);
    expect(Object.keys(page.data[0]!)).toEqual(['location_id', 'location_external_key', 'event_observed_at', 'last_observed_at', 'duration_seconds']);
    // Oldest first, paged.
    const asc = await history(x.id, '?sort=event_observed_at&limit=2&offset=1');
    expect(asc.data.map((v) => v.event_observed_at)).toEqual([t(5, 30), t(10)]);
    expect(asc.total_count).toBe(3);
    // from/to keep the visits that overlap the window, both ends inclusive.
    expect((await history(x.id, `?from=${t(2)}&to=${t(5, 30)}`)).data.map((v) => v.event_observed_at)).toEqual([t(5, 30), t(0)]);
    expect((await history(x.id, `?from=${t(3)}&to=${t(9)}`)).data.map((v) => v.event_observed_at)).toEqual([t(5, 30)]);
    expect((await history(x.id, `?from=${encodeURIComponent('2026-05-25T12:11:00+02:00')}`)).data.map((v) => v.event_observed_at)).toEqual([t(10)]);
    // To the microsecond, as observed times are: a window ending 100 µs before a visit begins misses it.
    const y = await asset();
    await scan(a, y.tag, '2026-05-25T10:00:00.000500Z');
    await scan(b, y.tag, '2026-05-25T10:00:00.000900Z');
    const window = (from: string, to: string) => history(y.id, `?from=${from}&to=${to}`).then((p) => p.data.map((v) => v.location_id));
    expect(await window('2026-05-25T10:00:00.000400Z', '2026-05-25T10:00:00.000800Z')).toEqual([a.id]);
    expect(await window('2026-05-25T10:00:00.000600Z', '2026-05-25T10:00:00.000900Z')).toEqual([b.id]);
    expect(await window('2026-05-25T10:00:00.000501Z', '2026-05-25T10:00:00.000899Z')).toEqual([]);
    // A late read in the middle of the first visit splits it; the current location does not move back.
    await scan(b, x.tag, t(1, 30));
    expect((await history(x.id, '?sort=event_observed_at')).data.map((v) => [v.location_id, v.event_observed_at, v.last_observed_at])).toEqual([
      [a.id, t(0), t(1)],
      [b.id, t(1, 30), t(1, 30)],
      [a.id, t(2), t(2)],
      [b.id, t(5, 30), t(5, 30)],
      [a.id, t(10), t(12, 15)],
    ]);
    const row = (await report(`?asset_id=${x.id}`)).data[0]!;
    expect(row).toMatchObject({ location_id: a.id, asset_last_seen: t(12, 15), dwell_started_at: t(10) });
  });

  it('the joined location key is null unless that location exists and is currently effective', async () => {
    const [future, doomed] = [await location({ valid_from: '2999-01-01T00:00:00Z' }), await location()];
    const x = await asset();
    await scan(doomed, x.tag, t(0));
    await scan(future, x.tag, t(1));
    expect((await api('DELETE', `/locations/${doomed.id}`)).status).toBe(204);
    expect((await history(x.id)).data.map((v) => [v.location_id, v.location_external_key])).toEqual([
      [future.id, null],
      [doomed.id, null],
    ]);
  });

  it('errors: bad from/to, sort, limit, path ids, a missing or deleted asset, another org, scopes', async () => {
    const x = await asset();
    expect(await api('GET', `/assets/${x.id}/history?from=yesterday`).then((r) => (r.body as { error: { fields: unknown[] } }).error.fields)).toEqual([
      { field: 'from', code: 'invalid_value', message: "Invalid 'from' timestamp; expected RFC 3339" },
    ]);
    expect(fieldCodes(await api('GET', `/assets/${x.id}/history?to=2026-13-01T00:00:00Z`))).toEqual([['to', 'invalid_value']]);
    expect(fieldCodes(await api('GET', `/assets/${x.id}/history?sort=location_id`))).toEqual([['sort', 'invalid_value']]);
    expect(fieldCodes(await api('GET', `/assets/${x.id}/history?limit=201&offset=-1`))).toEqual([
      ['limit', 'too_large'],
      ['offset', 'too_small'],
    ]);
    expect(fieldCodes(await api('GET', `/assets/${x.id}/history?unknown=1`))).toEqual([['unknown', 'unknown_field']]);
    expect(fieldCodes(await api('GET', '/assets/2147483648/history'))).toEqual([['asset_id', 'too_large']]);
    expect(fieldCodes(await api('GET', '/assets/0/history'))).toEqual([['asset_id', 'too_small']]);
    expect((await api('GET', '/assets/2147483647/history')).status).toBe(404);
    const other = client(svc.apiUrl, (await mintApiKey(svc.service.ctx, { orgId: (await createOrg(svc.service.ctx, 'x')).id, scopes: ['tracking:read'] })).token);
    expect((await other('GET', `/assets/${x.id}/history`)).status).toBe(404);
    const readOnly = client(svc.apiUrl, (await mintApiKey(svc.service.ctx, { orgId, scopes: ['assets:read', 'locations:read'] })).token);
    const forbidden = await readOnly('GET', `/assets/${x.id}/history`);
    expect(forbidden.status).toBe(403);
    expect((forbidden.body as { error: { detail: string } }).error.detail).toBe('Missing required scope: tracking:read');
    expect((await api('DELETE', `/assets/${x.id}`)).status).toBe(204);
    expect((await api('GET', `/assets/${x.id}/history`)).status).toBe(404);
    const head = await api('HEAD', '/reports/asset-locations');
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
    expect(head.headers.get('content-type')).toMatch(/^application\/json/);
    const post = await api('POST', '/reports/asset-locations', { body: {} });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
  });
});

describe('GET /reports/asset-locations', () => {
  it('one row per scanned asset: its documented fields and dwell_started_at; filters; sort; paging; scoped to effective, existing assets', async () => {
    const org = (await createOrg(svc.service.ctx, 'report')).id;
    const own = client(svc.apiUrl, (await mintApiKey(svc.service.ctx, { orgId: org, scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read'] })).token);
    const put = handheld(svc, (await mintApiKey(svc.service.ctx, { orgId: org, scopes: ['scans:write'] })).token);
    const loc = async () => (await own<{ data: Loc }>('POST', '/locations', { body: { name: 'L', external_key: unique('RLOC') } })).body.data;
    const mk = async (key: string, extra: Record<string, unknown> = {}) => {
      const tag = unique('E28');
      const created = (await own<{ data: { id: number; external_key: string } }>('POST', '/assets', { body: { name: 'A', external_key: key, tags: [{ tag_type: 'rfid', value: tag }], ...extra } })).body.data;
      return { ...created, tag };
    };
    const at = async (l: Loc, tag: string, when: string) =>
      expect((await put({ submission_id: randomUUID(), device_id: 'h', location: { id: l.id }, reads: [{ tag_type: 'rfid', value: tag, observed_at: when }] })).status).toBe(202);
    const [l1, l2] = [await loc(), await loc()];
    const a = await mk('R-A');
    const b = await mk('R-B');
    const c = await mk('R-C');
    await mk('R-NEVER-SCANNED');
    const future = await mk('R-FUTURE');
    await at(l1, a.tag, t(0));
    await at(l2, a.tag, t(3));
    await at(l2, a.tag, t(4));
    await at(l1, b.tag, t(2));
    await at(l2, c.tag, t(1));
    await at(l1, future.tag, t(5));
    expect((await own('PATCH', `/assets/${future.id}`, { body: { valid_from: '2999-01-01T00:00:00Z' } })).status).toBe(200);
    const get = async (query = '') => {
      const reply = await own<ListPage<ReportRow>>('GET', `/reports/asset-locations${query}`);
      expect(reply.status, reply.text).toBe(200);
      return reply.body;
    };
    const all = await get();
    expect(all.total_count).toBe(3);
    expect(all.data).toEqual([
      { asset_id: a.id, asset_external_key: 'R-A', location_id: l2.id, location_external_key: l2.external_key, asset_deleted_at: null, asset_last_seen: t(4), dwell_started_at: t(3) },
      { asset_id: b.id, asset_external_key: 'R-B', location_id: l1.id, location_external_key: l1.external_key, asset_deleted_at: null, asset_last_seen: t(2), dwell_started_at: t(2) },
      { asset_id: c.id, asset_external_key: 'R-C', location_id: l2.id, location_external_key: l2.external_key, asset_deleted_at: null, asset_last_seen: t(1), dwell_started_at: t(1) },
    ]);
    const keys = async (query: string) => (await get(query)).data.map((r) => r.asset_external_key);
    expect(await keys('?sort=asset_external_key')).toEqual(['R-A', 'R-B', 'R-C']);
    expect(await keys('?sort=-asset_external_key&limit=2')).toEqual(['R-C', 'R-B']);
    expect(await keys('?sort=asset_last_seen&offset=1')).toEqual(['R-B', 'R-A']);
    expect(await keys(`?location_id=${l2.id}`)).toEqual(['R-A', 'R-C']);
    expect(await keys(`?location_external_key=${l1.external_key}`)).toEqual(['R-B']);
    expect(await keys(`?asset_id=${b.id}`)).toEqual(['R-B']);
    expect(await keys('?asset_external_key=R-C')).toEqual(['R-C']);
    expect(await keys('?asset_external_key=R-NEVER-SCANNED')).toEqual([]);
    expect((await get('?location_external_key=NOWHERE')).total_count).toBe(0);
    // Soft-deleted assets leave the default report; include_deleted brings them back.
    expect((await own('DELETE', `/assets/${c.id}`)).status).toBe(204);
    expect(await keys('')).toEqual(['R-A', 'R-B']);
    const withDeleted = await get('?include_deleted=true&sort=asset_external_key');
    expect(withDeleted.data.map((r) => r.asset_external_key)).toEqual(['R-A', 'R-B', 'R-C']);
    expect(withDeleted.data[2]!.asset_deleted_at).toMatch(/Z$/);
    // With no existing asset placed there, its location can go: the row keeps location_id, not its key.
    await at(l1, a.tag, t(6));
    expect((await own('DELETE', `/locations/${l2.id}`)).status).toBe(204);
    const row = (await get('?include_deleted=true&asset_external_key=R-C')).data[0]!;
    expect(row).toMatchObject({ location_id: l2.id, location_external_key: null });
    // A deleted asset's tags are retired: its later reads place nothing.
    const late = await put({ submission_id: randomUUID(), device_id: 'h', location: { id: l1.id }, reads: [{ tag_type: 'rfid', value: c.tag }] });
    expect(late.body.data).toEqual({ accepted: 0, unknown: 1, duplicate: false });
  });

  it('total_count counts the rows the report shows, whatever mix of deleted and windowed assets (random states)', async () => {
    // The whole report's total is the projection's count of located assets less the hidden ones
    // (queries.ts): checked here against the rows themselves, over random mixes.
    const rnd = (() => {
      let seed = 0x5eed;
      return () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
    })();
    const org = (await createOrg(svc.service.ctx, 'report-counts')).id;
    const own = client(svc.apiUrl, (await mintApiKey(svc.service.ctx, { orgId: org, scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read'] })).token);
    const put = handheld(svc, (await mintApiKey(svc.service.ctx, { orgId: org, scopes: ['scans:write'] })).token);
    const l = (await own<{ data: Loc }>('POST', '/locations', { body: { name: 'L', external_key: unique('CLOC') } })).body.data;
    const windows = [
      {},
      { valid_from: '2999-01-01T00:00:00Z' },
      { valid_from: '2000-01-01T00:00:00Z', valid_to: '2001-01-01T00:00:00Z' },
      { valid_from: '2000-01-01T00:00:00Z', valid_to: '2999-01-01T00:00:00Z' },
      { valid_to: '2999-01-01T00:00:00Z' },
    ];
    const expected = { existing: 0, all: 0 };
    for (let i = 0; i < 30; i++) {
      const tag = unique('E28');
      const created = await own<{ data: { id: number } }>('POST', '/assets', { body: { name: 'A', external_key: unique('CNT'), tags: [{ tag_type: 'rfid', value: tag }] } });
      expect(created.status, created.text).toBe(201);
      const id = created.body.data.id;
      const scanned = rnd() < 0.8;
      if (scanned) expect((await put({ submission_id: randomUUID(), device_id: 'h', location: { id: l.id }, reads: [{ tag_type: 'rfid', value: tag, observed_at: t(i % 60) }] })).status).toBe(202);
      const window = windows[Math.floor(rnd() * windows.length)]!;
      if (Object.keys(window).length > 0) expect((await own('PATCH', `/assets/${id}`, { body: window })).status).toBe(200);
      const deleted = rnd() < 0.3;
      if (deleted) expect((await own('DELETE', `/assets/${id}`)).status).toBe(204);
      const effective = window === windows[0] || window === windows[3] || window === windows[4];
      if (scanned && effective) {
        expected.all++;
        if (!deleted) expected.existing++;
      }
      if (i % 10 === 9) {
        for (const [scope, count] of [['', expected.existing], ['&include_deleted=true', expected.all]] as const) {
          const page = (await own<ListPage<ReportRow>>('GET', `/reports/asset-locations?limit=200${scope}`)).body;
          expect(page.data).toHaveLength(count);
          expect(page.total_count, scope).toBe(count);
          expect((await own<ListPage<ReportRow>>('GET', `/reports/asset-locations?limit=1${scope}`)).body.total_count, scope).toBe(count);
        }
      }
    }
  });

  it('query errors: ambiguous pairs, unknown keys, bad sort, id limits, repeated keys, scope', async () => {
    expect(fieldCodes(await api('GET', '/reports/asset-locations?location_id=1&location_external_key=X'))).toEqual([
      ['location_id', 'ambiguous_fields'],
      ['location_external_key', 'ambiguous_fields'],
    ]);
    expect(fieldCodes(await api('GET', '/reports/asset-locations?asset_id=1&asset_external_key=X'))).toEqual([
      ['asset_id', 'ambiguous_fields'],
      ['asset_external_key', 'ambiguous_fields'],
    ]);
    const sort = await api('GET', '/reports/asset-locations?sort=name');
    expect(fieldCodes(sort)).toEqual([['sort', 'invalid_value']]);
    expect((sort.body as { error: { fields: Array<{ message: string }> } }).error.fields[0]!.message).toBe('unknown sort field: name');
    expect(fieldCodes(await api('GET', '/reports/asset-locations?location_id=2147483648'))).toEqual([['location_id', 'too_large']]);
    expect(fieldCodes(await api('GET', '/reports/asset-locations?asset_external_key=a.b'))).toEqual([['asset_external_key', 'invalid_value']]);
    expect(fieldCodes(await api('GET', '/reports/asset-locations?include_deleted=yes'))).toEqual([['include_deleted', 'invalid_value']]);
    expect(fieldCodes(await api('GET', '/reports/asset-locations?asset_id=1&asset_id=2'))).toEqual([['asset_id', 'invalid_value']]);
    expect(fieldCodes(await api('GET', '/reports/asset-locations?limit=0&q=x'))).toEqual([
      ['limit', 'too_small'],
      ['q', 'unknown_field'],
    ]);
    const assetsOnly = client(svc.apiUrl, (await mintApiKey(svc.service.ctx, { orgId, scopes: ['assets:read'] })).token);
    expect((await assetsOnly('GET', '/reports/asset-locations')).status).toBe(403);
  });
});

describe('location delete and placed assets', () => {
  it('a delete racing scans that place an asset there never leaves a deleted location with an existing asset placed at it', async () => {
    const outcomes = { deleted: 0, refused: 0 };
    for (let round = 0; round < 20; round++) {
      const l = await location();
      const x = await asset();
      const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));
      const [deleted, scanned] = await Promise.all([
        delay(Math.random() * 6).then(() => api('DELETE', `/locations/${l.id}`)),
        submit({ submission_id: randomUUID(), device_id: 'h', location: { id: l.id }, reads: [{ tag_type: 'rfid', value: x.tag }] }),
      ]);
      const view = (await api<{ data: { location_id: number | null } }>('GET', `/assets/${x.id}`)).body.data;
      const locationExists = (await api('GET', `/locations/${l.id}`)).status === 200;
      if (deleted.status === 204) {
        outcomes.deleted++;
        expect(locationExists).toBe(false);
        // The scan either came first (then the delete could not have gone through) or lost.
        expect(scanned.status === 400 || scanned.body.data?.accepted === 0, JSON.stringify(scanned.body)).toBe(true);
        expect(view.location_id).toBeNull();
      } else {
        outcomes.refused++;
        expect(deleted.status).toBe(409);
        expect((deleted.body as { error: { detail: string } }).error.detail).toBe(
          'location has assets placed at it; move or remove them before deleting (cascade is not supported)',
        );
        expect(locationExists).toBe(true);
        expect(view.location_id).toBe(l.id);
      }
    }
    expect(outcomes.deleted + outcomes.refused).toBe(20);
  });
});
