import type { Membership } from './member-roles.js';

/**
 * What a request with a session token needs to know beyond the token (docs/web-app.md, "Session
 * tokens"): whether its session is still open at the generation the token names, and the
 * person's membership of the token's organization now. The read models answer it (the people
 * projection's `memberships` beside `service.app_sessions`), handed in through the service's
 * ReadModelQueries, as for API keys.
 */

export interface SessionTokenState {
  kind: 'cookie' | 'cli';
  userId: string | null;
  email: string | null;
  expiresAt: Date;
  tokenGeneration: number;
  /** The person's membership of the organization asked about, now; null when none. */
  membership: Membership | null;
}

export interface SessionTokenStates {
  /** The session of this id, with the membership of `orgId` (none asked: null); null when no such session. */
  findSessionTokenState(sessionId: string, orgId: number | null): Promise<SessionTokenState | null>;
}

/** Channel on which the people projection names a user whose memberships changed. */
export const MEMBERSHIP_CHANGED_CHANNEL = 'membership_changed';
