import { randomBytes } from 'node:crypto';
import { newUlid } from '../../ulid.js';
import { eventsOf } from '../../event-store/catalogue.js';
import type { ExpectedRevision, Position, StreamAppend } from '../../event-store/port.js';
import { CheckpointTimeoutError, type AppendedStream } from '../../projection/checkpoints.js';
import { ProjectionSetAsideError } from '../../projection/set-aside.js';
import { hashPassword, verifyPassword } from '../../auth/passwords.js';
import type { Actor } from '../actor.js';
import { CommandContentionError, executeCommand, loadStream } from '../command.js';
import { fold } from '../decider.js';
import { orgDecider } from '../orgs-and-keys/decider.js';
import { orgEvents, orgStream } from '../orgs-and-keys/events.js';
import type { CommandPort } from '../port.js';
import { DomainRefusal } from '../refusal.js';
import {
  DOMAIN_JOIN_MEMBER_ROLE,
  LINK_LIFETIME_MS,
  emailDomain,
  checkPassword,
  checkMemberRole,
  invitationDecider,
  invitationLinkStatus,
  normalizeEmail,
  setupLinkStatus,
  sha256Hex,
  userDecider,
  userEmailDecider,
  type InvitationState,
  type LinkStatus,
  type UserState,
} from './decider.js';
import { invitationEvents, invitationStream, userEmailEvents, userEmailStream, userEvents, userStream, type MemberRole } from './events.js';


/**
 * The commands of people, run by the CLI (`users …`) and the web application's endpoints alike,
 * so both write the same events. Each reads what its decision needs from the log (never from a
 * read model: a user's current credential is read from its stream), decides (./decider.ts), appends
 * with expected revisions (a lost race is decided again) and waits for the projections.
 *
 * A new password's hash is stored as a credential (`port.credentials`) before the `PasswordSet`
 * that names it is appended, once per command whatever its retries; once appended, the user's
 * other credentials are forgotten, so a replaced hash is gone (docs/design.md, "Secrets are not
 * events"). A credential whose append failed is named by no event, so never read; it goes with
 * the user's next password, or at once when the command was refused.
 *
 * Links carry an id and a 32-byte random secret, `<id>.<secret>`; the log keeps the secret's
 * SHA-256 only. They are built on the service's public URL (`PUBLIC_URL`), with the token in the
 * fragment, which browsers send to no server: `<public url>/setup#token=…`, `/invite#token=…`.
 */

type Port = Pick<CommandPort, 'store' | 'checkpoints' | 'credentials'>;

export interface PeopleOptions {
  /** How the change becomes visible (the CLI's own); default: the checkpoint wait. */
  project?: (position: Position, streams: readonly AppendedStream[]) => Promise<void>;
  /** The clock, in milliseconds (tests issue links in the past). */
  now?: number;
}

const newSecret = () => randomBytes(32).toString('base64url');
const idOf = (prefix: string, now: number) => `${prefix}_${newUlid(now).toLowerCase()}`;

export function setupUrl(publicUrl: string, token: string): string {
  return `${publicUrl.replace(/\/+$/, '')}/setup#token=${token}`;
}

export function inviteUrl(publicUrl: string, token: string): string {
  return `${publicUrl.replace(/\/+$/, '')}/invite#token=${token}`;
}

/** `<id>.<secret>` (a setup token's id is `<user id>.<setup id>`), or null when it is not of that shape. */
function splitToken(token: string, parts: number): string[] | null {
  const split = typeof token === 'string' ? token.split('.') : [];
  return split.length === parts && split.every((p) => /^[A-Za-z0-9_-]{1,64}$/.test(p)) ? split : null;
}

/** As `splitToken`, or a refusal naming the link. */
function parseToken(token: string, parts: number, what: string): string[] {
  const split = splitToken(token, parts);
  if (!split) throw new DomainRefusal('bad_request', `This ${what} link is not valid`, 'token');
  return split;
}

