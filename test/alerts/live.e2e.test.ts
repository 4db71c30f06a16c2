import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { scanner } from '../support/scans.js';
import { client } from '../master-data/http.js';
import { SseClient, signedInUser } from '../operator/sse-client.js';
import type { AppClient } from '../people/app-client.js';
import { ALERTS_CHANGED_CHANNEL } from '../../projections/alerts/notice.js';

/**
 * The Alerts inbox's live notices (docs/web-app.md "Live alerts"): an `alerts` event on
 * /app/api/live/alerts once the `alerts` projection committed a batch that raised, acknowledged
 * or resolved an alert of the stream's organization; none for another organization's alerts, and
 * none for a batch written to a schema other than the current read model's (a rebuild's).
 */

let svc: TestService;
const streams: SseClient[] = [];

beforeAll(async () => {
  svc = await startTestService('alerts_live');
});
afterAll(async () => {
  for (const stream of streams) stream.close();
  await svc?.stop();
});

async function openAlerts(user: AppClient): Promise<SseClient> {
  const stream = await SseClient.open(`${user.origin}/app/api/live/alerts`, user.cookie ? { cookie: user.cookie } : {});
  streams.push(stream);
  if (stream.status === 200) await stream.until(() => stream.events.some((e) => e.event === 'ready'), 10_000, 'the ready event');
  return stream;
}

async function orgWithZone(label: string) {
  const ctx = svc.service.ctx;
  const orgId = (await createOrg(ctx, `${label}-${Math.random()}`)).id;
  const api = client(svc.apiUrl, (await mintApiKey(ctx, { orgId, scopes: ['alerts:read', 'alerts:write', 'assets:write', 'locations:write'] })).token);
  const cage = (await api<{ data: { id: number } }>('POST', '/locations', { body: { name: 'Cage', external_key: 'CAGE' } })).body.data.id;
  const dock = (await api<{ data: { id: number } }>('POST', '/locations', { body: { name: 'Dock', external_key: 'DOCK' } })).body.data.id;
  await api('POST', '/assets', { body: { name: 'Drill', external_key: 'DRILL', tags: [{ tag_type: 'barcode', value: `DRILL-${orgId}` }] } });
  const rule = (await api<{ data: { id: number } }>('POST', '/alert-rules', { body: { name: 'Left the cage', kind: 'left', location_id: cage } })).body.data.id;
  const scans = await scanner(svc, orgId);
  const viewer = await signedInUser(ctx, svc.apiUrl, orgId, 'viewer');
  return { orgId, api, cage, dock, rule, scans, viewer, tag: `DRILL-${orgId}` };
}

describe('live alerts: the notices of the Alerts inbox', () => {
  it('a raised alert and its acknowledgement each reach the organization\'s streams, not another organization\'s', async () => {
    const a = await orgWithZone('a');
    const b = await orgWithZone('b');
    const streamA = await openAlerts(a.viewer);
    const streamB = await openAlerts(b.viewer);
    expect(streamA.status).toBe(200);
    expect(streamA.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(streamA.of('ready')).toEqual([{ org_id: a.orgId, heartbeat_seconds: 15 }]);

    const now = Date.now();
    await a.scans.scan({ id: a.cage }, [{ tag_type: 'barcode', value: a.tag, observed_at: new Date(now - 2000).toISOString() }]);
    // Entering the zone raises nothing for a `left` rule: no notice either, the batch changed no alert.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(streamA.of('alerts')).toEqual([]);
    const sent = performance.now();
    await a.scans.scan({ id: a.dock }, [{ tag_type: 'barcode', value: a.tag, observed_at: new Date(now - 1000).toISOString() }]);
    await streamA.until(() => streamA.of('alerts').length >= 1, 10_000, 'the notice of the raised alert');
    const noticed = streamA.events.find((e) => e.event === 'alerts')!.at;
    const list = await a.api<{ data: Array<{ id: string; status: string }> }>('GET', '/alerts');
    // The notice comes after the commit: the alert is there to read.
    expect(list.body.data.map((x) => [x.id, x.status])).toEqual([[expect.stringMatching(new RegExp(`^${a.rule}-`)), 'open']]);
    console.info(`live alerts: a notice ${Math.round(noticed - sent)} ms after the read was submitted`);

    const before = streamA.of('alerts').length;
    expect((await a.api('POST', `/alerts/${list.body.data[0]!.id}/acknowledge`)).status).toBe(200);
    await streamA.until(() => streamA.of('alerts').length > before, 10_000, 'the notice of the acknowledgement');
    expect((await a.api<{ data: { status: string } }>('GET', `/alerts/${list.body.data[0]!.id}`)).body.data.status).toBe('resolved');
    // Another organization's stream heard of none of it.
    expect(streamB.of('alerts')).toEqual([]);
    // Nor does a reads stream carry alert notices, or an alerts stream reads.
    expect(streamA.of('read')).toEqual([]);
  });

  it('a notice of another schema (a rebuild\'s) is not forwarded; one of the current read model is, to the organizations it names', async () => {
    const a = await orgWithZone('c');
    const b = await orgWithZone('d');
    const streamA = await openAlerts(a.viewer);
    const streamB = await openAlerts(b.viewer);
    const pool = svc.service.ctx.pool;
    const { rows } = await pool.query<{ schema: string }>('SELECT current_schema() AS schema');
    await pool.query('SELECT pg_notify($1, $2)', [ALERTS_CHANGED_CHANNEL, `rebuild_shadow ${a.orgId},${b.orgId}`]);
    await pool.query('SELECT pg_notify($1, $2)', [ALERTS_CHANGED_CHANNEL, `${rows[0]!.schema} ${b.orgId}`]);
    await streamB.until(() => streamB.of('alerts').length === 1, 10_000, 'the notice of the current schema');
    // Notifications arrive in order: had the shadow's been forwarded, A would have it by now.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(streamA.of('alerts')).toEqual([]);
    expect(streamB.of('alerts')).toHaveLength(1);
    await pool.query('SELECT pg_notify($1, $2)', [ALERTS_CHANGED_CHANNEL, `${rows[0]!.schema} *`]);
    await streamA.until(() => streamA.of('alerts').length === 1, 10_000, 'the notice to every organization');
    await streamB.until(() => streamB.of('alerts').length === 2, 10_000, 'the notice to every organization');
  });

  it('signed out: 401, and no stream opens', async () => {
    const stream = await SseClient.open(`${new URL(svc.apiUrl).origin}/app/api/live/alerts`, {});
    expect(stream.status).toBe(401);
  });
});
