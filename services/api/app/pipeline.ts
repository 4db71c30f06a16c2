import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { ApiError } from '../../../shared/errors.js';
import type { Config } from '../../../shared/config.js';
import { registerPipeline, type PipelineResult } from '../../../shared/http/pipeline.js';
import type { AccessStrategy } from '../../../shared/http/access.js';
import { APP_SESSION_SECONDS, findAppSession, type AppSession } from '../../../shared/auth/app-sessions.js';
import type { MemberRole } from '../../../shared/domain/people/events.js';
import { memberRoleAllows, memberRoleRefusal } from '../../../shared/auth/member-roles.js';

import type pg from 'pg';

/**
 * The web application's own JSON endpoints (docs/web-app.md), under `/app/api`, on the public
 * listener and outside the public contract: the one request pipeline (shared/http/pipeline.ts)
 * with a cookie session for access (cookieSessionAccess). Same origin only: no CORS header is
 * ever sent. Errors use the contract's envelope.
 */

export const APP_API_PREFIX = '/app/api';
export const SESSION_COOKIE = 'app_session';
export const CSRF_HEADER = 'x-csrf-token';

export type AppMethod = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/** Who calls: a signed-in user, in their current organization (null: none selected, or no longer a member). */
export interface SignedIn {
  session: AppSession;
  user: { id: string; email: string };
  memberships: Array<{ org_id: number; org_name: string; role: MemberRole }>;
  org: { id: number; name: string; role: MemberRole } | null;
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
   * current organization in which the user has at least that member role (docs/web-app.md, "People and roles").
   */
  access: 'public' | 'signed-in' | MemberRole;
  body?: S;
  /** `sentBody`: the body as sent, before its schema decoded it (what a handheld submission's hash is of). */
  handler(input: { request: FastifyRequest; reply: FastifyReply; caller: SignedIn | null; body: z.output<S>; sentBody: Readonly<Record<string, unknown>>; params: Record<string, string> }): Promise<AppRouteResult>;
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

/**
 * The web application's access (docs/design.md, "One request pipeline"): a cookie session with
 * Origin and CSRF. In order: Origin (required on state-changing requests; on any other, checked
 * when sent), session cookie, CSRF header (state-changing requests of a session), organization,
 * member role. Public routes (sign-in, links) check the Origin only.
 */
export function cookieSessionAccess(deps: AppPipelineDependencies): AccessStrategy<AppRoute, SignedIn | null> {
  return {
    name: 'cookie session with Origin and CSRF',
    steps: ['Origin', 'session cookie', 'CSRF header', 'organization', 'role'],
    async admit(request, _reply, route, changesState) {
      // A page of another site cannot send these: browsers always name the page's origin on them.
      // A read (a page's EventSource) may come without one; one that names another origin is not ours.
      const origin = request.headers.origin;
      if (changesState && origin === undefined) throw new ApiError('forbidden', 'Origin header required on state-changing requests');
      if (origin !== undefined && origin.toLowerCase() !== expectedOrigin(request, deps.config)) throw new ApiError('forbidden', `Origin ${origin} is not this service's`);
      if (route.access === 'public') return null;

      const value = cookieValue(request, SESSION_COOKIE);
      const session = value ? await findAppSession(deps.pool, value) : null;
      const caller = session ? await deps.loadCaller(session) : null;
      if (!caller) throw new ApiError('unauthorized', 'Sign in first: no valid session cookie');
      if (changesState) {
        const sent = request.headers[CSRF_HEADER];
        if (typeof sent !== 'string' || sent !== caller.session.csrfToken) {
          throw new ApiError('forbidden', 'Missing or wrong X-CSRF-Token header (GET /app/api/me gives the token)');
        }
      }
      if (route.access !== 'signed-in') {
        if (!caller.org) throw new ApiError('forbidden', 'Select an organization first');
        if (!memberRoleAllows(caller.org.role, route.access)) throw new ApiError('forbidden', memberRoleRefusal(caller.org.role));
      }
      return caller;
    },
    // The signed-in person; nobody on a public route, such as a password-setup link.
    actorOf: (caller) => (caller ? { type: 'user', id: caller.user.id, name: caller.user.email } : null),
  };
}

const JSON_BODY = { mediaType: 'application/json', detail: 'Content-Type must be application/json' };

/** The web application's endpoints: the one request pipeline with cookie sessions for access. */
export function registerAppRoutes(app: FastifyInstance, routes: readonly AppRoute[], deps: AppPipelineDependencies): void {
  registerPipeline<AppRoute, SignedIn | null, Record<string, string>>(app, {
    prefix: APP_API_PREFIX,
    routes,
    access: cookieSessionAccess(deps),
    bodyMediaTypes: { POST: JSON_BODY, PATCH: JSON_BODY, DELETE: JSON_BODY },
    decodeParam: (_name, raw) => raw,
    isParamError: (_value): _value is never => false,
    answerOptions: false,
    refuseUndeclaredQuery: false,
    // Answers that hold a session's data are never kept by a cache.
    headers: { 'Cache-Control': 'no-store' },
    call: async (route, { request, reply, caller, params, body, sentBody }): Promise<PipelineResult> => {
      const result = await route.handler({ request, reply, caller, body, sentBody, params });
      if ('streamed' in result || result.cookie === undefined) return result;
      return { status: result.status, body: result.body, headers: { 'Set-Cookie': sessionCookie(request, deps.config, result.cookie) } };
    },
  });
}
