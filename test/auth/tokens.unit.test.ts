import { CompactSign, SignJWT, base64url, decodeProtectedHeader, generateKeyPair, type CryptoKey } from 'jose';
import { describe, expect, it } from 'vitest';
import { InvalidTokenError, SESSION_TOKEN_USE, signApiKeyToken, signSessionToken, tokenPrefix, verifyToken, type VerifiedToken } from '../../shared/auth/tokens.js';
import { ADMIN_SCOPE, BEARER_REALM, MINTABLE_SCOPES, TOKEN_AUDIENCE } from '../../shared/auth/scopes.js';
import { SIGNING_ALGORITHM, type SigningKey } from '../../shared/auth/signing-keys.js';
import { UnauthorizedError } from '../../shared/errors.js';

// The bearer tokens (docs/api.md "Authentication"): what is signed into them, and
// every reason a token is refused. Pure: keys are made here, no database.

const KID = 'sk_01jdx4a8q0n7yv5k3m2b9c6d1e';
const NOW = 1_900_000_000;

async function keyPair(kid = KID): Promise<{ signing: SigningKey; publicKey: CryptoKey; keyFor: (kid: string) => Promise<CryptoKey | undefined> }> {
  const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
  return { signing: { kid, privateKey }, publicKey, keyFor: async (asked) => (asked === kid ? publicKey : undefined) };
}

function claimsOf(token: string): Record<string, unknown> {
  return JSON.parse(new TextDecoder().decode(base64url.decode(token.split('.')[1]!))) as Record<string, unknown>;
}

/** The reason a token is refused (InvalidTokenError's message), or what it verified as. */
async function verdict(promise: Promise<VerifiedToken>): Promise<VerifiedToken | string> {
  try {
    return await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidTokenError);
    expect((error as Error).name).toBe('InvalidTokenError');
    return (error as Error).message;
  }
}