/** Whether the organization exists, from its stream (the single sign-on settings are checked with it at start). */
export async function orgExists(ctx: Pick<CommandPort, 'store'>, orgId: number): Promise<boolean> {
  if (!Number.isInteger(orgId) || orgId < 1 || orgId > 2147483647) return false;
  const recorded = await ctx.store.readStream(orgStream(orgId), { maxCount: 1 });
  return fold(orgDecider, eventsOf(recorded, orgEvents)).status === 'created';
}

/** The user an email address belongs to, and the revision to claim it with when nobody has it. */
async function emailHolder(ctx: Port, email: string): Promise<{ userId: string | null; expectedRevision: ExpectedRevision }> {
  const { state, expectedRevision } = await loadStream(ctx, userEmailStream(email), userEmailDecider, userEmailEvents);
  return { userId: state.holder, expectedRevision };
}

export async function loadUser(ctx: Pick<CommandPort, 'store'>, userId: string): Promise<{ state: UserState; expectedRevision: ExpectedRevision }> {
  return loadStream(ctx, userStream(userId), userDecider, userEvents);
}

/** The user of an email address, from the log (sign-in reads it this way); null when nobody has it. */
export async function findUserByEmail(ctx: Pick<CommandPort, 'store'>, email: string): Promise<UserState | null> {
  let normalized: string;
  try {
    normalized = normalizeEmail(email);
  } catch {
    return null;
  }
  const { state } = await loadStream(ctx, userEmailStream(normalized), userEmailDecider, userEmailEvents);
  if (state.holder === null) return null;
  const user = await loadUser(ctx, state.holder);
  return user.state.status === 'created' ? user.state : null;
}

/**
 * The hash of the user's current password (sign-in and a password change check against it): the
 * credential their stream names, or, from a log written before `PasswordSet` version 2, the hash
 * in the event; null when they have none (never set, or its credential is gone).
 */
export async function currentPasswordHash(ctx: Pick<CommandPort, 'credentials'>, user: UserState): Promise<string | null> {
  if (user.status !== 'created' || user.password === null) return null;
  if (user.password.kind === 'hash-in-log') return user.password.passwordHash;
  return ctx.credentials.read(user.userId, user.password.credentialId);
}

/**
 * A new password for one user, hashed and stored as a credential the first time a command's
 * attempt asks for it (so its retries name the same one); `forgetOthers` then deletes the user's
 * other credentials, once the event that names it is appended.
 */
function newCredential(ctx: Pick<CommandPort, 'credentials'>, userId: string, password: string, field = 'password') {
  let stored: Promise<string> | null = null;
  return {
    id(): Promise<string> {
      stored ??= (async () => {
        const passwordHash = await hashPassword(checkPassword(password, field));
        const credentialId = idOf('cred', Date.now());
        await ctx.credentials.store({ credentialId, userId, passwordHash });
        return credentialId;
      })();
      return stored;
    },
    /** After the append: the user's credentials but this one are deleted (older passwords, orphans of failed appends). */
    async forgetOthers(): Promise<void> {
      if (stored) await ctx.credentials.forgetAllBut(userId, await stored);
    },
    /** Every credential of the user is deleted: only for a new user's id that no append created. */
    async forgetAll(): Promise<void> {
      if (stored) await ctx.credentials.forgetAllBut(userId, null);
    },
  };
}

/** Whether a command's failure says for certain that nothing was appended (a refusal, or every attempt lost its race). */
const appendedNothing = (error: unknown) => error instanceof DomainRefusal || error instanceof CommandContentionError;

/** Whether a command's failure came after its append, in the wait for the projections (the append is durable). */
const appendedButNotVisible = (error: unknown) => error instanceof CheckpointTimeoutError || error instanceof ProjectionSetAsideError;

/**
 * Runs a command that sets a user's password to `credential`, then forgets the user's other
 * credentials (and runs `afterwards`): once it succeeds, and also when only the wait for the
 * projections failed, since the event naming the new one is in the log by then.
 */
async function settingPassword<T>(credential: ReturnType<typeof newCredential>, command: () => Promise<T>, afterwards?: () => Promise<void>): Promise<T> {
  let result: T;
  try {
    result = await command();
  } catch (error) {
    if (appendedButNotVisible(error)) await Promise.all([credential.forgetOthers(), afterwards?.()]);
    throw error;
  }
  await Promise.all([credential.forgetOthers(), afterwards?.()]);
  return result;
}

