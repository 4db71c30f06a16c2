import { describe, expect, it } from 'vitest';
import { BadRequest, NotFound } from '../../../test/support/refusals.js';
import { DomainRefusal } from '../refusal.js';
import { specFor } from '../../../test/support/decider.js';
import { fold } from '../decider.js';
import { apiKeyDecider, checkMintableScopes, checkName, mintClaims, orgDecider, type MintApiKey } from './decider.js';
import type { ApiKeyEvent } from './events.js';
import type { Actor } from '../actor.js';

const AT = '2026-01-01T00:00:00.000Z';
const NOW = Date.parse(AT);
const CLI: Actor = { kind: 'cli' };
const ADA: Actor = { kind: 'user', user_id: 'usr_1', email: 'ada@example.com' };

describe('CreateOrg', () => {
  const given = specFor(orgDecider);

  it('creates an organization with its name', () => {
    given([])
      .when({ type: 'CreateOrg', orgId: 3, name: 'Acme', at: AT })
      .then([{ type: 'OrgCreated', data: { org_id: 3, name: 'Acme', created_at: AT } }]);
  });

  it('refuses an empty, over-long or control-character name (docs/cli.md "orgs create")', () => {
    const refused = (name: string, message: string) =>
      given([]).when({ type: 'CreateOrg', orgId: 3, name, at: AT }).thenThrows(BadRequest, (e) => expect(e.message).toBe(message));
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
    by: CLI,
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
      minted_by: CLI,
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
      given([]).when({ ...mint, scopes }).thenThrows(BadRequest, (e) => expect(e.message).toContain(message));
    refused(['keys:admin'], 'keys:admin is reserved for session tokens');
    refused(['assets:read', 'assets:delete'], 'unknown scope: assets:delete');
    refused([' '], 'at least one scope is required');
  });

  it('refuses an expiry that is not in the future, or not a time', () => {
    given([]).when({ ...mint, expiresAt: new Date(NOW) }).thenThrows(BadRequest, (e) => expect(e.message).toBe('expiry must be in the future'));
    given([]).when({ ...mint, expiresAt: new Date(Number.NaN) }).thenThrows(BadRequest, (e) => expect(e.message).toBe('expiry is not a valid time'));
  });

  it('refuses an organization that does not exist, after the other rules', () => {
    given([]).when({ ...mint, orgExists: false }).thenThrows(NotFound, (e) => expect(e.message).toBe('organization 3 does not exist'));
    given([]).when({ ...mint, orgExists: false, scopes: [] }).thenThrows(BadRequest, (e) => expect(e.message).toContain('at least one scope'));
  });

  it('revokes an active key once; a revoked key changes nothing; an unknown key is refused', () => {
    const revoked: ApiKeyEvent = { type: 'ApiKeyRevoked', data: { key_id: 'ak_1', org_id: 3, revoked_at: AT, revoked_by: CLI } };
    given([minted]).when({ type: 'RevokeApiKey', keyId: 'ak_1', at: AT, by: CLI }).then([revoked]);
    given([minted, revoked]).when({ type: 'RevokeApiKey', keyId: 'ak_1', at: '2026-02-01T00:00:00.000Z', by: CLI }).then([]);
    given([]).when({ type: 'RevokeApiKey', keyId: 'ak_1', at: AT, by: CLI }).thenThrows(NotFound, (e) => expect(e.message).toBe('API key ak_1 does not exist'));
  });
});

// ---- every rule of the deciders, exactly ------------------------------------------------------

const ALLOWED = 'assets:read, assets:write, locations:read, locations:write, tracking:read, scans:write, webhooks:read, webhooks:write, audit:read, alerts:read, alerts:write, counts:read, counts:write';

