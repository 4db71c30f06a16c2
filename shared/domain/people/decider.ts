import { createHash, timingSafeEqual } from 'node:crypto';
import type { Actor } from '../actor.js';
import type { Decider } from '../decider.js';
import { DomainRefusal } from '../refusal.js';
import { LEGACY_MEMBER_ROLE, MEMBER_ROLES, currentMemberRole, type InvitationEvent, type NewUserEvent, type MemberRole, type UserEmailEvent, type UserEvent } from './events.js';

/**
 * The deciders of people (docs/design.md, "People and sessions"): a user's stream (the user, its
 * password, its memberships), the claim on an email address, and an invitation. Pure: the clock,
 * fresh ids, a link's secret (as its SHA-256), a password (as the id of the credential the handler
 * stored its hash under) and whether an organization exists come in on the command.
 */

/** Invitation and setup links are valid this long (docs/web-app.md, "Invitations and setup links"). */
export const LINK_LIFETIME_MS = 72 * 3600 * 1000;
export const MIN_PASSWORD_LENGTH = 10;
export const MAX_PASSWORD_LENGTH = 200;
const MAX_EMAIL_LENGTH = 254;
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

/** An email address as users are known by it: trimmed, lower-cased, `local@domain`, at most 254 characters. */
export function normalizeEmail(email: string): string {
  const normalized = email.trim().toLowerCase();
  if (normalized.length > MAX_EMAIL_LENGTH || !/^[^\s@]+@[^\s@]+$/.test(normalized) || CONTROL_CHARACTERS.test(normalized)) {
    throw new DomainRefusal('bad_request', 'email must be an email address (local@domain, at most 254 characters)', 'email');
  }
  return normalized;
}

/** The domain of an email address as `normalizeEmail` gives it: what follows its `@`. */
export function emailDomain(email: string): string {
  return email.slice(email.lastIndexOf('@') + 1);
}

/**
 * The address a single sign-on signs in with (docs/web-app.md, "Single sign-on"): the ID token's
 * `email` claim, normalized, which its `email_verified` claim must vouch for (`true`, nothing
 * else). Refused (`forbidden`) with a line for the person otherwise.
 */
export function verifiedSignOnEmail(email: unknown, emailVerified: unknown): string {
  if (typeof email !== 'string' || email.trim() === '') {
    throw new DomainRefusal('forbidden', 'Your identity provider sent no email address: it must put the email and email_verified claims in the ID token');
  }
  let normalized: string;
  try {
    normalized = normalizeEmail(email);
  } catch {
    throw new DomainRefusal('forbidden', `Your identity provider sent "${email}", which is not an email address this service can use`);
  }
  if (emailVerified !== true) {
    throw new DomainRefusal('forbidden', `Your identity provider has not verified this email address (${normalized}): verify it there, then sign in again`);
  }
  return normalized;
}

/** A member role as a command names it; `member`, the earlier name of `operator`, is read as that. */
export function checkMemberRole(role: string): MemberRole {
  if (role === LEGACY_MEMBER_ROLE) return 'operator';
  if (!(MEMBER_ROLES as readonly string[]).includes(role)) throw new DomainRefusal('bad_request', `role must be one of: ${MEMBER_ROLES.join(', ')}`, 'role');
  return role as MemberRole;
}

/** A password's rule, asked before it is hashed (the decider only ever sees the id of its credential). */
export function checkPassword(password: string, field = 'password'): string {
  if (password.length < MIN_PASSWORD_LENGTH) {
    throw new DomainRefusal('bad_request', `${field} must be at least ${MIN_PASSWORD_LENGTH} characters long`, field);
  }
  if (password.length > MAX_PASSWORD_LENGTH) {
    throw new DomainRefusal('bad_request', `${field} must be at most ${MAX_PASSWORD_LENGTH} characters long`, field);
  }
  return password;
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function sameDigest(a: string, b: string): boolean {
  return a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));
}

// ---- the claim on an email address ----------------------------------------------------------

export type UserEmailState = { holder: string | null };