describe('minting', () => {
  it('an API key token holds exactly iss, aud, sub, org_id, scopes, iat, and exp only when it expires', async () => {
    const { signing } = await keyPair();
    const input = { environment: 'preview', keyId: 'ak_1', orgId: 7, scopes: ['assets:read', 'tracking:read'], issuedAt: NOW };
    const forever = await signApiKeyToken(signing, { ...input, expiresAt: null });
    expect(claimsOf(forever)).toEqual({ iss: 'preview', aud: 'tracking-api', sub: 'ak_1', org_id: 7, scopes: ['assets:read', 'tracking:read'], iat: NOW });
    expect(decodeProtectedHeader(forever)).toEqual({ alg: 'EdDSA', kid: KID, typ: 'JWT' });
    const dated = await signApiKeyToken(signing, { ...input, expiresAt: NOW + 3600 });
    expect(claimsOf(dated)).toEqual({ ...claimsOf(forever), exp: NOW + 3600 });
  });

  it("a session token: the person, token_use \"session\", its session and generation, org_id when it has one, the membership it is bound to, always exp", async () => {
    const { signing } = await keyPair();
    const input = { environment: 'preview', user: 'ada@example.com', sessionId: 'ses_1', tokenGeneration: 2, userId: 'usr_a', issuedAt: NOW, expiresAt: NOW + 3600 };
    const admin = await signSessionToken(signing, { ...input, orgId: 3, membership: { role: 'admin', revision: '4' } });
    expect(claimsOf(admin)).toEqual({
      iss: 'preview',
      aud: 'tracking-api',
      sub: 'ada@example.com',
      token_use: 'session',
      sid: 'ses_1',
      gen: 2,
      uid: 'usr_a',
      role: 'admin',
      mrev: '4',
      scopes: ['keys:admin'],
      org_id: 3,
      iat: NOW,
      exp: NOW + 3600,
    });
    expect(decodeProtectedHeader(admin)).toEqual({ alg: 'EdDSA', kid: KID, typ: 'JWT' });
    // keys:admin for an admin's token and for the CLI's unscoped session (no membership), never another role's.
    expect(claimsOf(await signSessionToken(signing, { ...input, orgId: 3, membership: { role: 'operator', revision: '5' } }))).toMatchObject({ scopes: [], role: 'operator' });
    const unscoped = claimsOf(await signSessionToken(signing, { ...input, userId: null, orgId: 3, membership: null }));
    expect(unscoped).toMatchObject({ scopes: ['keys:admin'], org_id: 3 });
    expect(unscoped).not.toHaveProperty('uid');
    expect(unscoped).not.toHaveProperty('role');
    expect(unscoped).not.toHaveProperty('mrev');
    const withoutOrg = await signSessionToken(signing, { ...input, orgId: null, membership: null });
    expect(claimsOf(withoutOrg)).not.toHaveProperty('org_id');
  });

  it('what the tokens name is the contract\'s', () => {
    expect([SESSION_TOKEN_USE, ADMIN_SCOPE, TOKEN_AUDIENCE, SIGNING_ALGORITHM]).toEqual(['session', 'keys:admin', 'tracking-api', 'EdDSA']);
    expect(MINTABLE_SCOPES).toEqual(['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read', 'scans:write', 'webhooks:read', 'webhooks:write', 'audit:read', 'alerts:read', 'alerts:write', 'counts:read', 'counts:write']);
    // The challenge every 401 carries (docs/api.md "Authentication"), the same as the errors module sends.
    expect(BEARER_REALM).toBe('Bearer realm="tracking-api"');
    expect(new UnauthorizedError('x').headers['WWW-Authenticate']).toBe(BEARER_REALM);
  });

  it('the prefix shown instead of a token is the start of its signature, which differs per token', async () => {
    const { signing } = await keyPair();
    const input = { environment: 'preview', keyId: 'ak_1', orgId: 7, scopes: ['assets:read'], expiresAt: null };
    const one = await signApiKeyToken(signing, { ...input, issuedAt: NOW });
    const two = await signApiKeyToken(signing, { ...input, issuedAt: NOW + 1 });
    expect(tokenPrefix(one)).toBe(one.split('.')[2]!.slice(0, 12));
    expect(tokenPrefix(one)).toHaveLength(12);
    expect(tokenPrefix(one)).not.toBe(tokenPrefix(two));
    expect(tokenPrefix('a.b.c')).toBe('c');
    expect(tokenPrefix('a.b')).toBe('');
  });
});

