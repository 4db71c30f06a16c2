import { describe, expect, it } from 'vitest';
import { DomainRefusal } from '../refusal.js';
import { specFor } from '../../../test/support/decider.js';
import { fold } from '../decider.js';
import { CLI_ACTOR, type Actor } from '../actor.js';
import {
  LINK_LIFETIME_MS,
  checkPassword,
  checkMemberRole,
  emailDomain,
  invitationDecider,
  invitationLinkStatus,
  normalizeEmail,
  setupLinkStatus,
  sha256Hex,
  userDecider,
  userEmailDecider,
  verifiedSignOnEmail,
  type CreateUser,
  type IssueInvitation,
  type IssuePasswordSetup,
} from './decider.js';
import type { InvitationEvent, UserEvent } from './events.js';

const AT = '2026-01-01T00:00:00.000Z';
const LATER = '2026-01-02T00:00:00.000Z';
const EXPIRES = '2026-01-04T00:00:00.000Z';
const CLI: Actor = { kind: 'cli' };
const GRACE: Actor = { kind: 'user', user_id: 'usr_g', email: 'grace@example.com' };
const SECRET = sha256Hex('secret');

const refusedWith = (kind: DomainRefusal['kind'], message: string, field?: string) => (e: DomainRefusal) => {
  expect({ kind: e.kind, message: e.message, field: e.field }).toEqual({ kind, message, field });
};

