import { z } from 'zod';
import { defineEvent, type EventOf, type NewEventOf } from '../../event-store/catalogue.js';
import { MEMBER_ROLES, type MemberRole } from '../../auth/member-roles.js';
import { actorSchema } from '../actor.js';

/**
 * People of the web application: users, their memberships of organizations with a member role, their
 * passwords, and invitations. These events are the only source of truth; sign-in counters, locks
 * and cookie sessions are operational state in `service` tables (docs/design.md, "People and
 * sessions"). Neither a password nor its hash is in an event (the hash is a credential in
 * `service.user_credentials`, which an event names by id; docs/design.md, "Secrets are not
 * events"); a link's secret is never in an event, only its SHA-256.
 *
 * Streams: `user-<user id>` (the user, its password and its memberships), `user-email-<email>`
 * (the claim that makes an email address one user's, lower-cased), `invitation-<id>`.
 */

export const userStream = (userId: string) => `user-${userId}`;
export const userEmailStream = (email: string) => `user-email-${encodeURIComponent(email.toLowerCase())}`;
export const invitationStream = (invitationId: string) => `invitation-${invitationId}`;

export { MEMBER_ROLES, type MemberRole };
const memberRole = z.enum(MEMBER_ROLES);

/**
 * The earlier name of `operator`: version 1 of the three events that carry a member role holds `admin` or
 * `member`. Every reader takes `member` as `operator` (`currentMemberRole`); nothing appends it.
 */
export const LEGACY_MEMBER_ROLE = 'member';
const memberRoleV1 = z.enum(['admin', LEGACY_MEMBER_ROLE]);

/** A member role as an event of any version holds it, read as it is named now. */
export function currentMemberRole(recorded: MemberRole | typeof LEGACY_MEMBER_ROLE): MemberRole {
  return recorded === LEGACY_MEMBER_ROLE ? 'operator' : recorded;
}

export const UserCreated = defineEvent(
  'UserCreated',
  1,
  z.object({
    user_id: z.string().min(1),
    email: z.string().min(3).max(254),
    created_at: z.string(),
    created_by: actorSchema,
  }),
);

/** Claims an email address for a user, atomically with its creation (stream `user-email-<email>`). */
export const UserEmailClaimed = defineEvent(
  'UserEmailClaimed',
  1,
  z.object({ email: z.string().min(3).max(254), user_id: z.string().min(1), claimed_at: z.string() }),
);

const passwordSetupIssuedV1 = z.object({
  user_id: z.string().min(1),
  setup_id: z.string().min(1),
  secret_sha256: z.string().regex(/^[0-9a-f]{64}$/),
  issued_at: z.string(),
  expires_at: z.string(),
});

/**
 * A one-time link to choose the password: with `users create`, and as a new link (`users
 * reset-link`, an admin's "Send a new link") for someone who lost theirs or their password. Only
 * the secret's SHA-256 is kept. The newest link of a user replaces every earlier one; the password
 * does not change until it is used (docs/web-app.md, "Lost links and passwords").
 *
 * Version 2 names who asked (`issued_by`): a new link for someone else's account is a change an
 * audit must be able to attribute. Version 1, which logs written before may hold, was only ever
 * issued with `users create`, by whoever created the user.
 */
export const PasswordSetupIssued = defineEvent(
  'PasswordSetupIssued',
  2,
  passwordSetupIssuedV1.extend({ issued_by: actorSchema }),
  { version: 1, schema: passwordSetupIssuedV1 },
);

/** How a password was set: a setup link (its id), an accepted invitation (its id), or a change by the user. */
const passwordSetVia = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('setup'), setup_id: z.string().min(1) }),
  z.object({ kind: z.literal('invitation'), invitation_id: z.string().min(1) }),
  z.object({ kind: z.literal('change') }),
]);

/**
 * The user's password is now the credential `credential_id`: its hash is in `service.user_credentials`,
 * never in the log (docs/design.md, "People and sessions"). Version 1, which logs written before
 * version 2 may still hold, carried the hash itself (`password_hash`, `scrypt$<N>$<r>$<p>$<salt>$<hash>`);
 * readers handle both, appends write version 2 only.
 */
