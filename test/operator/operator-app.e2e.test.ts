import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg } from '../support/auth.js';
import { eventually, gateway, kafkaEnv } from '../support/kafka.js';
import { hex, unique } from '../support/reader-corpus.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';
import type { AppClient, Json } from '../people/app-client.js';
import { openLive, signedInUser, type SseClient } from './sse-client.js';

/**
 * The web application's operator endpoints over real HTTP (docs/web-app.md "Operator
 * endpoints"): readers and scan points registered through the app, reads published by a gateway
 * to a real Kafka broker, the live stream and the report; the refusals of members, of requests
 * without CSRF token or of another origin; an unknown read attached and read again.
 */

const SLOW = 120_000;
let svc: TestService;
let gw: Awaited<ReturnType<typeof gateway>>;
let topic: string;
let orgA: number;
let orgB: number;
let admin: AppClient;
let member: AppClient;
const streams: SseClient[] = [];

/** The contract's API as the page calls it: with the session token `POST /app/api/session-token` gives. */
async function apiOf(user: AppClient) {
  const token = (await user.request('POST', '/session-token')).body.data.token as string;
  return client(svc.apiUrl, token);
}

function publish(reader: string, reads: Array<{ point: string; epc: string; rssi?: number; at?: string }>) {
  return gw.publish(topic, reader, {
    reader_id: reader,
    reads: reads.map((r) => ({ capture_point: r.point, tag_type: 'rfid', value: r.epc, observed_at: r.at ?? new Date().toISOString(), rssi: r.rssi ?? -60 })),
  });
}

async function live(user: AppClient, query = ''): Promise<SseClient> {
  const stream = await openLive(user, query);
  streams.push(stream);
  return stream;
}

beforeAll(async () => {
  const env = await kafkaEnv('operator');
  topic = env.KAFKA_SCAN_TOPIC;
  svc = await startTestService('operator_app', env);
  gw = await gateway();
  orgA = (await createOrg(svc.service.ctx, 'Acme')).id;
  orgB = (await createOrg(svc.service.ctx, 'Globex')).id;
  admin = await signedInUser(svc.service.ctx, svc.apiUrl, orgA, 'admin');
  member = await signedInUser(svc.service.ctx, svc.apiUrl, orgA, 'operator');
}, SLOW);

afterAll(async () => {
  for (const stream of streams) stream.close();
  await gw?.close();
  await svc?.stop();
});

