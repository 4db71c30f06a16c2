import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../shared/config.js';
import { registerReader } from '../../shared/domain/readers/commands.js';
import { createLogger } from '../../shared/logger.js';
import { startService, type RunningService } from '../../services/service.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startPrivateKafkaBroker, type KafkaBroker } from '../support/kafka-broker.js';
import { createTopics, eventually, javaGateway, kafkaBrokers, withoutRealBroker } from '../support/kafka.js';
import { capturedLog } from '../support/logs.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY } from '../support/service.js';

/**
 * A consumer that cannot die silently (issue 22): whatever stops it is logged at error with its
 * cause, /readyz says why while it is not consuming, /healthz fails after
 * KAFKA_CONSUMER_UNHEALTHY_SECONDS, it restarts with backoff (counted), and nothing is lost or
 * counted twice. Against Apache Kafka: the run's broker, and one of this file's own to restart.
 */

let db: TestDatabase;
const running: RunningService[] = [];
beforeAll(async () => {
  db = await createTestDatabase('kafka_supervision');
});
afterAll(async () => {
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

async function ops(service: RunningService, path: string): Promise<{ status: number; body: { status: string; checks?: Record<string, string> } }> {
  const response = await fetch(`${service.urls.ops}${path}`);
  return { status: response.status, body: (await response.json()) as { status: string; checks?: Record<string, string> } };
}

async function metric(service: RunningService, name: string): Promise<number> {
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
});