export interface ClaimEmail {
  type: 'ClaimEmail';
  email: string;
  userId: string;
  at: string;
}

export const userEmailDecider: Decider<UserEmailState, ClaimEmail, UserEmailEvent> = {
  initialState: { holder: null },
  evolve(_state, event) {
    return { holder: event.data.user_id };
  },
  decide(command, state) {
    if (state.holder !== null) throw new DomainRefusal('conflict', `a user with email ${command.email} already exists`, 'email');
    return [{ type: 'UserEmailClaimed', data: { email: command.email, user_id: command.userId, claimed_at: command.at } }];
  },
};

// ---- users ----------------------------------------------------------------------------------

export interface UserState {
  status: 'absent' | 'created';
  userId: string;
  email: string;
  /**
   * The current password: the credential a `PasswordSet` names (its hash in the service's
   * credentials, read by the handler), or, from a log written before `PasswordSet` version 2, the
   * hash the event carried itself; null before the first.
   */
  password: CurrentPassword | null;
  /** Every setup link issued to the user, by setup id: at most one is open (the newest, until it is used). */
  setupLinks: ReadonlyMap<string, SetupLink>;
  /** The member role per organization id. */
  memberships: ReadonlyMap<number, MemberRole>;
}

export type CurrentPassword = { kind: 'credential'; credentialId: string } | { kind: 'hash-in-log'; passwordHash: string };

/** A setup link as the log remembers it: its secret's digest, until when it works, and what became of it. */
export interface SetupLink {
  secretSha256: string;
  expiresAt: string;
  /** open: usable until `expiresAt`; used: it set the password; replaced: a newer link was issued. */
  outcome: 'open' | 'used' | 'replaced';
}

const noUser: UserState = { status: 'absent', userId: '', email: '', password: null, setupLinks: new Map(), memberships: new Map() };

/**
 * What a link's page says before it shows a form (docs/web-app.md, "Checking a link"): `valid`,
 * or why not. `invalid` is any token whose secret does not match, or that names nothing, so it
 * tells nothing about accounts to someone without the link.
 */
export type LinkStatus = 'valid' | 'used' | 'expired' | 'cancelled' | 'replaced' | 'invalid';

/**
 * The status of a setup link `<user id>.<setup id>.<secret>`: the rule that both the link's check
 * and its use (`SetPasswordWithSetupLink`) follow. Only the newest link of a user works.
 */
export function setupLinkStatus(state: UserState, link: { setupId: string; secretSha256: string }, now: string): Exclude<LinkStatus, 'cancelled'> {
  const issued = state.status === 'created' ? state.setupLinks.get(link.setupId) : undefined;
  if (!issued || !sameDigest(issued.secretSha256, link.secretSha256)) return 'invalid';
  if (issued.outcome !== 'open') return issued.outcome;
  return Date.parse(issued.expiresAt) <= Date.parse(now) ? 'expired' : 'valid';
}

export interface CreateUser {
  type: 'CreateUser';
  userId: string;
  email: string;
  orgId: number;
  orgExists: boolean;
  role: MemberRole;
  at: string;
  by: Actor;
  /**
   * `users create`: a setup link; an invitation instead brings the password (its credential), or
   * none when it was accepted by single sign-on (the identity provider vouches for the person).
   */
  setup: { setupId: string; secretSha256: string; expiresAt: string } | null;
  invitation: { invitationId: string; credentialId: string | null } | null;
}

/**
 * Someone signs in by single sign-on for the first time with a verified email address of a
 * domain allowed to join (docs/web-app.md, "Single sign-on"): a user with no password, a viewer of
 * that organization, made by themselves. The handler has checked the domain.
 */
export interface JoinByEmailDomain {
  type: 'JoinByEmailDomain';
  userId: string;
  email: string;
  orgId: number;
  orgExists: boolean;
  at: string;
}

/**
 * A new one-time link to choose the password (`users reset-link`, an admin's "Send a new link"):
 * it replaces the user's earlier links, and the password stays until it is used.
 */
