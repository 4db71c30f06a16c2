import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ApiError, ValidationFailed } from '../../../shared/errors.js';
import type { ServiceContext } from '../../../shared/service-context.js';
import { dummyPasswordHash, verifyPassword } from '../../../shared/auth/passwords.js';
import { clearSignInAttempts, signInFailed, takeSignInAttempt } from '../../../shared/auth/sign-in-attempts.js';
import { closeAppSession, closeOtherAppSessions, openAppSession, recordSignIn, switchAppSessionOrg, type AppSession } from '../../../shared/auth/app-sessions.js';
import type { Actor } from '../../../shared/domain/actor.js';
import { mintApiKey, revokeApiKey } from '../../../shared/domain/orgs-and-keys/commands.js';
import { mintAppSessionToken } from '../../../shared/domain/people/session-tokens.js';
import {
  acceptInvitation,
  cancelInvitation,
  changePassword,
  changeMemberRole,
  checkLink,
  currentPasswordHash,
  findUserByEmail,
  inviteUser,
  issuePasswordSetup,
  removeMember,
  setPasswordWithSetupLink,
} from '../../../shared/domain/people/commands.js';
import { LEGACY_MEMBER_ROLE, MEMBER_ROLES, currentMemberRole } from '../../../shared/domain/people/events.js';
import { parseInstant, timeRangeMessage } from '../../../shared/time.js';
import { listApiKeys } from '../../../projections/orgs-and-keys/queries.js';
import { findMember, findUser, listMembers, listPendingInvitations, membershipsOf } from '../../../projections/people/queries.js';
import { appRoute, type AppRoute, type SignedIn } from './pipeline.js';

/**
 * The web application's own endpoints (docs/web-app.md): sign-in and its session, the user's
 * password, links, and an admin's API keys and members of the current organization. They run
 * the same commands as the CLI, so both write the same events; the actor of a key or member
 * change is the signed-in user.
 */

const WRONG_CREDENTIALS = 'Wrong email or password';

const email = z.string().min(1).max(320);
const password = z.string().min(1).max(1024);
/** A member role as a body names it; `member`, the earlier name of `operator`, is taken as that. */
const memberRole = z.enum([...MEMBER_ROLES, LEGACY_MEMBER_ROLE]).transform((r) => currentMemberRole(r));
const orgId = z.number().int().min(1).max(2147483647);

/** The contract's key form: a level per resource; `scans: "write"` makes an ingestion key. */
const ACCESS_SCOPES = {
  assets: { none: [], read: ['assets:read'], read_write: ['assets:read', 'assets:write'] },
  locations: { none: [], read: ['locations:read'], read_write: ['locations:read', 'locations:write'] },
  tracking: { none: [], read: ['tracking:read'] },
  scans: { none: [], write: ['scans:write'] },
  webhooks: { none: [], read: ['webhooks:read'], read_write: ['webhooks:read', 'webhooks:write'] },
  audit: { none: [], read: ['audit:read'] },
  alerts: { none: [], read: ['alerts:read'], read_write: ['alerts:read', 'alerts:write'] },
  counts: { none: [], read: ['counts:read'], read_write: ['counts:read', 'counts:write'] },
} as const;

const mintBody = z.strictObject({
  name: z.string().min(1).max(255),
  access: z.strictObject({
    assets: z.enum(['none', 'read', 'read_write']).optional(),
    locations: z.enum(['none', 'read', 'read_write']).optional(),
    tracking: z.enum(['none', 'read']).optional(),
    scans: z.enum(['none', 'write']).optional(),
    webhooks: z.enum(['none', 'read', 'read_write']).optional(),
    audit: z.enum(['none', 'read']).optional(),
    alerts: z.enum(['none', 'read', 'read_write']).optional(),
    counts: z.enum(['none', 'read', 'read_write']).optional(),
  }),
  expires_at: z.string().nullable().optional(),
});