function claimEmail(email: string, userId: string, expectedRevision: ExpectedRevision, at: string): StreamAppend {
  const events = userEmailDecider.decide({ type: 'ClaimEmail', email, userId, at }, userEmailDecider.initialState);
  return { streamId: userEmailStream(email), expectedRevision, events };
}

// ---- users create ---------------------------------------------------------------------------

export interface CreatedUser {
  id: string;
  email: string;
  org_id: number;
  role: MemberRole;
  setup_url: string;
}

/** `users create`: a user, member of one organization, with a one-time link to set the password. */
export async function createUser(
  ctx: Port,
  input: { email: string; orgId: number; role: string; by: Actor; publicUrl: string },
  options: PeopleOptions = {},
): Promise<CreatedUser> {
  const email = normalizeEmail(input.email);
  const role = checkMemberRole(input.role);
  const now = options.now ?? Date.now();
  const userId = idOf('usr', now);
  const setupId = idOf('ps', now);
  const secret = newSecret();
  const at = new Date(now).toISOString();
  const { result } = await executeCommand(
    ctx,
    async () => {
      const holder = await emailHolder(ctx, email);
      if (holder.userId !== null) {
        throw new DomainRefusal('conflict', `a user with email ${email} already exists; invite them to the organization instead`, 'email');
      }
      const events = userDecider.decide(
        {
          type: 'CreateUser',
          userId,
          email,
          orgId: input.orgId,
          orgExists: await orgExists(ctx, input.orgId),
          role,
          at,
          by: input.by,
          setup: { setupId, secretSha256: sha256Hex(secret), expiresAt: new Date(now + LINK_LIFETIME_MS).toISOString() },
          invitation: null,
        },
        userDecider.initialState,
      );
      return {
        appends: [{ streamId: userStream(userId), expectedRevision: 'no_stream', events }, claimEmail(email, userId, holder.expectedRevision, at)],
        result: { id: userId, email, org_id: input.orgId, role, setup_url: setupUrl(input.publicUrl, `${userId}.${setupId}.${secret}`) },
      };
    },
    { project: options.project },
  );
  return result;
}

export interface IssuedSetupLink {
  email: string;
  setup_url: string;
  expires_at: string;
}

/**
 * `users reset-link`, and an admin's "Send a new link" (`orgId`: the organization they act in):
 * a new one-time link to choose a password, valid 72 hours, for someone who never used theirs or
 * lost their password. It replaces the user's earlier links; their password keeps working until
 * it is used. An admin's link for someone else holds their own stream's revision, as a role
 * change does, so it is decided on what they administer at that moment.
 */
export async function issuePasswordSetup(
  ctx: Port,
  input: { userId: string; orgId: number | null; by: Actor; publicUrl: string },
  options: PeopleOptions = {},
): Promise<IssuedSetupLink> {
  const now = options.now ?? Date.now();
  const setupId = idOf('ps', now);
  const secret = newSecret();
  const expiresAt = new Date(now + LINK_LIFETIME_MS).toISOString();
  const { result } = await executeCommand(
    ctx,
    async () => {
      const { state, expectedRevision } = await loadUser(ctx, input.userId);
      // Another user asks: what they administer now, and the check that holds their stream's revision.
      const askerId = input.by.kind === 'user' && input.by.user_id !== input.userId ? input.by.user_id : null;
      const asker = askerId ? await loadUser(ctx, askerId) : null;
      const byAdminOf = asker ? new Set([...asker.state.memberships].filter(([, role]) => role === 'admin').map(([orgId]) => orgId)) : undefined;
      const events = userDecider.decide(
        { type: 'IssuePasswordSetup', setupId, secretSha256: sha256Hex(secret), at: new Date(now).toISOString(), expiresAt, by: input.by, orgId: input.orgId, byAdminOf },
        state,
      );
      const appends: StreamAppend[] = [{ streamId: userStream(input.userId), expectedRevision, events }];
      if (askerId && asker) appends.push({ streamId: userStream(askerId), expectedRevision: asker.expectedRevision, events: [] });
      return { appends, result: { email: state.email, setup_url: setupUrl(input.publicUrl, `${input.userId}.${setupId}.${secret}`), expires_at: expiresAt } };
    },
    { project: options.project },
  );
  return result;
}