export interface IssuePasswordSetup {
  type: 'IssuePasswordSetup';
  setupId: string;
  secretSha256: string;
  at: string;
  expiresAt: string;
  by: Actor;
  /** The organization in which an admin asks: the user must be a member of it. Null for the CLI. */
  orgId: number | null;
  /**
   * When `by` is a user other than the subject: the organizations they are an admin of now, read
   * from their own stream (the handler appends with its revision checked, as for a member role change).
   */
  byAdminOf: ReadonlySet<number> | undefined;
}

export interface SetPasswordWithSetupLink {
  type: 'SetPasswordWithSetupLink';
  setupId: string;
  secretSha256: string;
  credentialId: string;
  now: string;
}

/** The handler has checked the current password. */
export interface ChangePassword {
  type: 'ChangePassword';
  credentialId: string;
  at: string;
}

export interface GrantMembership {
  type: 'GrantMembership';
  orgId: number;
  orgExists: boolean;
  role: MemberRole;
  at: string;
  by: Actor;
  invitationId: string | null;
}

/**
 * What the user who asks (`by`, when a user) is in the organization now, read from their own
 * stream when the decision is made: the handler appends with that stream's revision checked too,
 * so two admins who demote or remove each other at the same moment cannot both succeed, and an
 * organization that has an admin keeps one (docs/web-app.md, "People and roles").
 */
export type ActorStanding = { role: MemberRole | null } | undefined;

export interface ChangeMemberRole {
  type: 'ChangeMemberRole';
  orgId: number;
  role: MemberRole;
  at: string;
  by: Actor;
  /** Required when `by` is a user. */
  byStanding: ActorStanding;
}

export interface RemoveMembership {
  type: 'RemoveMembership';
  orgId: number;
  at: string;
  by: Actor;
  /** Required when `by` is a user. */
  byStanding: ActorStanding;
}

export type UserCommand =
  | CreateUser
  | JoinByEmailDomain
  | IssuePasswordSetup
  | SetPasswordWithSetupLink
  | ChangePassword
  | GrantMembership
  | ChangeMemberRole
  | RemoveMembership;

/** The member role of everyone who joins an organization by their email's domain. */
export const DOMAIN_JOIN_MEMBER_ROLE: MemberRole = 'viewer';

function requireMember(state: UserState, orgId: number): MemberRole {
  const role = state.status === 'created' ? state.memberships.get(orgId) : undefined;
  if (role === undefined) throw new DomainRefusal('not_found', `user is not a member of organization ${orgId}`);
  return role;
}

function refuseSelf(by: Actor, state: UserState, what: string): void {
  if (by.kind === 'user' && by.user_id === state.userId) throw new DomainRefusal('forbidden', `you cannot ${what} yourself; ask another admin`);
}

/** A user may change others' memberships only while an admin of that organization (the CLI always may). */
function requireAdmin(by: Actor, standing: ActorStanding): void {
  if (by.kind !== 'user') return;
  if (standing === undefined) throw new Error('a user’s command needs their standing in the organization');
  if (standing.role !== 'admin') throw new DomainRefusal('forbidden', "Only the organization's admins can do this");
}