describe('readers and scan points through the app', () => {
  it(
    'register a reader, assign capture points by external key and by id, a read through Kafka reaches the live stream within a second and the report shows the asset there; unassign',
    async () => {
      const api = await apiOf(admin);
      const dock = (await api<Json>('POST', '/locations', { body: { name: 'Dock', external_key: unique('DOCK') } })).body.data;
      const yard = (await api<Json>('POST', '/locations', { body: { name: 'Yard', external_key: unique('YARD') } })).body.data;
      const epc = hex();
      const pallet = (await api<Json>('POST', '/assets', { body: { name: 'Pallet', external_key: unique('PALLET'), tags: [{ tag_type: 'rfid', value: epc }] } })).body.data;
      const reader = unique('dock-door');

      const registered = await admin.request('POST', '/readers', { reader_id: reader });
      expect(registered.status).toBe(200);
      expect(registered.body.data).toMatchObject({ reader_id: reader, org_id: orgA });
      // Again: nothing changes.
      expect((await admin.request('POST', '/readers', { reader_id: reader })).body.data).toEqual(registered.body.data);
      expect((await admin.request('GET', '/readers')).body.data).toEqual([{ reader_id: reader, org_id: orgA, registered_at: registered.body.data.registered_at }]);

      const byKey = await admin.request('POST', '/scan-points', { reader_id: reader, capture_point: `${reader}-1`, location: { external_key: dock.external_key } });
      expect(byKey).toMatchObject({ status: 200, body: { data: { reader_id: reader, capture_point: `${reader}-1`, location_id: dock.id, location_external_key: dock.external_key } } });
      const byId = await admin.request('POST', '/scan-points', { reader_id: reader, capture_point: `${reader}-2`, location: { id: yard.id } });
      expect(byId.body.data).toEqual({ reader_id: reader, capture_point: `${reader}-2`, location_id: yard.id, location_external_key: yard.external_key });
      expect((await admin.request('GET', `/scan-points?reader=${encodeURIComponent(reader)}`)).body.data).toEqual([byKey.body.data, byId.body.data]);

      const stream = await live(admin);
      expect(stream.status).toBe(200);
      expect(stream.headers['content-type']).toBe('text/event-stream; charset=utf-8');
      expect(stream.headers['cache-control']).toBe('no-store');
      expect(stream.headers['access-control-allow-origin']).toBeUndefined();
      const observedAt = new Date(Date.now() - 1000).toISOString();
      const sent = performance.now();
      await publish(reader, [{ point: `${reader}-1`, epc, rssi: -51, at: observedAt }]);
      await stream.until(() => stream.of('read').length >= 1, 5000);
      const arrived = stream.events.find((e) => e.event === 'read')!;
      // Within a second, by the fastest of three reads: a shared machine's load only ever adds
      // time to a read's way, never takes it away.
      const latencies = [arrived.at - sent];
      for (let more = 1; more <= 2; more++) {
        const next = performance.now();
        await publish(reader, [{ point: `${reader}-1`, epc, rssi: -51, at: new Date(Date.now() - 1000 + more).toISOString() }]);
        await stream.until(() => stream.of('read').length >= 1 + more, 5000);
        latencies.push(stream.events.filter((e) => e.event === 'read')[more]!.at - next);
      }
      expect(Math.min(...latencies)).toBeLessThan(1000);
      expect(stream.of('read')[0]).toEqual({
        source: 'fixed',
        reader_id: reader,
        capture_point: `${reader}-1`,
        device_id: null,
        tag_type: 'rfid',
        value: epc,
        asset: { id: pallet.id, external_key: pallet.external_key },
        location: { id: dock.id, external_key: dock.external_key },
        cause: null,
        observed_at: observedAt,
        rssi: -51,
        recorded_at: expect.any(String),
      });
      await eventually(async () => {
        const report = (await api<Json>('GET', '/reports/asset-locations')).body.data;
        expect(report.find((r: Json) => r.asset_id === pallet.id)).toMatchObject({ location_id: dock.id, location_external_key: dock.external_key });
      }, 5000);

      const unassigned = await admin.request('DELETE', `/scan-points/${encodeURIComponent(reader)}/${encodeURIComponent(`${reader}-2`)}`);
      expect(unassigned).toMatchObject({ status: 200, body: { data: { reader_id: reader, capture_point: `${reader}-2` } } });
      expect((await admin.request('GET', '/scan-points')).body.data.filter((p: Json) => p.reader_id === reader)).toEqual([byKey.body.data]);
      const again = await admin.request('DELETE', `/scan-points/${encodeURIComponent(reader)}/${encodeURIComponent(`${reader}-2`)}`);
      expect(again.status).toBe(404);
      expect(again.body.error).toMatchObject({ type: 'not_found', detail: `capture point ${reader}-2 of reader ${reader} is not assigned` });
    },
    SLOW,
  );

  it('the same refusals as the CLI: a reader of another organization, a location of none, both location forms, a reader of another organization to assign', async () => {
    const adminB = await signedInUser(svc.service.ctx, svc.apiUrl, orgB, 'admin');
    const reader = unique('gate');
    expect((await admin.request('POST', '/readers', { reader_id: reader })).status).toBe(200);
    const taken = await adminB.request('POST', '/readers', { reader_id: reader });
    expect(taken.status).toBe(409);
    expect(taken.body.error).toMatchObject({ type: 'conflict', detail: `reader ${reader} is already registered to organization ${orgA}` });
    expect((await adminB.request('GET', '/readers')).body.data).toEqual([]);

    const foreign = await adminB.request('POST', '/scan-points', { reader_id: reader, capture_point: 'p', location: { external_key: 'ANY' } });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.detail).toBe(`reader ${reader} is not registered in organization ${orgB}`);
    expect((await adminB.request('DELETE', `/scan-points/${reader}/p`)).status).toBe(404);

    const nowhere = await admin.request('POST', '/scan-points', { reader_id: reader, capture_point: 'p', location: { external_key: 'NOWHERE' } });
    expect(nowhere.status).toBe(400);
    expect(nowhere.body.error.fields).toEqual([{ field: 'location', code: 'fk_not_found', message: `no live location with external_key NOWHERE in organization ${orgA}` }]);
    const both = await admin.request('POST', '/scan-points', { reader_id: reader, capture_point: 'p', location: { external_key: 'X', id: 1 } });
    expect(both.status).toBe(400);
    expect(both.body.error.fields.map((f: Json) => f.code)).toEqual(['ambiguous_fields', 'ambiguous_fields']);
    const control = await admin.request('POST', '/readers', { reader_id: 'bad\u0001id' });
    expect(control.status).toBe(400);
    expect(control.body.error.fields[0].field).toBe('reader_id');
  });
});