describe('users', () => {
  const given = specFor(userDecider);
  const create: CreateUser = {
    type: 'CreateUser',
    userId: 'usr_a',
    email: 'ada@example.com',
    orgId: 1,
    orgExists: true,
    role: 'admin',
    at: AT,
    by: CLI,
    setup: { setupId: 'ps_1', secretSha256: SECRET, expiresAt: EXPIRES },
    invitation: null,
  };
  const created: UserEvent = { type: 'UserCreated', data: { user_id: 'usr_a', email: 'ada@example.com', created_at: AT, created_by: CLI } };
  const granted: UserEvent = { type: 'MembershipGranted', data: { user_id: 'usr_a', org_id: 1, role: 'admin', granted_at: AT, granted_by: CLI, invitation_id: null } };
  const setupIssued: UserEvent = {
    type: 'PasswordSetupIssued',
    data: { user_id: 'usr_a', setup_id: 'ps_1', secret_sha256: SECRET, issued_at: AT, expires_at: EXPIRES, issued_by: CLI },
  };
  const passwordSet: UserEvent = { type: 'PasswordSet', data: { user_id: 'usr_a', credential_id: 'cred_1', set_at: LATER, via: { kind: 'setup', setup_id: 'ps_1' } } };
  /** As logs written before PasswordSet version 2 hold it: the hash in the event. */
  const passwordSetV1: UserEvent = { type: 'PasswordSet', data: { user_id: 'usr_a', password_hash: 'scrypt$h1', set_at: LATER, via: { kind: 'setup', setup_id: 'ps_1' } } };

  it('users create: the user, the membership and a setup link', () => {
    given([]).when(create).then([created, granted, setupIssued]);
  });

  it('an invitation creates the user with the password (its credential) it brings, and no setup link', () => {
    given([])
      .when({ ...create, role: 'operator', setup: null, invitation: { invitationId: 'inv_1', credentialId: 'cred_0' }, by: GRACE })
      .then([
        { type: 'UserCreated', data: { user_id: 'usr_a', email: 'ada@example.com', created_at: AT, created_by: GRACE } },
        { type: 'PasswordSet', data: { user_id: 'usr_a', credential_id: 'cred_0', set_at: AT, via: { kind: 'invitation', invitation_id: 'inv_1' } } },
        { type: 'MembershipGranted', data: { user_id: 'usr_a', org_id: 1, role: 'operator', granted_at: AT, granted_by: GRACE, invitation_id: 'inv_1' } },
      ]);
  });

  it('an invitation accepted by single sign-on creates the user with no password', () => {
    given([])
      .when({ ...create, role: 'viewer', setup: null, invitation: { invitationId: 'inv_1', credentialId: null }, by: GRACE })
      .then([
        { type: 'UserCreated', data: { user_id: 'usr_a', email: 'ada@example.com', created_at: AT, created_by: GRACE } },
        { type: 'MembershipGranted', data: { user_id: 'usr_a', org_id: 1, role: 'viewer', granted_at: AT, granted_by: GRACE, invitation_id: 'inv_1' } },
      ]);
  });

  it('someone of an allowed email domain joins by single sign-on: made by themselves, a viewer, with no password', () => {
    const join = { type: 'JoinByEmailDomain' as const, userId: 'usr_a', email: 'ada@example.com', orgId: 1, orgExists: true, at: AT };
    const self: Actor = { kind: 'user', user_id: 'usr_a', email: 'ada@example.com' };
    given([])
      .when(join)
      .then([
        { type: 'UserCreated', data: { user_id: 'usr_a', email: 'ada@example.com', created_at: AT, created_by: self } },
        { type: 'MembershipGranted', data: { user_id: 'usr_a', org_id: 1, role: 'viewer', granted_at: AT, granted_by: self, invitation_id: null } },
      ]);
    expect(fold(userDecider, [created, { type: 'MembershipGranted', data: { ...granted.data, role: 'viewer' } }]).password).toBeNull();
    given([]).when({ ...join, orgExists: false }).thenThrows(DomainRefusal, refusedWith('not_found', 'organization 1 does not exist', 'org_id'));
    given([created]).when(join).thenThrows(DomainRefusal, refusedWith('conflict', 'user usr_a already exists'));
  });

  it('refuses an organization that does not exist, and a user twice', () => {
    given([]).when({ ...create, orgExists: false }).thenThrows(DomainRefusal, refusedWith('not_found', 'organization 1 does not exist', 'org_id'));
    given([created]).when(create).thenThrows(DomainRefusal, refusedWith('conflict', 'user usr_a already exists'));
  });

  it('the setup link sets the password once, before it expires, with its own secret only', () => {
    const use = { type: 'SetPasswordWithSetupLink' as const, setupId: 'ps_1', secretSha256: SECRET, credentialId: 'cred_1', now: LATER };
    given([created, granted, setupIssued]).when(use).then([passwordSet]);
    const invalid = refusedWith('bad_request', 'This setup link is not valid or has already been used', 'token');
    given([created, granted, setupIssued, passwordSet]).when(use).thenThrows(DomainRefusal, invalid);
    given([created, granted, setupIssued]).when({ ...use, secretSha256: sha256Hex('guess') }).thenThrows(DomainRefusal, invalid);
    given([created, granted, setupIssued]).when({ ...use, setupId: 'ps_2' }).thenThrows(DomainRefusal, invalid);
    // A secret of another length is refused the same way (compared in constant time only at equal lengths).
    given([created, granted, setupIssued]).when({ ...use, secretSha256: 'abc' }).thenThrows(DomainRefusal, invalid);
    given([]).when(use).thenThrows(DomainRefusal, invalid);
    given([created, granted, setupIssued])
      .when({ ...use, now: EXPIRES })
      .thenThrows(DomainRefusal, refusedWith('bad_request', 'This setup link has expired; ask an administrator for a new one', 'token'));
  });

  describe('a new link (users reset-link, an admin\'s "Send a new link")', () => {
    const SECRET_2 = sha256Hex('second secret');
    const RESET_AT = '2026-01-05T00:00:00.000Z';
    const RESET_EXPIRES = '2026-01-08T00:00:00.000Z';
    const reset: IssuePasswordSetup = {
      type: 'IssuePasswordSetup',
      setupId: 'ps_2',
      secretSha256: SECRET_2,
      at: RESET_AT,
      expiresAt: RESET_EXPIRES,
      by: CLI,
      orgId: null,
      byAdminOf: undefined,
    };
    const resetIssued = {
      type: 'PasswordSetupIssued' as const,
      data: { user_id: 'usr_a', setup_id: 'ps_2', secret_sha256: SECRET_2, issued_at: RESET_AT, expires_at: RESET_EXPIRES, issued_by: CLI },
    } satisfies UserEvent;
    const useFirst = { type: 'SetPasswordWithSetupLink' as const, setupId: 'ps_1', secretSha256: SECRET, credentialId: 'cred_1', now: LATER };
    const useReset = { type: 'SetPasswordWithSetupLink' as const, setupId: 'ps_2', secretSha256: SECRET_2, credentialId: 'cred_9', now: '2026-01-06T00:00:00.000Z' };
    const resetUsed = {
      type: 'PasswordSet' as const,
      data: { user_id: 'usr_a', credential_id: 'cred_9', set_at: useReset.now, via: { kind: 'setup' as const, setup_id: 'ps_2' } },
    } satisfies UserEvent;
    const invalid = refusedWith('bad_request', 'This setup link is not valid or has already been used', 'token');

    it('is issued for a user who has a password and for one who never set one (their setup link lost), by whoever asks', () => {
      given([created, granted, setupIssued, passwordSet]).when(reset).then([resetIssued]);
      given([created, granted, setupIssued]).when(reset).then([resetIssued]);
      given([]).when(reset).thenThrows(DomainRefusal, refusedWith('not_found', 'user does not exist'));
    });

    it('the old password stays the password until the new link is used, then the link sets it', () => {
      const before = fold(userDecider, [created, granted, setupIssued, passwordSet, resetIssued]);
      expect(before.password).toEqual({ kind: 'credential', credentialId: 'cred_1' });
      // The old password can still be changed (what a sign-in checks is the same credential).
      given([created, granted, setupIssued, passwordSet, resetIssued])
        .when({ type: 'ChangePassword', credentialId: 'cred_5', at: RESET_AT })
        .then([{ type: 'PasswordSet', data: { user_id: 'usr_a', credential_id: 'cred_5', set_at: RESET_AT, via: { kind: 'change' } } }]);
      given([created, granted, setupIssued, passwordSet, resetIssued]).when(useReset).then([resetUsed]);
      expect(fold(userDecider, [created, granted, setupIssued, passwordSet, resetIssued, resetUsed]).password).toEqual({ kind: 'credential', credentialId: 'cred_9' });
    });

    it('only the newest link works: an earlier one, used or not, is refused', () => {
      // The first link was never used, and is replaced.
      given([created, granted, setupIssued, resetIssued]).when(useFirst).thenThrows(DomainRefusal, invalid);
      given([created, granted, setupIssued, resetIssued]).when({ ...useReset, now: LATER }).then([{ ...resetUsed, data: { ...resetUsed.data, set_at: LATER } }]);
      // Two new links: the second replaces the first.
      const third: UserEvent = { type: 'PasswordSetupIssued', data: { ...resetIssued.data, setup_id: 'ps_3', secret_sha256: sha256Hex('third') } };
      given([created, granted, setupIssued, passwordSet, resetIssued, third]).when(useReset).thenThrows(DomainRefusal, invalid);
      given([created, granted, setupIssued, passwordSet, resetIssued, third])
        .when({ ...useReset, setupId: 'ps_3', secretSha256: sha256Hex('third') })
        .then([{ ...resetUsed, data: { ...resetUsed.data, via: { kind: 'setup', setup_id: 'ps_3' } } }]);
    });

    it('a used link is refused, and so is an expired one', () => {
      given([created, granted, setupIssued, passwordSet, resetIssued, resetUsed]).when(useReset).thenThrows(DomainRefusal, invalid);
      given([created, granted, setupIssued, passwordSet, resetIssued])
        .when({ ...useReset, now: RESET_EXPIRES })
        .thenThrows(DomainRefusal, refusedWith('bad_request', 'This setup link has expired; ask an administrator for a new one', 'token'));
      // A wrong secret for the newest link is refused like any unknown link.
      given([created, granted, setupIssued, passwordSet, resetIssued]).when({ ...useReset, secretSha256: sha256Hex('guess') }).thenThrows(DomainRefusal, invalid);
    });

    it('an admin asks for a member of their organization, and only if they administer every organization the member belongs to', () => {
      const byAdmin = { ...reset, by: GRACE, orgId: 1, byAdminOf: new Set([1]) };
      const issuedByAdmin: UserEvent = { ...resetIssued, data: { ...resetIssued.data, issued_by: GRACE } };
      given([created, granted, setupIssued, passwordSet]).when(byAdmin).then([issuedByAdmin]);
      // Not a member of the admin's organization: as absent as a user who never was.
      given([created, granted]).when({ ...byAdmin, orgId: 2, byAdminOf: new Set([2]) }).thenThrows(DomainRefusal, refusedWith('not_found', 'user is not a member of organization 2'));
      given([]).when(byAdmin).thenThrows(DomainRefusal, refusedWith('not_found', 'user is not a member of organization 1'));
      // The asker is no admin of it (any more).
      given([created, granted]).when({ ...byAdmin, byAdminOf: new Set([2]) }).thenThrows(DomainRefusal, refusedWith('forbidden', "Only the organization's admins can do this"));
      // The member also belongs to an organization the admin does not administer: the link would open that one too.
      const alsoInTwo: UserEvent = { type: 'MembershipGranted', data: { user_id: 'usr_a', org_id: 2, role: 'viewer', granted_at: LATER, granted_by: CLI, invitation_id: null } };
      given([created, granted, alsoInTwo])
        .when(byAdmin)
        .thenThrows(
          DomainRefusal,
          refusedWith('forbidden', "ada@example.com also belongs to an organization you do not administer: ask the installation's operator for a new link (npx tracking users reset-link)"),
        );
      given([created, granted, alsoInTwo]).when({ ...byAdmin, byAdminOf: new Set([1, 2]) }).then([issuedByAdmin]);
      given([created, granted, alsoInTwo]).when(reset).then([resetIssued]);
      // Asking for oneself needs no standing; another user's command needs it.
      const self: Actor = { kind: 'user', user_id: 'usr_a', email: 'ada@example.com' };
      given([created, granted, alsoInTwo]).when({ ...byAdmin, by: self, byAdminOf: undefined }).then([{ ...resetIssued, data: { ...resetIssued.data, issued_by: self } }]);
      expect(() => userDecider.decide({ ...byAdmin, byAdminOf: undefined }, fold(userDecider, [created, granted]))).toThrow('needs the organizations they administer');
    });

    it('a link issued before PasswordSetupIssued version 2 (no issued_by) is a link like any other, and a new one replaces it', () => {
      const v1: UserEvent = { type: 'PasswordSetupIssued', data: { user_id: 'usr_a', setup_id: 'ps_1', secret_sha256: SECRET, issued_at: AT, expires_at: EXPIRES } };
      given([created, granted, v1]).when(useFirst).then([passwordSet]);
      given([created, granted, v1, resetIssued]).when(useFirst).thenThrows(DomainRefusal, invalid);
    });

    it("a link's status, as its page asks it, is what its use decides: valid, used, replaced, expired or invalid", () => {
      const link = { setupId: 'ps_2', secretSha256: SECRET_2 };
      const cases: Array<[UserEvent[], { setupId: string; secretSha256: string }, string, string]> = [
        [[created, granted, setupIssued, passwordSet, resetIssued], link, useReset.now, 'valid'],
        [[created, granted, setupIssued, passwordSet, resetIssued, resetUsed], link, useReset.now, 'used'],
        [[created, granted, setupIssued, resetIssued], { setupId: 'ps_1', secretSha256: SECRET }, LATER, 'replaced'],
        [[created, granted, setupIssued, passwordSet, resetIssued], link, RESET_EXPIRES, 'expired'],
        // Used, then past its time: used.
        [[created, granted, setupIssued, passwordSet, resetIssued, resetUsed], link, '2026-02-01T00:00:00.000Z', 'used'],
        [[created, granted, setupIssued, passwordSet, resetIssued], { ...link, secretSha256: sha256Hex('guess') }, useReset.now, 'invalid'],
        // A used link with a wrong secret tells nothing.
        [[created, granted, setupIssued, passwordSet, resetIssued, resetUsed], { ...link, secretSha256: sha256Hex('guess') }, useReset.now, 'invalid'],
        [[created, granted, setupIssued], { setupId: 'ps_9', secretSha256: SECRET }, LATER, 'invalid'],
        [[], link, LATER, 'invalid'],
      ];
      for (const [events, checked, now, status] of cases) {
        const state = fold(userDecider, events);
        expect(setupLinkStatus(state, checked, now), `${status}`).toBe(status);
        const use = () => userDecider.decide({ type: 'SetPasswordWithSetupLink', ...checked, credentialId: 'cred_x', now }, state);
        if (status === 'valid') expect(use()).toHaveLength(1);
        else expect(use).toThrow(DomainRefusal);
      }
    });
  });

  it('a password change needs a password to change', () => {
    given([created, granted, setupIssued, passwordSet])
      .when({ type: 'ChangePassword', credentialId: 'cred_2', at: LATER })
      .then([{ type: 'PasswordSet', data: { user_id: 'usr_a', credential_id: 'cred_2', set_at: LATER, via: { kind: 'change' } } }]);
    given([created, granted]).when({ type: 'ChangePassword', credentialId: 'cred_2', at: LATER }).thenThrows(DomainRefusal, refusedWith('bad_request', 'this user has no password to change'));
    given([]).when({ type: 'ChangePassword', credentialId: 'cred_2', at: LATER }).thenThrows(DomainRefusal, refusedWith('bad_request', 'this user has no password to change'));
  });

  it('a password set before PasswordSet version 2 (its hash in the event) is a password to change; the change names a credential', () => {
    given([created, granted, setupIssued, passwordSetV1])
      .when({ type: 'ChangePassword', credentialId: 'cred_2', at: LATER })
      .then([{ type: 'PasswordSet', data: { user_id: 'usr_a', credential_id: 'cred_2', set_at: LATER, via: { kind: 'change' } } }]);
    // Either version uses the setup link up.
    given([created, granted, setupIssued, passwordSetV1])
      .when({ type: 'SetPasswordWithSetupLink', setupId: 'ps_1', secretSha256: SECRET, credentialId: 'cred_3', now: LATER })
      .thenThrows(DomainRefusal, refusedWith('bad_request', 'This setup link is not valid or has already been used', 'token'));
  });

  it('the current password is the credential the latest PasswordSet names, or the hash a version 1 event carried', () => {
    const changed: UserEvent = { type: 'PasswordSet', data: { user_id: 'usr_a', credential_id: 'cred_2', set_at: LATER, via: { kind: 'change' } } };
    expect(fold(userDecider, [created, granted]).password).toBeNull();
    expect(fold(userDecider, [created, granted, setupIssued, passwordSet]).password).toEqual({ kind: 'credential', credentialId: 'cred_1' });
    expect(fold(userDecider, [created, granted, setupIssued, passwordSetV1]).password).toEqual({ kind: 'hash-in-log', passwordHash: 'scrypt$h1' });
    expect(fold(userDecider, [created, granted, setupIssued, passwordSetV1, changed]).password).toEqual({ kind: 'credential', credentialId: 'cred_2' });
  });

  it('memberships: granted once per organization; a role changed (the same role is a no-op); removed; never by the user themselves, only by an admin of it', () => {
    const grant = { type: 'GrantMembership' as const, orgId: 2, orgExists: true, role: 'operator' as const, at: LATER, by: GRACE, invitationId: 'inv_2' };
    given([created, granted])
      .when(grant)
      .then([{ type: 'MembershipGranted', data: { user_id: 'usr_a', org_id: 2, role: 'operator', granted_at: LATER, granted_by: GRACE, invitation_id: 'inv_2' } }]);
    given([created, granted]).when({ ...grant, orgId: 1 }).thenThrows(DomainRefusal, refusedWith('conflict', 'ada@example.com is already a member of organization 1', 'email'));
    given([]).when(grant).thenThrows(DomainRefusal, refusedWith('not_found', 'user does not exist'));
    given([created, granted]).when({ ...grant, orgExists: false }).thenThrows(DomainRefusal, refusedWith('not_found', 'organization 2 does not exist', 'org_id'));

    const admin = { role: 'admin' as const };
    const change = { type: 'ChangeMemberRole' as const, orgId: 1, role: 'operator' as const, at: LATER, by: GRACE, byStanding: admin };
    given([created, granted]).when(change).then([{ type: 'MembershipRoleChanged', data: { user_id: 'usr_a', org_id: 1, role: 'operator', changed_at: LATER, changed_by: GRACE } }]);
    given([created, granted]).when({ ...change, role: 'admin' }).then([]);
    const changed: UserEvent = { type: 'MembershipRoleChanged', data: { user_id: 'usr_a', org_id: 1, role: 'operator', changed_at: LATER, changed_by: GRACE } };
    given([created, granted, changed]).when(change).then([]);
    given([created, granted]).when({ ...change, orgId: 2 }).thenThrows(DomainRefusal, refusedWith('not_found', 'user is not a member of organization 2'));
    const self: Actor = { kind: 'user', user_id: 'usr_a', email: 'ada@example.com' };
    given([created, granted]).when({ ...change, by: self }).thenThrows(DomainRefusal, refusedWith('forbidden', 'you cannot change the role of yourself; ask another admin'));
    // The asker's standing is what their stream says now: demoted or removed meanwhile, refused.
    for (const byStanding of [{ role: 'operator' as const }, { role: null }]) {
      given([created, granted]).when({ ...change, byStanding }).thenThrows(DomainRefusal, refusedWith('forbidden', "Only the organization's admins can do this"));
    }
    expect(() => userDecider.decide({ ...change, byStanding: undefined }, fold(userDecider, [created, granted]))).toThrow('needs their standing');
    // The CLI has no standing to check.
    given([created, granted]).when({ ...change, by: CLI_ACTOR, byStanding: undefined }).then([
      { type: 'MembershipRoleChanged', data: { user_id: 'usr_a', org_id: 1, role: 'operator', changed_at: LATER, changed_by: CLI_ACTOR } },
    ]);

    const remove = { type: 'RemoveMembership' as const, orgId: 1, at: LATER, by: GRACE, byStanding: admin };
    const removed: UserEvent = { type: 'MembershipRemoved', data: { user_id: 'usr_a', org_id: 1, removed_at: LATER, removed_by: GRACE } };
    given([created, granted]).when(remove).then([removed]);
    given([created, granted, removed]).when(remove).thenThrows(DomainRefusal, refusedWith('not_found', 'user is not a member of organization 1'));
    given([created, granted]).when({ ...remove, by: self }).thenThrows(DomainRefusal, refusedWith('forbidden', 'you cannot remove yourself; ask another admin'));
    given([created, granted]).when({ ...remove, byStanding: { role: 'operator' } }).thenThrows(DomainRefusal, refusedWith('forbidden', "Only the organization's admins can do this"));
    // Removed, the user can be made a member again.
    given([created, granted, removed])
      .when({ ...grant, orgId: 1 })
      .then([{ type: 'MembershipGranted', data: { user_id: 'usr_a', org_id: 1, role: 'operator', granted_at: LATER, granted_by: GRACE, invitation_id: 'inv_2' } }]);
  });
});

