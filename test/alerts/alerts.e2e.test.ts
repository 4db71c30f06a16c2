import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey, personWithToken } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';
import { alertStream } from '../../shared/domain/alerts/events.js';
import { scanner } from '../support/scans.js';

/**
 * The alerts API (docs/api.md "Alerts"): the list newest first, its filters and paging, 404s for
 * unknown, malformed and other organizations' ids, and acknowledge (one event under real
 * parallel requests, every answer the same alert; member roles).
 *
 * The alerts are the service's own: each organization has a `left` rule and a `dwell_exceeded`
 * (1 h, the saw only, made after the saw's first stay) rule on a cage, and handheld scans (observed on 2026-05-25) move a saw and a drill in and out
 * of it, so the `alerts` subscriber raises four alerts in observed time:
 * - d: the saw left the cage at 08:00 (`left`, open);
 * - b: the saw, back in the cage at 11:00, stayed past 12:00 (`dwell_exceeded`, open); raised once
 *   the clock passes 12:00 (at once: that is long past);
 * - a: the drill left the cage at 10:00 (`left`, open);
 * - c: the drill left it again at 12:00 (`left`), acknowledged, which resolves it; its reads come
 *   after b was raised, so of the two alerts raised at 12:00 it is the later.
 */

let svc: TestService;

beforeAll(async () => {
  svc = await startTestService('alerts_api', { ROLES: 'api,ingest,projector' });
});
afterAll(async () => {
  await svc?.stop();
});

const ALL = ['alerts:read', 'alerts:write', 'assets:read', 'assets:write', 'locations:read', 'locations:write', 'audit:read'];

type Alert = { id: string; status: string; rule_id: number; asset_id: number; raised_at: string };