describe('who may call', () => {
  it('a member: 403 on every reader and scan-point endpoint, the unknown reads and the live stream are theirs; no session: 401', async () => {
    for (const [method, path, body] of [
      ['GET', '/readers'],
      ['POST', '/readers', { reader_id: 'm-reader' }],
      ['GET', '/scan-points'],
      ['POST', '/scan-points', { reader_id: 'm-reader', capture_point: 'p', location: { id: 1 } }],
      ['DELETE', '/scan-points/m-reader/p'],
    ] as Array<[string, string, unknown?]>) {
      const answer = await member.request(method, path, body);
      expect(answer.status, `${method} ${path}`).toBe(403);
      expect(answer.body.error).toMatchObject({ type: 'forbidden', detail: 'Your role (operator) does not allow this' });
    }
    expect((await member.request('GET', '/scans/unknown')).status).toBe(200);
    const stream = await live(member);
    expect(stream.status).toBe(200);
    stream.close();

    const anonymous = await openLive({ origin: admin.origin, cookie: null } as AppClient);
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.error.type).toBe('unauthorized');
    expect((await member.request('GET', '/readers', undefined, {})).status).toBe(403);
  });

  it('CSRF: POST and DELETE without the token, with a wrong one, or from another origin are refused and change nothing; a stream asked from another origin is refused', async () => {
    const reader = unique('csrf');
    for (const options of [{ csrf: null }, { csrf: 'not-the-token' }, { origin: 'https://evil.example' }, { origin: null }]) {
      const post = await admin.request('POST', '/readers', { reader_id: reader }, options);
      expect(post.status, JSON.stringify(options)).toBe(403);
      const del = await admin.request('DELETE', `/scan-points/${reader}/p`, undefined, options);
      expect(del.status, JSON.stringify(options)).toBe(403);
      const assign = await admin.request('POST', '/scan-points', { reader_id: reader, capture_point: 'p', location: { id: 1 } }, options);
      expect(assign.status).toBe(403);
    }
    expect((await admin.request('GET', '/readers')).body.data.map((r: Json) => r.reader_id)).not.toContain(reader);
    const evil = await openLive(admin, '', { origin: 'https://evil.example' });
    expect(evil.status).toBe(403);
    expect(evil.body.error.detail).toBe("Origin https://evil.example is not this service's");
    const own = await live(admin, '', );
    expect(own.status).toBe(200);
    own.close();
  });
});

