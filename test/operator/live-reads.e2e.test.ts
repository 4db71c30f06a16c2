import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricsRegistry } from '../../services/ops/metrics.js';
import type { RunningService } from '../../services/service.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { eventually, gateway, kafkaEnv } from '../support/kafka.js';
import { hex, readerServices, unique } from '../support/reader-corpus.js';
import { client } from '../master-data/http.js';
import type { AppClient, Json } from '../people/app-client.js';
import { openLive, percentile, signedInUser, type SseClient } from './sse-client.js';

/**
 * The live stream of reads (docs/web-app.md "Live reads") across processes, as operations runs
 * them: one process ingests (Kafka and handheld) and projects, two others run only the api role
 * (no projector) and stream from the log on their own. Latency from publish to the event on a
 * stream, filters, tenancy, the end of a session, the bound per organization, and a client that
 * never reads.
 */

const SLOW = 180_000;
let db: TestDatabase;
const services = readerServices(() => db.url);
let worker: RunningService;
let apiOne: RunningService;
let apiTwo: RunningService;
let topic: string;
let gw: Awaited<ReturnType<typeof gateway>>;
const streams: SseClient[] = [];

interface Org {
  id: number;
  admin: AppClient;
  ingestToken: string;
  dock: { id: number; external_key: string };
  asset: { id: number; external_key: string; epc: string };
  reader: string;
}

async function orgWith(label: string, api: RunningService): Promise<Org> {
  const id = (await createOrg(worker.ctx, unique(label))).id;
  const admin = await signedInUser(api.ctx, api.urls.api!, id, 'admin');
  const token = (await admin.request('POST', '/session-token')).body.data.token as string;
  const v1 = client(api.urls.api!, token);
  const dock = (await v1<Json>('POST', '/locations', { body: { name: 'Dock', external_key: unique('DOCK') } })).body.data;
  const epc = hex();
  const asset = (await v1<Json>('POST', '/assets', { body: { name: 'Pallet', external_key: unique('PALLET'), tags: [{ tag_type: 'rfid', value: epc }] } })).body.data;
  const reader = unique(`${label}-reader`);
  expect((await admin.request('POST', '/readers', { reader_id: reader })).status).toBe(200);
  for (const point of ['p1', 'p2']) expect((await admin.request('POST', '/scan-points', { reader_id: reader, capture_point: point, location: { id: dock.id } })).status).toBe(200);
  const ingestToken = (await mintApiKey(worker.ctx, { orgId: id, scopes: ['scans:write'] })).token;
  return { id, admin, ingestToken, dock, asset: { id: asset.id, external_key: asset.external_key, epc }, reader };
}

async function live(user: AppClient, query = ''): Promise<SseClient> {
  const stream = await openLive(user, query);
  streams.push(stream);
  return stream;
}