function actorOf(caller: SignedIn): Actor {
  return { kind: 'user', user_id: caller.user.id, email: caller.user.email };
}

function meView(caller: SignedIn) {
  return {
    user: caller.user,
    memberships: caller.memberships,
    current_org: caller.org,
    csrf_token: caller.session.csrfToken,
    session_expires_at: caller.session.expiresAt.toISOString(),
  };
}

/** The session's user and memberships; the current organization only while they still belong to it. */
export async function loadCaller(ctx: Pick<ServiceContext, 'pool'>, session: AppSession): Promise<SignedIn | null> {
  const [user, memberships] = await Promise.all([findUser(ctx.pool, session.userId), membershipsOf(ctx.pool, session.userId)]);
  if (!user) return null;
  const current = memberships.find((m) => m.org_id === session.orgId);
  return { session, user, memberships, org: current ? { id: current.org_id, name: current.org_name, role: current.role } : null };
}

/** The current organization of an admin route (the pipeline has checked there is one). */
const orgOf = (caller: SignedIn | null): number => caller!.org!.id;

export function appRoutes(ctx: ServiceContext, publicUrl: (request: FastifyRequest) => string): AppRoute[] {
  // Made now, so the first sign-in of an unknown email costs no more than any other.
  void dummyPasswordHash();
  return [
    appRoute({
      method: 'POST',
      path: '/sign-in',
      access: 'public',
      body: z.strictObject({ email, password, org_id: orgId.optional() }),
      async handler({ body }) {
        const address = body.email.trim().toLowerCase();
        const verdict = await takeSignInAttempt(ctx.pool, address);
        if (!verdict.allowed) {
          if (verdict.locked) throw new ApiError('forbidden', 'Too many failed sign-ins: this account is locked until an administrator unlocks it');
          throw new ApiError('rate_limited', `Too many failed sign-ins; retry after ${verdict.retryAfterSeconds} seconds`, { 'Retry-After': String(verdict.retryAfterSeconds) });
        }
        // An unknown email, or a user without a password yet, is checked against a dummy hash:
        // the same work, the same answer as a wrong password. The hash is the credential the
        // user's stream names (docs/design.md, "Secrets are not events").
        const user = await findUserByEmail(ctx, address);
        const hash = user ? await currentPasswordHash(ctx, user) : null;
        const matches = await verifyPassword(body.password, hash ?? (await dummyPasswordHash()));
        if (!user || hash === null || !matches) {
          await signInFailed(ctx.pool, address);
          throw new ApiError('unauthorized', WRONG_CREDENTIALS);
        }
        await Promise.all([clearSignInAttempts(ctx.pool, address), recordSignIn(ctx.pool, user.userId)]);
        const memberships = await membershipsOf(ctx.pool, user.userId);
        // The organization asked for, if they belong to it; else their first.
        const chosen = memberships.find((m) => m.org_id === body.org_id) ?? memberships[0];
        const { value, session } = await openAppSession(ctx.pool, { userId: user.userId, email: user.email }, chosen?.org_id ?? null);
        const caller = await loadCaller(ctx, session);
        return { status: 200, body: { data: meView(caller!) }, cookie: value };
      },
    }),
    appRoute({
      method: 'POST',
      path: '/sign-out',
      access: 'signed-in',
      async handler({ caller }) {
        await closeAppSession(ctx.pool, caller!.session.idSha256);
        return { status: 204, cookie: null };
      },
    }),
    appRoute({
      method: 'GET',
      path: '/me',
      access: 'signed-in',
      async handler({ caller }) {
        return { status: 200, body: { data: meView(caller!) } };
      },
    }),
    appRoute({
      method: 'POST',
      path: '/session/org',
      access: 'signed-in',
      body: z.strictObject({ org_id: orgId }),
      async handler({ caller, body }) {
        if (!caller!.memberships.some((m) => m.org_id === body.org_id)) throw new ApiError('forbidden', `You are not a member of organization ${body.org_id}`);
        await switchAppSessionOrg(ctx.pool, caller!.session.idSha256, body.org_id);
        const switched = await loadCaller(ctx, { ...caller!.session, orgId: body.org_id });
        return { status: 200, body: { data: meView(switched!) } };
      },
    }),
    appRoute({
      method: 'POST',
      path: '/password',
      access: 'signed-in',
      body: z.strictObject({ current_password: password, new_password: password }),
      async handler({ caller, body }) {
        await changePassword(ctx, { userId: caller!.user.id, currentPassword: body.current_password, newPassword: body.new_password });
        // Sessions elsewhere (perhaps the reason for the change) end; this one goes on.
        await closeOtherAppSessions(ctx.pool, caller!.user.id, caller!.session.idSha256);
        return { status: 204 };
      },
    }),
    appRoute({
      method: 'POST',
      path: '/session-token',
      access: 'signed-in',
      async handler({ caller }) {
        // The contract's session token for /api/v1 (one hour at most), bound to this session and to
        // the person's membership of the current organization now; keys:admin only for an admin.
        const token = await mintAppSessionToken(ctx, caller!.session, { email: caller!.user.email, orgId: caller!.org?.id ?? null });
        return { status: 200, body: { data: token } };
      },
    }),
    appRoute({
      method: 'POST',
      path: '/password-setup',
      access: 'public',
      body: z.strictObject({ token: z.string().min(1).max(512), password }),
      async handler({ body }) {
        // A new link is what someone asks for after a compromise: every session of the user ends
        // once the password is set (docs/web-app.md, "Lost links and passwords").
        const set = await setPasswordWithSetupLink(ctx, body, { afterwards: (userId) => closeOtherAppSessions(ctx.pool, userId, '') });
        // And a lock left by failed guesses (perhaps the forgotten password's) no longer stands in the way.
        await clearSignInAttempts(ctx.pool, set.email);
        return { status: 200, body: { data: set } };
      },
    }),
    appRoute({
      method: 'POST',
      path: '/links/check',
      access: 'public',
      body: z.strictObject({ kind: z.enum(['setup', 'invitation']), token: z.string().min(1).max(512) }),
      async handler({ body }) {
        return { status: 200, body: { data: await checkLink(ctx, body) } };
      },
    }),
    appRoute({
      method: 'POST',
      path: '/invitations/accept',
      access: 'public',
      body: z.strictObject({ token: z.string().min(1).max(512), password }),
      async handler({ body }) {
        return { status: 200, body: { data: await acceptInvitation(ctx, body) } };
      },
    }),

    // ---- API keys of the current organization (admins) ---------------------------------------
    appRoute({
      method: 'GET',
      path: '/keys',
      access: 'admin',
      async handler({ caller }) {
        return { status: 200, body: { data: await listApiKeys(ctx.pool, orgOf(caller)) } };
      },
    }),
    appRoute({
      method: 'POST',
      path: '/keys',
      access: 'admin',
      body: mintBody,
      async handler({ caller, body }) {
        const scopes = (Object.keys(ACCESS_SCOPES) as Array<keyof typeof ACCESS_SCOPES>).flatMap((resource) => {
          const level = body.access[resource] ?? 'none';
          return [...(ACCESS_SCOPES[resource] as Record<string, readonly string[]>)[level]!];
        });
        if (scopes.length === 0) throw new ValidationFailed([{ field: 'access', code: 'invalid_value', message: 'access must grant at least one level' }]);
        let expiresAt: Date | null = null;
        if (body.expires_at !== undefined && body.expires_at !== null) {
          const parsed = parseInstant(body.expires_at);
          if (!parsed.ok) {
            const message = parsed.problem === 'range' ? timeRangeMessage('expires_at') : 'expires_at must be an RFC 3339 timestamp';
            throw new ValidationFailed([{ field: 'expires_at', code: 'invalid_value', message }]);
          }
          expiresAt = new Date(body.expires_at);
          if (expiresAt.getTime() <= Date.now()) throw new ValidationFailed([{ field: 'expires_at', code: 'invalid_value', message: 'expires_at must be in the future' }]);
        }
        const key = await mintApiKey(ctx, { orgId: orgOf(caller), name: body.name, scopes, expiresAt }, { by: actorOf(caller!) });
        const listed = (await listApiKeys(ctx.pool, orgOf(caller))).find((k) => k.id === key.id)!;
        // The token is in this answer only.
        return { status: 201, body: { data: { ...listed, token: key.token } } };
      },
    }),
    appRoute({
      method: 'DELETE',
      path: '/keys/:key_id',
      access: 'admin',
      async handler({ caller, params }) {
        const revoked = await revokeApiKey(ctx, params.key_id!, { by: actorOf(caller!), orgId: orgOf(caller) });
        return { status: 200, body: { data: revoked } };
      },
    }),

    // ---- members of the current organization (admins) ---------------------------------------
    appRoute({
      method: 'GET',
      path: '/members',
      access: 'admin',
      async handler({ caller }) {
        return { status: 200, body: { data: await listMembers(ctx.pool, orgOf(caller)) } };
      },
    }),
    appRoute({
      method: 'POST',
      path: '/members/invitations',
      access: 'admin',
      body: z.strictObject({ email, role: memberRole }),
      async handler({ request, caller, body }) {
        const invitation = await inviteUser(ctx, { email: body.email, orgId: orgOf(caller), role: body.role, by: actorOf(caller!), publicUrl: publicUrl(request) });
        return { status: 201, body: { data: invitation } };
      },
    }),
    appRoute({
      method: 'GET',
      path: '/members/invitations',
      access: 'admin',
      async handler({ caller }) {
        return { status: 200, body: { data: await listPendingInvitations(ctx.pool, orgOf(caller)) } };
      },
    }),
    appRoute({
      method: 'DELETE',
      path: '/members/invitations/:invitation_id',
      access: 'admin',
      async handler({ caller, params }) {
        await cancelInvitation(ctx, { invitationId: params.invitation_id!, orgId: orgOf(caller), by: actorOf(caller!) });
        return { status: 204 };
      },
    }),
    appRoute({
      method: 'PATCH',
      path: '/members/:user_id',
      access: 'admin',
      body: z.strictObject({ role: memberRole }),
      async handler({ caller, params, body }) {
        await changeMemberRole(ctx, { userId: params.user_id!, orgId: orgOf(caller), role: body.role, by: actorOf(caller!) });
        return { status: 200, body: { data: await findMember(ctx.pool, orgOf(caller), params.user_id!) } };
      },
    }),
    appRoute({
      method: 'DELETE',
      path: '/members/:user_id',
      access: 'admin',
      async handler({ caller, params }) {
        await removeMember(ctx, { userId: params.user_id!, orgId: orgOf(caller), by: actorOf(caller!) });
        return { status: 204 };
      },
    }),
    appRoute({
      method: 'POST',
      path: '/members/:user_id/setup-link',
      access: 'admin',
      async handler({ request, caller, params }) {
        const link = await issuePasswordSetup(ctx, { userId: params.user_id!, orgId: orgOf(caller), by: actorOf(caller!), publicUrl: publicUrl(request) });
        return { status: 201, body: { data: link } };
      },
    }),
    appRoute({
      method: 'POST',
      path: '/members/:user_id/unlock',
      access: 'admin',
      async handler({ caller, params }) {
        const member = await findMember(ctx.pool, orgOf(caller), params.user_id!);
        if (!member) throw new ApiError('not_found', `user ${params.user_id} is not a member of organization ${orgOf(caller)}`);
        await clearSignInAttempts(ctx.pool, member.email);
        return { status: 200, body: { data: { ...member, locked: false } } };
      },
    }),
  ];
}
