import os from 'node:os';
import type { FastifyInstance } from 'fastify';
import { createAuthentication, type Authentication } from '../../shared/auth/index.js';
import { kafkaBrokers } from '../../shared/config.js';
import { buildHttpServer } from '../../shared/http/server.js';
import { registerOpenApi } from '../../shared/http/openapi.js';
import { httpObserver } from '../ops/metrics.js';
import { listenerUrl, type RoleFactory } from '../role.js';
import { handheldRoutes } from './handheld-routes.js';
import { createKafkaIngestClient, type KafkaIngestClient } from './kafka/client.js';
import { ScanConsumer } from './kafka/consumer.js';
import { ingestMetrics } from './metrics.js';
import { MqttScanSubscriber } from './mqtt/subscriber.js';
import { readMqttTls } from './mqtt/tls-files.js';
import { INGEST_PREFIX } from './prefix.js';

/**
 * Scan ingestion: handheld submissions on INGEST_PORT (`/ingest/v1`), through the same request
 * pipeline as the public API (request id, envelope, authentication, rate limit, scope, content
 * type, validation); and, when KAFKA_BROKERS is set, the fixed-reader consumer of
 * KAFKA_SCAN_TOPIC in group KAFKA_GROUP_ID; and, when MQTT_URL is set, the fixed-reader MQTT
 * subscriber of MQTT_TOPICS, shared in MQTT_SHARE_GROUP.
 */
export const ingestRole: RoleFactory = (ctx) => {
  let auth: Authentication | null = null;
  let app: FastifyInstance | null = null;
  let kafka: KafkaIngestClient | null = null;
  let consumer: ScanConsumer | null = null;
  let mqtt: MqttScanSubscriber | null = null;
  const { config } = ctx;
  return {
    name: 'ingest',
    async start() {
      // Read first: a TLS file that is missing or wrong stops the start before anything connects.
      const mqttTls = config.MQTT_URL ? readMqttTls(config) : undefined;
      if (config.KAFKA_BROKERS) {
        kafka = createKafkaIngestClient({
          brokers: kafkaBrokers(config),
          groupId: config.KAFKA_GROUP_ID,
          clientId: 'tracking-ingest',
          log: ctx.log.child({ role: 'ingest' }),
        });
        consumer = new ScanConsumer(ctx, kafka, { scans: config.KAFKA_SCAN_TOPIC, deadLetters: config.KAFKA_DLQ_TOPIC }, ingestMetrics);
        await consumer.start();
      }
      if (config.MQTT_URL) {
        mqtt = new MqttScanSubscriber(
          ctx,
          {
            url: config.MQTT_URL,
            ...(config.MQTT_USERNAME ? { username: config.MQTT_USERNAME } : {}),
            ...(config.MQTT_PASSWORD ? { password: config.MQTT_PASSWORD } : {}),
            ...(mqttTls ? { tls: mqttTls } : {}),
            clientId: config.MQTT_CLIENT_ID ?? `tracking-ingest-${os.hostname()}`,
            topics: config.MQTT_TOPICS.split(',').map((t) => t.trim()).filter(Boolean),
            shareGroup: config.MQTT_SHARE_GROUP,
            sessionExpirySeconds: config.MQTT_SESSION_EXPIRY_SECONDS,
          },
          ingestMetrics,
        );
        await mqtt.start();
      }
      auth = await createAuthentication(ctx, { ensureSigningKey: false });
      const routes = handheldRoutes(ctx, ingestMetrics);
      app = buildHttpServer(ctx.log, {
        role: 'ingest',
        prefix: INGEST_PREFIX,
        authenticator: auth.authenticator,
        rateLimiter: auth.rateLimiter,
        routes,
        registerPublic: (server) =>
          registerOpenApi(server, routes, {
            title: 'Asset and Location Tracking: handheld ingestion',
            description: 'Handheld submissions of scans. Keys need the scans:write scope (x-required-scopes).',
            serverUrl: INGEST_PREFIX,
          }),
        observer: httpObserver('ingest'),
      });
      await app.listen({ host: ctx.config.HOST, port: ctx.config.INGEST_PORT });
    },
    async stop() {
      await app?.close();
      await consumer?.stop();
      await kafka?.close();
      await mqtt?.stop();
      await auth?.stop();
    },
    async readiness(): Promise<Record<string, string>> {
      const checks: Record<string, string> = {};
      const subscriber = mqtt?.status();
      if (subscriber) checks.mqtt = subscriber.connected ? 'ok' : `disconnected: ${subscriber.reason}`;
      if (!kafka) return checks;
      const state = consumer?.status();
      if (state && !state.running) return { ...checks, kafka: `consumer stopped: ${state.reason}` };
      try {
        await kafka.ping(2_000);
        return { ...checks, kafka: 'ok' };
      } catch {
        return { ...checks, kafka: 'unreachable' };
      }
    },
    liveness(): Record<string, string> {
      const checks: Record<string, string> = {};
      const subscriber = mqtt?.status();
      if (subscriber && !subscriber.connected) {
        const seconds = (Date.now() - subscriber.sinceMs) / 1000;
        if (seconds >= config.MQTT_UNHEALTHY_SECONDS) checks.mqtt = `disconnected for ${Math.round(seconds)} s: ${subscriber.reason}`;
      }
      const state = consumer?.status();
      if (!state || state.running) return checks;
      const seconds = (Date.now() - state.sinceMs) / 1000;
      if (seconds < config.KAFKA_CONSUMER_UNHEALTHY_SECONDS) return checks;
      return { ...checks, kafka: `consumer stopped for ${Math.round(seconds)} s: ${state.reason}` };
    },
    urls: (): Record<string, string> => (app ? { ingest: `${listenerUrl(app, ctx.config.HOST)}${INGEST_PREFIX}` } : {}),
  };
};
