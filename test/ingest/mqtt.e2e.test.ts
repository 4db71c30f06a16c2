import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import pg from 'pg';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { readMqttTls } from '../../services/ingest/mqtt/tls-files.js';
import { assignScanPoint, registerReader } from '../../shared/domain/readers/commands.js';
import { ConfigError } from '../../shared/errors.js';
import type { RunningService } from '../../services/service.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { eventually } from '../support/kafka.js';
import { capturedLog } from '../support/logs.js';
import { makeCertificateAuthority, makeSignedCertificate } from '../support/certificates.js';
import { startPrivateMosquitto, type Mosquitto } from '../support/mosquitto.js';
import { at, canonical, cs463, hex, readerServices, readerWorld, unique } from '../support/reader-corpus.js';
import { client } from '../master-data/http.js';

/**
 * Fixed readers over MQTT (docs/scan-ingestion.md, "Fixed readers over MQTT") against a real Eclipse
 * Mosquitto: the run's broker (global-setup), or a test's own where it restarts it. Gateways are
 * MQTT.js clients publishing at QoS 1 with a persistent session; topics are per test; a database
 * per file. Where mosquitto is not installed, every test here is skipped (global-setup says so).
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');
const BROKER = inject('mqttUrl');
const skip = BROKER === '';

let db: TestDatabase;
const services = readerServices(() => db.url);
const { start, stop } = services;
const gateways: MqttClient[] = [];
const children: ChildProcess[] = [];
const brokers: Array<Mosquitto & { remove(): Promise<void> }> = [];
const folders: string[] = [];

beforeAll(async () => {
  if (!skip) db = await createTestDatabase('mqtt_ingest');
});
afterAll(async () => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
  await services.stopAll();
  for (const gw of gateways.splice(0)) await gw.endAsync(true).catch(() => undefined);
  for (const broker of brokers.splice(0)) await broker.remove().catch(() => undefined);
  for (const folder of folders.splice(0)) fs.rmSync(folder, { recursive: true, force: true });
  await db?.drop();
});


/** Service environment for one test: its own topic filter and share group, on `url` (default: the run's broker). */
function mqttEnv(label: string, url = BROKER): { MQTT_URL: string; MQTT_TOPICS: string; MQTT_SHARE_GROUP: string; MQTT_CLIENT_ID: string; prefix: string } {
  const id = unique(label);
  return { MQTT_URL: url, MQTT_TOPICS: `scans/${id}/#`, MQTT_SHARE_GROUP: `group-${id}`, MQTT_CLIENT_ID: `ingest-${id}`, prefix: `scans/${id}` };
}

/** A gateway: QoS 1 publishes, a persistent session of its own, so what the broker has not acknowledged is sent again after a reconnect. */
async function gateway(url = BROKER, options: IClientOptions = {}): Promise<{ publish(topic: string, value: string | object): Promise<void>; client: MqttClient }> {
  const gw = await mqtt.connectAsync(url, { protocolVersion: 5, clientId: unique('gateway'), clean: false, reconnectPeriod: 200, properties: { sessionExpiryInterval: 600 }, ...options });
  gateways.push(gw);
  return {
    client: gw,
    async publish(topic, value) {
      await gw.publishAsync(topic, typeof value === 'string' ? value : JSON.stringify(value), { qos: 1 });
    },
  };
}

const world = (service: RunningService, assets = 2) => readerWorld(service, 'mqtt', assets);

async function placedReads(service: RunningService, orgId: number): Promise<number> {
  const r = await service.ctx.pool.query<{ n: number }>('SELECT coalesce(sum(reads), 0)::int AS n FROM scan_read_chunks WHERE org_id = $1', [orgId]);
  return r.rows[0]!.n;
}

async function perAsset(service: RunningService, orgId: number): Promise<number[]> {
  const r = await service.ctx.pool.query<{ n: number }>('SELECT sum(reads)::int AS n FROM scan_read_chunks WHERE org_id = $1 GROUP BY asset_id ORDER BY asset_id', [orgId]);
  return r.rows.map((row) => row.n);
}

async function reportOf(api: ReturnType<typeof client>) {
  return (await api<{ data: Array<{ asset_id: number; location_id: number; asset_last_seen: string }> }>('GET', '/reports/asset-locations?sort=asset_external_key')).body.data;
}

async function checks(service: RunningService, probe: 'readyz' | 'healthz'): Promise<{ status: number; checks: Record<string, string> }> {
  const response = await fetch(`${service.urls.ops}/${probe}`);
  return { status: response.status, checks: ((await response.json()) as { checks: Record<string, string> }).checks };
}

