import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allProjections } from '../../projections/index.js';
import { bearer, createOrg, mintApiKey, mintSession } from '../support/auth.js';
import { eventually, gateway, kafkaEnv } from '../support/kafka.js';
import { scrape, type MetricsPage } from '../support/metrics.js';
import { promqlMetricNames } from '../support/promql.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * The ops listener's /metrics over real HTTP (README, "Metrics"): one service with every role and
 * a Kafka consumer; the traffic of every kind the metrics count is made once, between two scrapes,
 * and each test reads what moved. Then every metric the Grafana dashboard queries is on the page.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');

let svc: TestService;
let before: MetricsPage;
let after: MetricsPage;
let scanTopic: string;
const statuses: Record<string, number[]> = {};

/** How much a series moved between the two scrapes. */
const moved = (name: string, labels: Record<string, string> = {}) => after.sum(name, labels) - before.sum(name, labels);

async function call(url: string, init: RequestInit & { label: string }): Promise<Response> {
  const response = await fetch(url, init);
  await response.arrayBuffer();
  (statuses[init.label] ??= []).push(response.status);
  return response;
}

beforeAll(async () => {
  const env = await kafkaEnv('metrics');
  scanTopic = env.KAFKA_SCAN_TOPIC;
  // A bucket of 3: a metered key is refused by its fourth request. Sessions are not metered.
  svc = await startTestService('metrics', { ...env, RATE_LIMIT_PER_MINUTE: '1', RATE_LIMIT_BURST: '3' });
  const ctx = svc.service.ctx;
  const orgId = (await createOrg(ctx, 'Metrics')).id;
  const session = bearer((await mintSession(ctx, { user: 'ops@example.com', orgId })).token);
  const metered = bearer((await mintApiKey(ctx, { orgId, scopes: ['assets:read'] })).token);
  const scans = bearer((await mintApiKey(ctx, { orgId, scopes: ['scans:write'] })).token);
  const json = { 'content-type': 'application/json' };
  const location = (await (await fetch(`${svc.apiUrl}/locations`, { method: 'POST', headers: { ...session, ...json }, body: JSON.stringify({ name: 'Dock' }) })).json()) as {
    data: { id: number };
  };
  const gw = await gateway();

  before = await scrape(svc.opsUrl);
  for (let i = 0; i < 3; i++) await call(`${svc.apiUrl}/assets`, { headers: session, label: 'list' });
  await call(`${svc.apiUrl}/assets/2147483000`, { headers: session, label: 'missing asset' });
  await call(`${svc.apiUrl.replace(/\/api\/v1$/, '')}/no/such/path-${randomUUID()}`, { label: 'unmatched' });
  await call(`${svc.apiUrl}/assets`, { method: 'POST', headers: { ...session, ...json }, body: JSON.stringify({ name: 'Forklift' }), label: 'create' });
  for (let i = 0; i < 5; i++) await call(`${svc.apiUrl}/assets`, { headers: metered, label: 'metered' });
  await call(`${svc.ingestUrl}/scans`, {
    method: 'POST',
    headers: { ...scans, ...json },
    body: JSON.stringify({ submission_id: randomUUID(), device_id: 'handheld-1', location: { id: location.data.id }, reads: [{ tag_type: 'rfid', value: 'E2800000UNKNOWN' }] }),
    label: 'handheld',
  });
  // A report of a reader no one registered (its reads are recorded as unknown) and a message that
  // is not JSON (dead-lettered).
  await gw.publish(scanTopic, 'dock-door-9', { reader_id: 'dock-door-9', reads: [{ capture_point: 'p1', tag_type: 'rfid', value: 'E2801', observed_at: new Date().toISOString() }] });
  await gw.publish(scanTopic, 'dock-door-9', 'not json');
  await gw.close();
  after = await eventually(async () => {
    const page = await scrape(svc.opsUrl);
    expect(page.sum('tracking_ingest_dead_letters_total') - before.sum('tracking_ingest_dead_letters_total')).toBeGreaterThanOrEqual(1);
    // The lag is set once a batch is committed, after its dead letters are counted: wait for it to
    // reach 0 (it never would if it stayed at a fetch's high watermark).
    const lags = page.matching('tracking_kafka_consumer_lag', { topic: scanTopic });
    expect(lags.length).toBeGreaterThanOrEqual(1);
    expect(lags.map((lag) => lag.value)).toEqual(lags.map(() => 0));
    return page;
  });
});

afterAll(async () => {
  await svc?.stop();
});