export interface LinkCheck {
  kind: 'setup' | 'invitation';
  status: LinkStatus;
  /** Only for a valid link: whose it is, and until when it works. */
  email?: string;
  expires_at?: string;
  /** Only for a valid invitation: the address has an account with a password, which accepting asks for instead of a new one. */
  existing_account?: boolean;
}

/**
 * What a link's page asks before it shows a form (docs/web-app.md, "Checking a link"): whether
 * the link still works, and if not why, by the same rule its use follows. Read from the log, as
 * the link's use is. Without the link's secret every answer is `invalid`.
 */
export async function checkLink(ctx: Pick<CommandPort, 'store' | 'credentials'>, input: { kind: 'setup' | 'invitation'; token: string }, options: Pick<PeopleOptions, 'now'> = {}): Promise<LinkCheck> {
  const now = new Date(options.now ?? Date.now()).toISOString();
  if (input.kind === 'setup') {
    const split = splitToken(input.token, 3);
    if (!split) return { kind: 'setup', status: 'invalid' };
    const [userId, setupId, secret] = split as [string, string, string];
    const { state } = await loadUser(ctx, userId);
    const status = setupLinkStatus(state, { setupId, secretSha256: sha256Hex(secret) }, now);
    if (status !== 'valid') return { kind: 'setup', status };
    return { kind: 'setup', status, email: state.email, expires_at: state.setupLinks.get(setupId)!.expiresAt };
  }
  const split = splitToken(input.token, 2);
  if (!split) return { kind: 'invitation', status: 'invalid' };
  const [invitationId, secret] = split as [string, string];
  const { state } = await loadStream(ctx, invitationStream(invitationId), invitationDecider, invitationEvents);
  const status = invitationLinkStatus(state, sha256Hex(secret), now);
  if (status !== 'valid' || state.status === 'absent') return { kind: 'invitation', status };
  const holder = await findUserByEmail(ctx, state.email);
  const existing = holder !== null && (await currentPasswordHash(ctx, holder)) !== null;
  return { kind: 'invitation', status, email: state.email, expires_at: state.expiresAt, existing_account: existing };
}

/**
 * A setup link (of `users create`, or a new one): sets the password once, before it expires.
 * `afterwards` runs once the new password is in the log, even when the wait for the projections
 * then fails: the web application ends the user's sessions there (a new link is what someone asks
 * for after a compromise).
 */
export async function setPasswordWithSetupLink(
  ctx: Port,
  input: { token: string; password: string },
  options: PeopleOptions & { afterwards?: (userId: string) => Promise<void> } = {},
): Promise<{ user_id: string; email: string }> {
  const [userId, setupId, secret] = parseToken(input.token, 3, 'setup') as [string, string, string];
  const credential = newCredential(ctx, userId, input.password);
  const afterwards = options.afterwards ? () => options.afterwards!(userId) : undefined;
  const { result } = await settingPassword(credential, () => executeCommand(
    ctx,
    async () => {
      const { state, expectedRevision } = await loadUser(ctx, userId);
      const command = { type: 'SetPasswordWithSetupLink' as const, setupId, secretSha256: sha256Hex(secret), now: new Date(options.now ?? Date.now()).toISOString() };
      // The link is judged first (a refused link says so whatever the password, and stores nothing), then the password.
      userDecider.decide({ ...command, credentialId: 'unchecked' }, state);
      const events = userDecider.decide({ ...command, credentialId: await credential.id() }, state);
      return { appends: [{ streamId: userStream(userId), expectedRevision, events }], result: { user_id: userId, email: state.email } };
    },
    { project: options.project },
  ), afterwards);
  return result;
}