describe('reads that placed nothing', () => {
  it(
    'an unknown tag read: listed with its cause and shown live with it; attached through /api/v1 with a member’s session token; the next read places the asset in the report and on the stream',
    async () => {
      const api = await apiOf(admin);
      const dock = (await api<Json>('POST', '/locations', { body: { name: 'Dock', external_key: unique('DOCK') } })).body.data;
      const reader = unique('unknown-door');
      expect((await admin.request('POST', '/readers', { reader_id: reader })).status).toBe(200);
      expect((await admin.request('POST', '/scan-points', { reader_id: reader, capture_point: 'p1', location: { id: dock.id } })).status).toBe(200);
      const stream = await live(member, `?reader=${encodeURIComponent(reader)}`);
      const stray = hex();
      await publish(reader, [{ point: 'p1', epc: stray }, { point: 'p9', epc: stray }]);
      await stream.until(() => stream.of('read').length >= 2, 5000);
      const [first, second] = stream.of('read');
      expect(first).toMatchObject({ reader_id: reader, capture_point: 'p1', value: stray, asset: null, location: { id: dock.id, external_key: dock.external_key }, cause: 'unknown_tag' });
      expect(second).toMatchObject({ reader_id: reader, capture_point: 'p9', value: stray, asset: null, location: null, cause: 'unassigned_capture_point' });

      const unknown = await eventually(async () => {
        const rows = (await member.request('GET', '/scans/unknown')).body.data.filter((r: Json) => r.reader_id === reader || r.value === stray);
        expect(rows).toHaveLength(2);
        return rows;
      }, 5000);
      expect(unknown.find((r: Json) => r.cause === 'unknown_tag')).toMatchObject({ tag_type: 'rfid', value: stray, count: 1, attached_to: null });
      expect(unknown.find((r: Json) => r.cause === 'unassigned_capture_point')).toMatchObject({ reader_id: reader, capture_point: 'p9', count: 1 });

      // A member attaches the tag: session tokens pass every scope check of /api/v1 (docs/web-app.md).
      const memberApi = await apiOf(member);
      const crate = (await memberApi<Json>('POST', '/assets', { body: { name: 'Crate', external_key: unique('CRATE') } })).body.data;
      const attached = await memberApi<Json>('POST', `/assets/${crate.id}/tags`, { body: { tag_type: 'rfid', value: stray.toLowerCase() } });
      expect(attached.status).toBe(201);
      const listed = (await member.request('GET', '/scans/unknown')).body.data.find((r: Json) => r.cause === 'unknown_tag' && r.value === stray);
      expect(listed.attached_to).toEqual({ owner_type: 'asset', id: crate.id, external_key: crate.external_key });

      // Paged, largest count first: pages of one add up to the whole list, in its order.
      const whole = (await member.request('GET', '/scans/unknown?limit=1000')).body;
      expect(whole).toMatchObject({ limit: 1000, offset: 0, total_count: whole.data.length });
      const counts = whole.data.map((r: Json) => r.count);
      expect(counts).toEqual([...counts].sort((x: number, y: number) => y - x));
      const onebyone = [];
      for (let offset = 0; offset < whole.total_count; offset++) {
        const page = (await member.request('GET', `/scans/unknown?limit=1&offset=${offset}`)).body;
        expect(page).toMatchObject({ limit: 1, offset, total_count: whole.total_count });
        onebyone.push(...page.data);
      }
      expect(onebyone).toEqual(whole.data);
      expect((await member.request('GET', `/scans/unknown?offset=${whole.total_count}`)).body).toMatchObject({ data: [], total_count: whole.total_count });
      for (const bad of ['limit=0', 'limit=1001', 'limit=x', 'offset=-1', 'limit=1&limit=2']) {
        const refused = await member.request('GET', `/scans/unknown?${bad}`);
        expect([bad, refused.status, refused.body.error.fields[0].code]).toEqual([bad, 400, 'invalid_value']);
      }

      await publish(reader, [{ point: 'p1', epc: stray }]);
      await stream.until(() => stream.of('read').length >= 3, 5000);
      expect(stream.of('read')[2]).toMatchObject({ value: stray, asset: { id: crate.id, external_key: crate.external_key }, location: { id: dock.id }, cause: null });
      await eventually(async () => {
        const report = (await api<Json>('GET', '/reports/asset-locations')).body.data;
        expect(report.find((r: Json) => r.asset_id === crate.id)).toMatchObject({ location_id: dock.id });
      }, 5000);
    },
    SLOW,
  );
});
