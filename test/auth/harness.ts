import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { buildApiServer } from '../../services/api/server.js';
import { createAuthentication, type Authentication } from '../../shared/auth/index.js';
import { defineRoute, type RouteDefinition } from '../../shared/http/routes.js';
import type { ServiceContext } from '../../shared/service-context.js';

/** The body of an error response. */
export interface ErrorBody {
  error: { type: string; title: string; status: number; detail: string; instance: string; request_id: string };
}

/**
 * Routes that exist only in these tests, so scope and session rules are checked against the real
 * route pipeline without depending on other slices' endpoints.
 */
export function probeRoutes(): RouteDefinition[] {
  const echo = (scope: string | null, path: string, method: 'GET' | 'POST' = 'GET') =>
    defineRoute({
      method,
      path,
      operationId: `probe${method}${path.replace(/\W/g, '_')}`,
      summary: 'test probe',
      tag: 'probe',
      scope,
      responses: { 200: { description: 'the principal' } },
      async handler({ principal }) {
        return { status: 200, body: { data: principal } };
      },
    });
  return [echo('assets:read', '/probe/assets'), echo('assets:write', '/probe/assets', 'POST'), echo('tracking:read', '/probe/tracking')];
}

export interface ProbeServer {
  url: string;
  auth: Authentication;
  app: FastifyInstance;
  close(): Promise<void>;
}

/** An api listener with the real authentication and rate limiter over `routes`, on an ephemeral port. */
export async function startProbeServer(ctx: ServiceContext, routes: RouteDefinition[] = probeRoutes()): Promise<ProbeServer> {
  const auth = await createAuthentication(ctx);
  const app = buildApiServer(ctx, { authenticator: auth.authenticator, rateLimiter: auth.rateLimiter, routes });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/api/v1`,
    auth,
    app,
    async close() {
      await app.close();
      await auth.stop();
    },
  };
}