describe('the claim on an email address', () => {
  const given = specFor(userEmailDecider);
  it('one user per address', () => {
    const claim = { type: 'ClaimEmail' as const, email: 'ada@example.com', userId: 'usr_a', at: AT };
    const claimed = { type: 'UserEmailClaimed' as const, data: { email: 'ada@example.com', user_id: 'usr_a', claimed_at: AT } };
    given([]).when(claim).then([claimed]);
    given([claimed]).when({ ...claim, userId: 'usr_b' }).thenThrows(DomainRefusal, refusedWith('conflict', 'a user with email ada@example.com already exists', 'email'));
  });
});

describe('invitations', () => {
  const given = specFor(invitationDecider);
  const issue: IssueInvitation = {
    type: 'IssueInvitation',
    invitationId: 'inv_1',
    orgId: 1,
    orgExists: true,
    email: 'linus@example.com',
    role: 'operator',
    secretSha256: SECRET,
    at: AT,
    expiresAt: EXPIRES,
    by: GRACE,
  };
  const issued: InvitationEvent = {
    type: 'InvitationIssued',
    data: { invitation_id: 'inv_1', org_id: 1, email: 'linus@example.com', role: 'operator', secret_sha256: SECRET, issued_at: AT, expires_at: EXPIRES, issued_by: GRACE },
  };
  const accept = { type: 'AcceptInvitation' as const, secretSha256: SECRET, userId: 'usr_l', now: LATER };
  const accepted: InvitationEvent = { type: 'InvitationAccepted', data: { invitation_id: 'inv_1', org_id: 1, user_id: 'usr_l', accepted_at: LATER } };

  it('issued for an organization that exists', () => {
    given([]).when(issue).then([issued]);
    given([]).when({ ...issue, orgExists: false }).thenThrows(DomainRefusal, refusedWith('not_found', 'organization 1 does not exist', 'org_id'));
    given([issued]).when(issue).thenThrows(DomainRefusal, refusedWith('conflict', 'invitation inv_1 already exists'));
  });

  it('accepted once, before it expires, with its own secret', () => {
    given([issued]).when(accept).then([accepted]);
    given([issued, accepted]).when(accept).thenThrows(DomainRefusal, refusedWith('bad_request', 'This invitation link has already been used', 'token'));
    given([issued]).when({ ...accept, now: EXPIRES }).thenThrows(DomainRefusal, refusedWith('bad_request', 'This invitation link has expired; ask an administrator for a new one', 'token'));
    given([issued]).when({ ...accept, secretSha256: sha256Hex('guess') }).thenThrows(DomainRefusal, refusedWith('bad_request', 'This invitation link is not valid', 'token'));
    given([issued]).when({ ...accept, secretSha256: 'abc' }).thenThrows(DomainRefusal, refusedWith('bad_request', 'This invitation link is not valid', 'token'));
    given([]).when(accept).thenThrows(DomainRefusal, refusedWith('bad_request', 'This invitation link is not valid', 'token'));
  });

  it('accepted by single sign-on for the address the identity provider verified, once, before it expires', () => {
    const bySignOn = { type: 'AcceptInvitationBySignOn' as const, verifiedEmail: 'linus@example.com', userId: 'usr_l', now: LATER };
    given([issued]).when(bySignOn).then([accepted]);
    // Another address's invitation is not found, as one that never was.
    given([issued]).when({ ...bySignOn, verifiedEmail: 'grace@example.com' }).thenThrows(DomainRefusal, refusedWith('not_found', 'invitation not found'));
    given([]).when(bySignOn).thenThrows(DomainRefusal, refusedWith('not_found', 'invitation not found'));
    given([issued, accepted]).when(bySignOn).thenThrows(DomainRefusal, refusedWith('bad_request', 'This invitation has already been accepted'));
    const cancelled: InvitationEvent = { type: 'InvitationCancelled', data: { invitation_id: 'inv_1', org_id: 1, cancelled_at: LATER, cancelled_by: GRACE } };
    given([issued, cancelled]).when(bySignOn).thenThrows(DomainRefusal, refusedWith('bad_request', 'This invitation was cancelled; ask an administrator for a new one'));
    given([issued]).when({ ...bySignOn, now: EXPIRES }).thenThrows(DomainRefusal, refusedWith('bad_request', 'This invitation has expired; ask an administrator for a new one'));
  });

  it("a link's status, as its page asks it, is what its acceptance decides: valid, used, cancelled, expired or invalid", () => {
    const cancelled: InvitationEvent = { type: 'InvitationCancelled', data: { invitation_id: 'inv_1', org_id: 1, cancelled_at: LATER, cancelled_by: GRACE } };
    const cases: Array<[InvitationEvent[], string, string, string]> = [
      [[issued], SECRET, LATER, 'valid'],
      [[issued, accepted], SECRET, LATER, 'used'],
      [[issued, cancelled], SECRET, LATER, 'cancelled'],
      [[issued, cancelled], SECRET, EXPIRES, 'cancelled'],
      [[issued], SECRET, EXPIRES, 'expired'],
      [[issued, accepted], sha256Hex('guess'), LATER, 'invalid'],
      [[], SECRET, LATER, 'invalid'],
    ];
    for (const [events, secret, now, status] of cases) {
      const state = fold(invitationDecider, events);
      expect(invitationLinkStatus(state, secret, now), status).toBe(status);
      const acceptIt = () => invitationDecider.decide({ ...accept, secretSha256: secret, now }, state);
      if (status === 'valid') expect(acceptIt()).toHaveLength(1);
      else expect(acceptIt).toThrow(DomainRefusal);
    }
  });

  it('cancelled by its own organization before it is accepted, once; its link is then refused, even after it expired', () => {
    const cancel = { type: 'CancelInvitation' as const, orgId: 1, at: LATER, by: GRACE };
    const cancelled: InvitationEvent = { type: 'InvitationCancelled', data: { invitation_id: 'inv_1', org_id: 1, cancelled_at: LATER, cancelled_by: GRACE } };
    given([issued]).when(cancel).then([cancelled]);
    given([issued]).when({ ...cancel, at: EXPIRES, by: CLI_ACTOR }).then([{ ...cancelled, data: { ...cancelled.data, cancelled_at: EXPIRES, cancelled_by: CLI_ACTOR } }]);
    given([issued, cancelled]).when(cancel).then([]);
    given([issued]).when({ ...cancel, orgId: 2 }).thenThrows(DomainRefusal, refusedWith('not_found', 'invitation not found'));
    given([]).when(cancel).thenThrows(DomainRefusal, refusedWith('not_found', 'invitation not found'));
    given([issued, accepted]).when(cancel).thenThrows(DomainRefusal, refusedWith('conflict', 'this invitation was already accepted; remove the member instead'));
    given([issued, cancelled])
      .when(accept)
      .thenThrows(DomainRefusal, refusedWith('bad_request', 'This invitation link was cancelled; ask an administrator for a new one', 'token'));
    // A wrong secret learns nothing about the invitation, cancelled or not.
    given([issued, cancelled]).when({ ...accept, secretSha256: sha256Hex('guess') }).thenThrows(DomainRefusal, refusedWith('bad_request', 'This invitation link is not valid', 'token'));
    expect(fold(invitationDecider, [issued, cancelled])).toMatchObject({ status: 'cancelled', invitationId: 'inv_1' });
  });
});