// ---- invitations ----------------------------------------------------------------------------

export interface IssuedInvitation {
  email: string;
  org_id: number;
  role: MemberRole;
  invite_url: string;
  expires_at: string;
}

/** `users invite`, and an admin's invitation in the web application: a one-time link, valid 72 hours. */
export async function inviteUser(
  ctx: Port,
  input: { email: string; orgId: number; role: string; by: Actor; publicUrl: string },
  options: PeopleOptions = {},
): Promise<IssuedInvitation> {
  const email = normalizeEmail(input.email);
  const role = checkMemberRole(input.role);
  const now = options.now ?? Date.now();
  const invitationId = idOf('inv', now);
  const secret = newSecret();
  const expiresAt = new Date(now + LINK_LIFETIME_MS).toISOString();
  const { result } = await executeCommand(
    ctx,
    async () => {
      const holder = await emailHolder(ctx, email);
      if (holder.userId !== null) {
        const { state } = await loadUser(ctx, holder.userId);
        if (state.memberships.has(input.orgId)) {
          throw new DomainRefusal('conflict', `${email} is already a member of organization ${input.orgId}`, 'email');
        }
      }
      const events = invitationDecider.decide(
        {
          type: 'IssueInvitation',
          invitationId,
          orgId: input.orgId,
          orgExists: await orgExists(ctx, input.orgId),
          email,
          role,
          secretSha256: sha256Hex(secret),
          at: new Date(now).toISOString(),
          expiresAt,
          by: input.by,
        },
        invitationDecider.initialState,
      );
      return {
        appends: [{ streamId: invitationStream(invitationId), expectedRevision: 'no_stream', events }],
        result: { email, org_id: input.orgId, role, invite_url: inviteUrl(input.publicUrl, `${invitationId}.${secret}`), expires_at: expiresAt },
      };
    },
    { project: options.project },
  );
  return result;
}

/**
 * Accepts an invitation once, before it expires. Someone new chooses their password here; someone
 * who already has one proves it with that password. Of two acceptances at once, one wins the
 * invitation stream's revision and the other is then told the link was used.
 */
export async function acceptInvitation(
  ctx: Port,
  input: { token: string; password: string },
  options: PeopleOptions = {},
): Promise<{ user_id: string; email: string; org_id: number; role: MemberRole }> {
  const [invitationId, secret] = parseToken(input.token, 2, 'invitation') as [string, string];
  // Someone new gets this id, whatever the attempt; a credential is stored for whoever sets a password.
  const newUserId = idOf('usr', options.now ?? Date.now());
  const credentials = new Map<string, ReturnType<typeof newCredential>>();
  const credentialOf = (userId: string) => credentials.get(userId) ?? credentials.set(userId, newCredential(ctx, userId, input.password)).get(userId)!;
  const accepting = executeCommand(
    ctx,
    async () => {
      const invitation = await loadStream(ctx, invitationStream(invitationId), invitationDecider, invitationEvents);
      const now = options.now ?? Date.now();
      const at = new Date(now).toISOString();
      const accept = { type: 'AcceptInvitation' as const, secretSha256: sha256Hex(secret), now: at };
      // The link is judged first: an unknown, used or expired link says so whatever the password.
      invitationDecider.decide({ ...accept, userId: 'unchecked' }, invitation.state);
      if (invitation.state.status === 'absent') throw new Error('unreachable: the decider refuses an absent invitation');
      const { email, orgId, role } = invitation.state;
      const holder = await emailHolder(ctx, email);
      const appends: StreamAppend[] = [];
      let userId: string;
      if (holder.userId === null) {
        userId = newUserId;
        const credentialId = await credentialOf(userId).id();
        const events = userDecider.decide(
          { type: 'CreateUser', userId, email, orgId, orgExists: true, role, at, by: { kind: 'user', user_id: userId, email }, setup: null, invitation: { invitationId, credentialId } },
          userDecider.initialState,
        );
        appends.push({ streamId: userStream(userId), expectedRevision: 'no_stream', events }, claimEmail(email, userId, holder.expectedRevision, at));
      } else {
        userId = holder.userId;
        const user = await loadUser(ctx, userId);
        const events: ReturnType<typeof userDecider.decide> = [];
        const current = await currentPasswordHash(ctx, user.state);
        if (current === null) {
          // Created by `users create` and never set up: the invitation sets the password.
          const credentialId = await credentialOf(userId).id();
          events.push({ type: 'PasswordSet', data: { user_id: userId, credential_id: credentialId, set_at: at, via: { kind: 'invitation', invitation_id: invitationId } } });
        } else if (!(await verifyPassword(input.password, current))) {
          throw new DomainRefusal('bad_request', `${email} already has an account: enter its password to accept`, 'password');
        }
        const grant = { type: 'GrantMembership' as const, orgId, orgExists: await orgExists(ctx, orgId), role, at, by: { kind: 'user' as const, user_id: userId, email }, invitationId };
        events.push(...userDecider.decide(grant, user.state));
        appends.push({ streamId: userStream(userId), expectedRevision: user.expectedRevision, events });
      }
      const accepted = invitationDecider.decide({ ...accept, userId }, invitation.state);
      appends.push({ streamId: invitationStream(invitationId), expectedRevision: invitation.expectedRevision, events: accepted });
      return { appends, result: { user_id: userId, email, org_id: orgId, role } };
    },
    { project: options.project },
  );
  let result: Awaited<typeof accepting>['result'];
  try {
    ({ result } = await accepting);
  } catch (error) {
    // Nothing appended: the new user does not exist, and neither may their credential.
    if (appendedNothing(error)) await credentials.get(newUserId)?.forgetAll();
    throw error;
  }
  // The user who accepted keeps the credential appended; a new user of an attempt that lost its
  // race to an existing account never came into being.
  await credentials.get(result.user_id)?.forgetOthers();
  if (result.user_id !== newUserId) await credentials.get(newUserId)?.forgetAll();
  return result;
}