/** A handheld submission to the worker's ingest listener. */
async function submit(org: Org, reads: Array<{ tag_type: string; value: string; observed_at?: string; rssi?: number }>): Promise<void> {
  const response = await fetch(`${worker.urls.ingest}/scans`, {
    method: 'POST',
    headers: { authorization: `Bearer ${org.ingestToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ submission_id: unique('sub'), device_id: 'handheld-7', location: { id: org.dock.id }, reads }),
  });
  expect(response.status).toBe(202);
}

function publish(reader: string, reads: Array<{ point: string; epc: string }>) {
  return gw.publish(topic, reader, { reader_id: reader, reads: reads.map((r) => ({ capture_point: r.point, tag_type: 'rfid', value: r.epc, observed_at: new Date().toISOString(), rssi: -60 })) });
}

async function metric(name: string, labels: Record<string, string> = {}): Promise<number> {
  const found = (await metricsRegistry.getMetricsAsJSON()).find((m) => m.name === name);
  return (found?.values ?? []).filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l)).reduce((sum, v) => sum + v.value, 0);
}

beforeAll(async () => {
  db = await createTestDatabase('operator_live');
  const env = await kafkaEnv('live');
  topic = env.KAFKA_SCAN_TOPIC;
  worker = await services.start(env, 'ingest,projector');
  apiOne = await services.start({}, 'api');
  apiTwo = await services.start({}, 'api');
  gw = await gateway();
}, SLOW);

afterAll(async () => {
  for (const stream of streams) stream.close();
  await gw?.close();
  await services.stopAll();
  await db?.drop();
});

describe('the live stream', () => {
  it(
    'two api processes without a projector each stream every read; 200 handheld reads, each on the stream well within a second of its publication (p50, p99 printed)',
    async () => {
      const org = await orgWith('latency', apiOne);
      const one = await live(org.admin);
      const other = await signedInUser(apiTwo.ctx, apiTwo.urls.api!, org.id, 'operator');
      const two = await live(other);
      const latencies: number[] = [];
      for (let i = 0; i < 200; i++) {
        const sent = performance.now();
        await submit(org, [{ tag_type: 'rfid', value: org.asset.epc, observed_at: new Date(Date.now() - 1000 + i).toISOString(), rssi: -40 - (i % 20) }]);
        await one.until(() => one.of('read').length > i, 5000);
        latencies.push(one.events.filter((e) => e.event === 'read')[i]!.at - sent);
      }
      await two.until(() => two.of('read').length >= 200, 5000);
      const p50 = percentile(latencies, 50);
      const p99 = percentile(latencies, 99);
      console.log(`live reads, handheld publish → event on a stream of another api process: p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${Math.max(...latencies).toFixed(1)} ms over ${latencies.length}`);
      expect(p99).toBeLessThan(1000);
      expect(one.of('read')[0]).toMatchObject({
        source: 'handheld',
        device_id: 'handheld-7',
        reader_id: null,
        capture_point: null,
        asset: { id: org.asset.id, external_key: org.asset.external_key },
        location: { id: org.dock.id, external_key: org.dock.external_key },
        cause: null,
        rssi: -40,
      });
      expect(two.of('read').map((r: Json) => r.observed_at)).toEqual(one.of('read').map((r: Json) => r.observed_at));
    },
    SLOW,
  );

  it(
    'filters by reader and capture point; the stream of another organization sees none of these reads; Kafka reads within a second',
    async () => {
      const a = await orgWith('tenant-a', apiOne);
      const b = await orgWith('tenant-b', apiTwo);
      const second = unique('tenant-a-second');
      expect((await a.admin.request('POST', '/readers', { reader_id: second })).status).toBe(200);
      expect((await a.admin.request('POST', '/scan-points', { reader_id: second, capture_point: 'p1', location: { id: a.dock.id } })).status).toBe(200);

      const all = await live(a.admin);
      const byReader = await live(a.admin, `?reader=${encodeURIComponent(a.reader)}`);
      const byPoint = await live(a.admin, `?capture_point=p2`);
      const both = await live(a.admin, `?reader=${encodeURIComponent(a.reader)}&capture_point=p1`);
      const otherOrg = await live(b.admin);

      const sent = performance.now();
      await publish(a.reader, [{ point: 'p1', epc: a.asset.epc }, { point: 'p2', epc: a.asset.epc }]);
      await publish(second, [{ point: 'p1', epc: a.asset.epc }, { point: 'p2', epc: hex() }]);
      await all.until(() => all.of('read').length >= 4, 5000);
      expect(all.events.filter((e) => e.event === 'read').every((e) => e.at - sent < 1000)).toBe(true);
      // Org B's own read is the marker: once it has arrived, anything of org A would have too.
      await publish(b.reader, [{ point: 'p1', epc: b.asset.epc }]);
      await otherOrg.until(() => otherOrg.of('read').length >= 1, 5000);
      await new Promise((r) => setTimeout(r, 300));

      const seen = (s: SseClient) => s.of('read').map((r: Json) => `${r.reader_id}/${r.capture_point}`).sort();
      expect(seen(all)).toEqual([`${a.reader}/p1`, `${a.reader}/p2`, `${second}/p1`, `${second}/p2`].sort());
      expect(seen(byReader)).toEqual([`${a.reader}/p1`, `${a.reader}/p2`]);
      expect(seen(byPoint)).toEqual([`${a.reader}/p2`, `${second}/p2`].sort());
      expect(seen(both)).toEqual([`${a.reader}/p1`]);
      expect(seen(otherOrg)).toEqual([`${b.reader}/p1`]);
      expect(all.of('read').find((r: Json) => r.reader_id === second && r.capture_point === 'p2')).toMatchObject({ cause: 'unassigned_capture_point', asset: null, location: null });
    },
    SLOW,
  );

  it('sign-out ends the stream of that session within about a second, with a closed event; the other streams go on', async () => {
    const org = await orgWith('signout', apiOne);
    const leaving = await signedInUser(apiOne.ctx, apiOne.urls.api!, org.id, 'operator');
    const stays = await live(org.admin);
    // Opened on the other api process: the sign-out on this one ends it all the same.
    const stream = await openLive(Object.assign(Object.create(Object.getPrototypeOf(leaving)), leaving, { origin: new URL(apiTwo.urls.api!).origin }) as AppClient);
    streams.push(stream);
    expect(stream.status).toBe(200);
    expect((await leaving.request('POST', '/sign-out')).status).toBe(204);
    const signedOut = performance.now();
    await stream.until(() => stream.closed, 5000, 'the stream to close');
    expect(performance.now() - signedOut).toBeLessThan(2500);
    expect(stream.of('closed')).toEqual([{ reason: 'session_ended' }]);
    await submit(org, [{ tag_type: 'rfid', value: org.asset.epc }]);
    await stays.until(() => stays.of('read').length >= 1, 5000);
    expect(stays.closed).toBe(false);
  });

  it('at most 20 streams per organization in a process: the 21st is refused with 429, another organization is not', async () => {
    const org = await orgWith('bound', apiTwo);
    const opened: SseClient[] = [];
    const tries = await Promise.all(Array.from({ length: 21 }, () => openLive(org.admin)));
    streams.push(...tries);
    for (const s of tries) if (s.status === 200) opened.push(s);
    // None ended while the others opened (a stream ended early frees its place, and says why).
    expect(opened.filter((s) => s.closed).map((s) => s.of('closed'))).toEqual([]);
    expect(opened).toHaveLength(20);
    const refused = tries.find((s) => s.status !== 200)!;
    expect(refused.status).toBe(429);
    expect(refused.body.error).toMatchObject({ type: 'rate_limited', detail: 'Too many live streams for this organization (20); close one first' });
    const other = await orgWith('bound-other', apiTwo);
    expect((await live(other.admin)).status).toBe(200);
    opened[0]!.close();
    await eventually(async () => expect((await openLive(org.admin)).status).toBe(200), 5000);
  });

  it('stopping an api process with streams open ends them with a closed event, and the stop does not wait on them', async () => {
    const org = await orgWith('shutdown', apiOne);
    const stopping = await services.start({}, 'api');
    const user = Object.assign(Object.create(Object.getPrototypeOf(org.admin)), org.admin, { origin: new URL(stopping.urls.api!).origin }) as AppClient;
    const stream = await openLive(user);
    streams.push(stream);
    expect(stream.status).toBe(200);
    const started = performance.now();
    await services.stop(stopping);
    expect(performance.now() - started).toBeLessThan(5000);
    await stream.until(() => stream.closed, 5000, 'the stream to close');
    expect(stream.of('closed')).toEqual([{ reason: 'shutdown' }]);
  });

  it(
    'a client that never reads while many reads flow is dropped: reads past its buffer are skipped, not kept, and a client that reads stays, with every read or its count',
    async () => {
      const org = await orgWith('slow', apiOne);
      const reading = await live(org.admin);
      const skippedBefore = await metric('tracking_live_reads_skipped_total');
      const droppedBefore = await metric('tracking_live_streams_closed_total', { reason: 'slow' });

      // A client that sends the request, takes the first bytes (the headers and `ready`), then reads nothing more.
      const origin = new URL(apiOne.urls.api!);
      const socket = net.connect(Number(origin.port), origin.hostname);
      let reset = false;
      socket.on('error', () => (reset = true));
      socket.on('close', () => (reset = true));
      await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
      socket.write(`GET /app/api/live/reads HTTP/1.1\r\nHost: ${origin.host}\r\nCookie: ${org.admin.cookie}\r\nAccept: text/event-stream\r\n\r\n`);
      const head = await new Promise<string>((resolve) => socket.once('data', (chunk: Buffer) => resolve(chunk.toString())));
      expect(head).toMatch(/^HTTP\/1\.1 200/);
      socket.pause();

      // About 20 MB of events: 40 submissions of 1,000 reads of a 255-character value.
      const value = `SLOW-${'x'.repeat(250)}`;
      const base = Date.now() - 60_000;
      let sent = 0;
      for (let s = 0; s < 40; s++) {
        await submit(org, Array.from({ length: 1000 }, (_, i) => ({ tag_type: 'barcode', value, observed_at: new Date(base + s * 1000 + i).toISOString() })));
        sent += 1000;
      }
      // The reading client gets every read, or is told how many it missed: a loaded machine can
      // leave even a reading client behind its buffer for a moment, which is what `skipped` is for.
      const accounted = () => reading.of('read').length + reading.of('skipped').reduce((n, e) => n + (e as { count: number }).count, 0);
      await reading.until(() => accounted() >= sent, 60_000, 'every read on the reading client, or its skipped count');
      expect(await metric('tracking_live_reads_skipped_total')).toBeGreaterThan(skippedBefore);
      // Still stalled after 10 s: dropped (at the latest by the next heartbeat), while reads keep coming.
      const deadline = Date.now() + 45_000;
      while ((await metric('tracking_live_streams_closed_total', { reason: 'slow' })) === droppedBefore && Date.now() < deadline) {
        await submit(org, [{ tag_type: 'barcode', value, observed_at: new Date().toISOString() }]);
        await new Promise((r) => setTimeout(r, 500));
      }
      expect(await metric('tracking_live_streams_closed_total', { reason: 'slow' })).toBe(droppedBefore + 1);
      socket.resume();
      await eventually(async () => expect(reset).toBe(true), 10_000);
      // The reading client is never dropped.
      expect(reading.closed).toBe(false);
    },
    SLOW,
  );
});
