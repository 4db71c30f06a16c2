import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { handheld, type ListPage, type ReportRow } from '../support/scans.js';
import { startTestService, type TestService } from '../support/service.js';
import { client, errorOf, fieldCodes } from '../master-data/http.js';

/**
 * The report at an instant over real HTTP: `GET /reports/asset-locations?at=` (docs/api.md "The
 * report at an instant"): validation of `at`, rows as they stood in observed time (late reads
 * included, a visit running past `at` cut at its last read by then), the same filters, sort and
 * paging, and an `at` in the future answering exactly as the report of now.
 */

let svc: TestService;
let n = 0;
const unique = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${++n}`;

interface Loc {
  id: number;
  external_key: string;
}

beforeAll(async () => {
  svc = await startTestService('tracking_report_at');
});
afterAll(async () => {
  await svc?.stop();
});

/** An org of its own: its API client, and helpers to make locations and tagged assets and to scan them. */
async function freshOrg(name: string) {
  const ctx = svc.service.ctx;
  const orgId = (await createOrg(ctx, name)).id;
  const api = client(svc.apiUrl, (await mintApiKey(ctx, { orgId, scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read'] })).token);
  const submit = handheld(svc, (await mintApiKey(ctx, { orgId, scopes: ['scans:write'] })).token);
  return {
    orgId,
    api,
    async location(): Promise<Loc> {
      const reply = await api<{ data: Loc }>('POST', '/locations', { body: { name: 'L', external_key: unique('ATLOC') } });
      expect(reply.status, reply.text).toBe(201);
      return reply.body.data;
    },
    async asset(key = unique('ATAST')): Promise<{ id: number; external_key: string; tag: string }> {
      const tag = unique('E28');
      const reply = await api<{ data: { id: number; external_key: string } }>('POST', '/assets', { body: { name: 'A', external_key: key, tags: [{ tag_type: 'rfid', value: tag }] } });
      expect(reply.status, reply.text).toBe(201);
      return { ...reply.body.data, tag };
    },
    /** Reads of one tag at one location, at the given observed times, in one submission. */
    async scan(loc: Loc, tag: string, ...times: string[]): Promise<void> {
      const reply = await submit({ submission_id: randomUUID(), device_id: 'h', location: { id: loc.id }, reads: times.map((observed_at) => ({ tag_type: 'rfid', value: tag, observed_at })) });
      expect(reply.status, JSON.stringify(reply.body)).toBe(202);
    },
    async report(query = ''): Promise<ListPage<ReportRow>> {
      const reply = await api<ListPage<ReportRow>>('GET', `/reports/asset-locations${query}`);
      expect(reply.status, reply.text).toBe(200);
      return reply.body;
    },
  };
}

const t = (minute: number, second = 0) => `2026-05-25T10:${String(minute).padStart(2, '0')}:${String(second).padStart(2, '0')}.000Z`;
const at = (instant: string) => `?at=${encodeURIComponent(instant)}`;

describe('GET /reports/asset-locations?at=', () => {
  it('refuses a bad or out-of-range at with invalid_value and the contract messages', async () => {
    const { api } = await freshOrg('at-errors');
    const badFormat = "Invalid 'at' timestamp; expected RFC 3339";
    const outOfRange = 'at must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z';
    const cases: Array<[string, string]> = [
      ['yesterday', badFormat],
      ['', badFormat],
      ['2026-05-25', badFormat],
      ['2026-05-25T10:00:00', badFormat],
      ['2026-05-25 10:00:00Z', badFormat],
      ['2026-02-30T00:00:00Z', badFormat],
      ['2026-05-25T24:00:00Z', badFormat],
      ['2026-05-25T10:00:60Z', badFormat],
      ['2026-05-25T10:00:00+24:00', badFormat],
      ['1779703200000', badFormat],
      ['0000-12-31T23:59:59Z', outOfRange],
      ['0001-01-01T00:00:00+00:01', outOfRange],
      ['9999-12-31T23:59:59.999999-00:01', outOfRange],
    ];
    for (const [value, message] of cases) {
      const reply = await api('GET', `/reports/asset-locations${at(value)}`);
      expect(fieldCodes(reply), value).toEqual([['at', 'invalid_value']]);
      expect(errorOf(reply).fields![0]!.message, value).toBe(message);
    }
    // Reported with the other problems of the query, like any parameter; repeated: invalid_value.
    expect(fieldCodes(await api('GET', '/reports/asset-locations?at=now&limit=0&sort=name'))).toEqual([
      ['at', 'invalid_value'],
      ['limit', 'too_small'],
      ['sort', 'invalid_value'],
    ]);
    expect(fieldCodes(await api('GET', `/reports/asset-locations?at=${t(0)}&at=${t(1)}`))).toEqual([['at', 'invalid_value']]);
    // The range's ends are accepted.
    expect((await api('GET', `/reports/asset-locations${at('0001-01-01T00:00:00Z')}`)).status).toBe(200);
    expect((await api('GET', `/reports/asset-locations${at('9999-12-31T23:59:59.999999Z')}`)).status).toBe(200);
    // Scope: tracking:read, as without at.
    const ctx = svc.service.ctx;
    const orgId = (await createOrg(ctx, 'at-scope')).id;
    const assetsOnly = client(svc.apiUrl, (await mintApiKey(ctx, { orgId, scopes: ['assets:read', 'locations:read'] })).token);
    const forbidden = await assetsOnly('GET', `/reports/asset-locations${at(t(0))}`);
    expect(forbidden.status).toBe(403);
    expect(errorOf(forbidden).detail).toBe('Missing required scope: tracking:read');
  });

  it('rows as they stood in observed time: inclusive at, a visit cut at its last read by then, late reads, microseconds', async () => {
    const org = await freshOrg('at-rows');
    const [l1, l2, l3] = [await org.location(), await org.location(), await org.location()];
    const a = await org.asset();
    const b = await org.asset();
    await org.scan(l1, a.tag, t(0), t(1), t(4));
    await org.scan(l2, a.tag, t(6), t(8));
    await org.scan(l3, b.tag, t(2));
    const rowOf = async (instant: string, asset: { id: number }) => (await org.report(`${at(instant)}&asset_id=${asset.id}`)).data[0] ?? null;
    // Before any read: no row; the row appears at the first read, at exactly its instant.
    expect(await org.report(at('2026-05-25T09:59:59.999999Z'))).toEqual({ data: [], limit: 50, offset: 0, total_count: 0 });
    expect(await rowOf(t(0), a)).toMatchObject({ location_id: l1.id, location_external_key: l1.external_key, asset_last_seen: t(0), dwell_started_at: t(0) });
    expect(await rowOf(t(0), b)).toBeNull();
    // Inside the visit at l1 (reads at 0, 1 and 4): last seen is the last read by then, not at and not the visit's end.
    expect(await rowOf(t(2, 30), a)).toMatchObject({ location_id: l1.id, asset_last_seen: t(1), dwell_started_at: t(0) });
    expect(await rowOf(t(5), a)).toMatchObject({ location_id: l1.id, asset_last_seen: t(4), dwell_started_at: t(0) });
    expect(await rowOf(t(7), a)).toMatchObject({ location_id: l2.id, asset_last_seen: t(6), dwell_started_at: t(6) });
    // After the last read: the same row as the report of now.
    const now = await org.report();
    expect(await org.report(at(t(30)))).toEqual(now);
    expect(now.data.map((r) => [r.asset_id, r.location_id, r.asset_last_seen])).toEqual([
      [a.id, l2.id, t(8)],
      [b.id, l3.id, t(2)],
    ]);
    // A late read (observed at 3, received now) counts where it was observed: it splits the visit
    // at l1, the report at 3:30 has it, and the report of now is unchanged.
    await org.scan(l3, a.tag, t(3));
    expect(await rowOf(t(3, 30), a)).toMatchObject({ location_id: l3.id, asset_last_seen: t(3), dwell_started_at: t(3) });
    expect(await rowOf(t(2, 30), a)).toMatchObject({ location_id: l1.id, asset_last_seen: t(1), dwell_started_at: t(0) });
    expect(await rowOf(t(5), a)).toMatchObject({ location_id: l1.id, asset_last_seen: t(4), dwell_started_at: t(4) });
    expect(await org.report()).toEqual(now);
    // Microseconds count, whatever the offset the instant is written with.
    const c = await org.asset();
    await org.scan(l1, c.tag, '2026-05-25T10:20:00.000500Z');
    await org.scan(l2, c.tag, '2026-05-25T10:20:00.000501Z');
    expect(await rowOf('2026-05-25T10:20:00.000499Z', c)).toBeNull();
    expect(await rowOf('2026-05-25T12:20:00.0005+02:00', c)).toMatchObject({ location_id: l1.id, asset_last_seen: '2026-05-25T10:20:00.000Z' });
    expect(await rowOf('2026-05-25T10:20:00.000500999Z', c)).toMatchObject({ location_id: l1.id });
    expect(await rowOf('2026-05-25T05:20:00.000501-05:00', c)).toMatchObject({ location_id: l2.id });
    // Two reads at one instant at two locations: the one the log holds last wins, as for now.
    const d = await org.asset();
    await org.scan(l1, d.tag, t(40));
    await org.scan(l2, d.tag, t(40));
    expect(await rowOf(t(40), d)).toMatchObject({ location_id: l2.id, asset_last_seen: t(40), dwell_started_at: t(40) });
    expect((await org.report(`?asset_id=${d.id}`)).data[0]).toMatchObject({ location_id: l2.id });
  });

  it('the same filters, sort, paging and envelope as the report of now, applied to the rows at that instant', async () => {
    const org = await freshOrg('at-filters');
    const [l1, l2] = [await org.location(), await org.location()];
    const a = await org.asset('AT-A');
    const b = await org.asset('AT-B');
    const c = await org.asset('AT-C');
    const d = await org.asset('AT-D');
    // At 10:10 a is at l1 (seen 0-5), b at l2 (seen 3), c at l1 (seen 7), d not yet seen; all move later.
    await org.scan(l1, a.tag, t(0), t(5));
    await org.scan(l2, b.tag, t(3));
    await org.scan(l1, c.tag, t(7));
    await org.scan(l2, a.tag, t(12));
    await org.scan(l1, b.tag, t(13));
    await org.scan(l2, c.tag, t(14));
    await org.scan(l2, d.tag, t(15));
    const then = at(t(10));
    const keys = async (query: string) => (await org.report(`${then}${query}`)).data.map((r) => r.asset_external_key);
    const page = await org.report(then);
    expect(page).toEqual({
      data: [
        { asset_id: c.id, asset_external_key: 'AT-C', location_id: l1.id, location_external_key: l1.external_key, asset_deleted_at: null, asset_last_seen: t(7), dwell_started_at: t(7) },
        { asset_id: a.id, asset_external_key: 'AT-A', location_id: l1.id, location_external_key: l1.external_key, asset_deleted_at: null, asset_last_seen: t(5), dwell_started_at: t(0) },
        { asset_id: b.id, asset_external_key: 'AT-B', location_id: l2.id, location_external_key: l2.external_key, asset_deleted_at: null, asset_last_seen: t(3), dwell_started_at: t(3) },
      ],
      limit: 50,
      offset: 0,
      total_count: 3,
    });
    expect(Object.keys(page.data[0]!)).toEqual(['asset_id', 'asset_external_key', 'location_id', 'location_external_key', 'asset_deleted_at', 'asset_last_seen', 'dwell_started_at']);
    // Filters by location match the location at that instant, not the current one.
    expect(await keys(`&location_id=${l1.id}`)).toEqual(['AT-C', 'AT-A']);
    expect(await keys(`&location_external_key=${l2.external_key}`)).toEqual(['AT-B']);
    expect((await org.report(`?location_id=${l1.id}`)).data.map((r) => r.asset_external_key)).toEqual(['AT-B']);
    expect(await keys(`&asset_id=${a.id}`)).toEqual(['AT-A']);
    expect(await keys('&asset_external_key=AT-D')).toEqual([]);
    expect((await org.report(`${then}&asset_external_key=AT-D`)).total_count).toBe(0);
    expect((await org.report(`${then}&location_external_key=NOWHERE`)).total_count).toBe(0);
    // Sort and paging.
    expect(await keys('&sort=asset_last_seen')).toEqual(['AT-B', 'AT-A', 'AT-C']);
    expect(await keys('&sort=-asset_external_key')).toEqual(['AT-C', 'AT-B', 'AT-A']);
    expect(await keys(`&sort=location_external_key,-asset_external_key`)).toEqual(
      [['AT-C', l1.external_key], ['AT-A', l1.external_key], ['AT-B', l2.external_key]].sort((x, y) => (x[1]! < y[1]! ? -1 : x[1]! > y[1]! ? 1 : 0)).map((x) => x[0]),
    );
    const second = await org.report(`${then}&sort=asset_external_key&limit=1&offset=1`);
    expect(second).toMatchObject({ limit: 1, offset: 1, total_count: 3 });
    expect(second.data.map((r) => r.asset_external_key)).toEqual(['AT-B']);
    expect((await org.report(`${then}&offset=3`)).data).toEqual([]);
    // Deleted assets: out by default, back with include_deleted; a deleted location keeps its id, not its key.
    expect((await org.api('DELETE', `/assets/${c.id}`)).status).toBe(204);
    expect(await keys('')).toEqual(['AT-A', 'AT-B']);
    const withDeleted = await org.report(`${then}&include_deleted=true&asset_id=${c.id}`);
    expect(withDeleted.total_count).toBe(1);
    expect(withDeleted.data[0]!.asset_deleted_at).toMatch(/Z$/);
    // a and d are at l2 now: moving them away frees l2 to be deleted.
    await org.scan(l1, a.tag, t(16));
    await org.scan(l1, d.tag, t(16));
    expect((await org.api('DELETE', `/locations/${l2.id}`)).status).toBe(204);
    expect((await org.report(`${then}&asset_id=${b.id}`)).data[0]).toMatchObject({ location_id: l2.id, location_external_key: null });
    // Assets outside their validity window now are out, as in the report of now.
    expect((await org.api('PATCH', `/assets/${a.id}`, { body: { valid_from: '2999-01-01T00:00:00Z' } })).status).toBe(200);
    expect(await keys('')).toEqual(['AT-B']);
    expect(fieldCodes(await org.api('GET', `/reports/asset-locations${then}&location_id=1&location_external_key=X`))).toEqual([
      ['location_id', 'ambiguous_fields'],
      ['location_external_key', 'ambiguous_fields'],
    ]);
  });

  it('an at in the future answers as the report of now, reads observed ahead of the clock included', async () => {
    const org = await freshOrg('at-future');
    const [l1, l2] = [await org.location(), await org.location()];
    const a = await org.asset();
    const b = await org.asset();
    await org.scan(l1, a.tag, t(0));
    await org.scan(l1, b.tag, t(1));
    // A read observed two minutes ahead of the server's clock (up to five are accepted).
    const ahead = new Date(Date.now() + 120_000).toISOString();
    await org.scan(l2, a.tag, ahead);
    const now = await org.report();
    expect(now.data[0]).toMatchObject({ asset_id: a.id, location_id: l2.id, asset_last_seen: ahead });
    const inAMinute = new Date(Date.now() + 60_000).toISOString();
    for (const query of ['', `&location_id=${l1.id}`, `&asset_id=${a.id}`, '&sort=asset_external_key&limit=1&offset=1']) {
      const plain = await org.report(query.replace(/^&/, '?'));
      expect(await org.report(`${at(inAMinute)}${query}`), query).toEqual(plain);
      expect(await org.report(`${at('9999-12-31T23:59:59.999999Z')}${query}`), query).toEqual(plain);
    }
    // In the past, the read ahead of the clock is not there yet.
    const past = new Date(Date.now() - 1_000).toISOString();
    expect((await org.report(`${at(past)}&asset_id=${a.id}`)).data[0]).toMatchObject({ location_id: l1.id, asset_last_seen: t(0) });
  });
});