/** Withdraws a pending invitation of the organization; its link is refused from then on. */
export async function cancelInvitation(ctx: Port, input: { invitationId: string; orgId: number; by: Actor }, options: PeopleOptions = {}): Promise<void> {
  await executeCommand(
    ctx,
    async () => {
      const { state, expectedRevision } = await loadStream(ctx, invitationStream(input.invitationId), invitationDecider, invitationEvents);
      const events = invitationDecider.decide({ type: 'CancelInvitation', orgId: input.orgId, at: new Date(options.now ?? Date.now()).toISOString(), by: input.by }, state);
      return { appends: [{ streamId: invitationStream(input.invitationId), expectedRevision, events }], result: undefined };
    },
    { project: options.project },
  );
}

// ---- a user's own password, and an admin's changes to members --------------------------------

/** The signed-in user changes their password, proving the current one. */
export async function changePassword(ctx: Port, input: { userId: string; currentPassword: string; newPassword: string }, options: PeopleOptions = {}): Promise<void> {
  checkPassword(input.newPassword, 'new_password');
  const first = await loadUser(ctx, input.userId);
  const current = await currentPasswordHash(ctx, first.state);
  if (current === null || !(await verifyPassword(input.currentPassword, current))) {
    throw new DomainRefusal('bad_request', 'current_password is not your current password', 'current_password');
  }
  const credential = newCredential(ctx, input.userId, input.newPassword, 'new_password');
  const credentialId = await credential.id();
  // The old hash is gone with its credential.
  await settingPassword(credential, () => executeCommand(
    ctx,
    async () => {
      const { state, expectedRevision } = await loadUser(ctx, input.userId);
      const events = userDecider.decide({ type: 'ChangePassword', credentialId, at: new Date(options.now ?? Date.now()).toISOString() }, state);
      return { appends: [{ streamId: userStream(input.userId), expectedRevision, events }], result: undefined };
    },
    { project: options.project },
  ));
}

/**
 * The standing of the user who changes another's membership, read from their own stream, and the
 * check that appends nothing to it but holds its revision: the change commits only if the asker
 * is, at that moment, still what the decision saw (two admins demoting each other at once: one
 * wins, the other is decided again and refused). None for the CLI, or when users act on themselves
 * (the decider refuses that).
 */
