import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DomainRefusal } from '../refusal.js';
import { inMemoryPort, type InMemoryPort } from '../../../test/support/in-memory/port.js';
import { rejectionOf } from '../../../test/support/rejection.js';
import { verifyPassword } from '../../auth/passwords.js';
import { InvalidEventError, START } from '../../event-store/port.js';
import { CheckpointTimeoutError } from '../../projection/checkpoints.js';
import {
  acceptInvitation,
  cancelInvitation,
  changePassword,
  checkLink,
  createUser,
  currentPasswordHash,
  findUserByEmail,
  inviteUser,
  issuePasswordSetup,
  loadUser,
  setPasswordWithSetupLink,
  signOnWithVerifiedEmail,
} from './commands.js';
import { LINK_LIFETIME_MS } from './decider.js';

// The people commands on the in-memory command port: what each appends, and what it refuses.

let port: InMemoryPort;
const BASE = 'https://tracking.example.com';
const token = (url: string) => url.split('#token=')[1]!;

afterEach(() => {
  vi.restoreAllMocks();
});

beforeEach(async () => {
  port = await inMemoryPort();
  await port.given('org-1', [{ type: 'OrgCreated', data: { org_id: 1, name: 'Acme', created_at: '2026-01-01T00:00:00.000Z' } }]);
});

