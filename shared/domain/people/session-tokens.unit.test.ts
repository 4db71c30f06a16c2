import { describe, expect, it } from 'vitest';
import { useInMemoryPort } from '../../../test/support/in-memory/port.js';
import { rejectionOf } from '../../../test/support/rejection.js';
import { refuse } from '../refusal.js';
import { changeMemberRole, createUser, removeMember } from './commands.js';
import { currentMembership, mintAppSessionToken, mintSession } from './session-tokens.js';

/**
 * Session tokens against the in-memory command port: signed with an Ed25519 key made in memory
 * and verified as the authenticator verifies them; what they are bound to comes from the log.
 */

const T0 = '2026-01-01T00:00:00.000Z';
const T0_SECONDS = Date.parse(T0) / 1000;
const orgCreated = (orgId: number) => ({ type: 'OrgCreated', data: { org_id: orgId, name: 'Acme', created_at: T0 } });
const port = useInMemoryPort(T0, { environment: 'staging' });
const CLI = { kind: 'cli' as const };

async function person(email: string, role: string) {
  return createUser(port(), { email, orgId: 1, role, by: CLI, publicUrl: 'http://127.0.0.1' });
}

describe('sessions mint', () => {
  it("for an email that is no member: the contract's unscoped session, of a session of its own, an hour by default; no event", async () => {
    await port().given('org-1', [orgCreated(1)]);
    const session = await mintSession(port(), { user: 'Ops@Example.com', orgId: 1 });
    expect(session.expires_at).toBe('2026-01-01T01:00:00.000Z');
    expect(await port().tokens.verify(session.token)).toEqual({
      kind: 'session',
      user: 'ops@example.com',
      sessionId: 'ses_mem_1',
      tokenGeneration: 0,
      userId: null,
      orgId: 1,
      membership: null,
      scopes: ['keys:admin'],
      expiresAt: T0_SECONDS + 3600,
    });
    expect(await port().appended()).toEqual([]);
  });

  it("for a member: bound to their membership as the log holds it, with their role; keys:admin only for an admin's", async () => {
    await port().given('org-1', [orgCreated(1)]);
    const viewer = await person('vera@example.com', 'viewer');
    const admin = await person('ada@example.com', 'admin');
    const verified = await port().tokens.verify((await mintSession(port(), { user: 'vera@example.com', orgId: 1 })).token);
    expect(verified).toMatchObject({ userId: viewer.id, orgId: 1, membership: { role: 'viewer', revision: expect.stringMatching(/^[0-9]+$/) }, scopes: [] });
    expect(await port().tokens.verify((await mintSession(port(), { user: 'ada@example.com', orgId: 1 })).token)).toMatchObject({
      userId: admin.id,
      membership: { role: 'admin' },
      scopes: ['keys:admin'],
    });
    // Another role, another revision: the earlier token names one that is gone.
    await changeMemberRole(port(), { userId: viewer.id, orgId: 1, role: 'operator', by: CLI });
    const after = await currentMembership(port(), viewer.id, 1);
    expect(after).toMatchObject({ role: 'operator' });
    expect(after!.revision).not.toBe((verified as { membership: { revision: string } }).membership.revision);
    await removeMember(port(), { userId: viewer.id, orgId: 1, by: CLI });
    expect(await currentMembership(port(), viewer.id, 1)).toBeNull();
  });

  it('refuses what is not an email, a lifetime outside 1 second..24 hours, and an organization that does not exist', async () => {
    await port().given('org-1', [orgCreated(1)]);
    expect(await rejectionOf(mintSession(port(), { user: 'ops' }))).toEqual(refuse.badRequest('user must be an email address'));
    for (const ttlSeconds of [0, 86_401, 1.5]) {
      expect(await rejectionOf(mintSession(port(), { user: 'ops@example.com', ttlSeconds }))).toEqual(refuse.badRequest('ttl must be a whole number of seconds between 1 and 86400'));
    }
    expect((await mintSession(port(), { user: 'ops@example.com', ttlSeconds: 86_400 })).expires_at).toBe('2026-01-02T00:00:00.000Z');
    expect(await rejectionOf(mintSession(port(), { user: 'ops@example.com', orgId: 2 }))).toEqual(refuse.notFound('organization 2 does not exist'));
  });
});

describe("the console's session token", () => {
  it('an hour, never past its session; bound to the membership of the current organization, or of none when it is gone', async () => {
    await port().given('org-1', [orgCreated(1)]);
    const operator = await person('otto@example.com', 'operator');
    const session = { id: 'ses_c', tokenGeneration: 3, userId: operator.id, expiresAt: new Date(Date.parse(T0) + 1800_000) };
    const minted = await mintAppSessionToken(port(), session, { email: 'otto@example.com', orgId: 1 });
    expect(minted).toMatchObject({ expires_at: '2026-01-01T00:30:00.000Z', org_id: 1 });
    expect(await port().tokens.verify(minted.token)).toMatchObject({ sessionId: 'ses_c', tokenGeneration: 3, orgId: 1, membership: { role: 'operator' }, scopes: [] });
    await removeMember(port(), { userId: operator.id, orgId: 1, by: CLI });
    const none = await mintAppSessionToken(port(), { ...session, expiresAt: new Date(Date.parse(T0) + 7200_000) }, { email: 'otto@example.com', orgId: 1 });
    expect(none).toMatchObject({ expires_at: '2026-01-01T01:00:00.000Z', org_id: null });
    expect(await port().tokens.verify(none.token)).toMatchObject({ orgId: null, membership: null });
  });
});