function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(TSX, ['services/cli/main.ts', ...args], { cwd: ROOT, env: { ...process.env, DATABASE_URL: db.url, LOG_LEVEL: 'warn', NODE_NO_WARNINGS: '1' }, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

/** `ROLES=ingest` as a process of its own (services/main.ts), ready once it prints so. */
function spawnIngest(env: Record<string, string>): { process: ChildProcess; ready: Promise<void>; ops(): string } {
  const child = spawn(process.execPath, ['--import', 'tsx', 'services/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, ...env, DATABASE_URL: db.url, ROLES: 'ingest', PORT: '0', OPS_PORT: '0', INGEST_PORT: '0', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('tracking service ready')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`ingest exited early (${code})`)));
  });
  return { process: child, ready, ops: () => /ops:\s+(http:\/\/[^/\s]+)/.exec(out)![1]! };
}

/** `ROLES=ingest` as a process of its own that is expected to stop at start: its exit code and stderr. */
function ingestRefusedAtStart(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', 'services/main.ts'], { cwd: ROOT, env: { ...process.env, ...env, DATABASE_URL: db.url, ROLES: 'ingest', PORT: '0', OPS_PORT: '0', INGEST_PORT: '0', LOG_LEVEL: 'warn' }, timeout: 60_000 }, (error, _stdout, stderr) =>
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stderr }),
    );
  });
}

async function exit(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  const exited = new Promise((r) => child.once('exit', r));
  child.kill(signal);
  await exited;
  children.splice(children.indexOf(child), 1);
}

