import { eventsWithRevisionOf } from '../../event-store/catalogue.js';
import type { CommandPort } from '../port.js';
import { refuse } from '../refusal.js';
import { orgDecider } from '../orgs-and-keys/decider.js';
import { orgEvents, orgStream } from '../orgs-and-keys/events.js';
import { fold } from '../decider.js';
import { eventsOf } from '../../event-store/catalogue.js';
import { findUserByEmail } from './commands.js';
import { currentMemberRole, userEvents, userStream } from './events.js';
import type { Membership } from '../../auth/member-roles.js';

/**
 * Session tokens (docs/web-app.md, "Session tokens"): the contract's bearer tokens for people,
 * each belonging to one app session and, when it works in an organization the person belongs
 * to, to their membership of it as it is now (its member role, and the revision of the user's stream that
 * last set it). The authenticator ends a token whose session ended or whose membership changed.
 * Minting one is not an event: a session token is operational state, like its session.
 */

export const SESSION_TOKEN_SECONDS = 3600;
const MAX_CLI_SESSION_SECONDS = 24 * 3600;

type Port = Pick<CommandPort, 'store' | 'tokens' | 'sessions'>;

/** The user's membership of `orgId` now, from their stream: its member role and the revision that set it; null when none. */
export async function currentMembership(ctx: Pick<CommandPort, 'store'>, userId: string, orgId: number): Promise<Membership | null> {
  const recorded = await ctx.store.readStream(userStream(userId));
  let membership: Membership | null = null;
  for (const event of eventsWithRevisionOf(recorded, userEvents)) {
    if (event.type === 'MembershipGranted' || event.type === 'MembershipRoleChanged') {
      if (event.data.org_id === orgId) membership = { role: currentMemberRole(event.data.role), revision: String(event.revision) };
    } else if (event.type === 'MembershipRemoved' && event.data.org_id === orgId) {
      membership = null;
    }
  }
  return membership;
}

export interface IssuedSessionToken {
  token: string;
  expires_at: string;
}

/**
 * The console's token for its cookie session (`POST /app/api/session-token`): one hour, never past
 * the session, bound to the person's membership of the session's organization. An organization
 * they no longer belong to gives a token of no organization.
 */
export async function mintAppSessionToken(
  ctx: Pick<CommandPort, 'store' | 'tokens'>,
  session: { id: string; tokenGeneration: number; userId: string; expiresAt: Date },
  person: { email: string; orgId: number | null },
): Promise<IssuedSessionToken & { org_id: number | null }> {
  const membership = person.orgId === null ? null : await currentMembership(ctx, session.userId, person.orgId);
  const orgId = membership === null ? null : person.orgId;
  const issuedAt = Math.floor(Date.now() / 1000);
  const expiresAt = Math.min(issuedAt + SESSION_TOKEN_SECONDS, Math.floor(session.expiresAt.getTime() / 1000));
  const { token } = await ctx.tokens.signSessionToken({
    user: person.email,
    sessionId: session.id,
    tokenGeneration: session.tokenGeneration,
    userId: session.userId,
    orgId,
    membership,
    issuedAt,
    expiresAt,
  });
  return { token, expires_at: new Date(expiresAt * 1000).toISOString(), org_id: orgId };
}

export interface MintSessionInput {
  /** The person's email address. */
  user: string;
  orgId?: number | null;
  ttlSeconds?: number;
}

/**
 * `sessions mint`: a token of a session of its own that ends with it. For a member of the
 * organization, their member role there (and the token ends when it changes); for an email that is no
 * member of it, the contract's unscoped session, as an installation's operator may mint.
 */
export async function mintSession(ctx: Port, input: MintSessionInput): Promise<IssuedSessionToken> {
  if (!/^[^\s@]+@[^\s@]+$/.test(input.user) || input.user.length > 320) {
    throw refuse.badRequest('user must be an email address');
  }
  const ttl = input.ttlSeconds ?? SESSION_TOKEN_SECONDS;
  if (!Number.isInteger(ttl) || ttl < 1 || ttl > MAX_CLI_SESSION_SECONDS) {
    throw refuse.badRequest(`ttl must be a whole number of seconds between 1 and ${MAX_CLI_SESSION_SECONDS}`);
  }
  const orgId = input.orgId ?? null;
  if (orgId !== null) {
    if (!Number.isInteger(orgId) || orgId < 1) throw refuse.badRequest('org id must be a positive integer');
    const org = fold(orgDecider, eventsOf(await ctx.store.readStream(orgStream(orgId), { maxCount: 1 }), orgEvents));
    if (org.status !== 'created') throw refuse.notFound(`organization ${orgId} does not exist`);
  }
  const user = await findUserByEmail(ctx, input.user);
  const email = user?.email ?? input.user.trim().toLowerCase();
  const membership = user !== null && orgId !== null ? await currentMembership(ctx, user.userId, orgId) : null;
  const issuedAt = Math.floor(Date.now() / 1000);
  const expiresAt = issuedAt + ttl;
  const sessionId = await ctx.sessions.openCliSession({ userId: user?.userId ?? null, email, orgId, expiresAt: new Date(expiresAt * 1000) });
  const { token } = await ctx.tokens.signSessionToken({
    user: email,
    sessionId,
    tokenGeneration: 0,
    userId: user?.userId ?? null,
    orgId,
    membership,
    issuedAt,
    expiresAt,
  });
  return { token, expires_at: new Date(expiresAt * 1000).toISOString() };
}