export const PasswordSet = defineEvent(
  'PasswordSet',
  2,
  z.object({ user_id: z.string().min(1), credential_id: z.string().min(1), set_at: z.string(), via: passwordSetVia }),
  { version: 1, schema: z.object({ user_id: z.string().min(1), password_hash: z.string().min(1), set_at: z.string(), via: passwordSetVia }) },
);

const membershipGranted = <R extends z.ZodType>(memberRoleSchema: R) =>
  z.object({
    user_id: z.string().min(1),
    org_id: z.number().int().positive(),
    role: memberRoleSchema,
    granted_at: z.string(),
    granted_by: actorSchema,
    invitation_id: z.string().min(1).nullable(),
  });

/** Version 2 carries a role of `MEMBER_ROLES`; version 1 `admin` or `member`. */
export const MembershipGranted = defineEvent('MembershipGranted', 2, membershipGranted(memberRole), { version: 1, schema: membershipGranted(memberRoleV1) });

const membershipRoleChanged = <R extends z.ZodType>(memberRoleSchema: R) =>
  z.object({ user_id: z.string().min(1), org_id: z.number().int().positive(), role: memberRoleSchema, changed_at: z.string(), changed_by: actorSchema });

/** Version 2 carries a role of `MEMBER_ROLES`; version 1 `admin` or `member`. */
export const MembershipRoleChanged = defineEvent('MembershipRoleChanged', 2, membershipRoleChanged(memberRole), { version: 1, schema: membershipRoleChanged(memberRoleV1) });

export const MembershipRemoved = defineEvent(
  'MembershipRemoved',
  1,
  z.object({ user_id: z.string().min(1), org_id: z.number().int().positive(), removed_at: z.string(), removed_by: actorSchema }),
);

const invitationIssued = <R extends z.ZodType>(memberRoleSchema: R) =>
  z.object({
    invitation_id: z.string().min(1),
    org_id: z.number().int().positive(),
    email: z.string().min(3).max(254),
    role: memberRoleSchema,
    secret_sha256: z.string().regex(/^[0-9a-f]{64}$/),
    issued_at: z.string(),
    expires_at: z.string(),
    issued_by: actorSchema,
  });

/** Version 2 carries a role of `MEMBER_ROLES`; version 1 `admin` or `member`. */
export const InvitationIssued = defineEvent('InvitationIssued', 2, invitationIssued(memberRole), { version: 1, schema: invitationIssued(memberRoleV1) });

export const InvitationAccepted = defineEvent(
  'InvitationAccepted',
  1,
  z.object({ invitation_id: z.string().min(1), org_id: z.number().int().positive(), user_id: z.string().min(1), accepted_at: z.string() }),
);

/** An admin (or the CLI) withdrew an invitation before it was accepted: its link is refused from then on. */
export const InvitationCancelled = defineEvent(
  'InvitationCancelled',
  1,
  z.object({ invitation_id: z.string().min(1), org_id: z.number().int().positive(), cancelled_at: z.string(), cancelled_by: actorSchema }),
);

export const userEvents = [UserCreated, PasswordSetupIssued, PasswordSet, MembershipGranted, MembershipRoleChanged, MembershipRemoved] as const;
export const userEmailEvents = [UserEmailClaimed] as const;
export const invitationEvents = [InvitationIssued, InvitationAccepted, InvitationCancelled] as const;
export const peopleEvents = [...userEvents, ...userEmailEvents, ...invitationEvents];

/** A user's event as its stream may hold it (every version); `NewUserEvent`: as appended now. */
export type UserEvent = EventOf<(typeof userEvents)[number]>;
export type NewUserEvent = NewEventOf<(typeof userEvents)[number]>;
export type UserEmailEvent = EventOf<(typeof userEmailEvents)[number]>;
export type InvitationEvent = EventOf<(typeof invitationEvents)[number]>;
export type PeopleEvent = EventOf<(typeof peopleEvents)[number]>;