describe.skipIf(skip)('the fixed-reader MQTT subscriber (Mosquitto)', () => {
  it('reads both payload shapes; duplicates and republished messages count once; out-of-order reads across two readers; the reader id from the payload, not the topic', async () => {
    const env = mqttEnv('shapes');
    const service = await start(env);
    const gw = await gateway();
    const w = await world(service);
    const [x, y] = w.assets;
    const [doorA, doorB] = [`${w.reader}-1`, `${w.reader}-2`];
    const first = canonical(w.reader, [{ point: doorA, epc: x!.epc, s: 0 }, { point: doorA, epc: x!.epc, s: 1 }, { point: doorB, epc: y!.epc, s: 2 }]);
    await gw.publish(`${env.prefix}/${w.reader}`, first);
    await gw.publish(`${env.prefix}/${w.reader}`, cs463(w.reader, [{ point: doorB, epc: x!.epc, s: 10 }]));
    await gw.publish(`${env.prefix}/${w.reader}`, first);
    const second = unique('yard-reader');
    await registerReader(service.ctx, w.orgId, second);
    await assignScanPoint(service.ctx, { orgId: w.orgId, readerId: second, capturePoint: 'yard-1', locationExternalKey: w.locations[0]!.external_key });
    // Published under another reader's topic: the payload names the reader.
    await gw.publish(`${env.prefix}/somewhere/else`, canonical(second, [{ point: 'yard-1', epc: x!.epc, s: 5 }]));
    await eventually(async () => expect(await placedReads(service, w.orgId)).toBe(5));
    const report = await reportOf(w.api);
    expect(report.find((r) => r.asset_id === x!.id)).toMatchObject({ location_id: w.locations[1]!.id, asset_last_seen: at(10) });
    expect(report.find((r) => r.asset_id === y!.id)).toMatchObject({ location_id: w.locations[1]!.id, asset_last_seen: at(2) });
    const history = (await w.api<{ data: Array<{ location_id: number; event_observed_at: string; last_observed_at: string }> }>('GET', `/assets/${x!.id}/history?sort=event_observed_at`)).body.data;
    expect(history.map((v) => [v.location_id, v.event_observed_at, v.last_observed_at])).toEqual([
      [w.locations[0]!.id, at(0), at(5)],
      [w.locations[1]!.id, at(10), at(10)],
    ]);
    const metrics = await (await fetch(`${service.urls.ops}/metrics`)).text();
    expect(metrics).toMatch(/tracking_ingest_reads_total\{path="mqtt",outcome="placed"\} \d+/);
    expect(metrics).toMatch(/tracking_mqtt_connected 1/);
    expect((await checks(service, 'readyz')).checks.mqtt).toBe('ok');
    await stop(service);
  });

  it('records unknown tags, unknown readers and unassigned capture points by cause', async () => {
    const env = mqttEnv('unknown');
    const service = await start(env);
    const gw = await gateway();
    const w = await world(service, 1);
    const [x] = w.assets;
    const door = `${w.reader}-1`;
    const stranger = unique('unregistered-reader');
    await gw.publish(`${env.prefix}/${w.reader}`, canonical(w.reader, [{ point: door, epc: hex(), s: 0 }, { point: `${w.reader}-9`, epc: x!.epc, s: 1 }, { point: door, epc: x!.epc, s: 2 }]));
    await gw.publish(`${env.prefix}/${stranger}`, cs463(stranger, [{ point: 'p', epc: hex(), s: 3 }]));
    await eventually(async () => {
      const unknown = await service.ctx.pool.query<{ org_id: number; cause: string; reader_id: string | null; capture_point: string | null; count: number }>(
        'SELECT org_id, cause, reader_id, capture_point, count::int AS count FROM unknown_reads WHERE org_id = $1 OR reader_id = $2 ORDER BY cause',
        [w.orgId, stranger],
      );
      expect(unknown.rows).toEqual([
        { org_id: w.orgId, cause: 'unassigned_capture_point', reader_id: w.reader, capture_point: `${w.reader}-9`, count: 1 },
        { org_id: 0, cause: 'unknown_reader', reader_id: stranger, capture_point: null, count: 1 },
        { org_id: w.orgId, cause: 'unknown_tag', reader_id: null, capture_point: null, count: 1 },
      ]);
    });
    expect(await placedReads(service, w.orgId)).toBe(1);
    const metrics = await (await fetch(`${service.urls.ops}/metrics`)).text();
    for (const cause of ['unknown_tag', 'unassigned_capture_point', 'unknown_reader']) expect(metrics).toMatch(new RegExp(`tracking_ingest_reads_total\\{path="mqtt",outcome="${cause}"\\} \\d+`));
    await stop(service);
  });

  it('keeps what is not JSON or matches neither shape as a dead letter (kept once when delivered again), counted, listed by `scans dead-letters`; the rest goes on', { timeout: 120_000 }, async () => {
    const env = mqttEnv('poison');
    const service = await start(env);
    const gw = await gateway();
    const w = await world(service, 1);
    const [x] = w.assets;
    const door = `${w.reader}-1`;
    const topic = `${env.prefix}/${w.reader}`;
    const before = await (await fetch(`${service.urls.ops}/metrics`)).text();
    const deadBefore = Number(/tracking_mqtt_dead_letters_total (\d+)/.exec(before)?.[1] ?? '0');
    await gw.publish(topic, canonical(w.reader, [{ point: door, epc: x!.epc, s: 0 }]));
    await gw.publish(topic, '{"reader_id": "oops", "reads": [');
    await gw.publish(topic, { hello: 'world' });
    const badTime = { reader_id: w.reader, reads: [{ capture_point: door, tag_type: 'rfid', value: x!.epc, observed_at: 'yesterday' }] };
    await gw.publish(topic, badTime);
    await gw.client.publishAsync(topic, Buffer.from([0xff, 0x00, 0xfe]), { qos: 1 });
    // What JSON.parse gives and Postgres cannot keep (a NUL, a lone surrogate) in the reader id or a key.
    await gw.publish(topic, '{"reader_id": "a\\u0000b", "reads": 5, "\\u0000": 1}');
    await gw.publish(topic, '{"rfidReaderName": "\\ud800", "tags": "none"}');
    await gw.publish(topic, canonical(w.reader, [{ point: door, epc: x!.epc, s: 1 }]));
    await eventually(async () => expect(await placedReads(service, w.orgId)).toBe(2));
    type Row = { id: string; topic: string; reason: string; received_at: string; payload_preview: string };
    const listed = await eventually(async () => {
      const { code, stdout, stderr } = await cli('scans', 'dead-letters', '--json');
      expect(code, stderr).toBe(0);
      const rows = (JSON.parse(stdout) as Row[]).filter((r) => r.topic === topic);
      expect(rows).toHaveLength(6);
      return rows;
    });
    for (const row of listed) {
      expect(Object.keys(row)).toEqual(['id', 'topic', 'reason', 'received_at', 'payload_preview']);
      expect(row.received_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(row.reason).not.toContain('\n');
    }
    const byPreview = new Map(listed.map((r) => [r.payload_preview, r.reason]));
    expect(byPreview.get('{"reader_id": "oops", "reads": [')).toBe('not valid JSON');
    expect(byPreview.get('{"hello":"world"}')).toBe('matches neither the canonical nor the CS463 shape');
    expect(byPreview.get(JSON.stringify(badTime).slice(0, 120))).toMatch(/^canonical shape: reads\[0\]\.observed_at: /);
    expect(byPreview.get(`base64:${Buffer.from([0xff, 0x00, 0xfe]).toString('base64')}`)).toBeTruthy();
    // --org: the one whose payload names this org's reader.
    const mine = JSON.parse((await cli('scans', 'dead-letters', '--org', String(w.orgId), '--json')).stdout) as Row[];
    expect(mine.map((r) => r.reason)).toEqual([expect.stringMatching(/^canonical shape: /)]);
    const table = await cli('scans', 'dead-letters');
    expect(table.stdout).toMatch(/^id\s+topic\s+reason\s+received_at\s+payload_preview/);
    // The same message again (as after a crash before its PUBACK) is one dead letter.
    await gw.publish(topic, { hello: 'world' });
    await eventually(async () => {
      const metrics = await (await fetch(`${service.urls.ops}/metrics`)).text();
      expect(Number(/tracking_mqtt_dead_letters_total (\d+)/.exec(metrics)?.[1])).toBe(deadBefore + 7);
    });
    await new Promise((r) => setTimeout(r, 500));
    const again = JSON.parse((await cli('scans', 'dead-letters', '--json')).stdout) as Row[];
    expect(again.filter((r) => r.topic === topic)).toHaveLength(6);
    expect(await cli('scans', 'dead-letters', '--org', '999999')).toMatchObject({ code: 2 });
    await stop(service);
  });

  it('broker restarts (persistence on): what reached the broker is not lost, in flight to the service or queued for its session while it was stopped; each read once; /readyz says disconnected meanwhile', { timeout: 180_000 }, async () => {
    const broker = await startPrivateMosquitto();
    brokers.push(broker);
    const env = mqttEnv('broker-restart', broker.url);
    const setup = await start({}, 'api,projector');
    let service = await start(env, 'ingest');
    const gw = await gateway(broker.url);
    const w = await world(setup, 3);
    const door = `${w.reader}-1`;
    let published = 0;
    const publish = (count: number) => {
      const sent: Array<Promise<void>> = [];
      for (let i = 0; i < count; i++, published++) sent.push(gw.publish(`${env.prefix}/${w.reader}`, canonical(w.reader, [{ point: door, epc: w.assets[published % 3]!.epc, s: published }])));
      return Promise.all(sent);
    };
    const ready = () => eventually(async () => expect((await checks(service, 'readyz')).checks.mqtt).toBe('ok'), 30_000);
    // 1. The broker stops while the service is recording (and so not yet acknowledging) a stream.
    await publish(150);
    await broker.stop();
    await eventually(async () => expect((await checks(service, 'readyz')).checks.mqtt).toMatch(/^disconnected: /), 15_000);
    expect((await checks(service, 'readyz')).status).toBe(503);
    await broker.resume();
    await ready();
    await eventually(async () => expect(await placedReads(setup, w.orgId)).toBe(150), 60_000, 250);
    // 2. Queued for the session of a stopped service, across a broker restart.
    await stop(service);
    await publish(150);
    await broker.stop();
    await broker.resume();
    service = await start(env, 'ingest');
    await ready();
    await publish(150);
    await eventually(async () => expect(await placedReads(setup, w.orgId)).toBe(450), 90_000, 250);
    expect(await perAsset(setup, w.orgId)).toEqual([150, 150, 150]);
    await stop(service);
    await stop(setup);
  });

  it('broker kill -9 mid-stream, saving on every change (autosave_on_changes true, autosave_interval 1): of what the gateway got a PUBACK for, queued for the stopped service, nothing is lost but at most the last one before the kill; the rest the gateway sends again; each read once', { timeout: 180_000 }, async () => {
    const broker = await startPrivateMosquitto({ extra: ['autosave_on_changes true'] });
    brokers.push(broker);
    const env = mqttEnv('broker-kill', broker.url);
    const setup = await start({}, 'api,projector');
    let service = await start(env, 'ingest');
    const ready = () => eventually(async () => expect((await checks(service, 'readyz')).checks.mqtt).toBe('ok'), 30_000);
    await ready();
    const w = await world(setup, 3);
    const door = `${w.reader}-1`;
    // Stopped, the service stays subscribed: the broker queues the stream in its session, and
    // only the broker's save keeps what it acknowledged to the gateway.
    await stop(service);
    // The gateway: what it has no PUBACK for when the broker goes, it publishes again once the
    // service has subscribed again (before that, Mosquitto 2.0 would drop it: the known gap).
    const gw = await mqtt.connectAsync(broker.url, { protocolVersion: 5, clientId: unique('gateway'), clean: true, reconnectPeriod: 0 });
    gateways.push(gw);
    gw.on('error', () => undefined);
    const total = 2_000;
    const message = (s: number) => JSON.stringify(canonical(w.reader, [{ point: door, epc: w.assets[s % 3]!.epc, s }]));
    const acknowledged: number[] = [];
    const gone = new Promise<void>((resolve) => gw.once('close', () => resolve()));
    let killed: Promise<void> | null = null;
    for (let s = 0; s < total; s++) {
      gw.publishAsync(`${env.prefix}/${w.reader}`, message(s), { qos: 1 }).then(
        () => {
          acknowledged.push(s);
          // Mid-stream: a quarter acknowledged.
          if (acknowledged.length === total / 4) killed = broker.kill();
        },
        () => undefined,
      );
    }
    await gone;
    await killed;
    await gw.endAsync(true);
    const acknowledgedBeforeKill = [...acknowledged];
    expect(acknowledgedBeforeKill.length).toBeLessThan(total);
    await broker.resume();
    service = await start(env, 'ingest');
    await ready();
    const again = await gateway(broker.url);
    const done = new Set(acknowledgedBeforeKill);
    await Promise.all(Array.from({ length: total }, (_, s) => s).filter((s) => !done.has(s)).map((s) => again.publish(`${env.prefix}/${w.reader}`, message(s))));
    await eventually(async () => expect(await placedReads(setup, w.orgId)).toBeGreaterThanOrEqual(total - 1), 90_000, 250);
    await new Promise((r) => setTimeout(r, 1_000));
    const rows = await setup.ctx.pool.query<{ observed_at: Date }>('SELECT r.observed_at FROM scan_read_chunks c, tracking_chunk_reads(c.first_at, c.first_seq, c.data) r WHERE c.org_id = $1', [w.orgId]);
    const recorded = new Set(rows.rows.map((r) => (r.observed_at.getTime() - Date.parse(at(0))) / 1000));
    expect(recorded.size).toBe(rows.rows.length);
    expect(await perAsset(setup, w.orgId)).toEqual([0, 1, 2].map((a) => [...recorded].filter((s) => s % 3 === a).length));
    const lost = Array.from({ length: total }, (_, s) => s).filter((s) => !recorded.has(s));
    // Mosquitto sends a PUBACK before the save at the end of that pass of its loop: a kill in
    // between loses what it acknowledged in that pass (one message of this one gateway).
    expect(lost.filter((s) => s !== acknowledgedBeforeKill.at(-1))).toEqual([]);
    expect(recorded.size).toBeGreaterThanOrEqual(total - 1);
    await stop(service);
    await stop(setup);
  });

  it('supervision: credentials from MQTT_USERNAME/MQTT_PASSWORD; refused or disconnected it is logged at error, /readyz 503 with the cause, /healthz 503 after MQTT_UNHEALTHY_SECONDS; it reconnects with backoff', { timeout: 120_000 }, async () => {
    const password = 'mqtt-secret-not-to-log';
    const broker = await startPrivateMosquitto({ users: { ingest: password, gateway: 'gw-pass' } });
    brokers.push(broker);
    const env = { ...mqttEnv('supervision', broker.url), MQTT_USERNAME: 'ingest', MQTT_UNHEALTHY_SECONDS: '2' };
    const setup = await start({}, 'api,projector');
    // A wrong password: the process starts, says why it is not connected, and keeps trying.
    const refusedLogs = capturedLog('warn');
    const refused = await start({ ...env, MQTT_PASSWORD: 'wrong-password' }, 'ingest', refusedLogs.log);
    await eventually(async () => {
      const ready = await checks(refused, 'readyz');
      expect(ready.status).toBe(503);
      expect(ready.checks.mqtt).toMatch(/^disconnected: .*(authori[sz]ed|Bad User Name or Password)/i);
    });
    await eventually(async () => {
      const health = await checks(refused, 'healthz');
      expect(health.status).toBe(503);
      expect(health.checks.mqtt).toMatch(/^disconnected for \d+ s: /);
    }, 20_000);
    const line = refusedLogs.lines().find((l) => l.level === 50 && String(l.msg).startsWith('mqtt: disconnected: '));
    expect(line).toBeTruthy();
    expect(JSON.stringify(refusedLogs.lines())).not.toContain('wrong-password');
    await stop(refused);
    // The right one (not in the URL): connected, subscribed, recording.
    const logs = capturedLog('warn');
    const service = await start({ ...env, MQTT_PASSWORD: password }, 'ingest', logs.log);
    await eventually(async () => expect((await checks(service, 'readyz')).checks.mqtt).toBe('ok'));
    const url = new URL(broker.url);
    url.username = 'gateway';
    url.password = 'gw-pass';
    const gw = await gateway(url.toString());
    const w = await world(setup, 1);
    await gw.publish(`${env.prefix}/${w.reader}`, canonical(w.reader, [{ point: `${w.reader}-1`, epc: w.assets[0]!.epc, s: 0 }]));
    await eventually(async () => expect(await placedReads(setup, w.orgId)).toBe(1));
    // The broker goes away: logged, 503, then reconnected once it is back.
    const metric = async (name: string) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(await (await fetch(`${service.urls.ops}/metrics`)).text())?.[1]);
    const disconnectionsBefore = await metric('tracking_mqtt_disconnections_total');
    await broker.stop();
    await eventually(async () => expect((await checks(service, 'readyz')).checks.mqtt).toMatch(/^disconnected: /));
    expect(await metric('tracking_mqtt_connected')).toBe(0);
    expect(await metric('tracking_mqtt_disconnections_total')).toBe(disconnectionsBefore + 1);
    expect(logs.lines().some((l) => l.level === 50 && /^mqtt: disconnected: .+; reconnecting in \d+ ms$/.test(String(l.msg)))).toBe(true);
    await broker.resume();
    await eventually(async () => expect((await checks(service, 'readyz')).checks.mqtt).toBe('ok'), 30_000);
    expect((await checks(service, 'healthz')).status).toBe(200);
    expect(await metric('tracking_mqtt_connected')).toBe(1);
    expect(JSON.stringify(logs.lines())).not.toContain(password);
    await gw.publish(`${env.prefix}/${w.reader}`, canonical(w.reader, [{ point: `${w.reader}-1`, epc: w.assets[0]!.epc, s: 1 }]));
    await eventually(async () => expect(await placedReads(setup, w.orgId)).toBe(2));
    await stop(service);
    await stop(setup);
  });

  it('kill -9 of the ingest process mid-stream, then a restart with the same client id: every read shows once', { timeout: 180_000 }, async () => {
    const env = mqttEnv('kill');
    const setup = await start({}, 'api,projector');
    const gw = await gateway();
    const w = await world(setup, 3);
    const first = spawnIngest(env);
    await first.ready;
    const door = `${w.reader}-1`;
    let published = 0;
    const publish = async (count: number) => {
      const sent: Array<Promise<void>> = [];
      for (let i = 0; i < count; i++, published++) sent.push(gw.publish(`${env.prefix}/${w.reader}`, canonical(w.reader, [{ point: door, epc: w.assets[published % 3]!.epc, s: published }])));
      await Promise.all(sent);
    };
    await publish(300);
    await eventually(async () => expect(await placedReads(setup, w.orgId)).toBeGreaterThan(0), 60_000, 20);
    await exit(first.process, 'SIGKILL');
    const before = await placedReads(setup, w.orgId);
    await publish(300);
    const second = spawnIngest(env);
    await second.ready;
    await eventually(async () => expect(await placedReads(setup, w.orgId)).toBe(600), 90_000, 250);
    expect(await perAsset(setup, w.orgId)).toEqual([200, 200, 200]);
    expect(before).toBeLessThan(600);
    const report = await reportOf(w.api);
    expect(report.map((r) => r.asset_last_seen).sort()).toEqual([at(597), at(598), at(599)]);
    await exit(second.process, 'SIGTERM');
    await stop(setup);
  });

  it('nothing is acknowledged before it is appended: messages received while Postgres is unreachable, then kill -9, are recorded by the next process', { timeout: 180_000 }, async () => {
    const env = mqttEnv('unacked');
    const setup = await start({}, 'api,projector');
    const gw = await gateway();
    const w = await world(setup, 2);
    const first = spawnIngest(env);
    await first.ready;
    const door = `${w.reader}-1`;
    const admin = new pg.Client({ connectionString: inject('postgresAdminUrl') });
    await admin.connect();
    const name = pg.escapeIdentifier(db.name);
    try {
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [db.name]);
      const sent: Array<Promise<void>> = [];
      for (let s = 0; s < 40; s++) sent.push(gw.publish(`${env.prefix}/${w.reader}`, canonical(w.reader, [{ point: door, epc: w.assets[s % 2]!.epc, s }])));
      await Promise.all(sent);
      // Delivered to the process, which cannot append them: it must not acknowledge them.
      await new Promise((r) => setTimeout(r, 2_000));
      await exit(first.process, 'SIGKILL');
    } finally {
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
      await admin.end();
    }
    const second = spawnIngest(env);
    await second.ready;
    await eventually(async () => expect(await placedReads(setup, w.orgId)).toBe(40), 90_000, 250);
    expect(await perAsset(setup, w.orgId)).toEqual([20, 20]);
    await exit(second.process, 'SIGTERM');
    await stop(setup);
  });

  it('two ingest processes share the subscription: every read recorded once, also when one stops and comes back', { timeout: 180_000 }, async () => {
    const env = mqttEnv('shared');
    const setup = await start({}, 'api,projector');
    const gw = await gateway();
    const w = await world(setup, 4);
    const one = spawnIngest(env);
    const two = spawnIngest({ ...env, MQTT_CLIENT_ID: `${env.MQTT_CLIENT_ID}-2` });
    await Promise.all([one.ready, two.ready]);
    const door = `${w.reader}-1`;
    let published = 0;
    const publish = async (count: number) => {
      const sent: Array<Promise<void>> = [];
      for (let i = 0; i < count; i++, published++) sent.push(gw.publish(`${env.prefix}/${w.reader}/${i % 3}`, canonical(w.reader, [{ point: door, epc: w.assets[published % 4]!.epc, s: published }])));
      await Promise.all(sent);
    };
    await publish(200);
    await eventually(async () => expect(await placedReads(setup, w.orgId)).toBe(200), 60_000, 250);
    // Each process took its share (the broker round-robins a shared subscription's messages).
    const placedBy = await Promise.all(
      [one, two].map(async (p) => Number(/tracking_ingest_reads_total\{path="mqtt",outcome="placed"\} (\d+)/.exec(await (await fetch(`${p.ops()}/metrics`)).text())?.[1] ?? '0')),
    );
    expect(placedBy[0]! + placedBy[1]!).toBeGreaterThanOrEqual(200);
    expect(Math.min(...placedBy)).toBeGreaterThan(0);
    // While one is stopped Mosquitto still queues its share in its session: delivered when it is back.
    await exit(two.process, 'SIGTERM');
    await publish(100);
    const back = spawnIngest({ ...env, MQTT_CLIENT_ID: `${env.MQTT_CLIENT_ID}-2` });
    await back.ready;
    await publish(100);
    await eventually(async () => expect(await placedReads(setup, w.orgId)).toBe(400), 90_000, 250);
    expect(await perAsset(setup, w.orgId)).toEqual([100, 100, 100, 100]);
    await exit(one.process, 'SIGTERM');
    await exit(back.process, 'SIGTERM');
    await stop(setup);
  });
  it('mqtts:// with a private CA (MQTT_CA_FILE) and a client certificate (MQTT_CERT_FILE, MQTT_KEY_FILE): connects and records; another CA, or no client certificate, is refused: /readyz 503 with the cause, logged at error', { timeout: 120_000 }, async () => {
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'tracking-mqtt-tls-'));
    folders.push(folder);
    const ca = await makeCertificateAuthority(folder, 'readers-ca');
    const server = await makeSignedCertificate(ca, 'broker', ['127.0.0.1', 'localhost']);
    const ingestCert = await makeSignedCertificate(ca, 'ingest');
    const gatewayCert = await makeSignedCertificate(ca, 'gateway');
    const other = await makeCertificateAuthority(folder, 'other-ca');
    const broker = await startPrivateMosquitto({ tls: { ...server, clientCa: ca.cert } });
    brokers.push(broker);
    expect(broker.url).toMatch(/^mqtts:\/\/127\.0\.0\.1:\d+$/);
    const env = { ...mqttEnv('tls', broker.url), MQTT_CA_FILE: ca.cert, MQTT_CERT_FILE: ingestCert.cert, MQTT_KEY_FILE: ingestCert.key };
    const setup = await start({}, 'api,projector');
    const service = await start(env, 'ingest');
    await eventually(async () => expect((await checks(service, 'readyz')).checks.mqtt).toBe('ok'), 30_000);
    const gw = await gateway(broker.url, { ca: fs.readFileSync(ca.cert), cert: fs.readFileSync(gatewayCert.cert), key: fs.readFileSync(gatewayCert.key) });
    const w = await world(setup, 1);
    await gw.publish(`${env.prefix}/${w.reader}`, canonical(w.reader, [{ point: `${w.reader}-1`, epc: w.assets[0]!.epc, s: 0 }]));
    await eventually(async () => expect(await placedReads(setup, w.orgId)).toBe(1));
    await stop(service);

    // The broker's certificate is not signed by the CA given: refused by the service, which says why.
    const wrongCaLogs = capturedLog('warn');
    const wrongCa = await start({ ...mqttEnv('tls-other-ca', broker.url), MQTT_CA_FILE: other.cert, MQTT_CERT_FILE: ingestCert.cert, MQTT_KEY_FILE: ingestCert.key }, 'ingest', wrongCaLogs.log);
    await eventually(async () => {
      const ready = await checks(wrongCa, 'readyz');
      expect(ready.status).toBe(503);
      expect(ready.checks.mqtt).toMatch(/^disconnected: TLS: broker certificate refused: .*certificate.* \([A-Z_]+\)$/);
    }, 20_000);
    const cause = (await checks(wrongCa, 'readyz')).checks.mqtt!.replace(/^disconnected: /, '');
    expect(wrongCaLogs.lines().some((l) => l.level === 50 && String(l.msg).startsWith(`mqtt: disconnected: ${cause}; reconnecting in `))).toBe(true);
    await stop(wrongCa);

    // The right CA, no client certificate: the broker requires one and refuses the handshake.
    const anonymous = await start({ ...mqttEnv('tls-no-client-cert', broker.url), MQTT_CA_FILE: ca.cert }, 'ingest');
    await eventually(async () => {
      const ready = await checks(anonymous, 'readyz');
      expect(ready.status).toBe(503);
      expect(ready.checks.mqtt).toMatch(/^disconnected: TLS: handshake failed: .*certificate required \(ERR_SSL_[A-Z0-9_]+\)$/);
    }, 20_000);
    await stop(anonymous);
    await stop(setup);
  });

  it('a TLS file that is missing, not what its variable names, or a key of another certificate stops the start with one line naming the variable (exit code 2)', { timeout: 120_000 }, async () => {
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'tracking-mqtt-tls-'));
    folders.push(folder);
    const ca = await makeCertificateAuthority(folder, 'readers-ca');
    const one = await makeSignedCertificate(ca, 'one');
    const two = await makeSignedCertificate(ca, 'two');
    const missing = path.join(folder, 'missing.crt');
    const cases: Array<[Partial<Record<'MQTT_CA_FILE' | 'MQTT_CERT_FILE' | 'MQTT_KEY_FILE', string>>, RegExp]> = [
      [{ MQTT_CA_FILE: missing }, /^Invalid configuration: MQTT_CA_FILE: cannot read .*missing\.crt \(no such file\)$/],
      [{ MQTT_CA_FILE: folder }, /^Invalid configuration: MQTT_CA_FILE: cannot read .* \(a directory, not a file\)$/],
      [{ MQTT_CA_FILE: one.key }, /^Invalid configuration: MQTT_CA_FILE: .*one\.key holds no PEM certificate/],
      [{ MQTT_CERT_FILE: one.cert, MQTT_KEY_FILE: two.key }, /^Invalid configuration: MQTT_KEY_FILE: .*two\.key is not the private key of the certificate in MQTT_CERT_FILE$/],
      [{ MQTT_CERT_FILE: one.cert, MQTT_KEY_FILE: one.cert }, /^Invalid configuration: MQTT_KEY_FILE: .*one\.crt is not an unencrypted PEM private key$/],
      [{ MQTT_CERT_FILE: one.key, MQTT_KEY_FILE: one.key }, /^Invalid configuration: MQTT_CERT_FILE: .*one\.key holds no PEM certificate/],
    ];
    for (const [files, expected] of cases) {
      const error = (() => {
        try {
          readMqttTls(files);
        } catch (e) {
          return e;
        }
      })();
      expect(error, JSON.stringify(files)).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toMatch(expected);
    }
    expect(readMqttTls({ MQTT_CA_FILE: ca.cert, MQTT_CERT_FILE: one.cert, MQTT_KEY_FILE: one.key })).toEqual({ ca: fs.readFileSync(ca.cert), cert: fs.readFileSync(one.cert), key: fs.readFileSync(one.key) });
    // The process: stopped before it connects to anything, one line on stderr.
    const { code, stderr } = await ingestRefusedAtStart({ ...mqttEnv('tls-files', 'mqtts://127.0.0.1:1'), MQTT_CA_FILE: missing });
    expect(code, stderr).toBe(2);
    expect(stderr).toBe(`Invalid configuration: MQTT_CA_FILE: cannot read ${missing} (no such file)\n`);
  });
});