export const userDecider: Decider<UserState, UserCommand, UserEvent, NewUserEvent> = {
  initialState: noUser,
  evolve(state, event) {
    switch (event.type) {
      case 'UserCreated':
        return { ...noUser, status: 'created', userId: event.data.user_id, email: event.data.email };
      case 'PasswordSetupIssued': {
        const setupLinks = new Map([...state.setupLinks].map(([id, link]): [string, SetupLink] => [id, link.outcome === 'open' ? { ...link, outcome: 'replaced' } : link]));
        setupLinks.set(event.data.setup_id, { secretSha256: event.data.secret_sha256, expiresAt: event.data.expires_at, outcome: 'open' });
        return { ...state, setupLinks };
      }
      case 'PasswordSet': {
        const password: CurrentPassword =
          'credential_id' in event.data ? { kind: 'credential', credentialId: event.data.credential_id } : { kind: 'hash-in-log', passwordHash: event.data.password_hash };
        const via = event.data.via;
        const used = via.kind === 'setup' ? state.setupLinks.get(via.setup_id) : undefined;
        if (via.kind !== 'setup' || !used) return { ...state, password };
        return { ...state, password, setupLinks: new Map(state.setupLinks).set(via.setup_id, { ...used, outcome: 'used' }) };
      }
      case 'MembershipGranted':
      case 'MembershipRoleChanged':
        return { ...state, memberships: new Map(state.memberships).set(event.data.org_id, currentMemberRole(event.data.role)) };
      case 'MembershipRemoved': {
        const memberships = new Map(state.memberships);
        memberships.delete(event.data.org_id);
        return { ...state, memberships };
      }
    }
  },
  decide(command, state) {
    switch (command.type) {
      case 'CreateUser': {
        if (state.status !== 'absent') throw new DomainRefusal('conflict', `user ${command.userId} already exists`);
        if (!command.orgExists) throw new DomainRefusal('not_found', `organization ${command.orgId} does not exist`, 'org_id');
        const events: NewUserEvent[] = [
          { type: 'UserCreated', data: { user_id: command.userId, email: command.email, created_at: command.at, created_by: command.by } },
        ];
        if (command.invitation?.credentialId) {
          events.push({
            type: 'PasswordSet',
            data: {
              user_id: command.userId,
              credential_id: command.invitation.credentialId,
              set_at: command.at,
              via: { kind: 'invitation', invitation_id: command.invitation.invitationId },
            },
          });
        }
        events.push({
          type: 'MembershipGranted',
          data: {
            user_id: command.userId,
            org_id: command.orgId,
            role: command.role,
            granted_at: command.at,
            granted_by: command.by,
            invitation_id: command.invitation?.invitationId ?? null,
          },
        });
        if (command.setup) {
          events.push({
            type: 'PasswordSetupIssued',
            data: {
              user_id: command.userId,
              setup_id: command.setup.setupId,
              secret_sha256: command.setup.secretSha256,
              issued_at: command.at,
              expires_at: command.setup.expiresAt,
              issued_by: command.by,
            },
          });
        }
        return events;
      }
      case 'JoinByEmailDomain': {
        if (state.status !== 'absent') throw new DomainRefusal('conflict', `user ${command.userId} already exists`);
        if (!command.orgExists) throw new DomainRefusal('not_found', `organization ${command.orgId} does not exist`, 'org_id');
        const self: Actor = { kind: 'user', user_id: command.userId, email: command.email };
        return [
          { type: 'UserCreated', data: { user_id: command.userId, email: command.email, created_at: command.at, created_by: self } },
          {
            type: 'MembershipGranted',
            data: { user_id: command.userId, org_id: command.orgId, role: DOMAIN_JOIN_MEMBER_ROLE, granted_at: command.at, granted_by: self, invitation_id: null },
          },
        ];
      }
      case 'IssuePasswordSetup': {
        // An admin learns nothing about users outside their organization, existing or not.
        if (command.orgId !== null) requireMember(state, command.orgId);
        else if (state.status !== 'created') throw new DomainRefusal('not_found', 'user does not exist');
        if (command.by.kind === 'user' && command.by.user_id !== state.userId) {
          if (command.byAdminOf === undefined) throw new Error('a user’s command needs the organizations they administer');
          if (command.orgId === null || !command.byAdminOf.has(command.orgId)) throw new DomainRefusal('forbidden', "Only the organization's admins can do this");
          // The link opens the whole account: an admin of one organization must not take over
          // someone who also belongs to another (docs/web-app.md, "Lost links and passwords").
          if ([...state.memberships.keys()].some((orgId) => !command.byAdminOf!.has(orgId))) {
            throw new DomainRefusal(
              'forbidden',
              `${state.email} also belongs to an organization you do not administer: ask the installation's operator for a new link (npx tracking users reset-link)`,
            );
          }
        }
        return [
          {
            type: 'PasswordSetupIssued',
            data: {
              user_id: state.userId,
              setup_id: command.setupId,
              secret_sha256: command.secretSha256,
              issued_at: command.at,
              expires_at: command.expiresAt,
              issued_by: command.by,
            },
          },
        ];
      }
      case 'SetPasswordWithSetupLink': {
        const status = setupLinkStatus(state, command, command.now);
        if (status === 'expired') throw new DomainRefusal('bad_request', 'This setup link has expired; ask an administrator for a new one', 'token');
        // One answer for a link that never was, was replaced or was used: the page's check (which
        // needs the link's secret too) tells them apart.
        if (status !== 'valid') throw new DomainRefusal('bad_request', 'This setup link is not valid or has already been used', 'token');
        return [
          {
            type: 'PasswordSet',
            data: { user_id: state.userId, credential_id: command.credentialId, set_at: command.now, via: { kind: 'setup', setup_id: command.setupId } },
          },
        ];
      }
      case 'ChangePassword':
        if (state.status !== 'created' || state.password === null) throw new DomainRefusal('bad_request', 'this user has no password to change');
        return [{ type: 'PasswordSet', data: { user_id: state.userId, credential_id: command.credentialId, set_at: command.at, via: { kind: 'change' } } }];
      case 'GrantMembership':
        if (state.status !== 'created') throw new DomainRefusal('not_found', 'user does not exist');
        if (!command.orgExists) throw new DomainRefusal('not_found', `organization ${command.orgId} does not exist`, 'org_id');
        if (state.memberships.has(command.orgId)) {
          throw new DomainRefusal('conflict', `${state.email} is already a member of organization ${command.orgId}`, 'email');
        }
        return [
          {
            type: 'MembershipGranted',
            data: {
              user_id: state.userId,
              org_id: command.orgId,
              role: command.role,
              granted_at: command.at,
              granted_by: command.by,
              invitation_id: command.invitationId,
            },
          },
        ];
      case 'ChangeMemberRole': {
        const current = requireMember(state, command.orgId);
        if (current === command.role) return [];
        refuseSelf(command.by, state, 'change the role of');
        requireAdmin(command.by, command.byStanding);
        return [
          { type: 'MembershipRoleChanged', data: { user_id: state.userId, org_id: command.orgId, role: command.role, changed_at: command.at, changed_by: command.by } },
        ];
      }
      case 'RemoveMembership':
        requireMember(state, command.orgId);
        refuseSelf(command.by, state, 'remove');
        requireAdmin(command.by, command.byStanding);
        return [{ type: 'MembershipRemoved', data: { user_id: state.userId, org_id: command.orgId, removed_at: command.at, removed_by: command.by } }];
    }
  },
};

