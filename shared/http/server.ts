import { METHODS } from 'node:http';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from '../logger.js';
import { accessLogOptions } from './access-log.js';
import { requestIdOptions, registerRequestId } from './request-id.js';
import { closeKeepAliveOnShutdown, refuseRequestsWhileClosing } from './shutdown.js';
import { discardRequestBody, MAX_BODY_BYTES, received } from './body.js';
import { registerErrorHandling, type NotFoundPage } from './errors-plugin.js';
import type { HttpObserver } from './observer.js';
import type { Authenticator, RateLimiter } from '../auth/principal.js';
import { registerRoutes, type RouteDefinition } from './routes.js';

export interface HttpServerOptions {
  /** Role name for the logs (`api`, `ingest`). */
  role: string;
  /** Where the routes live: `/api/v1`, `/ingest/v1`. */
  prefix: string;
  authenticator: Authenticator;
  rateLimiter: RateLimiter;
  routes: readonly RouteDefinition[];
  /** Routes outside the prefix that need no key (the OpenAPI documents); may give the listener's own Not found page. */
  registerPublic?: (app: FastifyInstance) => NotFoundPage | void;
  /** Told of every response and of every request the rate limiter refuses (metrics). */
  observer?: HttpObserver;
}

/**
 * A listener of the public contract (the api's `/api/v1`, the ingest's `/ingest/v1`): request ids,
 * the error envelope, and its routes under one prefix, each request checked in the contract's order.
 */
export function buildHttpServer(log: Logger, deps: HttpServerOptions): FastifyInstance {
  const app: FastifyInstance = Fastify({
    loggerInstance: log.child({ role: deps.role }) as FastifyBaseLogger,
    bodyLimit: MAX_BODY_BYTES,
    routerOptions: { maxParamLength: 2048 },
    // Oversized Authorization headers get our 401 envelope rather than Node's bare 431.
    http: { maxHeaderSize: 256 * 1024 },
    exposeHeadRoutes: false,
    // refuseRequestsWhileClosing answers them in the contract's envelope instead.
    return503OnClosing: false,
    ...requestIdOptions,
    ...accessLogOptions,
  });

  registerRequestId(app);
  // HEAD wherever GET answers, outside the pipeline's routes too (the console's pages, the docs,
  // the OpenAPI documents): the same handler, whose body Node leaves out of a HEAD response.
  app.addHook('onRoute', (route) => {
    if (route.method === 'GET') route.method = ['GET', 'HEAD'];
  });
  const observer = deps.observer;
  if (observer) {
    // A callback hook (no promise per request); the route's pattern, not the URL, keeps the
    // label set bounded whatever clients send.
    app.addHook('onResponse', (request, reply, done) => {
      observer.responded(request.method, request.routeOptions.url ?? null, reply.statusCode, reply.elapsedTime / 1000);
      done();
    });
  }
  app.addHook('onRequest', async (request, reply) => {
    // Every response under the prefix carries the rate-limit headers; requests that take from a
    // key's bucket replace these defaults in the route pipeline.
    const defaults = request.url.startsWith(deps.prefix) ? deps.rateLimiter.unmetered?.() : undefined;
    if (defaults) {
      reply.header('X-RateLimit-Limit', String(defaults.limit));
      reply.header('X-RateLimit-Remaining', String(defaults.remaining));
      reply.header('X-RateLimit-Reset', String(defaults.resetSeconds));
    }
  });

  // Bodies are not read here whatever their type: the route pipeline reads one at the body step
  // of the contract's order (shared/http/body.ts), and checks its type and decodes it there.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));
  // A body no step read is discarded (bounded) before the answer goes out, so the client reads it.
  app.addHook('onSend', (request, reply, payload, done) => {
    if (received(request.raw)) return done(null, payload);
    void discardRequestBody(request.raw).then((ended) => {
      if (!ended) reply.header('Connection', 'close');
      done(null, payload);
    });
  });

  acceptEveryMethod(app);
  closeKeepAliveOnShutdown(app);
  refuseRequestsWhileClosing(app);
  // The public routes may bring the listener's own Not found page; they are registered last.
  const notFound: { page?: NotFoundPage } = {};
  registerErrorHandling(app, deps.prefix, () => notFound.page);
  registerRoutes(app, deps.routes, deps);
  notFound.page = deps.registerPublic?.(app) ?? undefined;
  return app;
}

/**
 * Every method Node's parser accepts reaches the routes (CONNECT aside, which Node never hands to a
 * request handler), so a method a path does not declare (TRACE, QUERY, PROPFIND…) is answered 405
 * with Allow, as the contract says, not 404. No route takes a body with those methods, so they are
 * all bodyless here: QUERY's missing Content-Type is then no 400 before the method check.
 */
function acceptEveryMethod(app: FastifyInstance): void {
  for (const method of METHODS) {
    if (method === 'CONNECT' || ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'].includes(method)) continue;
    app.addHttpMethod(method, { hasBody: false, overrideExisting: app.supportedMethods.includes(method) });
  }
}
