import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../shared/config.js';
import { registerReader } from '../../shared/domain/readers/commands.js';
import { createLogger } from '../../shared/logger.js';
import { startService, type RunningService } from '../../services/service.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startPrivateKafkaBroker, type KafkaBroker } from '../support/kafka-broker.js';
import { createTopics, eventually, javaGateway, kafkaBrokers, readDeadLetters, withoutRealBroker, type Compression } from '../support/kafka.js';
import { damageRecords, firstSegment, segmentBatches } from '../support/kafka-segments.js';
import { capturedLog } from '../support/logs.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY } from '../support/service.js';

/**
 * A consumer that cannot die silently (issue 22): whatever stops it is logged at error with its
 * cause, /readyz says why while it is not consuming, /healthz fails after
 * KAFKA_CONSUMER_UNHEALTHY_SECONDS, it restarts with backoff (counted), and nothing is lost or
 * counted twice. Against Apache Kafka: the run's broker, and one of this file's own to restart.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
let db: TestDatabase;
const running: RunningService[] = [];
const children: ChildProcess[] = [];
beforeAll(async () => {
  db = await createTestDatabase('kafka_supervision');
});
afterAll(async () => {
  for (const child of children.splice(0)) {
    child.kill('SIGCONT');
    child.kill('SIGKILL');
  }
  for (const service of running.splice(0)) await service.stop().catch(() => undefined);
  await db?.drop();
});

let n = 0;
const unique = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${++n}`;

async function start(env: Record<string, string>, log = createLogger('silent')): Promise<RunningService> {
  const config = loadConfig({ PORT: '0', OPS_PORT: '0', INGEST_PORT: '0', LOG_LEVEL: 'silent', ROLES: 'ingest,projector', SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY, ...env });
  const service = await startService(config, db.url, log);
  running.push(service);
  return service;
}

async function stop(service: RunningService): Promise<void> {
  running.splice(running.indexOf(service), 1);
  await service.stop();
}

/** `ROLES=ingest` as a process of its own (services/main.ts): its ops URL once ready, and its log lines (JSON, warn and up). */
async function spawnIngest(env: Record<string, string>): Promise<{ process: ChildProcess; ops: string; lines(): Array<Record<string, unknown>> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'services/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, ...env, DATABASE_URL: db.url, ROLES: 'ingest', PORT: '0', OPS_PORT: '0', INGEST_PORT: '0', LOG_LEVEL: 'warn', SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  await new Promise<void>((resolve, reject) => {
    const ready = () => out.includes('tracking service ready') && resolve();
    child.stdout!.on('data', ready);
    child.once('exit', (code) => reject(new Error(`ingest exited early (${code}):\n${out.slice(-3000)}`)));
  });
  const lines = () =>
    out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { process: child, ops: /ops:\s+(http:\/\/[^/\s]+)/.exec(out)![1]!, lines };
}

async function ops(service: RunningService | { urls: { ops?: string } }, path: string): Promise<{ status: number; body: { status: string; checks?: Record<string, string> } }> {
  const response = await fetch(`${service.urls.ops}${path}`);
  return { status: response.status, body: (await response.json()) as { status: string; checks?: Record<string, string> } };
}

