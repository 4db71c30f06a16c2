import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey, personWithToken } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';

/**
 * The alert rules API (docs/api.md "Alerts"): validation codes exactly as documented, merge patch
 * judged as a create, the per-organization limit decided on the rules' stream under real parallel
 * requests, tenancy, scopes, member roles, 405 and HEAD, and the audit entries.
 */

let svc: TestService;

beforeAll(async () => {
  svc = await startTestService('alert_rules', { ROLES: 'api,projector' });
});
afterAll(async () => {
  await svc?.stop();
});

const ALL = ['alerts:read', 'alerts:write', 'assets:read', 'assets:write', 'locations:read', 'locations:write', 'audit:read'];

async function orgApi(scopes = ALL) {
  const ctx = svc.service.ctx;
  const orgId = (await createOrg(ctx, `org-${Math.random()}`)).id;
  const key = await mintApiKey(ctx, { orgId, scopes });
  const api = client(svc.apiUrl, key.token);
  const zone = await api<{ data: { id: number } }>('POST', '/locations', { body: { name: 'Cage', external_key: 'CAGE' } });
  const asset = await api<{ data: { id: number } }>('POST', '/assets', { body: { name: 'Drill' } });
  expect(zone.status, zone.text).toBe(201);
  expect(asset.status, asset.text).toBe(201);
  return { orgId, api, keyId: key.id, zoneId: zone.body.data.id, assetId: asset.body.data.id };
}

type Field = { field: string; code: string; params?: Record<string, unknown> };

async function fieldsOf(reply: Promise<{ status: number; body: { error?: { type: string; fields?: Field[] } }; text: string }>): Promise<Array<[string, string]>> {
  const got = await reply;
  expect(got.status, got.text).toBe(400);
  expect(got.body.error!.type).toBe('validation_error');
  return got.body.error!.fields!.map((f) => [f.field, f.code]);
}

