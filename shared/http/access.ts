import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, ForbiddenError } from '../errors.js';
import type { Authenticator, Principal, RateLimiter } from '../auth/principal.js';
import { memberRoleAllows, memberRoleRefusal, sessionMemberRoleFor, type MemberRole } from '../auth/member-roles.js';
import type { CommandActor } from '../event-store/command-context.js';
import type { HttpObserver } from './observer.js';
import { principalActor } from './command-actor.js';

/**
 * Access strategies (docs/design.md, "One request pipeline"): the "access" step of the pipeline's
 * CHECK_ORDER, one per way a caller proves who they are. Each admits a caller for a route, or
 * throws the contract's refusal, checking its own steps in the order `steps` states:
 *
 * - API key with scopes, and session token with member role: the public contract's bearer tokens
 *   (BEARER_STEPS); which of the two a token is decides the last step.
 * - Cookie session with Origin and CSRF: the web application's own endpoints
 *   (services/api/app/pipeline.ts).
 */
export interface AccessStrategy<R, Caller> {
  name: string;
  /** Its checks, in the order they run. */
  steps: readonly string[];
  admit(request: FastifyRequest, reply: FastifyReply, route: R, changesState: boolean): Promise<Caller>;
  /** Who asks, as the events of the route's commands record it (null: nobody signed in). */
  actorOf(caller: Caller): CommandActor | null;
}

/** What a public route asks of a bearer token. */
export interface BearerRequirement {
  /** Scope an API key needs; null: any API key of the organization. */
  scope: string | null;
  /**
   * Instead of `scope`: an API key needs one of these, and the handler checks the one its input
   * names (an import needs `assets:write` or `locations:write`, as its `resource` says).
   */
  anyOfScopes?: readonly string[];
  /** Refuse session tokens (only `GET /orgs/me`). */
  apiKeysOnly?: boolean;
  /**
   * The least member role whose session token may use it, when it is not the one its scope asks
   * (`sessionMemberRoleFor`, docs/web-app.md "People and roles").
   */
  sessionMemberRole?: MemberRole;
}

/** The public contract's order inside "access" (docs/design.md, "One request pipeline"). */
export const BEARER_STEPS = ['authentication', 'rate limit', 'scope (API key) or role (session token)'] as const;

/** An API key may use a route when its scopes include the route's. */
export const apiKeyWithScopes = {
  name: 'API key with scopes',
  authorize(principal: Principal, route: BearerRequirement): void {
    if (route.scope && !principal.scopes.includes(route.scope)) throw new ForbiddenError(route.scope);
    if (route.anyOfScopes && !route.anyOfScopes.some((scope) => principal.scopes.includes(scope))) throw new ForbiddenError(route.anyOfScopes.join(' or '));
  },
};

/**
 * A person's session token may use a route when the person's member role in the token's organization,
 * now, is at least the route's (docs/web-app.md, "People and roles"); every public route works
 * inside one organization.
 */
export const sessionTokenWithMemberRole = {
  name: 'session token with role',
  authorize(principal: Principal, route: BearerRequirement): void {
    if (principal.orgId === null) throw new ApiError('forbidden', 'This session has no organization; mint the session with --org to use this endpoint');
    const role = principal.role ?? null;
    if (role === null || !memberRoleAllows(role, route.sessionMemberRole ?? sessionMemberRoleFor(route.scope))) throw new ApiError('forbidden', memberRoleRefusal(role));
  },
};

export interface BearerDependencies {
  authenticator: Authenticator;
  rateLimiter: RateLimiter;
  observer?: Pick<HttpObserver, 'rateLimited'>;
}

/** The public contract's bearer tokens: API keys with scopes and session tokens with member role. */
export function bearerAccess(deps: BearerDependencies): AccessStrategy<BearerRequirement, Principal> {
  return {
    name: 'bearer token (API key with scopes, or session token with role)',
    steps: BEARER_STEPS,
    async admit(request, reply, route) {
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
          throw new ApiError('rate_limited', `Retry after ${limit.retryAfterSeconds} seconds`, { 'Retry-After': String(limit.retryAfterSeconds) });
        }
      }
      (principal.kind === 'session' ? sessionTokenWithMemberRole : apiKeyWithScopes).authorize(principal, route);
      return principal;
    },
    actorOf: principalActor,
  };
}