async function metric(service: RunningService | { urls: { ops?: string } }, name: string): Promise<number> {
  const text = await (await fetch(`${service.urls.ops}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ')[1]) : NaN;
}

/** An org with one registered reader; its capture point `cp` is assigned nowhere, so every read is counted as such. */
async function world(service: RunningService) {
  const ctx = service.ctx;
  const { createOrg } = await import('../support/auth.js');
  const orgId = (await createOrg(ctx, unique('supervised'))).id;
  const reader = unique('reader');
  await registerReader(ctx, orgId, reader);
  return { orgId, reader };
}

/** Reads of `reader` recorded (placed or not), as the scan read model holds them. */
async function readsOf(service: RunningService, reader: string): Promise<number> {
  const r = await service.ctx.pool.query<{ n: number }>('SELECT coalesce(sum(count), 0)::int AS n FROM unknown_reads WHERE reader_id = $1', [reader]);
  return r.rows[0]?.n ?? 0;
}

const report = (reader: string, s: number) => ({
  reader_id: reader,
  reads: [{ capture_point: 'cp', tag_type: 'rfid', value: 'E2801160600002084D9F34A9', observed_at: new Date(Date.UTC(2026, 4, 25, 14) + s * 1000).toISOString() }],
});

describe.skipIf(withoutRealBroker())('a Kafka consumer that cannot die silently', () => {
  it('a missing topic stops it: logged at error with the cause, /readyz 503 with the reason, /healthz 503 past the bound; it restarts with backoff and, once the topic exists, consumes', { timeout: 120_000 }, async () => {
    const id = unique('supervised');
    const env = { KAFKA_BROKERS: kafkaBrokers(), KAFKA_SCAN_TOPIC: `scans-${id}`, KAFKA_DLQ_TOPIC: `dlq-${id}`, KAFKA_GROUP_ID: `group-${id}`, KAFKA_CONSUMER_UNHEALTHY_SECONDS: '3' };
    const logs = capturedLog('warn');
    const service = await start(env, logs.log);
    const restartsBefore = await metric(service, 'tracking_kafka_consumer_restarts_total');
    // No such topic: the consumer cannot join; the process runs and says so.
    await eventually(async () => {
      const ready = await ops(service, '/readyz');
      expect(ready.status).toBe(503);
      expect(ready.body.checks!.kafka).toMatch(/^consumer stopped: .+/);
    });
    expect(await metric(service, 'tracking_kafka_consumer_running')).toBe(0);
    expect((await ops(service, '/healthz')).status).toBe(200);
    const stoppedLine = logs.lines().find((l) => l.level === 50 && String(l.msg).startsWith('kafka: consumer stopped: '));
    expect(stoppedLine).toBeTruthy();
    expect(stoppedLine!.err).toBeTruthy();
    await eventually(async () => {
      const health = await ops(service, '/healthz');
      expect(health.status).toBe(503);
      expect(health.body.checks!.kafka).toMatch(/^consumer stopped for \d+ s: /);
    }, 20_000);
    // Restarted with backoff, each counted; then the topic appears and the consumer joins.
    await eventually(async () => expect(await metric(service, 'tracking_kafka_consumer_restarts_total')).toBeGreaterThan(restartsBefore), 20_000);
    await createTopics(env.KAFKA_SCAN_TOPIC, env.KAFKA_DLQ_TOPIC);
    const w = await world(service);
    await javaGateway(env.KAFKA_SCAN_TOPIC, Array.from({ length: 30 }, (_, s) => ({ key: w.reader, value: report(w.reader, s) })), { compression: 'snappy' });
    await eventually(async () => expect(await metric(service, 'tracking_kafka_consumer_running')).toBe(1), 60_000, 250);
    await eventually(async () => expect(await readsOf(service, w.reader)).toBe(30), 60_000, 250);
    expect((await ops(service, '/readyz')).body.checks!.kafka).toBe('ok');
    expect((await ops(service, '/healthz')).status).toBe(200);
    await stop(service);
  });

  describe('a broker restart', () => {
    let broker: KafkaBroker | null = null;
    afterAll(async () => {
      await broker?.stop();
    });

    it('the broker restarts under a consuming service: every read recorded once, the consumer consuming after', { timeout: 180_000 }, async () => {
      broker = await startPrivateKafkaBroker();
      const id = unique('restart');
      const env = { KAFKA_BROKERS: broker.brokers, KAFKA_SCAN_TOPIC: `scans-${id}`, KAFKA_DLQ_TOPIC: `dlq-${id}`, KAFKA_GROUP_ID: `group-${id}` };
      const { Kafka, logLevel } = await import('kafkajs');
      const admin = new Kafka({ clientId: 'test-admin', brokers: [broker.brokers], logLevel: logLevel.NOTHING }).admin();
      await admin.connect();
      await admin.createTopics({ waitForLeaders: true, topics: [env.KAFKA_SCAN_TOPIC, env.KAFKA_DLQ_TOPIC].map((topic) => ({ topic, numPartitions: 4 })) });
      await admin.disconnect();
      const service = await start(env);
      const w = await world(service);
      const publish = (from: number) =>
        javaGateway(env.KAFKA_SCAN_TOPIC, Array.from({ length: 50 }, (_, i) => ({ key: `${w.reader}-${i % 7}`, value: report(w.reader, from + i) })), { compression: 'zstd', brokers: broker!.brokers });
      await publish(0);
      await eventually(async () => expect(await readsOf(service, w.reader)).toBe(50), 60_000, 250);
      await broker.restart();
      await publish(50);
      await eventually(async () => expect(await readsOf(service, w.reader)).toBe(100), 90_000, 250);
      await eventually(async () => {
        expect(await metric(service, 'tracking_kafka_consumer_running')).toBe(1);
        expect((await ops(service, '/readyz')).body.checks!.kafka).toBe('ok');
      }, 60_000, 250);
      // Nothing counted twice: a little later the count is the same.
      await new Promise((r) => setTimeout(r, 2_000));
      expect(await readsOf(service, w.reader)).toBe(100);
      await stop(service);
    });
  });

  it('a lost group (the ingest process frozen past its 10 s session): logged at error with the cause, /readyz 503 with it, restarted by itself; nothing lost or counted twice', { timeout: 180_000 }, async () => {
    const id = unique('lost-group');
    const env = { KAFKA_BROKERS: kafkaBrokers(), KAFKA_SCAN_TOPIC: `scans-${id}`, KAFKA_DLQ_TOPIC: `dlq-${id}`, KAFKA_GROUP_ID: `group-${id}` };
    await createTopics(env.KAFKA_SCAN_TOPIC, env.KAFKA_DLQ_TOPIC);
    const setup = await start({ ...env, ROLES: 'projector' });
    const w = await world(setup);
    let s = 0;
    const publish = (count: number) => javaGateway(env.KAFKA_SCAN_TOPIC, Array.from({ length: count }, (_, i) => ({ key: `${w.reader}-${i % 5}`, value: report(w.reader, s++) })));
    const ingest = await spawnIngest(env);
    const at = { urls: { ops: ingest.ops } };
    await publish(20);
    await eventually(async () => expect(await readsOf(setup, w.reader)).toBe(20), 60_000, 250);
    expect(await metric(at, 'tracking_kafka_consumer_restarts_total')).toBe(0);
    // Frozen past the session timeout: the coordinator drops the member; reports arrive meanwhile.
    ingest.process.kill('SIGSTOP');
    await publish(20);
    await new Promise((r) => setTimeout(r, 15_000));
    ingest.process.kill('SIGCONT');
    const reason = await eventually(async () => {
      const ready = await ops(at, '/readyz');
      expect(ready.status).toBe(503);
      expect(ready.body.checks!.kafka).toMatch(/^consumer stopped: .*lost this member/);
      return ready.body.checks!.kafka!;
    }, 15_000, 50);
    const stopped = ingest.lines().find((l) => l.level === 50 && String(l.msg).startsWith('kafka: consumer stopped: ') && String(l.msg).includes('lost this member'));
    expect(stopped, JSON.stringify(ingest.lines().slice(-10))).toBeTruthy();
    expect(stopped!.err).toBeTruthy();
    expect(reason).toBe(`consumer stopped: ${String(stopped!.msg).replace(/^kafka: consumer stopped: /, '').replace(/; restarting in \d+ ms$/, '')}`);
    await eventually(async () => expect(await metric(at, 'tracking_kafka_consumer_restarts_total')).toBe(1), 30_000, 250);
    await eventually(async () => expect((await ops(at, '/readyz')).body.checks!.kafka).toBe('ok'), 30_000, 250);
    await publish(20);
    await eventually(async () => expect(await readsOf(setup, w.reader)).toBe(60), 60_000, 250);
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await readsOf(setup, w.reader)).toBe(60);
    expect(await metric(at, 'tracking_kafka_consumer_running')).toBe(1);
    ingest.process.kill('SIGTERM');
    await new Promise((r) => ingest.process.once('exit', r));
    children.splice(children.indexOf(ingest.process), 1);
    await stop(setup);
  });

  it('the topic deleted under a consuming service (a fatal broker error): logged at error with the cause, /readyz 503 with it, restarted with backoff; once the topic is back, every read counts once', { timeout: 180_000 }, async () => {
    const id = unique('deleted');
    const env = { KAFKA_BROKERS: kafkaBrokers(), KAFKA_SCAN_TOPIC: `scans-${id}`, KAFKA_DLQ_TOPIC: `dlq-${id}`, KAFKA_GROUP_ID: `group-${id}` };
    await createTopics(env.KAFKA_SCAN_TOPIC, env.KAFKA_DLQ_TOPIC);
    const logs = capturedLog('warn');
    const service = await start(env, logs.log);
    const w = await world(service);
    const restartsBefore = await metric(service, 'tracking_kafka_consumer_restarts_total');
    let s = 0;
    const publish = (count: number) => javaGateway(env.KAFKA_SCAN_TOPIC, Array.from({ length: count }, (_, i) => ({ key: `${w.reader}-${i % 5}`, value: report(w.reader, s++) })));
    await publish(20);
    await eventually(async () => expect(await readsOf(service, w.reader)).toBe(20), 60_000, 250);
    const { Kafka, logLevel } = await import('kafkajs');
    const admin = new Kafka({ clientId: 'test-admin', brokers: [kafkaBrokers()], logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    await admin.deleteTopics({ topics: [env.KAFKA_SCAN_TOPIC] });
    const reason = await eventually(async () => {
      const ready = await ops(service, '/readyz');
      expect(ready.status).toBe(503);
      expect(ready.body.checks!.kafka).toMatch(/^consumer stopped: .+/);
      return ready.body.checks!.kafka!;
    }, 30_000, 50);
    const stopped = logs.lines().find((l) => l.level === 50 && String(l.msg).startsWith('kafka: consumer stopped: '));
    expect(stopped).toBeTruthy();
    expect(stopped!.err).toBeTruthy();
    expect(String(stopped!.msg)).toContain(reason.replace(/^consumer stopped: /, ''));
    await eventually(async () => expect(await metric(service, 'tracking_kafka_consumer_restarts_total')).toBeGreaterThan(restartsBefore), 30_000, 250);
    // Back: the group's offsets went with the old topic, the new one is read from its start.
    await eventually(() => createTopics(env.KAFKA_SCAN_TOPIC), 30_000, 500);
    await admin.disconnect();
    await publish(20);
    await eventually(async () => expect(await readsOf(service, w.reader)).toBe(40), 90_000, 250);
    await eventually(async () => expect((await ops(service, '/readyz')).body.checks!.kafka).toBe('ok'), 60_000, 250);
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await readsOf(service, w.reader)).toBe(40);
    await stop(service);
  });

  describe('a record batch that cannot be read', () => {
    let broker: KafkaBroker | null = null;
    afterAll(async () => {
      await broker?.stop();
    });

    it('a gzip batch whose payload is damaged and a plain batch whose record is cut go whole to the dead-letter topic with the reason; the partition moves on, commits past them once, and the reads around them count once', { timeout: 240_000 }, async () => {
      broker = await startPrivateKafkaBroker();
      const id = unique('unreadable');
      const env = { KAFKA_BROKERS: broker.brokers, KAFKA_SCAN_TOPIC: `scans-${id}`, KAFKA_DLQ_TOPIC: `dlq-${id}`, KAFKA_GROUP_ID: `group-${id}` };
      const { Kafka, logLevel } = await import('kafkajs');
      const admin = new Kafka({ clientId: 'test-admin', brokers: [broker.brokers], logLevel: logLevel.NOTHING }).admin();
      await admin.connect();
      // One partition: the batches are in one segment, in the order published.
      await admin.createTopics({ waitForLeaders: true, topics: [env.KAFKA_SCAN_TOPIC, env.KAFKA_DLQ_TOPIC].map((topic) => ({ topic, numPartitions: 1 })) });
      const setup = await start({ ...env, ROLES: 'projector' });
      const w = await world(setup);
      // Offsets 0-9 plain, 10-14 gzip (to damage), 15-24 plain, 25-27 plain (to damage), 28-37 plain: each call its own producer, so its own batches.
      const runs: Array<[number, Compression]> = [[10, 'none'], [5, 'gzip'], [10, 'none'], [3, 'none'], [10, 'none']];
      let s = 0;
      for (const [count, compression] of runs) {
        await javaGateway(env.KAFKA_SCAN_TOPIC, Array.from({ length: count }, () => ({ key: w.reader, value: report(w.reader, s++) })), { compression, brokers: broker.brokers });
      }
      const segment = firstSegment(broker.logDir, env.KAFKA_SCAN_TOPIC, 0);
      const damaged: Array<{ first: bigint; last: bigint; bytes: Buffer }> = [];
      await broker.restart(async () => {
        const batches = (await segmentBatches(segment)).filter((b) => !b.isControl);
        expect(batches.map((b) => b.codec)).toContain(1);
        for (const batch of batches) {
          // In the gzip payload's middle (its CRC-32 fails); in the plain batch, its first record's length (kafkajs alone would throw reading it).
          if (batch.codec === 1) damaged.push({ first: batch.firstOffset, last: batch.lastOffset, bytes: await damageRecords(segment, batch, Math.floor((batch.size - 61) / 2)) });
          else if (batch.firstOffset >= 25n && batch.lastOffset <= 27n) damaged.push({ first: batch.firstOffset, last: batch.lastOffset, bytes: await damageRecords(segment, batch, 0, 1) });
        }
      });
      const damagedReads = damaged.reduce((n, d) => n + Number(d.last - d.first + 1n), 0);
      expect(damagedReads).toBe(8);
      // The broker back: its partitions led and its group coordinator loaded (else a join may fail at first, a restart this test does not count).
      await eventually(async () => {
        const metadata = await admin.fetchTopicMetadata({ topics: [env.KAFKA_SCAN_TOPIC] });
        expect(metadata.topics[0]!.partitions[0]!.leader).toBe(1);
        await admin.fetchOffsets({ groupId: env.KAFKA_GROUP_ID, topics: [env.KAFKA_SCAN_TOPIC] });
      }, 30_000, 250);

      // This process's metrics registry is shared by the file's services: count from here.
      const [restartsBefore, unreadableBefore] = [await metric(setup, 'tracking_kafka_consumer_restarts_total'), await metric(setup, 'tracking_kafka_unreadable_batches_total')];
      const logs = capturedLog('warn');
      let service = await start({ ...env, ROLES: 'ingest' }, logs.log);
      await eventually(async () => expect(await readsOf(setup, w.reader)).toBe(30), 60_000, 250);
      const letters = await readDeadLetters(env.KAFKA_DLQ_TOPIC, damaged.length, 30_000, broker.brokers);
      expect(letters.map((l) => ({ first: l.headers['x-original-offset'], last: l.headers['x-original-last-offset'] }))).toEqual(damaged.map((d) => ({ first: String(d.first), last: String(d.last) })));
      for (const [i, letter] of letters.entries()) {
        expect(letter.key).toBeNull();
        expect(letter.bytes!.equals(damaged[i]!.bytes)).toBe(true);
        expect(letter.headers['x-original-topic']).toBe(env.KAFKA_SCAN_TOPIC);
        expect(letter.headers['x-original-partition']).toBe('0');
      }
      expect(letters[0]!.headers['x-dlq-reason']).toMatch(/^unreadable record batch \(gzip\): CRC-32C mismatch: the batch says 0x[0-9a-f]{8}, its bytes give 0x[0-9a-f]{8}$/);
      expect(letters[letters.length - 1]!.headers['x-dlq-reason']).toMatch(/^unreadable record batch \(none\): CRC-32C mismatch/);
      expect(await metric(service, 'tracking_kafka_unreadable_batches_total')).toBe(unreadableBefore + damaged.length);
      expect(await metric(service, 'tracking_kafka_consumer_restarts_total')).toBe(restartsBefore);
      expect(logs.lines().filter((l) => l.level === 50 && String(l.msg).includes('unreadable record batch'))).toHaveLength(damaged.length);
      // Committed past the last offset, once: a new process of the group reads nothing again.
      await eventually(async () => {
        const [offsets] = await admin.fetchOffsets({ groupId: env.KAFKA_GROUP_ID, topics: [env.KAFKA_SCAN_TOPIC] });
        expect(offsets!.partitions[0]!.offset).toBe('38');
      });
      await stop(service);
      service = await start({ ...env, ROLES: 'ingest' });
      await eventually(async () => expect(await metric(service, 'tracking_kafka_consumer_running')).toBe(1), 30_000, 250);
      await javaGateway(env.KAFKA_SCAN_TOPIC, [{ key: w.reader, value: report(w.reader, s++) }], { brokers: broker.brokers });
      await eventually(async () => expect(await readsOf(setup, w.reader)).toBe(31), 60_000, 250);
      await new Promise((r) => setTimeout(r, 1_000));
      expect(await readsOf(setup, w.reader)).toBe(31);
      await expect(readDeadLetters(env.KAFKA_DLQ_TOPIC, damaged.length + 1, 2_000, broker.brokers)).rejects.toThrow(new RegExp(`only ${damaged.length} of`));
      expect(await metric(service, 'tracking_kafka_unreadable_batches_total')).toBe(unreadableBefore + damaged.length);
      await admin.disconnect();
      await stop(service);
      await stop(setup);
    });
  });
});
