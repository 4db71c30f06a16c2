import type { FastifyInstance } from 'fastify';
import { createAuthentication, type Authentication } from '../../shared/auth/index.js';
import { buildHttpServer } from '../../shared/http/server.js';
import { registerOpenApi } from '../../shared/http/openapi.js';
import { listenerUrl, type RoleFactory } from '../role.js';
import { handheldRoutes } from './handheld-routes.js';
import { ingestMetrics } from './metrics.js';
import { INGEST_PREFIX } from './prefix.js';

/**
 * Scan ingestion: handheld submissions on INGEST_PORT (`/ingest/v1`), through the same request
 * pipeline as the public API (request id, envelope, authentication, rate limit, scope, content
 * type, validation).
 */
export const ingestRole: RoleFactory = (ctx) => {
  let auth: Authentication | null = null;
  let app: FastifyInstance | null = null;
  return {
    name: 'ingest',
    async start() {
      auth = await createAuthentication(ctx);
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
      });
      await app.listen({ host: ctx.config.HOST, port: ctx.config.INGEST_PORT });
    },
    async stop() {
      await app?.close();
      await auth?.stop();
    },
    urls: (): Record<string, string> => (app ? { ingest: `${listenerUrl(app, ctx.config.HOST)}${INGEST_PREFIX}` } : {}),
  };
};
