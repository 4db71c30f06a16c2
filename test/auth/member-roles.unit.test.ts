import { describe, expect, it } from 'vitest';
import { MEMBER_ROLES, memberRoleAllows, memberRoleRefusal, sessionMemberRoleFor } from '../../shared/auth/member-roles.js';
import { MINTABLE_SCOPES } from '../../shared/auth/scopes.js';

// What each member role may do (docs/web-app.md, "People and roles"), as the pipelines ask it.

describe('member roles', () => {
  it('each member role may do all that the one below it may, and no more', () => {
    expect(MEMBER_ROLES).toEqual(['admin', 'operator', 'viewer']);
    const allowed = MEMBER_ROLES.flatMap((role) => MEMBER_ROLES.filter((needed) => memberRoleAllows(role, needed)).map((needed) => `${role}>=${needed}`));
    expect(allowed.sort()).toEqual(['admin>=admin', 'admin>=operator', 'admin>=viewer', 'operator>=operator', 'operator>=viewer', 'viewer>=viewer']);
  });

  it('a refusal names the role', () => {
    expect(memberRoleRefusal('viewer')).toBe('Your role (viewer) does not allow this');
    expect(memberRoleRefusal(null)).toBe('Your role (none) does not allow this');
  });

  it("a session token needs, for an operation of each scope: reads every role's, master data the operators', webhooks and the audit log the admins'", () => {
    const table = Object.fromEntries(MINTABLE_SCOPES.map((scope) => [scope, sessionMemberRoleFor(scope)]));
    expect(table).toEqual({
      'assets:read': 'viewer',
      'assets:write': 'operator',
      'locations:read': 'viewer',
      'locations:write': 'operator',
      'tracking:read': 'viewer',
      // An ingestion key's scope: no person's operation asks it; an unknown scope is the admins'.
      'scans:write': 'admin',
      'webhooks:read': 'admin',
      'webhooks:write': 'admin',
      'audit:read': 'admin',
      // Alerts: every member reads; rules are the admins' (acknowledging, an operator's, says so on its route).
      'alerts:read': 'viewer',
      'alerts:write': 'admin',
      // Counts: every member reads; operators start and close them.
      'counts:read': 'viewer',
      'counts:write': 'operator',
    });
    expect(['alerts:read', 'counts:read', 'counts:write', 'alerts:write', 'anything:else'].map(sessionMemberRoleFor)).toEqual(['viewer', 'viewer', 'operator', 'admin', 'admin']);
    // An operation any key may use (no scope) is every role's.
    expect(sessionMemberRoleFor(null)).toBe('viewer');
  });
});