describe('names (organizations and keys)', () => {
  it('1..255 characters without control characters; refusals are bad requests', () => {
    expect(checkName('key name', 'x'.repeat(255))).toBe('x'.repeat(255));
    expect(checkName('key name', ' a b ~\u0080é')).toBe(' a b ~\u0080é');
    for (const [name, message] of [
      ['', 'key name must not be empty'],
      ['\t \n', 'key name must not be empty'],
      ['x'.repeat(256), 'key name must be at most 255 characters long'],
      ['a\u0000', 'key name must not contain control characters'],
      ['a\u001fb', 'key name must not contain control characters'],
      ['a\u007f', 'key name must not contain control characters'],
    ]) {
      let thrown: unknown = null;
      try {
        checkName('key name', name!);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(BadRequest);
      expect((thrown as Error).message).toBe(message);
      expect((thrown as Error).name).toBe('DomainRefusal');
    }
  });
});

describe('CreateOrg, exactly', () => {
  const given = specFor(orgDecider);
  const created = { type: 'OrgCreated' as const, data: { org_id: 3, name: 'Acme', created_at: AT } };

  it('folds into the created organization; a second creation is refused, after the name rule', () => {
    expect(fold(orgDecider, [])).toStrictEqual({ status: 'absent' });
    expect(fold(orgDecider, [created])).toStrictEqual({ status: 'created', id: 3, name: 'Acme' });
    given([created]).when({ type: 'CreateOrg', orgId: 3, name: 'Other', at: AT }).thenThrows(BadRequest, (e) => expect(e.message).toBe('organization 3 already exists'));
    given([created]).when({ type: 'CreateOrg', orgId: 3, name: '', at: AT }).thenThrows(BadRequest, (e) => expect(e.message).toBe('organization name must not be empty'));
  });
});

describe('MintApiKey and RevokeApiKey, exactly', () => {
  const given = specFor(apiKeyDecider);
  const mint: MintApiKey = {
    type: 'MintApiKey',
    keyId: 'ak_1',
    orgId: 3,
    name: 'partner',
    scopes: ['tracking:read'],
    now: NOW,
    orgExists: true,
    token: { prefix: 'abc', signingKid: 'sk_1' },
    by: ADA,
  };
  const minted: ApiKeyEvent = {
    type: 'ApiKeyMinted',
    data: { key_id: 'ak_1', org_id: 3, name: 'partner', scopes: ['tracking:read'], prefix: 'abc', signing_kid: 'sk_1', created_at: AT, expires_at: null, minted_by: ADA },
  };
  const revoked: ApiKeyEvent = { type: 'ApiKeyRevoked', data: { key_id: 'ak_1', org_id: 3, revoked_at: AT, revoked_by: CLI } };

  it('folds into the active, then the revoked key', () => {
    expect(fold(apiKeyDecider, [])).toStrictEqual({ status: 'absent' });
    expect(fold(apiKeyDecider, [minted])).toStrictEqual({ status: 'active', keyId: 'ak_1', orgId: 3 });
    expect(fold(apiKeyDecider, [minted, revoked])).toStrictEqual({ status: 'revoked', keyId: 'ak_1', orgId: 3, revokedAt: AT });
  });

  it('every mintable scope can be minted, alone or together', () => {
    const all = ALLOWED.split(', ');
    for (const scope of all) expect(checkMintableScopes([scope])).toEqual([scope]);
    expect(checkMintableScopes([...all].reverse())).toEqual([...all].reverse());
  });

  it('scope refusals name what is allowed', () => {
    expect(() => checkMintableScopes([])).toThrow(`at least one scope is required (${ALLOWED})`);
    expect(() => checkMintableScopes(['assets:read', 'orgs:write'])).toThrow(`unknown scope: orgs:write (allowed: ${ALLOWED})`);
    expect(() => checkMintableScopes(['keys:admin'])).toThrow('keys:admin is reserved for session tokens and cannot be minted');
  });

  it('the expiry is kept in whole seconds and must be in the future at that precision', () => {
    expect(mintClaims({ ...mint, expiresAt: new Date(NOW + 1999) })).toStrictEqual({ name: 'partner', scopes: ['tracking:read'], expiresAtSeconds: NOW / 1000 + 1 });
    expect(mintClaims({ ...mint, expiresAt: null })).toStrictEqual({ name: 'partner', scopes: ['tracking:read'], expiresAtSeconds: null });
    expect(() => mintClaims({ ...mint, expiresAt: new Date(NOW + 999) })).toThrow('expiry must be in the future');
    expect(() => mintClaims({ ...mint, expiresAt: new Date(NOW - 1000) })).toThrow('expiry must be in the future');
  });

  it('the organization id must be a positive integer', () => {
    for (const orgId of [0, -1, 1.5, Number.NaN]) {
      given([]).when({ ...mint, orgId }).thenThrows(BadRequest, (e) => expect(e.message).toBe('org id must be a positive integer'));
    }
    given([]).when({ ...mint, orgId: 1 }).then([{ ...minted, data: { ...minted.data, org_id: 1 } }]);
  });

  it('refusals in the order an operator hears of them: name, scopes, expiry, org id, org, existing key (every combination)', () => {
    const faults: [Partial<MintApiKey>, string][] = [
      [{ name: ' ' }, 'key name must not be empty'],
      [{ scopes: ['nope'] }, 'unknown scope: nope'],
      [{ expiresAt: new Date(NOW - 5000) }, 'expiry must be in the future'],
      [{ orgId: 0 }, 'org id must be a positive integer'],
      [{ orgExists: false }, 'does not exist'],
      [{}, 'API key ak_1 already exists'],
    ];
    for (let mask = 1; mask < 1 << faults.length; mask++) {
      const present = faults.filter((_, i) => mask & (1 << i));
      const command = present.reduce((c, [fault]) => ({ ...c, ...fault }), mint);
      const history = mask & (1 << 5) ? (mask & 1 ? [minted, revoked] : [minted]) : [];
      given(history)
        .when(command)
        .thenThrows(DomainRefusal, (e) => expect(e.message).toContain(present[0]![1]));
    }
  });

  it('a revocation names the key and its organization', () => {
    given([{ ...minted, data: { ...minted.data, org_id: 9 } }])
      .when({ type: 'RevokeApiKey', keyId: 'ak_1', at: '2026-03-01T00:00:00.000Z', by: ADA })
      .then([{ type: 'ApiKeyRevoked', data: { key_id: 'ak_1', org_id: 9, revoked_at: '2026-03-01T00:00:00.000Z', revoked_by: ADA } }]);
  });
});
