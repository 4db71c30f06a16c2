import type { FastifyRequest } from 'fastify';
import type { MemberRole } from './member-roles.js';

/** Who is calling: an API key (scoped) or a person's session token (their member role; docs/web-app.md, "Session tokens"). */
export interface Principal {
  kind: 'api_key' | 'session';
  /** null for a session minted without an organization. */
  orgId: number | null;
  scopes: readonly string[];
  /** The API key id (JWT `sub`); null for sessions. */
  keyId: string | null;
  /** The API key id, or the session's email address. */
  subject: string;
  /** API keys: the key's name (recorded as who asked, in the events its commands append). */
  keyName?: string;
  /** Sessions: the person's user id (null for a CLI session of an email that is no user). */
  userId?: string | null;
  /** Sessions: the person's member role in the organization now (`admin` for the CLI's unscoped sessions). */
  role?: MemberRole | null;
}

export interface Authenticator {
  /** Throws UnauthorizedError with the cause in its detail. */
  authenticate(request: FastifyRequest): Promise<Principal>;
}

export interface RateLimitState {
  limit: number;
  remaining: number;
  /** Seconds until the bucket is full again. */
  resetSeconds: number;
  /** Set when the request is refused: whole seconds to wait (≥ 1). */
  retryAfterSeconds?: number;
}

export interface RateLimiter {
  /** Takes one token for the principal; null when the principal is not metered. */
  take(principal: Principal): RateLimitState | null;
  /** Headers for responses that take no token (before authentication, or unmetered principals). */
  unmetered?(): RateLimitState;
}