describe('alert rules: the API', () => {
  it('create (201, Location), read, list, verbatim round trip, merge patch, delete (204, then 404)', async () => {
    const { api, zoneId, assetId } = await orgApi();
    const created = await api<{ data: Record<string, unknown> & { id: number; updated_at: string } }>('POST', '/alert-rules', {
      body: { name: 'Drill left the cage', kind: 'left', location_external_key: 'CAGE', asset_ids: [assetId] },
    });
    expect(created.status, created.text).toBe(201);
    const id = created.body.data.id;
    expect(created.headers.get('location')).toBe(`/api/v1/alert-rules/${id}`);
    expect(created.body.data).toEqual({
      id,
      name: 'Drill left the cage',
      kind: 'left',
      location_id: zoneId,
      location_external_key: 'CAGE',
      threshold_seconds: null,
      asset_ids: [assetId],
      is_active: true,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      updated_at: created.body.data.created_at,
    });
    const view = created.body.data;
    expect((await api('GET', `/alert-rules/${id}`)).body).toEqual({ data: view });
    expect((await api('GET', '/alert-rules')).body).toEqual({ data: [view], limit: 50, offset: 0, total_count: 1 });

    const same = await api<{ data: Record<string, unknown> }>('PATCH', `/alert-rules/${id}`, { body: view });
    expect(same.status, same.text).toBe(200);
    expect(same.body.data).toEqual(view);

    const patched = await api<{ data: Record<string, unknown> }>('PATCH', `/alert-rules/${id}`, { body: { kind: 'dwell_exceeded', threshold_seconds: 7200, asset_ids: null, is_active: false } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.data).toMatchObject({ kind: 'dwell_exceeded', threshold_seconds: 7200, asset_ids: null, is_active: false, name: 'Drill left the cage' });
    expect(Date.parse(patched.body.data.updated_at as string)).toBeGreaterThanOrEqual(Date.parse(view.updated_at));

    expect(await fieldsOf(api('PATCH', `/alert-rules/${id}`, { body: { id: id + 1, created_at: '2000-01-01T00:00:00Z' } }))).toEqual([
      ['id', 'read_only'],
      ['created_at', 'read_only'],
    ]);

    expect((await api('DELETE', `/alert-rules/${id}`)).status).toBe(204);
    for (const method of ['GET', 'PATCH', 'DELETE']) {
      const gone = await api<{ error: { type: string; detail: string } }>(method, `/alert-rules/${id}`, method === 'PATCH' ? { body: { name: 'x' } } : {});
      expect([gone.status, gone.body.error.type, gone.body.error.detail]).toEqual([404, 'not_found', 'Alert rule not found']);
    }
    expect((await api<{ total_count: number }>('GET', '/alert-rules')).body.total_count).toBe(0);
  });

  it('validation: kind, threshold per kind, the zone (exactly one form, existing), the assets (existing, distinct, 1..1000), unknown fields', async () => {
    const { api, zoneId, assetId } = await orgApi();
    const post = (body: Record<string, unknown>) => fieldsOf(api('POST', '/alert-rules', { body }));
    const base = { name: 'r', location_id: zoneId };
    expect(await post({ ...base, kind: 'vanished' })).toEqual([['kind', 'invalid_value']]);
    expect(await post({ ...base, kind: 'entered', threshold_seconds: 600 })).toEqual([['threshold_seconds', 'invalid_value']]);
    expect(await post({ ...base, kind: 'left', threshold_seconds: 600 })).toEqual([['threshold_seconds', 'invalid_value']]);
    expect(await post({ ...base, kind: 'dwell_exceeded' })).toEqual([['threshold_seconds', 'required']]);
    expect(await post({ ...base, kind: 'not_seen', threshold_seconds: null })).toEqual([['threshold_seconds', 'required']]);
    expect(await post({ ...base, kind: 'not_seen', threshold_seconds: 59 })).toEqual([['threshold_seconds', 'too_small']]);
    expect(await post({ ...base, kind: 'not_seen', threshold_seconds: 2_592_001 })).toEqual([['threshold_seconds', 'too_large']]);
    expect(await post({ name: 'r', kind: 'left' })).toEqual([['location_id', 'required']]);
    expect(await post({ ...base, kind: 'left', location_external_key: 'CAGE' })).toEqual([
      ['location_id', 'ambiguous_fields'],
      ['location_external_key', 'ambiguous_fields'],
    ]);
    expect(await post({ name: 'r', kind: 'left', location_external_key: 'NOPE' })).toEqual([['location_external_key', 'fk_not_found']]);
    expect(await post({ name: 'r', kind: 'left', location_id: 2_000_000_000 })).toEqual([['location_id', 'fk_not_found']]);
    expect(await post({ ...base, kind: 'left', asset_ids: [] })).toEqual([['asset_ids', 'too_short']]);
    expect(await post({ ...base, kind: 'left', asset_ids: Array.from({ length: 1001 }, (_, i) => i + 1) })).toEqual([['asset_ids', 'too_long']]);
    expect(await post({ ...base, kind: 'left', asset_ids: [assetId, assetId] })).toEqual([['asset_ids', 'invalid_value']]);
    expect(await post({ ...base, kind: 'left', asset_ids: [assetId, 2_000_000_000] })).toEqual([['asset_ids', 'fk_not_found']]);
    expect(await post({ ...base, kind: 'left', colour: 'red' })).toEqual([['colour', 'unknown_field']]);
    // Several at once, in the rule's field order.
    expect(await post({ name: 'r', kind: 'dwell_exceeded', location_external_key: 'NOPE', asset_ids: [2_000_000_000] })).toEqual([
      ['location_external_key', 'fk_not_found'],
      ['threshold_seconds', 'required'],
      ['asset_ids', 'fk_not_found'],
    ]);
    // Another organization's location is not this one's.
    const other = await orgApi();
    expect(await post({ name: 'r', kind: 'left', location_id: other.zoneId })).toEqual([['location_id', 'fk_not_found']]);
    expect(await post({ name: 'r', kind: 'left', location_id: zoneId, asset_ids: [other.assetId] })).toEqual([['asset_ids', 'fk_not_found']]);
    expect((await api<{ total_count: number }>('GET', '/alert-rules')).body.total_count).toBe(0);
  });

  it('PATCH judges the merged rule: a kind change without its threshold is refused, and nothing changes', async () => {
    const { api, zoneId } = await orgApi();
    const rule = await api<{ data: { id: number } }>('POST', '/alert-rules', { body: { name: 'dwell', kind: 'dwell_exceeded', location_id: zoneId, threshold_seconds: 600 } });
    const id = rule.body.data.id;
    expect(await fieldsOf(api('PATCH', `/alert-rules/${id}`, { body: { kind: 'entered' } }))).toEqual([['threshold_seconds', 'invalid_value']]);
    expect(await fieldsOf(api('PATCH', `/alert-rules/${id}`, { body: { threshold_seconds: null } }))).toEqual([['threshold_seconds', 'required']]);
    expect(await fieldsOf(api('PATCH', `/alert-rules/${id}`, { body: { location_external_key: 'NOPE' } }))).toEqual([['location_external_key', 'fk_not_found']]);
    expect(await fieldsOf(api('PATCH', `/alert-rules/${id}`, { body: { location_id: null } }))).toEqual([['location_id', 'invalid_value']]);
    // A null key names nothing: the zone stays.
    const nullKey = await api<{ data: { location_id: number } }>('PATCH', `/alert-rules/${id}`, { body: { location_external_key: null } });
    expect([nullKey.status, nullKey.body.data.location_id]).toEqual([200, zoneId]);
    const ok = await api<{ data: Record<string, unknown> }>('PATCH', `/alert-rules/${id}`, { body: { kind: 'entered', threshold_seconds: null } });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.data).toMatchObject({ kind: 'entered', threshold_seconds: null, location_id: zoneId });
  });

  it('at most 100 rules per organization, decided on the stream: 105 parallel creates give 100 rules and five 409s; a delete frees a place', async () => {
    const { api, zoneId } = await orgApi();
    const replies = await Promise.all(
      Array.from({ length: 105 }, (_, i) => api<{ data: { id: number }; error?: { type: string; detail: string } }>('POST', '/alert-rules', { body: { name: `r${i}`, kind: 'entered', location_id: zoneId } })),
    );
    const statuses = replies.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(100);
    const refused = replies.filter((r) => r.status === 409);
    expect(refused).toHaveLength(5);
    for (const r of refused) expect(r.body.error).toMatchObject({ type: 'conflict', detail: 'An organization has at most 100 alert rules; delete one first' });
    expect((await api<{ total_count: number }>('GET', '/alert-rules?limit=1')).body.total_count).toBe(100);
    const first = replies.find((r) => r.status === 201)!.body.data.id;
    expect((await api('DELETE', `/alert-rules/${first}`)).status).toBe(204);
    expect((await api('POST', '/alert-rules', { body: { name: 'again', kind: 'entered', location_id: zoneId } })).status).toBe(201);
  });

  it("tenancy, scopes, member roles (any member reads, admins write), 405 and HEAD", async () => {
    const a = await orgApi();
    const b = await orgApi();
    const rule = await a.api<{ data: { id: number } }>('POST', '/alert-rules', { body: { name: 'r', kind: 'left', location_id: a.zoneId } });
    const id = rule.body.data.id;
    expect((await b.api('GET', `/alert-rules/${id}`)).status).toBe(404);
    expect((await b.api('PATCH', `/alert-rules/${id}`, { body: { name: 'mine' } })).status).toBe(404);
    expect((await b.api('DELETE', `/alert-rules/${id}`)).status).toBe(404);

    const ctx = svc.service.ctx;
    const readOnly = client(svc.apiUrl, (await mintApiKey(ctx, { orgId: a.orgId, scopes: ['alerts:read'] })).token);
    expect((await readOnly('GET', `/alert-rules/${id}`)).status).toBe(200);
    const refused = await readOnly<{ error: { type: string; detail: string } }>('POST', '/alert-rules', { body: { name: 'r', kind: 'left', location_id: a.zoneId } });
    expect([refused.status, refused.body.error.detail]).toEqual([403, 'Missing required scope: alerts:write']);
    const none = client(svc.apiUrl, (await mintApiKey(ctx, { orgId: a.orgId, scopes: ['assets:read'] })).token);
    expect((await none('GET', '/alert-rules')).status).toBe(403);

    for (const role of ['viewer', 'operator'] as const) {
      const person = client(svc.apiUrl, (await personWithToken(ctx, a.orgId, role)).token);
      expect((await person('GET', '/alert-rules')).status, role).toBe(200);
      const write = await person<{ error: { detail: string } }>('PATCH', `/alert-rules/${id}`, { body: { name: 'x' } });
      expect([write.status, write.body.error.detail]).toEqual([403, `Your role (${role}) does not allow this`]);
    }
    const admin = client(svc.apiUrl, (await personWithToken(ctx, a.orgId, 'admin')).token);
    expect((await admin('PATCH', `/alert-rules/${id}`, { body: { name: 'by an admin' } })).status).toBe(200);

    const put = await a.api<{ error: { type: string } }>('PUT', `/alert-rules/${id}`, { body: {} });
    expect([put.status, put.headers.get('allow')]).toEqual([405, 'GET, HEAD, PATCH, DELETE']);
    expect((await a.api('PUT', '/alert-rules', { body: {} })).headers.get('allow')).toBe('GET, HEAD, POST');
    const head = await fetch(`${svc.apiUrl}/alert-rules/${id}`, { method: 'HEAD', headers: { authorization: `Bearer ${(await mintApiKey(ctx, { orgId: a.orgId, scopes: ['alerts:read'] })).token}` } });
    expect(head.status).toBe(200);
  });

  it('the audit log lists each change of a rule once, with its changes', async () => {
    const { api, zoneId, keyId } = await orgApi();
    const rule = await api<{ data: { id: number } }>('POST', '/alert-rules', { body: { name: 'r', kind: 'left', location_id: zoneId } });
    const id = rule.body.data.id;
    await api('PATCH', `/alert-rules/${id}`, { body: { name: 'renamed', is_active: true } });
    await api('DELETE', `/alert-rules/${id}`);
    const audit = await api<{ data: Array<{ action: string; resource_id: string; actor: { type: string; id: string }; changes: unknown }> }>('GET', '/audit-events?resource_type=alert_rule');
    expect(audit.status, audit.text).toBe(200);
    expect(audit.body.data.map((e) => [e.action, e.resource_id, e.actor.type, e.actor.id, e.changes])).toEqual([
      ['alert_rule.deleted', String(id), 'api_key', keyId, null],
      ['alert_rule.updated', String(id), 'api_key', keyId, { name: { from: 'r', to: 'renamed' } }],
      ['alert_rule.created', String(id), 'api_key', keyId, null],
    ]);
  });
});