async function askerStanding(
  ctx: Pick<CommandPort, 'store'>,
  by: Actor,
  subjectId: string,
  orgId: number,
): Promise<{ standing: { role: MemberRole | null }; check: StreamAppend } | null> {
  if (by.kind !== 'user' || by.user_id === subjectId) return null;
  const { state, expectedRevision } = await loadUser(ctx, by.user_id);
  return { standing: { role: state.memberships.get(orgId) ?? null }, check: { streamId: userStream(by.user_id), expectedRevision, events: [] } };
}

export async function changeMemberRole(ctx: Port, input: { userId: string; orgId: number; role: string; by: Actor }, options: PeopleOptions = {}): Promise<MemberRole> {
  const role = checkMemberRole(input.role);
  await executeCommand(
    ctx,
    async () => {
      const { state, expectedRevision } = await loadUser(ctx, input.userId);
      const asker = await askerStanding(ctx, input.by, input.userId, input.orgId);
      const at = new Date(options.now ?? Date.now()).toISOString();
      const events = userDecider.decide({ type: 'ChangeMemberRole', orgId: input.orgId, role, at, by: input.by, byStanding: asker?.standing }, state);
      return { appends: [{ streamId: userStream(input.userId), expectedRevision, events }, ...(events.length > 0 && asker ? [asker.check] : [])], result: undefined };
    },
    { project: options.project },
  );
  return role;
}

export async function removeMember(ctx: Port, input: { userId: string; orgId: number; by: Actor }, options: PeopleOptions = {}): Promise<void> {
  await executeCommand(
    ctx,
    async () => {
      const { state, expectedRevision } = await loadUser(ctx, input.userId);
      const asker = await askerStanding(ctx, input.by, input.userId, input.orgId);
      const at = new Date(options.now ?? Date.now()).toISOString();
      const events = userDecider.decide({ type: 'RemoveMembership', orgId: input.orgId, at, by: input.by, byStanding: asker?.standing }, state);
      return { appends: [{ streamId: userStream(input.userId), expectedRevision, events }, ...(asker ? [asker.check] : [])], result: undefined };
    },
    { project: options.project },
  );
}

// ---- single sign-on -------------------------------------------------------------------------

/** Who may come in by single sign-on without an account yet: people of these email domains join this organization. */
export interface DomainJoin {
  domains: readonly string[];
  orgId: number;
}

export interface SignedOn {
  user_id: string;
  email: string;
  /** Whether this sign-on made the user. */
  created: boolean;
  /** The organizations this sign-on made them a member of (an invitation accepted, or their domain's), newest invitation first. */
  joined: Array<{ org_id: number; role: MemberRole; invitation_id: string | null }>;
}

/** An invitation that single sign-on may accept for the address, as its stream says now. */
interface OpenInvitation {
  invitationId: string;
  orgId: number;
  role: MemberRole;
  state: InvitationState;
  expectedRevision: ExpectedRevision;
}

/**
 * Of the invitations the read model lists as pending for the address (newest first), those their
 * streams still hold open to it, the newest per organization.
 */
async function openInvitations(ctx: Port, email: string, invitationIds: readonly string[], now: string): Promise<OpenInvitation[]> {
  const open: OpenInvitation[] = [];
  for (const invitationId of invitationIds) {
    const { state, expectedRevision } = await loadStream(ctx, invitationStream(invitationId), invitationDecider, invitationEvents);
    if (state.status === 'absent' || open.some((o) => o.orgId === state.orgId)) continue;
    try {
      invitationDecider.decide({ type: 'AcceptInvitationBySignOn', verifiedEmail: email, userId: 'unchecked', now }, state);
    } catch (error) {
      // Accepted, cancelled or expired meanwhile, or another address's: not one to accept.
      if (error instanceof DomainRefusal) continue;
      throw error;
    }
    open.push({ invitationId, orgId: state.orgId, role: state.role, state, expectedRevision });
  }
  return open;
}