describe('what a command is made of', () => {
  const refusal = (work: () => unknown) => {
    try {
      work();
    } catch (error) {
      expect(error).toBeInstanceOf(DomainRefusal);
      const { kind, message, field, name } = error as DomainRefusal;
      return { kind, message, field, name };
    }
    throw new Error('not refused');
  };
  const EMAIL = { kind: 'bad_request', message: 'email must be an email address (local@domain, at most 254 characters)', field: 'email', name: 'DomainRefusal' };

  it('an email address: trimmed and lower-cased; local@domain, no spaces, no control characters, at most 254 characters', () => {
    expect(normalizeEmail('  Ada@Example.COM ')).toBe('ada@example.com');
    const longest = `${'a'.repeat(242)}@example.com`;
    expect(longest).toHaveLength(254);
    expect(normalizeEmail(longest)).toBe(longest);
    for (const bad of [`a${longest}`, 'ada', '@example.com', 'ada@', 'ada@@example.com', 'a da@example.com', 'ada@exa mple.com', 'ada@example.com\u0007', 'ad\u007fa@example.com', 'x@a@b']) {
      expect(refusal(() => normalizeEmail(bad)), JSON.stringify(bad)).toEqual(EMAIL);
    }
  });

  it('single sign-on signs in with the ID token’s email, normalized, only when email_verified is true', () => {
    expect(verifiedSignOnEmail(' Ada@Example.COM ', true)).toBe('ada@example.com');
    expect(emailDomain('ada@example.com')).toBe('example.com');
    const unverified = { kind: 'forbidden', message: 'Your identity provider has not verified this email address (ada@example.com): verify it there, then sign in again', field: undefined, name: 'DomainRefusal' };
    for (const verified of [false, undefined, 'true', 1, null]) expect(refusal(() => verifiedSignOnEmail('Ada@Example.com', verified)), String(verified)).toEqual(unverified);
    const none = { kind: 'forbidden', message: 'Your identity provider sent no email address: it must put the email and email_verified claims in the ID token', field: undefined, name: 'DomainRefusal' };
    for (const email of [undefined, null, '', '  ', 42]) expect(refusal(() => verifiedSignOnEmail(email, true)), String(email)).toEqual(none);
    expect(refusal(() => verifiedSignOnEmail('not an address', true))).toEqual({
      kind: 'forbidden',
      message: 'Your identity provider sent "not an address", which is not an email address this service can use',
      field: undefined,
      name: 'DomainRefusal',
    });
  });

  it('a member role is admin, operator or viewer; member is read as operator', () => {
    expect(checkMemberRole('admin')).toBe('admin');
    expect(checkMemberRole('member')).toBe('operator');
    expect(checkMemberRole('viewer')).toBe('viewer');
    expect(refusal(() => checkMemberRole('owner'))).toEqual({ kind: 'bad_request', message: 'role must be one of: admin, operator, viewer', field: 'role', name: 'DomainRefusal' });
  });

  it('a password has 10 to 200 characters; the refusal names the field it came in', () => {
    expect(checkPassword('x'.repeat(10))).toBe('x'.repeat(10));
    expect(checkPassword('x'.repeat(200))).toBe('x'.repeat(200));
    expect(refusal(() => checkPassword('x'.repeat(9)))).toEqual({ kind: 'bad_request', message: 'password must be at least 10 characters long', field: 'password', name: 'DomainRefusal' });
    expect(refusal(() => checkPassword('x'.repeat(201), 'new_password'))).toEqual({
      kind: 'bad_request',
      message: 'new_password must be at most 200 characters long',
      field: 'new_password',
      name: 'DomainRefusal',
    });
  });

  it('links last 72 hours; a secret is known by its SHA-256 in hex', () => {
    expect(LINK_LIFETIME_MS).toBe(259_200_000);
    expect(sha256Hex('secret')).toBe('2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b');
  });
});