async function orgWithAlerts() {
  const ctx = svc.service.ctx;
  const orgId = (await createOrg(ctx, `org-${Math.random()}`)).id;
  const key = await mintApiKey(ctx, { orgId, scopes: ALL });
  const api = client(svc.apiUrl, key.token);
  const zone = (await api<{ data: { id: number } }>('POST', '/locations', { body: { name: 'Cage', external_key: 'CAGE' } })).body.data.id;
  const dock = (await api<{ data: { id: number } }>('POST', '/locations', { body: { name: 'Dock', external_key: 'DOCK' } })).body.data.id;
  const drill = (await api<{ data: { id: number } }>('POST', '/assets', { body: { name: 'Drill', external_key: 'DRILL', tags: [{ tag_type: 'barcode', value: `DRILL-${orgId}` }] } })).body.data.id;
  const saw = (await api<{ data: { id: number } }>('POST', '/assets', { body: { name: 'Saw', external_key: 'SAW', tags: [{ tag_type: 'barcode', value: `SAW-${orgId}` }] } })).body.data.id;
  const left = (await api<{ data: { id: number } }>('POST', '/alert-rules', { body: { name: 'left', kind: 'left', location_id: zone } })).body.data.id;
  const scans = await scanner(svc, orgId);
  const at = (hhmm: string) => `2026-05-25T${hhmm}:00.000Z`;
  const move = (asset: 'DRILL' | 'SAW', where: number, hhmm: string) => scans.scan({ id: where }, [{ tag_type: 'barcode', value: `${asset}-${orgId}`, observed_at: at(hhmm) }]);
  const dwellId = left + 1;
  const ids = { a: `${left}-${drill}-1`, b: `${dwellId}-${saw}-1`, c: `${left}-${drill}-2`, d: `${left}-${saw}-1` };
  const alerts = async () => (await api<{ data: Alert[] }>('GET', '/alerts?limit=200')).body.data;
  const until = async (what: string, check: (list: Alert[]) => boolean) => {
    const deadline = Date.now() + 30_000;
    while (!check(await alerts())) {
      if (Date.now() > deadline) throw new Error(`${what}: not within 30 s; the alerts are ${JSON.stringify(await alerts())}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  await move('SAW', zone, '07:30');
  await move('SAW', dock, '08:00');
  // The dwell rule comes after the saw's first stay, and is the saw's only: each read arrives long
  // after it was made, so a stay whose leaving read has not arrived yet is past the hour at once.
  const dwell = (await api<{ data: { id: number } }>('POST', '/alert-rules', { body: { name: 'dwell', kind: 'dwell_exceeded', location_id: zone, threshold_seconds: 3600, asset_ids: [saw] } })).body.data.id;
  expect(dwell).toBe(dwellId);
  await move('SAW', zone, '11:00');
  await until('the saw\'s left and dwell alerts', (list) => [ids.b, ids.d].every((id) => list.some((x) => x.id === id)));
  for (const [where, hhmm] of [
    [zone, '09:30'],
    [dock, '10:00'],
    [zone, '11:30'],
    [dock, '12:00'],
  ] as const) {
    await move('DRILL', where, hhmm);
  }
  await until('the drill\'s two left alerts', (list) => [ids.a, ids.c].every((id) => list.some((x) => x.id === id)));
  expect((await api('POST', `/alerts/${ids.c}/acknowledge`)).status).toBe(200);
  await until('the drill\'s second alert resolved', (list) => list.find((x) => x.id === ids.c)?.status === 'resolved');
  expect((await alerts()).map((x) => x.id).sort()).toEqual(Object.values(ids).sort());
  return { orgId, api, keyId: key.id, zone, dock, drill, saw, left, dwell, ids };
}

describe('alerts: the API', () => {
  it('the alert view: its fields, current keys, and the list newest first (the later-raised of one instant first)', async () => {
    const { api, ids, left, drill, dock } = await orgWithAlerts();
    const one = await api<{ data: Record<string, unknown> }>('GET', `/alerts/${ids.a}`);
    expect(one.status, one.text).toBe(200);
    expect(one.body.data).toEqual({
      id: ids.a,
      rule_id: left,
      kind: 'left',
      asset_id: drill,
      asset_external_key: 'DRILL',
      location_id: dock,
      location_external_key: 'DOCK',
      raised_at: '2026-05-25T10:00:00.000Z',
      status: 'open',
      acknowledged_at: null,
      acknowledged_by: null,
      resolved_at: null,
    });
    expect(ids.a).toBe(`${left}-${drill}-1`);
    const list = await api<{ data: Alert[]; total_count: number; limit: number; offset: number }>('GET', '/alerts');
    expect(list.body.data.map((a) => a.id)).toEqual([ids.c, ids.b, ids.a, ids.d]);
    expect(list.body).toMatchObject({ total_count: 4, limit: 50, offset: 0 });
    // Keys are the current ones.
    await api('POST', `/assets/${drill}/rename`, { body: { external_key: 'DRILL-2' } });
    expect((await api<{ data: { asset_external_key: string } }>('GET', `/alerts/${ids.a}`)).body.data.asset_external_key).toBe('DRILL-2');
  });

  it('filters status, rule_id, asset_id, since and until (inclusive), with paging; bad values are validation errors', async () => {
    const { api, ids, left, dwell, saw } = await orgWithAlerts();
    const listed = async (query: string) => {
      const reply = await api<{ data: Alert[]; total_count: number }>('GET', `/alerts?${query}`);
      expect(reply.status, reply.text).toBe(200);
      return { ids: reply.body.data.map((a) => a.id), total: reply.body.total_count };
    };
    expect((await listed('status=open')).ids).toEqual([ids.b, ids.a, ids.d]);
    expect((await listed('status=resolved')).ids).toEqual([ids.c]);
    expect((await listed('status=acknowledged')).ids).toEqual([]);
    expect((await listed(`rule_id=${dwell}`)).ids).toEqual([ids.b]);
    expect((await listed(`rule_id=${left}&status=open`)).ids).toEqual([ids.a, ids.d]);
    expect((await listed(`asset_id=${saw}`)).ids).toEqual([ids.b, ids.d]);
    expect((await listed('since=2026-05-25T10:00:00Z&until=2026-05-25T12:00:00Z')).ids).toEqual([ids.c, ids.b, ids.a]);
    expect((await listed('since=2026-05-25T10:00:00.001Z')).ids).toEqual([ids.c, ids.b]);
    expect(await listed('limit=2&offset=1')).toEqual({ ids: [ids.b, ids.a], total: 4 });
    for (const [query, field, code] of [
      ['status=closed', 'status', 'invalid_value'],
      ['rule_id=0', 'rule_id', 'too_small'],
      ['since=yesterday', 'since', 'invalid_value'],
      ['colour=red', 'colour', 'unknown_field'],
    ]) {
      const bad = await api<{ error: { type: string; fields: Array<{ field: string; code: string }> } }>('GET', `/alerts?${query}`);
      expect([bad.status, bad.body.error.type, bad.body.error.fields[0]!.field, bad.body.error.fields[0]!.code], query).toEqual([400, 'validation_error', field, code]);
    }
  });

  it('an unknown, malformed or other organization\'s alert id is 404 on read and acknowledge; the list is the org\'s own', async () => {
    const a = await orgWithAlerts();
    const b = await orgWithAlerts();
    for (const id of [a.ids.a, '999999-1-1', 'nope', '1-2', '1-2-3-4', 'x'.repeat(300), '%E2%9C%93']) {
      for (const [method, path] of [['GET', `/alerts/${id}`], ['POST', `/alerts/${id}/acknowledge`]] as const) {
        const reply = await b.api<{ error: { type: string; detail: string } }>(method, path);
        expect([reply.status, reply.body.error?.type, reply.body.error?.detail], `${method} ${id}`).toEqual([404, 'not_found', 'Alert not found']);
      }
    }
    expect((await b.api<{ data: Alert[] }>('GET', '/alerts')).body.data.every((alert) => Object.values(b.ids).includes(alert.id))).toBe(true);
    expect((await a.api<{ data: Alert[] }>('GET', `/alerts/${a.ids.a}`)).status).toBe(200);
  });

  it('acknowledge under 20 parallel requests: one AlertAcknowledged on the alert\'s stream, one audit entry, every answer the same alert', async () => {
    const { api, orgId, keyId, ids } = await orgWithAlerts();
    const replies = await Promise.all(Array.from({ length: 20 }, () => api<{ data: Alert }>('POST', `/alerts/${ids.b}/acknowledge`)));
    for (const reply of replies) expect(reply.status, reply.text).toBe(200);
    expect(new Set(replies.map((r) => r.text)).size).toBe(1);
    expect(replies[0]!.body.data).toEqual((await api<{ data: Alert }>('GET', `/alerts/${ids.b}`)).body.data);
    const events = await svc.service.ctx.store.readStream(alertStream(orgId, ids.b));
    expect(events.map((e) => [e.type, e.data])).toEqual([
      ['AlertAcknowledged', { org_id: orgId, alert_id: ids.b, rule_id: expect.any(Number), asset_id: expect.any(Number), at: expect.any(String) }],
    ]);
    // Again, later: nothing more.
    expect((await api('POST', `/alerts/${ids.b}/acknowledge`)).status).toBe(200);
    expect(await svc.service.ctx.store.readStream(alertStream(orgId, ids.b))).toHaveLength(1);
    // (The setup acknowledged another alert, c: this one's entries only.)
    const audit = await api<{ data: Array<{ action: string; resource_type: string; resource_id: string; actor: { type: string; id: string } }> }>(
      'GET',
      `/audit-events?action=alert.acknowledged&resource_type=alert&resource_id=${ids.b}`,
    );
    expect(audit.body.data.map((e) => [e.action, e.resource_type, e.resource_id, e.actor.type, e.actor.id])).toEqual([['alert.acknowledged', 'alert', ids.b, 'api_key', keyId]]);
    // The subscriber projects it: a dwell alert acknowledged stays so (it is resolved when the saw leaves), by that key.
    const deadline = Date.now() + 10_000;
    let seen: { status: string; acknowledged_by: { type: string; id: string } | null } | undefined;
    while ((seen = (await api<{ data: { status: string; acknowledged_by: { type: string; id: string } | null } }>('GET', `/alerts/${ids.b}`)).body.data).status !== 'acknowledged') {
      if (Date.now() > deadline) throw new Error(`not acknowledged within 10 s: ${JSON.stringify(seen)}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(seen.acknowledged_by).toMatchObject({ type: 'api_key', id: keyId });
  });

  it('member roles: any member reads alerts; operators and admins acknowledge, viewers may not', async () => {
    const { orgId, ids } = await orgWithAlerts();
    const ctx = svc.service.ctx;
    const viewer = client(svc.apiUrl, (await personWithToken(ctx, orgId, 'viewer')).token);
    const operator = client(svc.apiUrl, (await personWithToken(ctx, orgId, 'operator')).token);
    expect((await viewer('GET', '/alerts')).status).toBe(200);
    expect((await viewer('GET', `/alerts/${ids.a}`)).status).toBe(200);
    const refused = await viewer<{ error: { detail: string } }>('POST', `/alerts/${ids.a}/acknowledge`);
    expect([refused.status, refused.body.error.detail]).toEqual([403, 'Your role (viewer) does not allow this']);
    expect((await viewer('GET', `/alerts/${ids.a}`)).status).toBe(200);
    const acknowledged = await operator('POST', `/alerts/${ids.a}/acknowledge`);
    expect(acknowledged.status, acknowledged.text).toBe(200);
    const readOnlyKey = client(svc.apiUrl, (await mintApiKey(ctx, { orgId, scopes: ['alerts:read'] })).token);
    const noScope = await readOnlyKey<{ error: { detail: string } }>('POST', `/alerts/${ids.d}/acknowledge`);
    expect([noScope.status, noScope.body.error.detail]).toEqual([403, 'Missing required scope: alerts:write']);
    const get = await readOnlyKey<{ error: { type: string } }>('DELETE', `/alerts/${ids.a}`);
    expect([get.status, get.headers.get('allow')]).toEqual([405, 'GET, HEAD']);
  });

  it('exports: alerts and rules answer text/csv with every row', async () => {
    const { ids, orgId } = await orgWithAlerts();
    const key = await mintApiKey(svc.service.ctx, { orgId, scopes: ['alerts:read'] });
    const csv = await fetch(`${svc.apiUrl}/alerts?status=open`, { headers: { authorization: `Bearer ${key.token}`, accept: 'text/csv' } });
    expect(csv.status).toBe(200);
    const lines = (await csv.text()).trim().split('\r\n');
    expect(lines[0]).toBe('id,rule_id,kind,asset_id,asset_external_key,location_id,location_external_key,raised_at,status,acknowledged_at,acknowledged_by.type,acknowledged_by.id,acknowledged_by.name,resolved_at');
    expect(lines.slice(1).map((l) => l.split(',')[0])).toEqual([ids.b, ids.a, ids.d]);
    const rules = await fetch(`${svc.apiUrl}/alert-rules`, { headers: { authorization: `Bearer ${key.token}`, accept: 'text/csv' } });
    expect(rules.status).toBe(200);
    expect((await rules.text()).split('\r\n')[0]).toBe('id,name,kind,location_id,location_external_key,threshold_seconds,asset_ids,is_active,created_at,updated_at');
  });
});
