import { SignJWT, base64url, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKey } from '../../shared/domain/orgs-and-keys/commands.js';
import { activeSigningKey, type SigningKey } from '../../shared/auth/signing-keys.js';
import { signApiKeyToken } from '../../shared/auth/tokens.js';
import { bearer, createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import type { ErrorBody } from './harness.js';

/** Every token here must be refused with 401, its own detail and the challenge header, never a 500. */

let svc: TestService;
let orgId: number;
let valid: { id: string; token: string };
let signingKey: SigningKey;

const INVALID = 'Invalid or expired token';
const FORMAT = 'Invalid authorization header format';
const now = () => Math.floor(Date.now() / 1000);

beforeAll(async () => {
  svc = await startTestService('auth_hostile');
  const org = await createOrg(svc.service.ctx, 'Target');
  orgId = org.id;
  valid = await mintApiKey(svc.service.ctx, { orgId, name: 'valid', scopes: ['assets:read'] });
  signingKey = await activeSigningKey(svc.service.ctx.pool, svc.service.ctx.keyEncryption.keys);
});

afterAll(async () => {
  await svc?.stop();
});

/** Claims like a real key's, signed with the installation's own key unless told otherwise. */
function craft(claims: Record<string, unknown>, options: { key?: SigningKey; header?: Record<string, unknown> } = {}): Promise<string> {
  const key = options.key ?? signingKey;
  return new SignJWT({ sub: valid.id, org_id: orgId, scopes: ['assets:read'], iss: 'development', aud: 'tracking-api', iat: now(), ...claims })
    .setProtectedHeader({ alg: 'EdDSA', kid: key.kid, typ: 'JWT', ...options.header })
    .sign(key.privateKey);
}

function segments(token: string): [string, string, string] {
  const [header, payload, signature] = token.split('.');
  return [header!, payload!, signature!];
}

const json = (value: unknown) => base64url.encode(JSON.stringify(value));

async function expect401(headers: Record<string, string>, detail: string): Promise<void> {
  const response = await fetch(`${svc.apiUrl}/orgs/me`, { headers });
  const body = (await response.json()) as Partial<ErrorBody>;
  // A token that is wrongly accepted answers 200 without an error envelope: compare status and detail together.
  expect({ status: response.status, detail: body.error?.detail }, JSON.stringify(body)).toEqual({ status: 401, detail });
  expect(body.error!.type).toBe('unauthorized');
  expect(body.error!.title).toBe('Unauthorized');
  expect(response.headers.get('www-authenticate')).toBe('Bearer realm="tracking-api"');
  expect(response.headers.get('content-type')).toMatch(/^application\/json/);
}

describe('hostile tokens', () => {
  it('the valid token itself is accepted (the baseline the others deviate from)', async () => {
    const response = await fetch(`${svc.apiUrl}/orgs/me`, { headers: bearer(valid.token) });
    expect(response.status).toBe(200);
    const crafted = await craft({});
    expect((await fetch(`${svc.apiUrl}/orgs/me`, { headers: bearer(crafted) })).status).toBe(200);
  });

  it('alg none', async () => {
    const [, payload] = segments(valid.token);
    await expect401(bearer(`${json({ alg: 'none', typ: 'JWT' })}.${payload}.`), INVALID);
    await expect401(bearer(`${json({ alg: 'none', typ: 'JWT', kid: signingKey.kid })}.${payload}.${segments(valid.token)[2]}`), INVALID);
  });

  it('signed with a different key under our kid, and by another installation', async () => {
    const { privateKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
    await expect401(bearer(await craft({}, { key: { kid: signingKey.kid, privateKey } })), INVALID);
    await expect401(bearer(await craft({}, { key: { kid: 'sk_01jdx4a8q0n7yv5k3m2b9c6d1e', privateKey } })), INVALID);
  });

  it('HS256 with the public key as the HMAC secret', async () => {
    const rows = await svc.service.ctx.pool.query<{ public_jwk: { x: string } }>('SELECT public_jwk FROM service.signing_keys WHERE kid = $1', [signingKey.kid]);
    const publicJwk = rows.rows[0]!.public_jwk;
    for (const secret of [base64url.decode(publicJwk.x), new TextEncoder().encode(JSON.stringify(publicJwk))]) {
      const token = await new SignJWT({ sub: valid.id, org_id: orgId, scopes: ['assets:read'] })
        .setProtectedHeader({ alg: 'HS256', kid: signingKey.kid })
        .setIssuer('development')
        .setAudience('tracking-api')
        .setIssuedAt()
        .sign(secret);
      await expect401(bearer(token), INVALID);
    }
  });

  it('tampered payload', async () => {
    const [header, payload, signature] = segments(valid.token);
    const claims = JSON.parse(new TextDecoder().decode(base64url.decode(payload))) as Record<string, unknown>;
    await expect401(bearer(`${header}.${json({ ...claims, scopes: ['assets:read', 'assets:write'] })}.${signature}`), INVALID);
    await expect401(bearer(`${header}.${json({ ...claims, org_id: orgId + 1 })}.${signature}`), INVALID);
  });

  it('wrong issuer (another environment) and wrong audience', async () => {
    await expect401(bearer(await craft({ iss: 'production' })), INVALID);
    await expect401(bearer(await craft({ aud: 'another-api' })), INVALID);
    await expect401(bearer(await craft({ aud: undefined })), INVALID);
  });

  it('expired exp', async () => {
    await expect401(bearer(await craft({ exp: now() - 10 })), 'API key has expired');
  });

  it('far-future iat', async () => {
    await expect401(bearer(await craft({ iat: now() + 7 * 24 * 3600 })), INVALID);
  });

  it('a key this installation does not know (deleted) and a revoked key', async () => {
    await expect401(bearer(await craft({ sub: 'ak_01jdx4a8q0n7yv5k3m2b9c6d1e' })), INVALID);
    const doomed = await mintApiKey(svc.service.ctx, { orgId, name: 'doomed', scopes: ['assets:read'] });
    await revokeApiKey(svc.service.ctx, doomed.id);
    await expect401(bearer(doomed.token), 'API key has been revoked');
  });

  it("a validly signed token whose org_id is not its key's org (the key exists, is not revoked, belongs to another org)", async () => {
    const other = await createOrg(svc.service.ctx, 'Other');
    // Signed with the installation's own active key, so signature, issuer and audience all pass:
    // only the key's recorded org can refuse it.
    const token = await signApiKeyToken(signingKey, {
      environment: 'development',
      keyId: valid.id,
      orgId: other.id,
      scopes: ['assets:read'],
      issuedAt: now(),
      expiresAt: null,
    });
    await expect401(bearer(token), INVALID);
    // The same key with its own org still works: the refusal is the org mismatch, nothing else.
    const own = await signApiKeyToken(signingKey, { environment: 'development', keyId: valid.id, orgId, scopes: ['assets:read'], issuedAt: now(), expiresAt: null });
    expect((await fetch(`${svc.apiUrl}/orgs/me`, { headers: bearer(own) })).status).toBe(200);
  });

  it('claims of the wrong shape', async () => {
    await expect401(bearer(await craft({ scopes: 'assets:read' })), INVALID);
    await expect401(bearer(await craft({ org_id: '1' })), INVALID);
    await expect401(bearer(await craft({ iat: 'yesterday' })), INVALID);
    await expect401(bearer(`${json({ alg: 'EdDSA', kid: signingKey.kid })}.${base64url.encode('not json')}.${segments(valid.token)[2]}`), INVALID);
  });

  it('garbage', async () => {
    await expect401(bearer('garbage'), INVALID);
    await expect401(bearer('a.b.c'), INVALID);
    await expect401(bearer('eyJ.eyJ.sig'), INVALID);
    await expect401(bearer('..'), INVALID);
    await expect401(bearer('%%%.%%%.%%%'), INVALID);
  });

  it('header format: empty bearer, two spaces, lowercase scheme, other schemes', async () => {
    await expect401({ authorization: 'Bearer ' }, FORMAT);
    await expect401({ authorization: 'Bearer' }, FORMAT);
    await expect401({ authorization: '' }, FORMAT);
    await expect401({ authorization: `Bearer  ${valid.token}` }, FORMAT);
    await expect401({ authorization: `bearer ${valid.token}` }, FORMAT);
    await expect401({ authorization: `BEARER ${valid.token}` }, FORMAT);
    await expect401({ authorization: `Basic ${Buffer.from('user:pass').toString('base64')}` }, FORMAT);
    await expect401({ authorization: valid.token }, FORMAT);
    await expect401({ authorization: `Bearer ${valid.token} extra` }, FORMAT);
    await expect401({ authorization: `Bearer\t${valid.token}` }, FORMAT);
  });

  it('a 100 KB Authorization header gets the 401 envelope, not a bare 431', async () => {
    await expect401({ authorization: `Bearer ${'a'.repeat(100 * 1024)}` }, INVALID);
    await expect401({ authorization: `Bearer ${valid.token}${'A'.repeat(100 * 1024)}` }, INVALID);
  });

  it('the token in another header, or none at all', async () => {
    await expect401({ 'x-api-key': valid.token }, 'Use Authorization: Bearer <token>');
    await expect401({ 'x-api-key': 'anything' }, 'Use Authorization: Bearer <token>');
    await expect401({ 'x-custom-auth': `Bearer ${valid.token}` }, 'Use Authorization: Bearer <token>');
    await expect401({ 'x-token': valid.token }, 'Use Authorization: Bearer <token>');
    await expect401({}, 'Missing authorization header');
    await expect401({ 'x-unrelated': 'hello' }, 'Missing authorization header');
  });
});