// ---- invitations ----------------------------------------------------------------------------

export type InvitationState =
  | { status: 'absent' }
  | { status: 'issued' | 'accepted' | 'cancelled'; invitationId: string; orgId: number; email: string; role: MemberRole; secretSha256: string; expiresAt: string };

export interface IssueInvitation {
  type: 'IssueInvitation';
  invitationId: string;
  orgId: number;
  orgExists: boolean;
  email: string;
  role: MemberRole;
  secretSha256: string;
  at: string;
  expiresAt: string;
  by: Actor;
}

export interface AcceptInvitation {
  type: 'AcceptInvitation';
  secretSha256: string;
  userId: string;
  now: string;
}

/**
 * Accepted by single sign-on: no link, but the identity provider has verified that the person
 * signing in owns the invitation's email address (the handler passes that address, lower-cased).
 */
export interface AcceptInvitationBySignOn {
  type: 'AcceptInvitationBySignOn';
  verifiedEmail: string;
  userId: string;
  now: string;
}

/** Withdraws an invitation of `orgId` that was not accepted yet (a second cancel changes nothing). */
export interface CancelInvitation {
  type: 'CancelInvitation';
  orgId: number;
  at: string;
  by: Actor;
}

export type InvitationCommand = IssueInvitation | AcceptInvitation | AcceptInvitationBySignOn | CancelInvitation;

