import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../../shared/service-context.js';
import type { HttpObserver } from '../../shared/http/observer.js';
import type { Authenticator, RateLimiter } from '../../shared/auth/principal.js';
import type { RouteDefinition } from '../../shared/http/routes.js';
import { buildHttpServer } from '../../shared/http/server.js';
import type { NotFoundPage } from '../../shared/http/errors-plugin.js';
import { API_PREFIX } from './prefix.js';

export interface ApiDependencies {
  authenticator: Authenticator;
  rateLimiter: RateLimiter;
  routes: readonly RouteDefinition[];
  /** Routes outside /api/v1 that need no key (the OpenAPI documents, /docs). */
  registerPublic?: (app: FastifyInstance) => NotFoundPage | void;
  /** Request metrics (services/ops/metrics.ts). */
  observer?: HttpObserver;
}

/** The public listener: the shared request pipeline with the /api/v1 routes. */
export function buildApiServer(ctx: ServiceContext, deps: ApiDependencies): FastifyInstance {
  return buildHttpServer(ctx.log, { role: 'api', prefix: API_PREFIX, ...deps });
}