describe('verifying', () => {
  it('round trip: what was minted verifies as what it is', async () => {
    const { signing, keyFor } = await keyPair();
    const apiKey = { environment: 'preview', keyId: 'ak_1', orgId: 7, scopes: ['assets:read'], issuedAt: NOW };
    expect(await verifyToken(await signApiKeyToken(signing, { ...apiKey, expiresAt: null }), keyFor, 'preview', NOW)).toEqual({
      kind: 'api_key',
      keyId: 'ak_1',
      orgId: 7,
      scopes: ['assets:read'],
      expiresAt: null,
    });
    expect(await verifyToken(await signApiKeyToken(signing, { ...apiKey, expiresAt: NOW + 5 }), keyFor, 'preview', NOW)).toMatchObject({ expiresAt: NOW + 5 });
    const session = { environment: 'preview', user: 'ada@example.com', sessionId: 'ses_1', tokenGeneration: 1, userId: 'usr_a', issuedAt: NOW, expiresAt: NOW + 60 };
    expect(await verifyToken(await signSessionToken(signing, { ...session, orgId: 3, membership: { role: 'viewer', revision: '12' } }), keyFor, 'preview', NOW)).toEqual({
      kind: 'session',
      user: 'ada@example.com',
      sessionId: 'ses_1',
      tokenGeneration: 1,
      userId: 'usr_a',
      orgId: 3,
      membership: { role: 'viewer', revision: '12' },
      scopes: [],
      expiresAt: NOW + 60,
    });
    expect(await verifyToken(await signSessionToken(signing, { ...session, userId: null, orgId: null, membership: null }), keyFor, 'preview', NOW)).toMatchObject({
      kind: 'session',
      orgId: null,
      userId: null,
      membership: null,
      scopes: ['keys:admin'],
    });
  });

  it('expiry is not checked here (it is per use): an expired token still verifies', async () => {
    const { signing, keyFor } = await keyPair();
    const token = await signApiKeyToken(signing, { environment: 'preview', keyId: 'ak_1', orgId: 7, scopes: [], issuedAt: NOW - 100, expiresAt: NOW - 50 });
    expect(await verifyToken(token, keyFor, 'preview', NOW)).toMatchObject({ kind: 'api_key', expiresAt: NOW - 50 });
  });

  it('not three base64url segments: refused before anything is parsed', async () => {
    const { signing, keyFor } = await keyPair();
    const good = await signApiKeyToken(signing, { environment: 'preview', keyId: 'ak_1', orgId: 7, scopes: [], issuedAt: NOW, expiresAt: null });
    let asked = 0;
    const counting = async (kid: string) => {
      asked++;
      return keyFor(kid);
    };
    const [h, p, s] = good.split('.');
    for (const token of ['', 'garbage', 'a.b', 'a.b.c.d', `${h}.${p}`, `${h}.${p}.${s}.`, `${h}..${s}`, `.${p}.${s}`, `${h}.${p}.`, ` ${good}`, `${good} `, `${good}\n`, `x=.${p}.${s}`, `${h}.${p}.${s}=`, `%%%.%%%.%%%`]) {
      expect([token, await verdict(verifyToken(token, counting, 'preview', NOW))]).toEqual([token, 'not a compact JWS']);
    }
    expect(asked).toBe(0);
    expect(await verifyToken(good, counting, 'preview', NOW)).toMatchObject({ keyId: 'ak_1' });
  });

  it('the signature: by our kid, with the key of that kid, EdDSA only', async () => {
    const { signing, keyFor } = await keyPair();
    const other = await keyPair();
    const claims = { iss: 'preview', aud: 'tracking-api', sub: 'ak_1', org_id: 7, scopes: [], iat: NOW };
    const sign = (header: Record<string, unknown>, key = signing.privateKey) => new SignJWT(claims).setProtectedHeader({ alg: 'EdDSA', ...header }).sign(key);
    expect(await verdict(verifyToken(await sign({}), keyFor, 'preview', NOW))).toBe('no kid');
    expect(await verdict(verifyToken(await sign({ kid: 7 }), keyFor, 'preview', NOW))).toBe('no kid');
    expect(await verdict(verifyToken(await sign({ kid: 'sk_01jdx4a8q0n7yv5k3m2b9c6d1f' }), keyFor, 'preview', NOW))).toBe('unknown kid');
    expect(await verdict(verifyToken(await sign({ kid: KID }, other.signing.privateKey), keyFor, 'preview', NOW))).toBe('signature verification failed');
    const hmac = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256', kid: KID }).sign(new Uint8Array(32));
    expect(await verdict(verifyToken(hmac, keyFor, 'preview', NOW))).toMatch(/alg/);
    const unsigned = `${base64url.encode(JSON.stringify({ alg: 'none', kid: KID }))}.${base64url.encode(JSON.stringify(claims))}.AAAA`;
    expect(await verdict(verifyToken(unsigned, keyFor, 'preview', NOW))).toMatch(/alg/);
    // Signed by our key under our kid, but announcing the fully-specified "Ed25519" (RFC 9864) rather
    // than "EdDSA": jose would verify it, the contract's tokens are EdDSA only.
    const otherAlg = await new SignJWT(claims).setProtectedHeader({ alg: 'Ed25519', kid: KID }).sign(signing.privateKey);
    expect(await verdict(verifyToken(otherAlg, keyFor, 'preview', NOW))).toBe('"alg" (Algorithm) Header Parameter value not allowed');
    // A key of the wrong kind under our kid (jose's TypeError) is a refusal too.
    const wrongKind = async () => (await generateKeyPair('ES256')).publicKey;
    expect(await verdict(verifyToken(await sign({ kid: KID }), wrongKind, 'preview', NOW))).toMatch(/Ed25519/);
    const privateHalf = async () => signing.privateKey;
    expect(await verdict(verifyToken(await sign({ kid: KID }), privateHalf, 'preview', NOW))).toMatch(/public/);
    expect(await verifyToken(await sign({ kid: KID }), keyFor, 'preview', NOW)).toMatchObject({ keyId: 'ak_1' });
  });

  it('a failure to find the key (the database) is not a refusal: it is thrown as it is', async () => {
    const { signing } = await keyPair();
    const token = await signApiKeyToken(signing, { environment: 'preview', keyId: 'ak_1', orgId: 7, scopes: [], issuedAt: NOW, expiresAt: null });
    const down = new Error('connection refused');
    await expect(verifyToken(token, () => Promise.reject(down), 'preview', NOW)).rejects.toBe(down);
  });

  it('the payload: JSON claims of the expected shapes only', async () => {
    const { signing, keyFor } = await keyPair();
    const payload = (bytes: Uint8Array) => new CompactSign(bytes).setProtectedHeader({ alg: 'EdDSA', kid: KID }).sign(signing.privateKey);
    expect(await verdict(verifyToken(await payload(new TextEncoder().encode('not json')), keyFor, 'preview', NOW))).toBe('payload is not JSON');
    const valid = { iss: 'preview', aud: 'tracking-api', sub: 'ak_1', org_id: 7, scopes: ['assets:read'], iat: NOW };
    const json = (claims: unknown) => payload(new TextEncoder().encode(JSON.stringify(claims)));
    const refused: Array<Record<string, unknown> | unknown> = [
      null,
      [],
      'claims',
      { ...valid, iss: undefined },
      { ...valid, iss: 7 },
      { ...valid, aud: undefined },
      { ...valid, aud: 7 },
      { ...valid, aud: [7] },
      { ...valid, sub: undefined },
      { ...valid, sub: '' },
      { ...valid, sub: 7 },
      { ...valid, iat: undefined },
      { ...valid, iat: 'yesterday' },
      { ...valid, iat: -1 },
      { ...valid, iat: NOW + 0.5 },
      { ...valid, exp: NOW + 0.5 },
      { ...valid, exp: -1 },
      { ...valid, exp: 'tomorrow' },
      { ...valid, scopes: undefined },
      { ...valid, scopes: 'assets:read' },
      { ...valid, scopes: [7] },
      { ...valid, org_id: '7' },
      { ...valid, org_id: 0 },
      { ...valid, org_id: -7 },
      { ...valid, org_id: 7.5 },
      { ...valid, token_use: 'refresh' },
      { ...valid, token_use: 7 },
    ];
    for (const claims of refused) expect([claims, await verdict(verifyToken(await json(claims), keyFor, 'preview', NOW))]).toEqual([claims, 'unexpected claims']);
    // The edges that are accepted: a one-letter subject, iat and exp of 0, no scopes, org 1.
    expect(await verifyToken(await json({ ...valid, sub: 'a', iat: 0, exp: 0, scopes: [], org_id: 1 }), keyFor, 'preview', NOW)).toEqual({
      kind: 'api_key',
      keyId: 'a',
      orgId: 1,
      scopes: [],
      expiresAt: 0,
    });
  });

  it('issuer, audience and issue time', async () => {
    const { signing, keyFor } = await keyPair();
    const valid = { iss: 'preview', aud: 'tracking-api', sub: 'ak_1', org_id: 7, scopes: [], iat: NOW };
    const token = (claims: Record<string, unknown>) => new SignJWT({ ...valid, ...claims }).setProtectedHeader({ alg: 'EdDSA', kid: KID }).sign(signing.privateKey);
    // Keys from one environment do not authenticate against another.
    expect(await verdict(verifyToken(await token({ iss: 'production' }), keyFor, 'preview', NOW))).toBe('wrong issuer');
    expect(await verdict(verifyToken(await token({ iss: 'Preview' }), keyFor, 'preview', NOW))).toBe('wrong issuer');
    expect(await verdict(verifyToken(await token({ aud: 'another-api' }), keyFor, 'preview', NOW))).toBe('wrong audience');
    expect(await verdict(verifyToken(await token({ aud: ['another-api'] }), keyFor, 'preview', NOW))).toBe('wrong audience');
    expect(await verdict(verifyToken(await token({ aud: [] }), keyFor, 'preview', NOW))).toBe('wrong audience');
    expect(await verifyToken(await token({ aud: ['another-api', 'tracking-api'] }), keyFor, 'preview', NOW)).toMatchObject({ keyId: 'ak_1' });
    // Up to a minute of clock difference with the minting host.
    expect(await verifyToken(await token({ iat: NOW + 60 }), keyFor, 'preview', NOW)).toMatchObject({ keyId: 'ak_1' });
    expect(await verdict(verifyToken(await token({ iat: NOW + 61 }), keyFor, 'preview', NOW))).toBe('issued in the future');
  });

  it('a session needs an exp, its session and generation, and a whole membership of an organization or none; an API key needs an org', async () => {
    const { signing, keyFor } = await keyPair();
    const token = (claims: Record<string, unknown>) =>
      new SignJWT({ iss: 'preview', aud: 'tracking-api', sub: 'ada@example.com', scopes: ['keys:admin'], iat: NOW, ...claims })
        .setProtectedHeader({ alg: 'EdDSA', kid: KID })
        .sign(signing.privateKey);
    const ofSession = { token_use: 'session', sid: 'ses_1', gen: 0 };
    expect(await verdict(verifyToken(await token({ ...ofSession }), keyFor, 'preview', NOW))).toBe('session without exp');
    expect(await verdict(verifyToken(await token({ ...ofSession, org_id: 3 }), keyFor, 'preview', NOW))).toBe('session without exp');
    expect(await verifyToken(await token({ ...ofSession, exp: NOW + 1 }), keyFor, 'preview', NOW)).toMatchObject({ kind: 'session', orgId: null, sessionId: 'ses_1', tokenGeneration: 0 });
    // A token from before tokens named their session belongs to none.
    expect(await verdict(verifyToken(await token({ token_use: 'session', exp: NOW + 1 }), keyFor, 'preview', NOW))).toBe('session token without its session');
    expect(await verdict(verifyToken(await token({ token_use: 'session', sid: 'ses_1', exp: NOW + 1 }), keyFor, 'preview', NOW))).toBe('session token without its session');
    expect(await verdict(verifyToken(await token({ token_use: 'session', gen: 0, exp: NOW + 1 }), keyFor, 'preview', NOW))).toBe('session token without its session');
    // A role without its revision, or the reverse, or a membership of no organization, is no token of ours.
    expect(await verdict(verifyToken(await token({ ...ofSession, org_id: 3, role: 'admin', exp: NOW + 1 }), keyFor, 'preview', NOW))).toBe('half a membership');
    expect(await verdict(verifyToken(await token({ ...ofSession, org_id: 3, mrev: '2', exp: NOW + 1 }), keyFor, 'preview', NOW))).toBe('half a membership');
    expect(await verdict(verifyToken(await token({ ...ofSession, role: 'admin', mrev: '2', exp: NOW + 1 }), keyFor, 'preview', NOW))).toBe('a membership of no organization');
    expect(await verdict(verifyToken(await token({ ...ofSession, org_id: 3, role: 'owner', mrev: '2', exp: NOW + 1 }), keyFor, 'preview', NOW))).toBe('unexpected claims');
    expect(await verifyToken(await token({ ...ofSession, org_id: 3, role: 'viewer', mrev: '2', exp: NOW + 1 }), keyFor, 'preview', NOW)).toMatchObject({ membership: { role: 'viewer', revision: '2' } });
    expect(await verdict(verifyToken(await token({ exp: NOW + 1 }), keyFor, 'preview', NOW))).toBe('api key without org_id');
    expect(await verifyToken(await token({ org_id: 3 }), keyFor, 'preview', NOW)).toMatchObject({ kind: 'api_key', orgId: 3 });
  });
});
