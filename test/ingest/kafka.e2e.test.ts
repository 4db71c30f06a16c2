import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { assignScanPoint, registerReader } from '../../shared/domain/readers/commands.js';
import { metricsRegistry } from '../../services/ops/metrics.js';
import type { RunningService } from '../../services/service.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY } from '../support/service.js';
import { eventually, gateway, javaGateway, kafkaEnv, readDeadLetters, withoutRealBroker, type Compression, type GatewayRecord } from '../support/kafka.js';
import { at, canonical, cs463, hex, readerServices, readerWorld, unique, us } from '../support/reader-corpus.js';
import { client } from '../master-data/http.js';

/**
 * Fixed readers through Kafka (docs/scan-ingestion.md "Fixed readers over Kafka"), with a real Kafka-protocol broker
 * (librdkafka's mock cluster) and kafkajs on both sides: a topic, dead-letter topic and group per
 * test; a database per file.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
let db: TestDatabase;
let gw: Awaited<ReturnType<typeof gateway>>;
const services = readerServices(() => db.url);
const { start, stop } = services;

beforeAll(async () => {
  db = await createTestDatabase('kafka_ingest');
  gw = await gateway();
});
afterAll(async () => {
  await services.stopAll();
  await gw?.close();
  await db?.drop();
});

const world = (service: RunningService, assets = 2) => readerWorld(service, 'kafka', assets);

/** The service's consumer lag on `topic`, summed over partitions (this process's metrics registry). */
async function consumerLag(topic: string): Promise<number> {
  const metric = (await metricsRegistry.getMetricsAsJSON()).find((m) => m.name === 'tracking_kafka_consumer_lag');
  return (metric?.values ?? []).filter((v) => v.labels.topic === topic).reduce((sum, v) => sum + v.value, 0);
}

async function placedReads(service: RunningService, orgId: number): Promise<number> {
  const r = await service.ctx.pool.query<{ n: number }>('SELECT coalesce(sum(reads), 0)::int AS n FROM scan_read_chunks WHERE org_id = $1', [orgId]);
  return r.rows[0]!.n;
}

async function reportOf(api: ReturnType<typeof client>) {
  return (await api<{ data: Array<{ asset_id: number; location_id: number; asset_last_seen: string }> }>('GET', '/reports/asset-locations?sort=asset_external_key')).body.data;
}

/**
 * The service in a child process of its own, as `npm start` runs it: with `roles` as ROLES, or
 * the default roles when null. `ready` settles with its output once it says so.
 */
function spawnService(env: Record<string, string>, roles: string | null): { process: ChildProcess; ready: Promise<string> } {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env, DATABASE_URL: db.url, SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY, PORT: '0', OPS_PORT: '0', INGEST_PORT: '0', LOG_LEVEL: 'warn' };
  if (roles === null) delete childEnv.ROLES;
  else childEnv.ROLES = roles;
  const child = spawn(process.execPath, ['--import', 'tsx', 'services/main.ts'], { cwd: ROOT, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  const ready = new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('tracking service ready')) resolve(out);
    });
    child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    child.once('exit', (code) => reject(new Error(`the service exited early (${code}): ${out}`)));
  });
  return { process: child, ready };
}