describe('member roles as the log holds them', () => {
  it('a version 1 event with the role member is read as operator, by the user and the invitation alike', () => {
    const granted = { type: 'MembershipGranted' as const, data: { user_id: 'usr_m', org_id: 1, role: 'member' as const, granted_at: AT, granted_by: CLI, invitation_id: null } };
    const created: UserEvent = { type: 'UserCreated', data: { user_id: 'usr_m', email: 'm@example.com', created_at: AT, created_by: CLI } };
    expect(fold(userDecider, [created, granted]).memberships.get(1)).toBe('operator');
    const changed = { type: 'MembershipRoleChanged' as const, data: { user_id: 'usr_m', org_id: 1, role: 'member' as const, changed_at: LATER, changed_by: CLI } };
    expect(fold(userDecider, [created, { ...granted, data: { ...granted.data, role: 'admin' as const } }, changed]).memberships.get(1)).toBe('operator');
    const issued: InvitationEvent = {
      type: 'InvitationIssued',
      data: { invitation_id: 'inv_m', org_id: 1, email: 'm@example.com', role: 'member', secret_sha256: SECRET, issued_at: AT, expires_at: EXPIRES, issued_by: CLI },
    };
    expect(fold(invitationDecider, [issued])).toMatchObject({ status: 'issued', role: 'operator' });
  });
});