/**
 * A person whose email address the identity provider has verified signs in by single sign-on
 * (docs/web-app.md, "Single sign-on"): as the user of that address, with every invitation still
 * open to it accepted (with its role); someone without an account yet comes in through an open
 * invitation, or, with an email domain of `domainJoin`, as a viewer of its organization. Nobody
 * else: refused (`forbidden`), and nothing is appended. Nobody gets a password this way.
 * `pendingInvitationIds` are the read model's pending invitations of the address; each is decided
 * again from its stream, and accepted in the same append as the membership it grants.
 */
export async function signOnWithVerifiedEmail(
  ctx: Port,
  input: { email: string; pendingInvitationIds: readonly string[]; domainJoin: DomainJoin | null },
  options: PeopleOptions = {},
): Promise<SignedOn> {
  const email = normalizeEmail(input.email);
  // Someone new gets this id, whatever the attempt.
  const newUserId = idOf('usr', options.now ?? Date.now());
  const { result } = await executeCommand(
    ctx,
    async () => {
      const at = new Date(options.now ?? Date.now()).toISOString();
      const holder = await emailHolder(ctx, email);
      const open = await openInvitations(ctx, email, input.pendingInvitationIds, at);
      const appends: StreamAppend[] = [];
      const joined: SignedOn['joined'] = [];
      let userId: string;
      let user: { state: UserState; expectedRevision: ExpectedRevision };
      const events: ReturnType<typeof userDecider.decide> = [];
      if (holder.userId !== null) {
        userId = holder.userId;
        user = await loadUser(ctx, userId);
      } else {
        userId = newUserId;
        const self = { kind: 'user' as const, user_id: userId, email };
        const [first] = open;
        if (first) {
          events.push(
            ...userDecider.decide(
              { type: 'CreateUser', userId, email, orgId: first.orgId, orgExists: true, role: first.role, at, by: self, setup: null, invitation: { invitationId: first.invitationId, credentialId: null } },
              userDecider.initialState,
            ),
          );
        } else if (input.domainJoin && input.domainJoin.domains.includes(emailDomain(email))) {
          const orgId = input.domainJoin.orgId;
          events.push(...userDecider.decide({ type: 'JoinByEmailDomain', userId, email, orgId, orgExists: await orgExists(ctx, orgId), at }, userDecider.initialState));
          joined.push({ org_id: orgId, role: DOMAIN_JOIN_MEMBER_ROLE, invitation_id: null });
        } else {
          throw new DomainRefusal('forbidden', `No account for ${email}: ask an administrator to invite you`);
        }
        appends.push(claimEmail(email, userId, holder.expectedRevision, at));
        user = { state: events.reduce(userDecider.evolve, userDecider.initialState), expectedRevision: 'no_stream' };
      }
      // Every open invitation of an organization they are not in yet (the one that made a new user included).
      let state = user.state;
      for (const invitation of open) {
        const madeBy = events.some((e) => e.type === 'MembershipGranted' && e.data.invitation_id === invitation.invitationId);
        if (!madeBy) {
          if (state.memberships.has(invitation.orgId)) continue;
          const grant = userDecider.decide(
            { type: 'GrantMembership', orgId: invitation.orgId, orgExists: true, role: invitation.role, at, by: { kind: 'user', user_id: userId, email }, invitationId: invitation.invitationId },
            state,
          );
          events.push(...grant);
          state = grant.reduce(userDecider.evolve, state);
        }
        const accepted = invitationDecider.decide({ type: 'AcceptInvitationBySignOn', verifiedEmail: email, userId, now: at }, invitation.state);
        appends.push({ streamId: invitationStream(invitation.invitationId), expectedRevision: invitation.expectedRevision, events: accepted });
        joined.push({ org_id: invitation.orgId, role: invitation.role, invitation_id: invitation.invitationId });
      }
      if (events.length > 0) appends.unshift({ streamId: userStream(userId), expectedRevision: user.expectedRevision, events });
      return { appends, result: { user_id: userId, email, created: holder.userId === null, joined } };
    },
    { project: options.project },
  );
  return result;
}
