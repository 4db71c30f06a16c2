import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { ApiError } from '../../../shared/errors.js';
import type { Config } from '../../../shared/config.js';
import { readRequestBody } from '../../../shared/http/body.js';
import { decodeJsonObject, validateBody } from '../../../shared/http/validation.js';
import { APP_SESSION_SECONDS, findAppSession, type AppSession } from '../../../shared/auth/app-sessions.js';
import { apiErrorOf } from '../../../shared/http/domain-errors.js';
import type { Role } from '../../../shared/domain/people/events.js';
import { roleAllows, roleRefusal } from '../../../shared/auth/roles.js';
import { runInCommandContext } from '../../../shared/event-store/command-context.js';

import type pg from 'pg';

/**
 * The request pipeline of the web application's own JSON endpoints (docs/web-app.md), under
 * `/app/api`, on the public listener and outside the public contract. Same origin only: no CORS
 * header is ever sent. Each request is checked in this order: route, method (405 with Allow),
 * Origin (required on state-changing requests; on any other, checked when sent), session cookie,
 * CSRF header (state-changing requests of a session), role, content type, body. Errors use the
 * contract's envelope.
 */

export const APP_API_PREFIX = '/app/api';
export const SESSION_COOKIE = 'app_session';
export const CSRF_HEADER = 'x-csrf-token';

export type AppMethod = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/** Who calls: a signed-in user, in their current organization (null: none selected, or no longer a member). */
export interface SignedIn {
  session: AppSession;
  user: { id: string; email: string };
  memberships: Array<{ org_id: number; org_name: string; role: Role }>;
  org: { id: number; name: string; role: Role } | null;
}

export type AppRouteResult =
  | {
      status: number;
      body?: unknown;
      /** Set the session cookie to this value, or clear it (null). */
      cookie?: string | null;
    }
  /** The handler answered on the reply itself (a stream of server-sent events). */
  | { streamed: true };

export interface AppRoute<S extends z.ZodType = z.ZodType> {
  method: AppMethod;
  /** Under the prefix, Fastify's form: `/keys/:key_id`. */
  path: string;
  /**
   * public: no session needed; signed-in: a session; viewer, operator, admin: a session with a
   * current organization in which the user has at least that role (docs/web-app.md, "People and roles").
   */
  access: 'public' | 'signed-in' | Role;
  body?: S;
  handler(input: { request: FastifyRequest; reply: FastifyReply; caller: SignedIn | null; body: z.output<S>; params: Record<string, string> }): Promise<AppRouteResult>;
}

export function appRoute<S extends z.ZodType>(route: AppRoute<S>): AppRoute {
  return route as unknown as AppRoute;
}

export interface AppPipelineDependencies {
  pool: pg.Pool;
  config: Pick<Config, 'PUBLIC_URL' | 'TRUST_PROXY'>;
  /** The session's user and memberships, from the read model. */
  loadCaller(session: AppSession): Promise<SignedIn | null>;
}

const STATE_CHANGING = new Set(['POST', 'PATCH', 'DELETE', 'PUT']);

function forwardedProto(request: FastifyRequest, trustProxy: boolean): 'http' | 'https' {
  const header = request.headers['x-forwarded-proto'];
  const first = (Array.isArray(header) ? header[0] : header)?.split(',')[0]?.trim().toLowerCase();
  return trustProxy && first === 'https' ? 'https' : 'http';
}

/** Whether the page reaches us over TLS: a configured https PUBLIC_URL, or a trusted proxy that says so. */
export function behindTls(request: FastifyRequest, config: AppPipelineDependencies['config']): boolean {
  return config.PUBLIC_URL?.startsWith('https://') === true || forwardedProto(request, config.TRUST_PROXY) === 'https';
}

/** The origin pages are served from: PUBLIC_URL's, or this request's own (its Host). */
function expectedOrigin(request: FastifyRequest, config: AppPipelineDependencies['config']): string | null {
  if (config.PUBLIC_URL) return new URL(config.PUBLIC_URL).origin;
  const host = request.headers.host;
  return host ? `${forwardedProto(request, config.TRUST_PROXY)}://${host}`.toLowerCase() : null;
}

export function sessionCookie(request: FastifyRequest, config: AppPipelineDependencies['config'], value: string | null): string {
  const attributes = ['Path=/', 'HttpOnly', 'SameSite=Strict', `Max-Age=${value === null ? 0 : APP_SESSION_SECONDS}`];
  if (behindTls(request, config)) attributes.push('Secure');
  return [`${SESSION_COOKIE}=${value ?? ''}`, ...attributes].join('; ');
}

