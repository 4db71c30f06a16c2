import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { ApiError, ForbiddenError, ValidationFailed, orderFieldErrors, type FieldError } from '../errors.js';
import { JsonText } from '../json/text.js';
import type { HttpObserver } from './observer.js';
import type { Authenticator, Principal, RateLimiter } from '../auth/principal.js';
import { roleAllows, roleRefusal, sessionRoleFor, type Role } from '../auth/roles.js';
import { readRequestBody } from './body.js';
import { decodeJsonObject, isFieldError, parseId, parseQuery, validateBody, type ParsedQuery, type QuerySpec } from './validation.js';
import { runInCommandContext } from '../event-store/command-context.js';
import { principalActor } from './command-actor.js';
import { apiErrorOf } from './domain-errors.js';

export type HttpMethod = 'GET' | 'POST' | 'PATCH' | 'DELETE';

const BODY_CONTENT_TYPE: Record<'POST' | 'PATCH', string> = {
  POST: 'application/json',
  PATCH: 'application/merge-patch+json',
};

const CONTENT_TYPE_DETAIL: Record<'POST' | 'PATCH', string> = {
  POST: 'Content-Type must be application/json',
  PATCH: 'Content-Type must be application/merge-patch+json on PATCH operations',
};

export interface RouteResult {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface RouteRequest<Q extends QuerySpec, B> {
  request: FastifyRequest;
  principal: Principal;
  /** Path ids, already checked to be 1..2147483647. */
  params: Record<string, number>;
  query: ParsedQuery<Q>;
  body: B;
  /** The body's JSON as sent, before the schema (an empty object for a route without a body). */
  sentBody: Readonly<Record<string, unknown>>;
}

export interface ResponseDoc {
  description: string;
  /** JSON Schema of the body (from zod via z.toJSONSchema, or written out). */
  schema?: Record<string, unknown>;
}

export interface RouteDefinition<Q extends QuerySpec = QuerySpec, S extends z.ZodType = z.ZodType> {
  method: HttpMethod;
  /** OpenAPI form, relative to the listener's prefix (`/api/v1`): `/assets/{asset_id}`. */
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  /** Scope the operation needs; null: any authenticated API key. */
  scope: string | null;
  /** Refuse session tokens (only `GET /orgs/me`). */
  apiKeysOnly?: boolean;
  /**
   * The least role whose session token may use it, when it is not the one its scope asks
   * (`sessionRoleFor`, docs/web-app.md "People and roles"). API keys need the route's scope.
   */
  sessionRole?: Role;
  query?: Q;
  body?: S;
  /** Field order for stable error ordering (default: the schema's keys). */
  bodyFieldOrder?: readonly string[];
  responses: Record<number, ResponseDoc>;
  /**
   * Optional: field errors that depend on stored state (e.g. a PATCH's read-only fields that
   * differ), computed from the raw body when the schema itself has failed, so the response lists
   * every field error at once. When the schema passes, the handler reports them itself.
   */
  stateBodyErrors?(input: { principal: Principal; params: Record<string, number>; body: Record<string, unknown> }): Promise<FieldError[]>;
  handler(input: RouteRequest<Q, z.output<S>>): Promise<RouteResult>;
}

/** Keeps the declared generic types of one route while collecting heterogeneous routes in one list. */
export function defineRoute<Q extends QuerySpec, S extends z.ZodType>(route: RouteDefinition<Q, S>): RouteDefinition {
  return route as unknown as RouteDefinition;
}

export interface RouteDependencies {
  /** Where the routes live, e.g. `/api/v1`. */
  prefix: string;
  authenticator: Authenticator;
  rateLimiter: RateLimiter;
  observer?: Pick<HttpObserver, 'rateLimited'>;
}

/** Schema errors plus state errors, ordered by the body's field order (stable), one entry per field. */
function mergeFieldErrors(schema: FieldError[], state: FieldError[], order: readonly string[]): FieldError[] {
  const seen = new Set(schema.map((e) => e.field));
  return orderFieldErrors([...schema, ...state.filter((e) => !seen.has(e.field))], order);
}

function pathParamNames(path: string): string[] {
  return [...path.matchAll(/\{([a-z_]+)\}/g)].map((m) => m[1]!);
}

function allowHeader(methods: HttpMethod[]): string {
  const list: string[] = [];
  for (const m of ['GET', 'HEAD', 'POST', 'PATCH', 'DELETE'] as const) {
    if (m === 'HEAD' ? methods.includes('GET') : methods.includes(m)) list.push(m);
  }
  return list.join(', ');
}

function mediaType(header: string | undefined): string | null {
  if (!header) return null;
  return header.split(';')[0]!.trim().toLowerCase() || null;
}

/**
 * Registers routes so that every request is checked in the contract's order:
 * route → method → authentication → rate limit → scope (a session token: its role) → content type →
 * path ids → body.
 * Each path is one Fastify route accepting every method, so that the method check (405 with
 * `Allow`) comes after route matching and before authentication.
 */
export function registerRoutes(app: FastifyInstance, routes: readonly RouteDefinition[], deps: RouteDependencies): void {
  const byPath = new Map<string, Map<string, RouteDefinition>>();
  for (const route of routes) {
    const methods = byPath.get(route.path) ?? new Map<string, RouteDefinition>();
    if (methods.has(route.method)) throw new Error(`route declared twice: ${route.method} ${route.path}`);
    methods.set(route.method, route);
    byPath.set(route.path, methods);
  }

  for (const [path, methods] of byPath) {
    const declared = [...methods.keys()] as HttpMethod[];
    const allow = allowHeader(declared);
    const url = deps.prefix + path.replace(/\{([a-z_]+)\}/g, ':$1');
    // Every method of a path shares its path parameters: worked out once, not per request.
    const paramNames = pathParamNames(path);
    app.route({
      // Every method the server knows (server.ts): an undeclared one is 405 below, not 404.
      method: app.supportedMethods,
      url,
      handler: async (request: FastifyRequest, reply: FastifyReply) => {
        if (request.method === 'OPTIONS') {
          // Reserved for CORS preflight, which this server-to-server API never grants.
          return reply.code(204).header('Allow', allow).send();
        }
        const route = methods.get(request.method === 'HEAD' ? 'GET' : request.method);
        if (!route) {
          throw new ApiError('method_not_allowed', `Allowed methods: ${allow}`, { Allow: allow });
        }
        const principal = await deps.authenticator.authenticate(request);
        if (route.apiKeysOnly && principal.kind !== 'api_key') {
          throw new ApiError('unauthorized', 'Session tokens are not accepted on this endpoint; use an API key', {
            'WWW-Authenticate': 'Bearer realm="tracking-api"',
          });
        }
        const limit = deps.rateLimiter.take(principal);
        if (limit) {
          reply.header('X-RateLimit-Limit', String(limit.limit));
          reply.header('X-RateLimit-Remaining', String(limit.remaining));
          reply.header('X-RateLimit-Reset', String(limit.resetSeconds));
          if (limit.retryAfterSeconds !== undefined) {
            deps.observer?.rateLimited();
            throw new ApiError('rate_limited', `Retry after ${limit.retryAfterSeconds} seconds`, {
              'Retry-After': String(limit.retryAfterSeconds),
            });
          }
        }
        if (principal.kind === 'session') {
          // A person's session token: their role now, not scopes (docs/web-app.md, "People and roles").
          if (principal.orgId === null) {
            // Every public endpoint works inside one organization.
            throw new ApiError('forbidden', 'This session has no organization; mint the session with --org to use this endpoint');
          }
          const role = principal.role ?? null;
          if (role === null || !roleAllows(role, route.sessionRole ?? sessionRoleFor(route.scope))) throw new ApiError('forbidden', roleRefusal(role));
        } else if (route.scope && !principal.scopes.includes(route.scope)) {
          throw new ForbiddenError(route.scope);
        }

        if (route.body && (route.method === 'POST' || route.method === 'PATCH')) {
          const type = mediaType(request.headers['content-type']);
          if (type !== BODY_CONTENT_TYPE[route.method]) {
            throw new ApiError('unsupported_media_type', CONTENT_TYPE_DETAIL[route.method]);
          }
        }

        const rawParams = request.params as Record<string, string>;
        const params: Record<string, number> = {};
        const paramErrors: FieldError[] = [];
        for (const name of paramNames) {
          const parsed = parseId(name, rawParams[name] ?? '');
          if (isFieldError(parsed)) paramErrors.push(parsed);
          else params[name] = parsed;
        }
        if (paramErrors.length > 0) throw new ValidationFailed(paramErrors);

        const query = parseQuery((request.query ?? {}) as Record<string, string | string[]>, route.query ?? {});

        let body: unknown = undefined;
        let sentBody: Record<string, unknown> = {};
        if (route.body) {
          // Read only now, after every check that comes before the body in the contract's order.
          request.body = await readRequestBody(request.raw);
          const decoded = decodeJsonObject(request.body as Buffer, route.method);
          sentBody = decoded.value;
          const order = route.bodyFieldOrder ?? Object.keys((route.body as unknown as { shape?: object }).shape ?? {});
          try {
            body = validateBody(route.body, decoded.value, order, decoded.textErrors);
          } catch (error) {
            // Every field error at once: add the ones that need loaded state (a PATCH's
            // read-only fields) to the schema's, in the same field order.
            if (error instanceof ValidationFailed && route.stateBodyErrors) {
              const extra = await route.stateBodyErrors({ principal, params, body: decoded.value });
              if (extra.length > 0) throw new ValidationFailed(mergeFieldErrors(error.fields, extra, order));
            }
            throw error;
          }
        } else if (request.method === 'POST' || request.method === 'PATCH' || request.method === 'DELETE') {
          // No route reads it, but the size limit holds for every body, at the same step.
          await readRequestBody(request.raw);
        }

        // Every event the handler's commands append records who asked and this request's id.
        const context = { actor: principalActor(principal), requestId: request.id };
        const result = await runInCommandContext(context, () => route.handler({ request, principal, params, query, body, sentBody })).catch((error: unknown) => {
          throw apiErrorOf(error);
        });
        reply.code(result.status);
        for (const [name, value] of Object.entries(result.headers ?? {})) reply.header(name, value);
        if (result.body === undefined) return reply.send();
        if (result.body instanceof JsonText) return reply.type('application/json; charset=utf-8').send(result.body.text);
        return reply.send(result.body);
      },
    });
  }
}