describe('createUser', () => {
  it('appends the user, the membership, the setup link and the claim on the (lower-cased) address; the link is on the public URL', async () => {
    const user = await createUser(port, { email: ' Ada@Example.com ', orgId: 1, role: 'admin', by: { kind: 'cli' }, publicUrl: BASE });
    expect(user).toMatchObject({ email: 'ada@example.com', org_id: 1, role: 'admin' });
    expect(user.setup_url).toMatch(/^https:\/\/tracking\.example\.com\/setup#token=usr_[0-9a-z]{26}\.ps_[0-9a-z]{26}\.[A-Za-z0-9_-]{43}$/);
    const appended = await port.appended();
    // One atomic append of two streams (the log orders the streams as the store does).
    expect(appended.map((e) => [e.streamId, e.type]).sort()).toEqual([
      [`user-${user.id}`, 'UserCreated'],
      [`user-${user.id}`, 'MembershipGranted'],
      [`user-${user.id}`, 'PasswordSetupIssued'],
      ['user-email-ada%40example.com', 'UserEmailClaimed'],
    ].sort());
    // Only the secret's digest is in the log.
    expect(JSON.stringify(appended)).not.toContain(token(user.setup_url).split('.')[2]);
  });

  it('refuses an address that has a user, an unknown organization and a bad role, appending nothing', async () => {
    await createUser(port, { email: 'ada@example.com', orgId: 1, role: 'admin', by: { kind: 'cli' }, publicUrl: BASE });
    await port.given('marker', [{ type: 'OrgCreated', data: { org_id: 9, name: 'x', created_at: '2026-01-01T00:00:00.000Z' } }]);
    for (const input of [
      { email: 'ADA@example.com', orgId: 1, role: 'admin' },
      { email: 'bob@example.com', orgId: 2, role: 'admin' },
      { email: 'bob@example.com', orgId: 1, role: 'owner' },
      { email: 'not an address', orgId: 1, role: 'admin' },
    ]) {
      expect(await rejectionOf(createUser(port, { ...input, by: { kind: 'cli' }, publicUrl: BASE }))).toBeInstanceOf(DomainRefusal);
    }
    expect(await port.appended()).toEqual([]);
  });

  it('the setup link sets a password that then verifies; a second use is refused', async () => {
    const user = await createUser(port, { email: 'ada@example.com', orgId: 1, role: 'admin', by: { kind: 'cli' }, publicUrl: BASE });
    await port.given('marker', []);
    await setPasswordWithSetupLink(port, { token: token(user.setup_url), password: 'a long enough password' });
    const found = await findUserByEmail(port, 'ADA@example.com');
    expect(await verifyPassword('a long enough password', (await currentPasswordHash(port, found!))!)).toBe(true);
    // The log names the credential; the hash is in the credentials only.
    const [credential] = port.credentials.rows();
    expect(await port.appended()).toEqual([
      { streamId: `user-${user.id}`, type: 'PasswordSet', data: { user_id: user.id, credential_id: credential!.credentialId, set_at: expect.any(String), via: { kind: 'setup', setup_id: expect.any(String) } } },
    ]);
    expect(credential).toMatchObject({ userId: user.id, passwordHash: expect.stringMatching(/^scrypt\$/) });
    const again = await rejectionOf(setPasswordWithSetupLink(port, { token: token(user.setup_url), password: 'another password!' }));
    expect((again as Error).message).toBe('This setup link is not valid or has already been used');
    // A refused password says so, and the link stays usable for a good one (checked in a new user).
    const bob = await createUser(port, { email: 'bob@example.com', orgId: 1, role: 'member', by: { kind: 'cli' }, publicUrl: BASE });
    expect((await rejectionOf(setPasswordWithSetupLink(port, { token: token(bob.setup_url), password: 'short' })) as Error).message).toBe('password must be at least 10 characters long');
    await setPasswordWithSetupLink(port, { token: token(bob.setup_url), password: 'long enough now' });
    // A refused link stored nothing: one credential each.
    expect(port.credentials.rows().map((c) => c.userId).sort()).toEqual([user.id, bob.id].sort());
  });

  it('the log refuses a PasswordSet that carries a hash (version 1): appends are of version 2', async () => {
    const user = await createUser(port, { email: 'ada@example.com', orgId: 1, role: 'admin', by: { kind: 'cli' }, publicUrl: BASE });
    const v1 = { type: 'PasswordSet', data: { user_id: user.id, password_hash: 'scrypt$32768$8$1$salt$key', set_at: '2026-01-02T00:00:00.000Z', via: { kind: 'change' } } };
    expect(await rejectionOf(port.given(`user-${user.id}`, [v1]))).toBeInstanceOf(InvalidEventError);
    await setPasswordWithSetupLink(port, { token: token(user.setup_url), password: 'a long enough password' });
    const [recorded] = (await port.store.readStream(`user-${user.id}`)).filter((e) => e.type === 'PasswordSet');
    expect(recorded!.metadata).toMatchObject({ schema_version: 2 });
  });
});

describe('invitations', () => {
  it('someone new: accepting creates the user with their password, the membership, and marks the invitation used', async () => {
    const invitation = await inviteUser(port, { email: 'linus@example.com', orgId: 1, role: 'member', by: { kind: 'cli' }, publicUrl: BASE });
    await port.given('marker', []);
    const accepted = await acceptInvitation(port, { token: token(invitation.invite_url), password: 'a long enough password' });
    expect(accepted).toMatchObject({ email: 'linus@example.com', org_id: 1, role: 'operator' });
    const appended = await port.appended();
    expect(appended.map((e) => e.type).sort()).toEqual(['InvitationAccepted', 'MembershipGranted', 'PasswordSet', 'UserCreated', 'UserEmailClaimed']);
    expect(port.credentials.rows()).toEqual([{ credentialId: expect.stringMatching(/^cred_/), userId: accepted.user_id, passwordHash: expect.stringMatching(/^scrypt\$/) }]);
    expect(appended.find((e) => e.type === 'PasswordSet')!.data).toMatchObject({ credential_id: port.credentials.rows()[0]!.credentialId });
    expect(JSON.stringify(appended)).not.toContain('scrypt');
  });

  it('someone with an account proves it with their password; then joins the organization', async () => {
    await port.given('org-2', [{ type: 'OrgCreated', data: { org_id: 2, name: 'Globex', created_at: '2026-01-01T00:00:00.000Z' } }]);
    const first = await inviteUser(port, { email: 'linus@example.com', orgId: 1, role: 'member', by: { kind: 'cli' }, publicUrl: BASE });
    await acceptInvitation(port, { token: token(first.invite_url), password: 'a long enough password' });
    const second = await inviteUser(port, { email: 'linus@example.com', orgId: 2, role: 'admin', by: { kind: 'cli' }, publicUrl: BASE });
    const wrong = await rejectionOf(acceptInvitation(port, { token: token(second.invite_url), password: 'not my password' }));
    expect((wrong as Error).message).toBe('linus@example.com already has an account: enter its password to accept');
    const joined = await acceptInvitation(port, { token: token(second.invite_url), password: 'a long enough password' });
    expect(joined).toMatchObject({ org_id: 2, role: 'admin' });
    // Already a member: a new invitation is refused.
    expect(await rejectionOf(inviteUser(port, { email: 'linus@example.com', orgId: 2, role: 'admin', by: { kind: 'cli' }, publicUrl: BASE }))).toBeInstanceOf(DomainRefusal);
  });

  it('an expired link is refused before the password is looked at; a lost race is decided again and told the link was used', async () => {
    const old = await inviteUser(port, { email: 'late@example.com', orgId: 1, role: 'member', by: { kind: 'cli' }, publicUrl: BASE }, { now: Date.now() - LINK_LIFETIME_MS - 1 });
    expect((await rejectionOf(acceptInvitation(port, { token: token(old.invite_url), password: 'x' })) as Error).message).toBe(
      'This invitation link has expired; ask an administrator for a new one',
    );
    const invitation = await inviteUser(port, { email: 'race@example.com', orgId: 1, role: 'member', by: { kind: 'cli' }, publicUrl: BASE });
    const invitationId = token(invitation.invite_url).split('.')[0]!;
    port.store.beforeNextAppend(async () => {
      await port.store.appendToStream(`invitation-${invitationId}`, [{ type: 'InvitationAccepted', data: { invitation_id: invitationId, org_id: 1, user_id: 'usr_other', accepted_at: new Date().toISOString() } }], 0n);
    });
    expect((await rejectionOf(acceptInvitation(port, { token: token(invitation.invite_url), password: 'a long enough password' })) as Error).message).toBe(
      'This invitation link has already been used',
    );
    // The user the lost attempt would have created does not exist, and neither does its credential.
    expect(port.credentials.rows()).toEqual([]);
  });
});

describe('changePassword', () => {
  it('needs the current password', async () => {
    const invitation = await inviteUser(port, { email: 'ada@example.com', orgId: 1, role: 'member', by: { kind: 'cli' }, publicUrl: BASE });
    const { user_id } = await acceptInvitation(port, { token: token(invitation.invite_url), password: 'the first password' });
    expect(await rejectionOf(changePassword(port, { userId: user_id, currentPassword: 'wrong one!!', newPassword: 'the second password' }))).toBeInstanceOf(DomainRefusal);
    await changePassword(port, { userId: user_id, currentPassword: 'the first password', newPassword: 'the second password' });
    expect(await verifyPassword('the second password', (await currentPasswordHash(port, (await findUserByEmail(port, 'ada@example.com'))!))!)).toBe(true);
  });

  it('appends a PasswordSet naming the new credential, and forgets the old one: its hash is gone', async () => {
    const invitation = await inviteUser(port, { email: 'ada@example.com', orgId: 1, role: 'member', by: { kind: 'cli' }, publicUrl: BASE });
    const { user_id } = await acceptInvitation(port, { token: token(invitation.invite_url), password: 'the first password' });
    const [first] = port.credentials.rows();
    await port.given('marker', []);
    await changePassword(port, { userId: user_id, currentPassword: 'the first password', newPassword: 'the second password' });
    const [second, ...others] = port.credentials.rows();
    expect(others).toEqual([]);
    expect(second!.credentialId).not.toBe(first!.credentialId);
    expect(await verifyPassword('the second password', second!.passwordHash)).toBe(true);
    expect(await port.appended()).toEqual([
      { streamId: `user-${user_id}`, type: 'PasswordSet', data: { user_id, credential_id: second!.credentialId, set_at: expect.any(String), via: { kind: 'change' } } },
    ]);
    expect(await port.credentials.read(user_id, first!.credentialId)).toBeNull();
    // The old password no longer proves anything.
    expect(await rejectionOf(changePassword(port, { userId: user_id, currentPassword: 'the first password', newPassword: 'a third password' }))).toBeInstanceOf(DomainRefusal);
  });

  it('the old credential is forgotten even when only the wait for the projections failed (the change is in the log)', async () => {
    const invitation = await inviteUser(port, { email: 'ada@example.com', orgId: 1, role: 'member', by: { kind: 'cli' }, publicUrl: BASE });
    const { user_id } = await acceptInvitation(port, { token: token(invitation.invite_url), password: 'the first password' });
    const [first] = port.credentials.rows();
    vi.spyOn(port.checkpoints, 'waitForCheckpoint').mockRejectedValueOnce(new CheckpointTimeoutError(START, ['people']));
    expect(await rejectionOf(changePassword(port, { userId: user_id, currentPassword: 'the first password', newPassword: 'the second password' }))).toBeInstanceOf(CheckpointTimeoutError);
    expect(await port.credentials.read(user_id, first!.credentialId)).toBeNull();
    expect(port.credentials.rows()).toHaveLength(1);
    expect(await verifyPassword('the second password', (await currentPasswordHash(port, (await findUserByEmail(port, 'ada@example.com'))!))!)).toBe(true);
  });

  it('an orphan (a credential stored for an append that failed) is never read, and goes with the next password', async () => {
    const invitation = await inviteUser(port, { email: 'ada@example.com', orgId: 1, role: 'member', by: { kind: 'cli' }, publicUrl: BASE });
    const { user_id } = await acceptInvitation(port, { token: token(invitation.invite_url), password: 'the first password' });
    await port.credentials.store({ credentialId: 'cred_orphan', userId: user_id, passwordHash: 'scrypt$orphan' });
    expect(await verifyPassword('the first password', (await currentPasswordHash(port, (await findUserByEmail(port, 'ada@example.com'))!))!)).toBe(true);
    await changePassword(port, { userId: user_id, currentPassword: 'the first password', newPassword: 'the second password' });
    expect(port.credentials.rows().map((c) => c.credentialId)).not.toContain('cred_orphan');
    expect(port.credentials.rows()).toHaveLength(1);
  });
});

describe('signOnWithVerifiedEmail (single sign-on)', () => {
  const invitationIdOf = (url: string) => token(url).split('.')[0]!;
  const org2 = () => port.given('org-2', [{ type: 'OrgCreated', data: { org_id: 2, name: 'Globex', created_at: '2026-01-01T00:00:00.000Z' } }]);
  const JOIN = { domains: ['example.com'], orgId: 1 };

  it('someone without an account, no invitation and no allowed domain is refused, and nothing is appended', async () => {
    await port.given('marker', []);
    for (const domainJoin of [null, { domains: ['example.org'], orgId: 1 }]) {
      const refused = await rejectionOf(signOnWithVerifiedEmail(port, { email: 'ada@example.com', pendingInvitationIds: [], domainJoin }));
      expect(refused).toBeInstanceOf(DomainRefusal);
      expect({ kind: (refused as DomainRefusal).kind, message: (refused as Error).message }).toEqual({ kind: 'forbidden', message: 'No account for ada@example.com: ask an administrator to invite you' });
    }
    expect(await port.appended()).toEqual([]);
  });

  it('someone of an allowed domain joins its organization as a viewer, with no password; the next sign-on changes nothing', async () => {
    await port.given('marker', []);
    const first = await signOnWithVerifiedEmail(port, { email: 'Ada@Example.com', pendingInvitationIds: [], domainJoin: JOIN });
    expect(first).toEqual({ user_id: expect.stringMatching(/^usr_/), email: 'ada@example.com', created: true, joined: [{ org_id: 1, role: 'viewer', invitation_id: null }] });
    expect((await port.appended()).map((e) => [e.streamId, e.type]).sort()).toEqual(
      [
        [`user-${first.user_id}`, 'UserCreated'],
        [`user-${first.user_id}`, 'MembershipGranted'],
        ['user-email-ada%40example.com', 'UserEmailClaimed'],
      ].sort(),
    );
    expect((await loadUser(port, first.user_id)).state).toMatchObject({ password: null, memberships: new Map([[1, 'viewer']]) });
    await port.given('marker', []);
    expect(await signOnWithVerifiedEmail(port, { email: 'ada@example.com', pendingInvitationIds: [], domainJoin: JOIN })).toEqual({ ...first, created: false, joined: [] });
    expect(await port.appended()).toEqual([]);
  });

  it('a user who already exists signs in as themselves, whatever the domains, and joins nothing', async () => {
    const ada = await createUser(port, { email: 'ada@example.com', orgId: 1, role: 'admin', by: { kind: 'cli' }, publicUrl: BASE });
    await org2();
    await port.given('marker', []);
    const signedOn = await signOnWithVerifiedEmail(port, { email: 'ada@example.com', pendingInvitationIds: [], domainJoin: { domains: ['example.com'], orgId: 2 } });
    expect(signedOn).toEqual({ user_id: ada.id, email: 'ada@example.com', created: false, joined: [] });
    expect(await port.appended()).toEqual([]);
  });

  it('someone new with a pending invitation comes in through it: the user (no password), the membership with its role, the invitation accepted', async () => {
    const invitation = await inviteUser(port, { email: 'linus@example.com', orgId: 1, role: 'operator', by: { kind: 'cli' }, publicUrl: BASE });
    const invitationId = invitationIdOf(invitation.invite_url);
    await port.given('marker', []);
    // An allowed domain does not turn the invitation's role into a viewer's.
    const signedOn = await signOnWithVerifiedEmail(port, { email: 'linus@example.com', pendingInvitationIds: [invitationId], domainJoin: JOIN });
    expect(signedOn).toMatchObject({ email: 'linus@example.com', created: true, joined: [{ org_id: 1, role: 'operator', invitation_id: invitationId }] });
    const appended = await port.appended();
    expect(appended.map((e) => e.type).sort()).toEqual(['InvitationAccepted', 'MembershipGranted', 'UserCreated', 'UserEmailClaimed']);
    expect(appended.find((e) => e.type === 'MembershipGranted')!.data).toMatchObject({ role: 'operator', invitation_id: invitationId });
    expect(appended.find((e) => e.type === 'InvitationAccepted')!.data).toMatchObject({ invitation_id: invitationId, user_id: signedOn.user_id });
    expect(port.credentials.rows()).toEqual([]);
    // Its link is used up.
    expect((await rejectionOf(acceptInvitation(port, { token: token(invitation.invite_url), password: 'a long enough password' })) as Error).message).toBe('This invitation link has already been used');
  });

  it('a user with pending invitations of other organizations: each accepted, the newest per organization; one of their own organization stays', async () => {
    await org2();
    await port.given('org-3', [{ type: 'OrgCreated', data: { org_id: 3, name: 'Initech', created_at: '2026-01-01T00:00:00.000Z' } }]);
    // Issued for organization 1 before she was made a member there by `users create`.
    const ownOrg = await inviteUser(port, { email: 'ada@example.com', orgId: 1, role: 'admin', by: { kind: 'cli' }, publicUrl: BASE });
    const ada = await createUser(port, { email: 'ada@example.com', orgId: 1, role: 'operator', by: { kind: 'cli' }, publicUrl: BASE });
    const older = await inviteUser(port, { email: 'ada@example.com', orgId: 2, role: 'viewer', by: { kind: 'cli' }, publicUrl: BASE }, { now: Date.now() - 1000 });
    const newer = await inviteUser(port, { email: 'ada@example.com', orgId: 2, role: 'admin', by: { kind: 'cli' }, publicUrl: BASE });
    const other = await inviteUser(port, { email: 'ada@example.com', orgId: 3, role: 'viewer', by: { kind: 'cli' }, publicUrl: BASE });
    await port.given('marker', []);
    const ids = [newer, other, older, ownOrg].map((i) => invitationIdOf(i.invite_url));
    const signedOn = await signOnWithVerifiedEmail(port, { email: 'ada@example.com', pendingInvitationIds: ids, domainJoin: null });
    expect(signedOn).toEqual({
      user_id: ada.id,
      email: 'ada@example.com',
      created: false,
      joined: [
        { org_id: 2, role: 'admin', invitation_id: ids[0] },
        { org_id: 3, role: 'viewer', invitation_id: ids[1] },
      ],
    });
    expect((await loadUser(port, ada.id)).state.memberships).toEqual(new Map([[1, 'operator'], [2, 'admin'], [3, 'viewer']]));
    // The role she has in organization 1 stays; that invitation stays pending, as does the older one of organization 2.
    expect((await port.appended()).filter((e) => e.type === 'InvitationAccepted').map((e) => e.data.invitation_id).sort()).toEqual([ids[0], ids[1]].sort());
  });

  it('an expired or cancelled invitation, or one of another address, lets nobody in', async () => {
    const expired = await inviteUser(port, { email: 'late@example.com', orgId: 1, role: 'operator', by: { kind: 'cli' }, publicUrl: BASE }, { now: Date.now() - LINK_LIFETIME_MS - 1 });
    const cancelled = await inviteUser(port, { email: 'late@example.com', orgId: 1, role: 'operator', by: { kind: 'cli' }, publicUrl: BASE });
    await cancelInvitation(port, { invitationId: invitationIdOf(cancelled.invite_url), orgId: 1, by: { kind: 'cli' } });
    const someoneElses = await inviteUser(port, { email: 'bob@example.com', orgId: 1, role: 'operator', by: { kind: 'cli' }, publicUrl: BASE });
    await port.given('marker', []);
    const ids = [expired, cancelled, someoneElses].map((i) => invitationIdOf(i.invite_url));
    const refused = await rejectionOf(signOnWithVerifiedEmail(port, { email: 'late@example.com', pendingInvitationIds: ids, domainJoin: null }));
    expect((refused as Error).message).toBe('No account for late@example.com: ask an administrator to invite you');
    expect(await port.appended()).toEqual([]);
  });

  it('the allowed organization must exist', async () => {
    const refused = await rejectionOf(signOnWithVerifiedEmail(port, { email: 'ada@example.com', pendingInvitationIds: [], domainJoin: { domains: ['example.com'], orgId: 9 } }));
    expect((refused as Error).message).toBe('organization 9 does not exist');
  });
});

describe('a new link (issuePasswordSetup)', () => {
  const verifies = async (email: string, password: string) => verifyPassword(password, (await currentPasswordHash(port, (await findUserByEmail(port, email))!))!);

  it('appends one PasswordSetupIssued naming who asked (never the secret); the old password works until the link sets a new one; the first link is then refused', async () => {
    const user = await createUser(port, { email: 'ada@example.com', orgId: 1, role: 'admin', by: { kind: 'cli' }, publicUrl: BASE });
    await setPasswordWithSetupLink(port, { token: token(user.setup_url), password: 'the first password' });
    await port.given('marker', []);
    const link = await issuePasswordSetup(port, { userId: user.id, orgId: null, by: { kind: 'cli' }, publicUrl: BASE });
    expect(link).toEqual({ email: 'ada@example.com', setup_url: expect.stringMatching(/^https:\/\/tracking\.example\.com\/setup#token=usr_/), expires_at: expect.any(String) });
    expect(Date.parse(link.expires_at) - Date.now()).toBeGreaterThan(LINK_LIFETIME_MS - 60_000);
    const appended = await port.appended();
    expect(appended).toEqual([
      {
        streamId: `user-${user.id}`,
        type: 'PasswordSetupIssued',
        data: { user_id: user.id, setup_id: expect.stringMatching(/^ps_/), secret_sha256: expect.stringMatching(/^[0-9a-f]{64}$/), issued_at: expect.any(String), expires_at: link.expires_at, issued_by: { kind: 'cli' } },
      },
    ]);
    expect(JSON.stringify(appended)).not.toContain(token(link.setup_url).split('.')[2]);
    expect(await verifies('ada@example.com', 'the first password')).toBe(true);
    await setPasswordWithSetupLink(port, { token: token(link.setup_url), password: 'the second password' });
    expect(await verifies('ada@example.com', 'the second password')).toBe(true);
    // The first password's credential is gone with it.
    expect(port.credentials.rows()).toHaveLength(1);
    expect((await rejectionOf(setPasswordWithSetupLink(port, { token: token(link.setup_url), password: 'a third password' })) as Error).message).toBe(
      'This setup link is not valid or has already been used',
    );
  });

  it('using the link runs `afterwards` with the user id (the web application ends their sessions there), also when only the wait for the projections failed; a refused link runs nothing', async () => {
    const user = await createUser(port, { email: 'ada@example.com', orgId: 1, role: 'admin', by: { kind: 'cli' }, publicUrl: BASE });
    const ended: string[] = [];
    const afterwards = async (userId: string) => void ended.push(userId);
    const link = await issuePasswordSetup(port, { userId: user.id, orgId: null, by: { kind: 'cli' }, publicUrl: BASE });
    expect(await rejectionOf(setPasswordWithSetupLink(port, { token: token(user.setup_url), password: 'a long enough password' }, { afterwards }))).toBeInstanceOf(DomainRefusal);
    expect(ended).toEqual([]);
    vi.spyOn(port.checkpoints, 'waitForCheckpoint').mockRejectedValueOnce(new CheckpointTimeoutError(START, ['people']));
    expect(await rejectionOf(setPasswordWithSetupLink(port, { token: token(link.setup_url), password: 'a long enough password' }, { afterwards }))).toBeInstanceOf(CheckpointTimeoutError);
    expect(ended).toEqual([user.id]);
    const next = await issuePasswordSetup(port, { userId: user.id, orgId: null, by: { kind: 'cli' }, publicUrl: BASE });
    await setPasswordWithSetupLink(port, { token: token(next.setup_url), password: 'another long password' }, { afterwards });
    expect(ended).toEqual([user.id, user.id]);
  });

  it("an admin's link for another member holds the admin's own stream: demoted meanwhile, it is decided again and refused", async () => {
    const admin = await createUser(port, { email: 'grace@example.com', orgId: 1, role: 'admin', by: { kind: 'cli' }, publicUrl: BASE });
    const member = await createUser(port, { email: 'linus@example.com', orgId: 1, role: 'operator', by: { kind: 'cli' }, publicUrl: BASE });
    const by = { kind: 'user' as const, user_id: admin.id, email: admin.email };
    expect((await issuePasswordSetup(port, { userId: member.id, orgId: 1, by, publicUrl: BASE })).email).toBe('linus@example.com');
    port.store.beforeNextAppend(async () => {
      const [last] = (await port.store.readStream(`user-${admin.id}`)).slice(-1);
      await port.store.appendToStream(
        `user-${admin.id}`,
        [{ type: 'MembershipRoleChanged', data: { user_id: admin.id, org_id: 1, role: 'viewer', changed_at: new Date().toISOString(), changed_by: { kind: 'cli' } } }],
        last!.revision,
      );
    });
    const refused = await rejectionOf(issuePasswordSetup(port, { userId: member.id, orgId: 1, by, publicUrl: BASE }));
    expect(refused).toMatchObject({ kind: 'forbidden', message: "Only the organization's admins can do this" });
    // Another organization's admin: as if the user did not exist.
    expect(await rejectionOf(issuePasswordSetup(port, { userId: member.id, orgId: 2, by, publicUrl: BASE }))).toMatchObject({ kind: 'not_found' });
    expect(await rejectionOf(issuePasswordSetup(port, { userId: 'usr_nobody', orgId: null, by: { kind: 'cli' }, publicUrl: BASE }))).toMatchObject({ kind: 'not_found' });
  });
});

describe('checkLink', () => {
  it('a setup link: valid (with its email), then used; an earlier one replaced; an expired one; anything else invalid', async () => {
    const user = await createUser(port, { email: 'ada@example.com', orgId: 1, role: 'admin', by: { kind: 'cli' }, publicUrl: BASE });
    const first = token(user.setup_url);
    expect(await checkLink(port, { kind: 'setup', token: first })).toEqual({ kind: 'setup', status: 'valid', email: 'ada@example.com', expires_at: expect.any(String) });
    const link = await issuePasswordSetup(port, { userId: user.id, orgId: null, by: { kind: 'cli' }, publicUrl: BASE });
    expect(await checkLink(port, { kind: 'setup', token: first })).toEqual({ kind: 'setup', status: 'replaced' });
    expect(await checkLink(port, { kind: 'setup', token: token(link.setup_url) }, { now: Date.now() + LINK_LIFETIME_MS })).toEqual({ kind: 'setup', status: 'expired' });
    await setPasswordWithSetupLink(port, { token: token(link.setup_url), password: 'a long enough password' });
    expect(await checkLink(port, { kind: 'setup', token: token(link.setup_url) })).toEqual({ kind: 'setup', status: 'used' });
    const [userId, setupId] = token(link.setup_url).split('.');
    for (const bad of [`${userId}.${setupId}.guess`, 'nonsense', '', `${userId}.${setupId}`, token(link.setup_url).replace(/^usr_/, 'usr_x')]) {
      expect(await checkLink(port, { kind: 'setup', token: bad }), bad).toEqual({ kind: 'setup', status: 'invalid' });
    }
    // A setup token is no invitation token.
    expect(await checkLink(port, { kind: 'invitation', token: token(link.setup_url) })).toEqual({ kind: 'invitation', status: 'invalid' });
  });

  it('an invitation link: valid (saying whether the address already has an account), used, cancelled, expired, invalid', async () => {
    const fresh = await inviteUser(port, { email: 'linus@example.com', orgId: 1, role: 'operator', by: { kind: 'cli' }, publicUrl: BASE });
    expect(await checkLink(port, { kind: 'invitation', token: token(fresh.invite_url) })).toEqual({
      kind: 'invitation',
      status: 'valid',
      email: 'linus@example.com',
      expires_at: fresh.expires_at,
      existing_account: false,
    });
    await port.given('org-2', [{ type: 'OrgCreated', data: { org_id: 2, name: 'Globex', created_at: '2026-01-01T00:00:00.000Z' } }]);
    const other = await inviteUser(port, { email: 'linus@example.com', orgId: 2, role: 'viewer', by: { kind: 'cli' }, publicUrl: BASE });
    await acceptInvitation(port, { token: token(fresh.invite_url), password: 'a long enough password' });
    expect(await checkLink(port, { kind: 'invitation', token: token(fresh.invite_url) })).toEqual({ kind: 'invitation', status: 'used' });
    expect(await checkLink(port, { kind: 'invitation', token: token(other.invite_url) })).toMatchObject({ status: 'valid', existing_account: true });
    expect(await checkLink(port, { kind: 'invitation', token: token(other.invite_url) }, { now: Date.parse(other.expires_at) })).toEqual({ kind: 'invitation', status: 'expired' });
    await cancelInvitation(port, { invitationId: token(other.invite_url).split('.')[0]!, orgId: 2, by: { kind: 'cli' } });
    expect(await checkLink(port, { kind: 'invitation', token: token(other.invite_url) })).toEqual({ kind: 'invitation', status: 'cancelled' });
    expect(await checkLink(port, { kind: 'invitation', token: `${token(other.invite_url).split('.')[0]}.guess` })).toEqual({ kind: 'invitation', status: 'invalid' });
  });
});
