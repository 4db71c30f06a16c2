import { describe, expect, it } from 'vitest';
import { specFor } from '../../../test/support/decider.js';
import { AuthCommandError, apiKeyDecider, orgDecider, type MintApiKey } from './decider.js';
import type { ApiKeyEvent } from './events.js';

const AT = '2026-01-01T00:00:00.000Z';
const NOW = Date.parse(AT);

describe('CreateOrg', () => {
  const given = specFor(orgDecider);

  it('creates an organization with its name', () => {
    given([])
      .when({ type: 'CreateOrg', orgId: 3, name: 'Acme', at: AT })
      .then([{ type: 'OrgCreated', data: { org_id: 3, name: 'Acme', created_at: AT } }]);
  });

  it('refuses an empty, over-long or control-character name (INTERFACES: orgs create)', () => {
    const refused = (name: string, message: string) =>
      given([]).when({ type: 'CreateOrg', orgId: 3, name, at: AT }).thenThrows(AuthCommandError, (e) => expect(e.message).toBe(message));
    refused(' ', 'organization name must not be empty');
    refused('x'.repeat(256), 'organization name must be at most 255 characters long');
    refused('a\tb', 'organization name must not contain control characters');
  });
});

describe('MintApiKey and RevokeApiKey', () => {
  const given = specFor(apiKeyDecider);
  const mint: MintApiKey = {
    type: 'MintApiKey',
    keyId: 'ak_1',
    orgId: 3,
    name: 'partner',
    scopes: ['assets:read', ' assets:read', 'locations:read'],
    now: NOW,
    orgExists: true,
    token: { prefix: 'abc', signingKid: 'sk_1' },
  };
  const minted: ApiKeyEvent = {
    type: 'ApiKeyMinted',
    data: {
      key_id: 'ak_1',
      org_id: 3,
      name: 'partner',
      scopes: ['assets:read', 'locations:read'],
      prefix: 'abc',
      signing_kid: 'sk_1',
      created_at: AT,
      expires_at: null,
    },
  };

  it('mints with the scopes as given, in order, without duplicates; an expiry in whole seconds', () => {
    given([]).when(mint).then([minted]);
    given([])
      .when({ ...mint, expiresAt: new Date(NOW + 90_500) })
      .then([{ ...minted, data: { ...minted.data, expires_at: '2026-01-01T00:01:30.000Z' } }]);
  });

  it('refuses keys:admin, unknown scopes and no scope at all', () => {
    const refused = (scopes: string[], message: string) =>
      given([]).when({ ...mint, scopes }).thenThrows(AuthCommandError, (e) => expect(e.message).toContain(message));
    refused(['keys:admin'], 'keys:admin is reserved for session tokens');
    refused(['assets:read', 'assets:delete'], 'unknown scope: assets:delete');
    refused([' '], 'at least one scope is required');
  });

  it('refuses an expiry that is not in the future, or not a time', () => {
    given([]).when({ ...mint, expiresAt: new Date(NOW) }).thenThrows(AuthCommandError, (e) => expect(e.message).toBe('expiry must be in the future'));
    given([]).when({ ...mint, expiresAt: new Date(Number.NaN) }).thenThrows(AuthCommandError, (e) => expect(e.message).toBe('expiry is not a valid time'));
  });

  it('refuses an organization that does not exist, after the other rules', () => {
    given([]).when({ ...mint, orgExists: false }).thenThrows(AuthCommandError, (e) => expect(e.message).toBe('organization 3 does not exist'));
    given([]).when({ ...mint, orgExists: false, scopes: [] }).thenThrows(AuthCommandError, (e) => expect(e.message).toContain('at least one scope'));
  });

  it('revokes an active key once; a revoked key changes nothing; an unknown key is refused', () => {
    const revoked: ApiKeyEvent = { type: 'ApiKeyRevoked', data: { key_id: 'ak_1', org_id: 3, revoked_at: AT } };
    given([minted]).when({ type: 'RevokeApiKey', keyId: 'ak_1', at: AT }).then([revoked]);
    given([minted, revoked]).when({ type: 'RevokeApiKey', keyId: 'ak_1', at: '2026-02-01T00:00:00.000Z' }).then([]);
    given([]).when({ type: 'RevokeApiKey', keyId: 'ak_1', at: AT }).thenThrows(AuthCommandError, (e) => expect(e.message).toBe('API key ak_1 does not exist'));
  });
});