describe('the fixed-reader consumer', () => {
  it('reads both payload shapes from one topic; duplicates and republished messages count once; out-of-order reads across two readers', async () => {
    const env = await kafkaEnv('shapes');
    const service = await start(env);
    const w = await world(service);
    const [x, y] = w.assets;
    const [doorA, doorB] = [`${w.reader}-1`, `${w.reader}-2`];
    const first = canonical(w.reader, [{ point: doorA, epc: x!.epc, s: 0 }, { point: doorA, epc: x!.epc, s: 1 }, { point: doorB, epc: y!.epc, s: 2 }]);
    await gw.publish(env.KAFKA_SCAN_TOPIC, w.reader, first);
    await gw.publish(env.KAFKA_SCAN_TOPIC, w.reader, cs463(w.reader, [{ point: doorB, epc: x!.epc, s: 10 }]));
    // The gateway republishes the first report; the broker delivers it again as a new message.
    await gw.publish(env.KAFKA_SCAN_TOPIC, w.reader, first);
    // A second reader, registered to the same org, saw x earlier than door B did: a late read.
    const second = unique('yard-reader');
    await registerReader(service.ctx, w.orgId, second);
    await assignScanPoint(service.ctx, { orgId: w.orgId, readerId: second, capturePoint: 'yard-1', locationExternalKey: w.locations[0]!.external_key });
    await gw.publish(env.KAFKA_SCAN_TOPIC, second, canonical(second, [{ point: 'yard-1', epc: x!.epc, s: 5 }]));
    await eventually(async () => expect(await placedReads(service, w.orgId)).toBe(5));
    const report = await reportOf(w.api);
    expect(report.find((r) => r.asset_id === x!.id)).toMatchObject({ location_id: w.locations[1]!.id, asset_last_seen: at(10) });
    expect(report.find((r) => r.asset_id === y!.id)).toMatchObject({ location_id: w.locations[1]!.id, asset_last_seen: at(2) });
    const history = (await w.api<{ data: Array<{ location_id: number; event_observed_at: string; last_observed_at: string }> }>('GET', `/assets/${x!.id}/history?sort=event_observed_at`)).body.data;
    expect(history.map((v) => [v.location_id, v.event_observed_at, v.last_observed_at])).toEqual([
      [w.locations[0]!.id, at(0), at(5)],
      [w.locations[1]!.id, at(10), at(10)],
    ]);
    // Microseconds from the CS463 reader are kept, views show milliseconds.
    await gw.publish(env.KAFKA_SCAN_TOPIC, w.reader, { ...cs463(w.reader, []), tags: [{ epc: y!.epc, timeStampOfRead: us(20) + 123_456, antennaPort: 1, capturePointName: doorA, rssi: '-50' }] });
    await eventually(async () => expect((await reportOf(w.api)).find((r) => r.asset_id === y!.id)?.asset_last_seen).toBe(new Date(us(20) / 1000 + 123).toISOString()));
    const stored = await service.ctx.pool.query<{ us: string }>(
      "SELECT (extract(epoch FROM last_seen) * 1000000)::bigint::text AS us FROM asset_locations WHERE org_id = $1 AND asset_id = $2",
      [w.orgId, y!.id],
    );
    expect(Number(stored.rows[0]!.us)).toBe(us(20) + 123_456);
    await stop(service);
  });

  it('dead-letters what is not JSON or matches neither shape, key and value unchanged, with the reason and origin; the batch goes on', async () => {
    const env = await kafkaEnv('poison');
    const service = await start(env);
    const w = await world(service, 1);
    const [x] = w.assets;
    const door = `${w.reader}-1`;
    await gw.publish(env.KAFKA_SCAN_TOPIC, w.reader, canonical(w.reader, [{ point: door, epc: x!.epc, s: 0 }]));
    await gw.publish(env.KAFKA_SCAN_TOPIC, w.reader, '{"reader_id": "oops", "reads": [');
    await gw.publish(env.KAFKA_SCAN_TOPIC, w.reader, { hello: 'world' });
    await gw.publish(env.KAFKA_SCAN_TOPIC, w.reader, { reader_id: w.reader, reads: [{ capture_point: door, tag_type: 'rfid', value: x!.epc, observed_at: 'yesterday' }] });
    await gw.publish(env.KAFKA_SCAN_TOPIC, w.reader, canonical(w.reader, [{ point: door, epc: x!.epc, s: 1 }]));
    const dead = await readDeadLetters(env.KAFKA_DLQ_TOPIC, 3);
    expect(dead.map((d) => [d.key, d.value])).toEqual([
      [w.reader, '{"reader_id": "oops", "reads": ['],
      [w.reader, '{"hello":"world"}'],
      [w.reader, JSON.stringify({ reader_id: w.reader, reads: [{ capture_point: door, tag_type: 'rfid', value: x!.epc, observed_at: 'yesterday' }] })],
    ]);
    expect(dead[0]!.headers['x-dlq-reason']).toBe('not valid JSON');
    expect(dead[1]!.headers['x-dlq-reason']).toBe('matches neither the canonical nor the CS463 shape');
    expect(dead[2]!.headers['x-dlq-reason']).toMatch(/^canonical shape: reads\[0\]\.observed_at: /);
    for (const d of dead) {
      expect(d.headers['x-original-topic']).toBe(env.KAFKA_SCAN_TOPIC);
      expect(d.headers['x-original-partition']).toMatch(/^[0-3]$/);
      expect(d.headers['x-original-offset']).toMatch(/^\d+$/);
      expect(d.headers['x-dlq-reason']).not.toContain('\n');
    }
    expect(new Set(dead.map((d) => d.headers['x-original-offset'])).size).toBe(3);
    await eventually(async () => expect(await placedReads(service, w.orgId)).toBe(2));
    const metrics = await (await fetch(`${service.urls.ops}/metrics`)).text();
    expect(metrics).toMatch(/tracking_ingest_dead_letters_total \d+/);
    expect(metrics).toMatch(/tracking_ingest_reads_total\{path="kafka",outcome="placed"\} \d+/);
    const ready = (await (await fetch(`${service.urls.ops}/readyz`)).json()) as { checks: Record<string, string> };
    expect(ready.checks.kafka).toBe('ok');
    await stop(service);
  });

  it('records unknown tags, unknown readers, unassigned capture points; a tag moved to another asset between two reads', async () => {
    const env = await kafkaEnv('unknown');
    const service = await start(env);
    const w = await world(service, 2);
    const [x, y] = w.assets;
    const door = `${w.reader}-1`;
    const stranger = unique('unregistered-reader');
    const strangerEpc = hex();
    await gw.publish(env.KAFKA_SCAN_TOPIC, w.reader, canonical(w.reader, [{ point: door, epc: hex(), s: 0 }, { point: `${w.reader}-9`, epc: x!.epc, s: 1 }, { point: door, epc: x!.epc, s: 2 }]));
    await gw.publish(env.KAFKA_SCAN_TOPIC, stranger, canonical(stranger, [{ point: 'p', epc: strangerEpc, s: 3 }]));
    await eventually(async () => expect(await placedReads(service, w.orgId)).toBe(1));
    // Move x's tag to y: detach, attach.
    const tag = (await w.api<{ data: Array<{ id: number }> }>('GET', `/assets/${x!.id}/tags`)).body.data[0]!;
    expect((await w.api('DELETE', `/assets/${x!.id}/tags/${tag.id}`)).status).toBe(204);
    expect((await w.api('POST', `/assets/${y!.id}/tags`, { body: { tag_type: 'rfid', value: x!.epc } })).status).toBe(201);
    await gw.publish(env.KAFKA_SCAN_TOPIC, w.reader, canonical(w.reader, [{ point: `${w.reader}-2`, epc: x!.epc, s: 4 }]));
    await eventually(async () => expect(await placedReads(service, w.orgId)).toBe(2));
    const report = await reportOf(w.api);
    expect(report.find((r) => r.asset_id === x!.id)).toMatchObject({ location_id: w.locations[0]!.id, asset_last_seen: at(2) });
    expect(report.find((r) => r.asset_id === y!.id)).toMatchObject({ location_id: w.locations[1]!.id, asset_last_seen: at(4) });
    const unknown = await service.ctx.pool.query<{ org_id: number; cause: string; reader_id: string | null; capture_point: string | null; count: number }>(
      'SELECT org_id, cause, reader_id, capture_point, count::int AS count FROM unknown_reads WHERE org_id = $1 OR reader_id = $2 ORDER BY cause',
      [w.orgId, stranger],
    );
    expect(unknown.rows).toEqual([
      { org_id: w.orgId, cause: 'unassigned_capture_point', reader_id: w.reader, capture_point: `${w.reader}-9`, count: 1 },
      { org_id: 0, cause: 'unknown_reader', reader_id: stranger, capture_point: null, count: 1 },
      { org_id: w.orgId, cause: 'unknown_tag', reader_id: null, capture_point: null, count: 1 },
    ]);
    await stop(service);
  });

  it('keeps the batch while Postgres is unreachable and records it after: nothing lost, nothing dead-lettered', async () => {
    const env = await kafkaEnv('outage');
    const service = await start(env);
    const w = await world(service, 1);
    const [x] = w.assets;
    const door = `${w.reader}-1`;
    const admin = new pg.Client({ connectionString: inject('postgresAdminUrl') });
    await admin.connect();
    const name = pg.escapeIdentifier(db.name);
    try {
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [db.name]);
      for (let s = 0; s < 20; s++) await gw.publish(env.KAFKA_SCAN_TOPIC, w.reader, canonical(w.reader, [{ point: door, epc: x!.epc, s }]));
      await new Promise((r) => setTimeout(r, 3_000));
      // Stuck on the batch, the consumer shows it as lag, not the last committed batch's 0.
      expect(await consumerLag(env.KAFKA_SCAN_TOPIC)).toBeGreaterThanOrEqual(1);
    } finally {
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
      await admin.end();
    }
    await eventually(async () => expect(await placedReads(service, w.orgId)).toBe(20), 60_000, 250);
    await expect(readDeadLetters(env.KAFKA_DLQ_TOPIC, 1, 2_000)).rejects.toThrow(/only 0 of 1/);
    await eventually(async () => expect(await consumerLag(env.KAFKA_SCAN_TOPIC)).toBe(0));
    await stop(service);
  });

  it('two consumers in one group, and a rebalance in the middle of the stream: every read recorded once', { timeout: 180_000 }, async () => {
    const env = await kafkaEnv('rebalance');
    const one = await start(env, 'api,ingest,projector');
    const w = await world(one, 4);
    const readers = [w.reader];
    for (let i = 0; i < 3; i++) {
      const reader = unique('reader');
      await registerReader(one.ctx, w.orgId, reader);
      await assignScanPoint(one.ctx, { orgId: w.orgId, readerId: reader, capturePoint: 'cp', locationExternalKey: w.locations[i % 2]!.external_key });
      readers.push(reader);
    }
    const point = (reader: string) => (reader === w.reader ? `${w.reader}-1` : 'cp');
    let published = 0;
    const publish = async (count: number) => {
      for (let i = 0; i < count; i++, published++) {
        const reader = readers[published % readers.length]!;
        await gw.publish(env.KAFKA_SCAN_TOPIC, reader, canonical(reader, [{ point: point(reader), epc: w.assets[published % 4]!.epc, s: published }]));
      }
    };
    await publish(60);
    const two = await start(env, 'ingest');
    await publish(60);
    await stop(one);
    await publish(60);
    const three = await start(env, 'ingest,projector');
    await publish(60);
    await eventually(async () => expect(await placedReads(three, w.orgId)).toBe(240), 90_000, 250);
    const perAsset = await three.ctx.pool.query<{ n: number }>('SELECT sum(reads)::int AS n FROM scan_read_chunks WHERE org_id = $1 GROUP BY asset_id ORDER BY asset_id', [w.orgId]);
    expect(perAsset.rows.map((r) => r.n)).toEqual([60, 60, 60, 60]);
    await stop(two);
    await stop(three);
  });
});

