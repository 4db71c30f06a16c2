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
import { INGEST_PREFIX } from './prefix.js';

/**
 * Scan ingestion: handheld submissions on INGEST_PORT (`/ingest/v1`), through the same request
 * pipeline as the public API (request id, envelope, authentication, rate limit, scope, content
 * type, validation); and, when KAFKA_BROKERS is set, the fixed-reader consumer of
 * KAFKA_SCAN_TOPIC in group KAFKA_GROUP_ID.
 */
export const ingestRole: RoleFactory = (ctx) => {
  let auth: Authentication | null = null;
  let app: FastifyInstance | null = null;
  let kafka: KafkaIngestClient | null = null;
  let consumer: ScanConsumer | null = null;
  const { config } = ctx;
  return {
    name: 'ingest',
    async start() {
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
      await auth?.stop();
    },
    async readiness(): Promise<Record<string, string>> {
      if (!kafka) return {};
      const state = consumer?.status();
      if (state && !state.running) return { kafka: `consumer stopped: ${state.reason}` };
      try {
        await kafka.ping(2_000);
        return { kafka: 'ok' };
      } catch {
        return { kafka: 'unreachable' };
      }
    },
    liveness(): Record<string, string> {
      const state = consumer?.status();
      if (!state || state.running) return {};
      const seconds = (Date.now() - state.sinceMs) / 1000;
      if (seconds < config.KAFKA_CONSUMER_UNHEALTHY_SECONDS) return {};
      return { kafka: `consumer stopped for ${Math.round(seconds)} s: ${state.reason}` };
    },
    urls: (): Record<string, string> => (app ? { ingest: `${listenerUrl(app, ctx.config.HOST)}${INGEST_PREFIX}` } : {}),
  };
};