/** The status of an invitation link `<invitation id>.<secret>`: the rule its check and its acceptance both follow. */
export function invitationLinkStatus(state: InvitationState, secretSha256: string, now: string): Exclude<LinkStatus, 'replaced'> {
  if (state.status === 'absent' || !sameDigest(state.secretSha256, secretSha256)) return 'invalid';
  if (state.status === 'accepted') return 'used';
  if (state.status === 'cancelled') return 'cancelled';
  return Date.parse(state.expiresAt) <= Date.parse(now) ? 'expired' : 'valid';
}

const INVITATION_REFUSALS: Record<Exclude<LinkStatus, 'valid' | 'replaced'>, string> = {
  invalid: 'This invitation link is not valid',
  used: 'This invitation link has already been used',
  cancelled: 'This invitation link was cancelled; ask an administrator for a new one',
  expired: 'This invitation link has expired; ask an administrator for a new one',
};

export const invitationDecider: Decider<InvitationState, InvitationCommand, InvitationEvent> = {
  initialState: { status: 'absent' },
  evolve(state, event) {
    switch (event.type) {
      case 'InvitationIssued':
        return {
          status: 'issued',
          invitationId: event.data.invitation_id,
          orgId: event.data.org_id,
          email: event.data.email,
          role: currentMemberRole(event.data.role),
          secretSha256: event.data.secret_sha256,
          expiresAt: event.data.expires_at,
        };
      case 'InvitationAccepted':
        return state.status === 'absent' ? state : { ...state, status: 'accepted' };
      case 'InvitationCancelled':
        return state.status === 'absent' ? state : { ...state, status: 'cancelled' };
    }
  },
  decide(command, state) {
    switch (command.type) {
      case 'IssueInvitation':
        if (state.status !== 'absent') throw new DomainRefusal('conflict', `invitation ${command.invitationId} already exists`);
        if (!command.orgExists) throw new DomainRefusal('not_found', `organization ${command.orgId} does not exist`, 'org_id');
        return [
          {
            type: 'InvitationIssued',
            data: {
              invitation_id: command.invitationId,
              org_id: command.orgId,
              email: command.email,
              role: command.role,
              secret_sha256: command.secretSha256,
              issued_at: command.at,
              expires_at: command.expiresAt,
              issued_by: command.by,
            },
          },
        ];
      case 'AcceptInvitation': {
        const status = invitationLinkStatus(state, command.secretSha256, command.now);
        if (status !== 'valid') throw new DomainRefusal('bad_request', INVITATION_REFUSALS[status], 'token');
        if (state.status !== 'issued') throw new Error('unreachable: a valid link is an issued invitation');
        return [{ type: 'InvitationAccepted', data: { invitation_id: state.invitationId, org_id: state.orgId, user_id: command.userId, accepted_at: command.now } }];
      }
      case 'AcceptInvitationBySignOn':
        // Someone else's invitation is as absent as one that never was.
        if (state.status === 'absent' || state.email !== command.verifiedEmail) throw new DomainRefusal('not_found', 'invitation not found');
        if (state.status === 'accepted') throw new DomainRefusal('bad_request', 'This invitation has already been accepted');
        if (state.status === 'cancelled') throw new DomainRefusal('bad_request', 'This invitation was cancelled; ask an administrator for a new one');
        if (Date.parse(state.expiresAt) <= Date.parse(command.now)) {
          throw new DomainRefusal('bad_request', 'This invitation has expired; ask an administrator for a new one');
        }
        return [{ type: 'InvitationAccepted', data: { invitation_id: state.invitationId, org_id: state.orgId, user_id: command.userId, accepted_at: command.now } }];
      case 'CancelInvitation':
        // Another organization's invitation is as absent as one that never was.
        if (state.status === 'absent' || state.orgId !== command.orgId) throw new DomainRefusal('not_found', 'invitation not found');
        if (state.status === 'accepted') throw new DomainRefusal('conflict', 'this invitation was already accepted; remove the member instead');
        if (state.status === 'cancelled') return [];
        return [{ type: 'InvitationCancelled', data: { invitation_id: state.invitationId, org_id: state.orgId, cancelled_at: command.at, cancelled_by: command.by } }];
    }
  },
};