describe('every producer setting a gateway may use (Apache Kafka, its Java producer)', () => {
  it.skipIf(withoutRealBroker())('batches compressed with gzip, snappy, lz4 and zstd; headers; null keys; each read recorded once', { timeout: 120_000 }, async () => {
    const env = await kafkaEnv('codecs');
    const service = await start(env);
    const w = await world(service, 4);
    const door = `${w.reader}-1`;
    const codecs: Compression[] = ['gzip', 'snappy', 'lz4', 'zstd'];
    let s = 0;
    for (const [i, compression] of codecs.entries()) {
      // 25 reports in one batch; every other one with a null key, some with headers.
      const records = Array.from({ length: 25 }, (_, j): GatewayRecord => ({
        key: j % 2 === 0 ? null : w.reader,
        value: canonical(w.reader, [{ point: door, epc: w.assets[i]!.epc, s: s++ }]),
        headers: j % 3 === 0 ? { 'x-gateway': `gw-${compression}`, traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' } : undefined,
      }));
      await javaGateway(env.KAFKA_SCAN_TOPIC, records, { compression });
    }
    await eventually(async () => expect(await placedReads(service, w.orgId)).toBe(100), 60_000, 250);
    const perAsset = await service.ctx.pool.query<{ n: number }>('SELECT sum(reads)::int AS n FROM scan_read_chunks WHERE org_id = $1 GROUP BY asset_id ORDER BY asset_id', [w.orgId]);
    expect(perAsset.rows.map((r) => r.n)).toEqual([25, 25, 25, 25]);
    const ready = (await (await fetch(`${service.urls.ops}/readyz`)).json()) as { checks: Record<string, string> };
    expect(ready.checks.kafka).toBe('ok');
    await expect(readDeadLetters(env.KAFKA_DLQ_TOPIC, 1, 1_000)).rejects.toThrow(/only 0 of 1/);
    await stop(service);
  });

  it.skipIf(withoutRealBroker())('a report of about 1 MB (the broker default max) and a null value (dead-lettered) go through', { timeout: 120_000 }, async () => {
    const env = await kafkaEnv('large');
    const service = await start(env);
    const w = await world(service, 1);
    const door = `${w.reader}-1`;
    const reads = Array.from({ length: 6_600 }, (_, s) => ({ point: door, epc: w.assets[0]!.epc, s }));
    const big = JSON.stringify(canonical(w.reader, reads));
    expect(big.length).toBeGreaterThan(900_000);
    expect(big.length).toBeLessThan(1_000_000);
    await javaGateway(env.KAFKA_SCAN_TOPIC, [{ key: w.reader, value: big }, { key: w.reader, value: null }], { compression: 'none' });
    await eventually(async () => expect(await placedReads(service, w.orgId)).toBe(6_600), 90_000, 500);
    const dead = await readDeadLetters(env.KAFKA_DLQ_TOPIC, 1);
    expect(dead[0]).toMatchObject({ key: w.reader, value: null });
    expect(dead[0]!.headers['x-dlq-reason']).toBeTruthy();
    await stop(service);
  });

  it.skipIf(withoutRealBroker())('transactional producers: committed reads recorded once, aborted ones never (read committed)', { timeout: 120_000 }, async () => {
    const env = await kafkaEnv('transactions');
    const service = await start(env);
    const w = await world(service, 2);
    const door = `${w.reader}-1`;
    const [kept, aborted] = w.assets;
    const batch = (epc: string, from: number) => Array.from({ length: 10 }, (_, i) => ({ key: w.reader, value: canonical(w.reader, [{ point: door, epc, s: from + i }]) }));
    await javaGateway(env.KAFKA_SCAN_TOPIC, batch(aborted!.epc, 0), { transaction: 'abort', compression: 'lz4' });
    await javaGateway(env.KAFKA_SCAN_TOPIC, batch(kept!.epc, 100), { transaction: 'commit', compression: 'zstd' });
    await javaGateway(env.KAFKA_SCAN_TOPIC, batch(aborted!.epc, 200), { transaction: 'abort' });
    await javaGateway(env.KAFKA_SCAN_TOPIC, batch(kept!.epc, 300), { transaction: 'commit' });
    await eventually(async () => expect(await placedReads(service, w.orgId)).toBe(20), 60_000, 250);
    // Past the last transaction's markers: nothing else arrives.
    await new Promise((r) => setTimeout(r, 2_000));
    const perAsset = await service.ctx.pool.query<{ asset_id: number; n: number }>('SELECT asset_id, sum(reads)::int AS n FROM scan_read_chunks WHERE org_id = $1 GROUP BY asset_id', [w.orgId]);
    expect(perAsset.rows).toEqual([{ asset_id: kept!.id, n: 20 }]);
    await expect(readDeadLetters(env.KAFKA_DLQ_TOPIC, 1, 1_000)).rejects.toThrow(/only 0 of 1/);
    await stop(service);
  });
});

describe('a gateway publishing with kcat -z to the service as `npm start` runs it', () => {
  let child: ChildProcess | null = null;
  afterAll(() => {
    child?.kill('SIGKILL');
  });

  it('one snappy, one lz4, one zstd and one gzip batch from librdkafka (kcat) are each ingested by one process of every role', { timeout: 180_000 }, async () => {
    const env = await kafkaEnv('kcat');
    const setup = await start(env, 'api,projector');
    const w = await world(setup, 4);
    // As `npm start` does, with the roles it runs by default (api, ingest, projector).
    const started = spawnService(env, null);
    child = started.process;
    const out = await started.ready;
    expect(out).toMatch(/roles:\s+api, ingest, projector/);
    const door = `${w.reader}-1`;
    const codecs = ['snappy', 'lz4', 'zstd', 'gzip'] as const;
    for (const [i, codec] of codecs.entries()) {
      // A batch of two reports, compressed by librdkafka as a gateway built on it would.
      const reports = [0, 1].map((j) => JSON.stringify(canonical(w.reader, [{ point: door, epc: w.assets[i]!.epc, s: i * 10 + j }])));
      const kcat = promisify(execFile)('kcat', ['-P', '-b', env.KAFKA_BROKERS, '-t', env.KAFKA_SCAN_TOPIC, '-k', w.reader, '-z', codec, '-X', 'linger.ms=50']);
      kcat.child.stdin!.end(`${reports.join('\n')}\n`);
      await kcat;
    }
    await eventually(async () => expect(await placedReads(setup, w.orgId)).toBe(8), 60_000, 100);
    const report = await reportOf(w.api);
    expect(report.map((r) => r.asset_last_seen).sort()).toEqual([at(1), at(11), at(21), at(31)]);
    child.kill('SIGTERM');
    await new Promise((r) => child!.once('exit', r));
    child = null;
    await stop(setup);
  });
});

describe('a consumer killed mid-stream', () => {
  let child: ChildProcess | null = null;
  afterAll(() => {
    child?.kill('SIGKILL');
  });

  it('kill -9 of the ingest process mid-stream, then a restart: every read shows once', { timeout: 180_000 }, async () => {
    const env = await kafkaEnv('kill');
    const setup = await start(env, 'api,projector');
    const w = await world(setup, 3);
    const spawnIngest = () => spawnService(env, 'ingest');
    const first = spawnIngest();
    child = first.process;
    await first.ready;
    const door = `${w.reader}-1`;
    let published = 0;
    const publish = async (count: number) => {
      for (let i = 0; i < count; i++, published++) {
        await gw.publish(env.KAFKA_SCAN_TOPIC, w.reader, canonical(w.reader, [{ point: door, epc: w.assets[published % 3]!.epc, s: published }]));
      }
    };
    await publish(150);
    await eventually(async () => expect(await placedReads(setup, w.orgId)).toBeGreaterThan(0), 60_000, 50);
    child.kill('SIGKILL');
    await new Promise((r) => child!.once('exit', r));
    await publish(150);
    const second = spawnIngest();
    child = second.process;
    await second.ready;
    await eventually(async () => expect(await placedReads(setup, w.orgId)).toBe(300), 90_000, 250);
    const perAsset = await setup.ctx.pool.query<{ n: number }>('SELECT sum(reads)::int AS n FROM scan_read_chunks WHERE org_id = $1 GROUP BY asset_id ORDER BY asset_id', [w.orgId]);
    expect(perAsset.rows.map((r) => r.n)).toEqual([100, 100, 100]);
    const report = await reportOf(w.api);
    expect(report.map((r) => r.asset_last_seen).sort()).toEqual([at(297), at(298), at(299)]);
    child.kill('SIGTERM');
    await new Promise((r) => child!.once('exit', r));
    child = null;
    await stop(setup);
  });
});