describe('/metrics', () => {
  it('times every request by listener, method, route pattern and status', () => {
    expect(statuses).toMatchObject({ list: [200, 200, 200], 'missing asset': [404], unmatched: [404], create: [201], handheld: [202] });
    const api = { listener: 'api', method: 'GET' };
    expect(moved('tracking_http_request_duration_seconds_count', { ...api, route: '/api/v1/assets', status: '200' })).toBe(3 + 3);
    expect(moved('tracking_http_request_duration_seconds_count', { ...api, route: '/api/v1/assets/:asset_id', status: '404' })).toBe(1);
    expect(moved('tracking_http_request_duration_seconds_count', { ...api, route: 'unmatched', status: '404' })).toBe(1);
    expect(moved('tracking_http_request_duration_seconds_count', { listener: 'api', method: 'POST', route: '/api/v1/assets', status: '201' })).toBe(1);
    expect(moved('tracking_http_request_duration_seconds_count', { listener: 'ingest', method: 'POST', route: '/ingest/v1/scans', status: '202' })).toBe(1);
    expect(moved('tracking_http_request_duration_seconds_sum', { listener: 'api' })).toBeGreaterThan(0);
    // Buckets are cumulative: +Inf holds every request.
    const series = { ...api, route: '/api/v1/assets', status: '200' };
    expect(after.sum('tracking_http_request_duration_seconds_bucket', { ...series, le: '+Inf' })).toBe(after.sum('tracking_http_request_duration_seconds_count', series));
    // Raw paths never become labels (one series for every unmatched path, ids as patterns).
    const routes = new Set(after.matching('tracking_http_request_duration_seconds_count').map((s) => s.labels.route));
    expect([...routes].filter((route) => /no\/such|\d{5,}/.test(route!))).toEqual([]);
    expect([...routes].every((route) => route === 'unmatched' || route!.startsWith('/'))).toBe(true);
  });

  it('counts requests the rate limit refused, per listener', () => {
    expect(statuses.metered).toEqual([200, 200, 200, 429, 429]);
    expect(moved('tracking_http_rate_limited_total', { listener: 'api' })).toBe(2);
    expect(moved('tracking_http_request_duration_seconds_count', { listener: 'api', route: '/api/v1/assets', status: '429' })).toBe(2);
  });

  it('times event-store appends by outcome', () => {
    // The asset created (an asset and its reservation, one atomic append) and the scans ingested.
    expect(moved('tracking_event_store_append_seconds_count', { outcome: 'ok' })).toBeGreaterThanOrEqual(3);
    expect(moved('tracking_event_store_append_seconds_sum')).toBeGreaterThan(0);
    expect(after.types.get('tracking_event_store_append_seconds')).toBe('histogram');
  });

  it('counts ingested reads by path and outcome, dead letters, and the consumer lag and batch time', () => {
    expect(moved('tracking_ingest_reads_total', { path: 'handheld', outcome: 'unknown_tag' })).toBe(1);
    expect(moved('tracking_ingest_reads_total', { path: 'kafka', outcome: 'unknown_reader' })).toBe(1);
    expect(moved('tracking_ingest_dead_letters_total')).toBe(1);
    expect(moved('tracking_ingest_append_seconds_count')).toBeGreaterThanOrEqual(1);
    const lags = after.matching('tracking_kafka_consumer_lag', { topic: scanTopic });
    expect(lags.length).toBeGreaterThanOrEqual(1);
    for (const lag of lags) expect(lag.value).toBe(0);
  });

  it('reports each projection lag in events and seconds, computed when scraped', async () => {
    const names = allProjections().map((p) => p.name);
    for (const name of ['tracking_projection_lag_events', 'tracking_projection_lag_seconds']) {
      expect(after.types.get(name)).toBe('gauge');
      expect(after.matching(name).map((s) => s.labels.projection).sort()).toEqual([...names].sort());
    }

    // A process without the projector, on a database of its own: an event appended there waits.
    const lagging = await startTestService('metrics_lag', { ROLES: 'ingest' });
    try {
      const idle = await scrape(lagging.opsUrl);
      expect(idle.sum('tracking_projection_lag_events')).toBe(0);
      await lagging.service.ctx.store.appendToStream('org-1', [{ type: 'OrgCreated', data: { org_id: 1, name: 'Waiting', created_at: new Date().toISOString() } }], 'no_stream');
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      const behind = await scrape(lagging.opsUrl);
      for (const name of names) {
        expect(behind.sum('tracking_projection_lag_events', { projection: name })).toBe(1);
        expect(behind.sum('tracking_projection_lag_seconds', { projection: name })).toBeGreaterThanOrEqual(1);
      }
    } finally {
      await lagging.stop();
    }
  });

  it('carries the process metrics prom-client collects by default', () => {
    for (const name of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'nodejs_heap_size_used_bytes', 'nodejs_eventloop_lag_p99_seconds']) {
      expect(after.names()).toContain(name);
    }
  });
});

describe('deploy/grafana/tracking-dashboard.json', () => {
  it('queries only metrics the service serves', () => {
    const dashboard = JSON.parse(fs.readFileSync(path.join(ROOT, 'deploy/grafana/tracking-dashboard.json'), 'utf8')) as {
      panels: Array<{ title: string; targets?: Array<{ expr: string }> }>;
    };
    const served = after.names();
    const queried = new Set<string>();
    for (const panel of dashboard.panels) {
      for (const target of panel.targets ?? []) {
        const names = promqlMetricNames(target.expr);
        expect(names.length, `${panel.title}: ${target.expr}`).toBeGreaterThan(0);
        for (const name of names) {
          expect(served, `${panel.title}: ${name}`).toContain(name);
          queried.add(name);
        }
      }
    }
    // Every tracking_ metric the service serves is on the dashboard.
    const ours = [...served].filter((name) => name.startsWith('tracking_'));
    const family = (name: string) => name.replace(/_(bucket|sum|count)$/, '');
    const shown = new Set([...queried].map(family));
    expect(ours.map(family).filter((name) => !shown.has(name))).toEqual([]);
  });
});
