import { describe, expect, it, vi } from 'vitest';
import { BadRequest, NotFound } from '../../../test/support/refusals.js';
import { useInMemoryPort } from '../../../test/support/in-memory/port.js';
import { rejectionOf } from '../../../test/support/rejection.js';
import { tokenPrefix } from '../../auth/tokens.js';
import { createOrg, mintApiKey, revokeApiKey } from './commands.js';

/**
 * The organization and API key commands against the in-memory command port: org ids
 * from a counter, tokens signed with an Ed25519 key made in memory by the service's signing code,
 * and checked as the authenticator checks them.
 */

const T0 = '2026-01-01T00:00:00.000Z';
const orgCreated = (orgId: number) => ({ type: 'OrgCreated', data: { org_id: orgId, name: 'Acme', created_at: T0 } });

const port = useInMemoryPort(T0, { environment: 'staging' });

describe('createOrg', () => {
  it('takes the next org id, appends OrgCreated and waits until the read model shows it', async () => {
    port().ids.startAt('org_ids', 4);

    expect(await createOrg(port(), 'Acme')).toEqual({ id: 4, name: 'Acme' });

    expect(await port().appended()).toEqual([{ streamId: 'org-4', ...orgCreated(4) }]);
    expect(port().checkpoints.waits.map((w) => w.streams.map((s) => s.streamId))).toEqual([['org-4']]);
  });

  it('a refused name takes no id', async () => {
    expect(await rejectionOf(createOrg(port(), ' '))).toBeInstanceOf(BadRequest);
    expect(await port().appended()).toEqual([]);
    expect(await port().ids.nextOrgId()).toBe(1);
  });
});

const ADA = { kind: 'user' as const, user_id: 'usr_1', email: 'ada@example.com' };

describe('mintApiKey', () => {
  it('signs a token for the accepted claims with the active key, and the event names that key, the token prefix and who minted it', async () => {
    await port().given('org-1', [orgCreated(1)]);

    const key = await mintApiKey(port(), { orgId: 1, name: 'gateway', scopes: ['assets:read', 'assets:read', 'scans:write'] }, { by: ADA });

    expect(key).toMatchObject({ name: 'gateway', scopes: ['assets:read', 'scans:write'], expires_at: null });
    expect(key.id).toMatch(/^ak_[0-9a-z]{26}$/);
    expect(await port().tokens.verify(key.token)).toEqual({ kind: 'api_key', keyId: key.id, orgId: 1, scopes: ['assets:read', 'scans:write'], expiresAt: null });
    expect(await port().appended()).toEqual([
      {
        streamId: `apikey-${key.id}`,
        type: 'ApiKeyMinted',
        data: {
          key_id: key.id,
          org_id: 1,
          name: 'gateway',
          scopes: ['assets:read', 'scans:write'],
          prefix: tokenPrefix(key.token),
          signing_kid: port().tokens.kid,
          created_at: T0,
          expires_at: null,
          minted_by: ADA,
        },
      },
    ]);
  });

  it('without an actor, the CLI minted it', async () => {
    await port().given('org-1', [orgCreated(1)]);
    await mintApiKey(port(), { orgId: 1, name: 'gateway', scopes: ['assets:read'] });
    expect((await port().appended())[0]!.data.minted_by).toEqual({ kind: 'cli' });
  });

  it('for an organization that does not exist: refused, nothing signed or appended', async () => {
    const sign = vi.spyOn(port().tokens, 'signApiKeyToken');
    const error = await rejectionOf(mintApiKey(port(), { orgId: 9, scopes: ['assets:read'] }));
    expect(error).toBeInstanceOf(NotFound);
    expect(sign).not.toHaveBeenCalled();
    expect(await port().appended()).toEqual([]);
  });
});

describe('revokeApiKey', () => {
  const minted = (keyId: string) => ({
    type: 'ApiKeyMinted',
    data: { key_id: keyId, org_id: 1, name: 'k', scopes: ['assets:read'], prefix: 'abc', signing_kid: 'sk_x', created_at: T0, expires_at: null },
  });

  it('revoked at the same moment by someone else: answers their revocation, appends nothing more', async () => {
    await port().given('apikey-ak_1', [minted('ak_1')]);
    const theirs = '2025-12-31T23:59:59.000Z';
    port().store.beforeNextAppend(async () => {
      await port().store.appendToStream('apikey-ak_1', [{ type: 'ApiKeyRevoked', data: { key_id: 'ak_1', org_id: 1, revoked_at: theirs } }], 0n);
    });

    expect(await revokeApiKey(port(), 'ak_1')).toEqual({ id: 'ak_1', revoked_at: theirs });

    expect((await port().appended()).map((e) => e.type)).toEqual(['ApiKeyRevoked']);
  });

  it('records who revoked it; a key of another organization than the one named is refused as unknown', async () => {
    await port().given('apikey-ak_1', [minted('ak_1')]);

    expect(await rejectionOf(revokeApiKey(port(), 'ak_1', { by: ADA, orgId: 2 }))).toBeInstanceOf(NotFound);
    expect(await port().appended()).toEqual([]);

    await revokeApiKey(port(), 'ak_1', { by: ADA, orgId: 1 });
    expect(await port().appended()).toEqual([
      { streamId: 'apikey-ak_1', type: 'ApiKeyRevoked', data: { key_id: 'ak_1', org_id: 1, revoked_at: T0, revoked_by: ADA } },
    ]);
  });
});