function cookieValue(request: FastifyRequest, name: string): string | null {
  const header = request.headers.cookie;
  if (!header) return null;
  for (const part of header.split(';')) {
    const [key, ...rest] = part.split('=');
    if (key?.trim() === name) return rest.join('=').trim();
  }
  return null;
}

/** A domain refusal as the contract's envelope (shared/http/domain-errors.ts). */
function toApiError(error: unknown): unknown {
  return apiErrorOf(error);
}

function allowHeader(methods: Iterable<string>): string {
  const declared = new Set(methods);
  return ['GET', 'HEAD', 'POST', 'PATCH', 'DELETE'].filter((m) => (m === 'HEAD' ? declared.has('GET') : declared.has(m))).join(', ');
}

export function registerAppRoutes(app: FastifyInstance, routes: readonly AppRoute[], deps: AppPipelineDependencies): void {
  const byPath = new Map<string, Map<string, AppRoute>>();
  for (const route of routes) {
    const methods = byPath.get(route.path) ?? new Map<string, AppRoute>();
    methods.set(route.method, route);
    byPath.set(route.path, methods);
  }
  for (const [path, methods] of byPath) {
    const allow = allowHeader(methods.keys());
    app.route({
      method: app.supportedMethods,
      url: APP_API_PREFIX + path,
      handler: async (request: FastifyRequest, reply: FastifyReply) => {
        // Answers that hold a session's data are never kept by a cache.
        reply.header('Cache-Control', 'no-store');
        const route = methods.get(request.method === 'HEAD' ? 'GET' : request.method);
        if (!route) throw new ApiError('method_not_allowed', `Allowed methods: ${allow}`, { Allow: allow });

        const changesState = STATE_CHANGING.has(request.method);
        // A page of another site cannot send these: browsers always name the page's origin on them.
        // A read (a page's EventSource) may come without one; one that names another origin is not ours.
        const origin = request.headers.origin;
        if (changesState && origin === undefined) throw new ApiError('forbidden', 'Origin header required on state-changing requests');
        if (origin !== undefined && origin.toLowerCase() !== expectedOrigin(request, deps.config)) throw new ApiError('forbidden', `Origin ${origin} is not this service's`);

        let caller: SignedIn | null = null;
        if (route.access !== 'public') {
          const value = cookieValue(request, SESSION_COOKIE);
          const session = value ? await findAppSession(deps.pool, value) : null;
          caller = session ? await deps.loadCaller(session) : null;
          if (!caller) throw new ApiError('unauthorized', 'Sign in first: no valid session cookie');
          if (changesState) {
            const sent = request.headers[CSRF_HEADER];
            if (typeof sent !== 'string' || sent !== caller.session.csrfToken) {
              throw new ApiError('forbidden', 'Missing or wrong X-CSRF-Token header (GET /app/api/me gives the token)');
            }
          }
          if (route.access !== 'signed-in') {
            if (!caller.org) throw new ApiError('forbidden', 'Select an organization first');
            if (!roleAllows(caller.org.role, route.access)) throw new ApiError('forbidden', roleRefusal(caller.org.role));
          }
        }

        let body: unknown = undefined;
        if (route.body) {
          const type = request.headers['content-type']?.split(';')[0]?.trim().toLowerCase();
          if (type !== 'application/json') throw new ApiError('unsupported_media_type', 'Content-Type must be application/json');
          request.body = await readRequestBody(request.raw);
          const decoded = decodeJsonObject(request.body as Buffer, request.method);
          const order = Object.keys((route.body as unknown as { shape?: object }).shape ?? {});
          body = validateBody(route.body, decoded.value, order, decoded.textErrors);
        } else if (changesState) {
          await readRequestBody(request.raw);
        }

        let result: AppRouteResult;
        try {
          // Every event the handler's commands append records who asked (the signed-in person; nobody
          // on a public route, such as a password-setup link) and this request's id.
          const actor = caller ? { type: 'user' as const, id: caller.user.id, name: caller.user.email } : null;
          result = await runInCommandContext({ actor, requestId: request.id }, () =>
            route.handler({ request, reply, caller, body, params: request.params as Record<string, string> }),
          );
        } catch (error) {
          throw toApiError(error);
        }
        if ('streamed' in result) return reply;
        if (result.cookie !== undefined) reply.header('Set-Cookie', sessionCookie(request, deps.config, result.cookie));
        reply.code(result.status);
        return result.body === undefined ? reply.send() : reply.send(result.body);
      },
    });
  }
}
