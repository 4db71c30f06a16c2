import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createOrg, mintApiKey, mintSession } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { postgresCommandPorts } from '../../shared/service-context.js';
import { startProbeServer, type ErrorBody, type ProbeServer } from './harness.js';

/** Scopes, sessions and the absence of CORS, through the real route pipeline. */

let svc: TestService;
let probe: ProbeServer;
let orgId: number;

beforeAll(async () => {
  svc = await startTestService('auth_scopes');
  probe = await startProbeServer(svc.service.ctx);
  orgId = (await createOrg(svc.service.ctx, 'Scoped')).id;
});

afterAll(async () => {
  await probe?.close();
  await svc?.stop();
});

async function call(path: string, token: string, method = 'GET'): Promise<{ status: number; body: unknown }> {
  const headers: Record<string, string> = { ...bearer(token) };
  if (method === 'POST') headers['content-type'] = 'application/json';
  const response = await fetch(`${probe.url}${path}`, { method, headers, body: method === 'POST' ? '{}' : undefined });
  return { status: response.status, body: await response.json() };
}

describe('scopes', () => {
  it('a key without the scope gets 403 naming it; with it, the request goes through', async () => {
    const reader = await mintApiKey(svc.service.ctx, { orgId, scopes: ['assets:read'] });
    expect((await call('/probe/assets', reader.token)).status).toBe(200);
    const write = await call('/probe/assets', reader.token, 'POST');
    expect(write.status).toBe(403);
    expect((write.body as ErrorBody).error).toMatchObject({ type: 'forbidden', title: 'Forbidden', status: 403, detail: 'Missing required scope: assets:write' });
    const tracking = await call('/probe/tracking', reader.token);
    expect((tracking.body as ErrorBody).error.detail).toBe('Missing required scope: tracking:read');
  });

  it('a write scope implies no read scope', async () => {
    const writer = await mintApiKey(svc.service.ctx, { orgId, scopes: ['assets:write'] });
    expect((await call('/probe/assets', writer.token, 'POST')).status).toBe(200);
    const read = await call('/probe/assets', writer.token);
    expect(read.status).toBe(403);
    expect((read.body as ErrorBody).error.detail).toBe('Missing required scope: assets:read');
  });

  it('the principal carries the key’s org, scopes, id and name', async () => {
    const key = await mintApiKey(svc.service.ctx, { orgId, name: 'probe', scopes: ['assets:read', 'tracking:read'] });
    expect((await call('/probe/assets', key.token)).body).toEqual({
      data: { kind: 'api_key', orgId, scopes: ['assets:read', 'tracking:read'], keyId: key.id, subject: key.id, keyName: 'probe' },
    });
  });

  it('keys:admin and unknown scopes cannot be minted', async () => {
    await expect(mintApiKey(svc.service.ctx, { orgId, scopes: ['keys:admin'] })).rejects.toThrow('keys:admin is reserved');
    await expect(mintApiKey(svc.service.ctx, { orgId, scopes: ['assets:read', 'assets:delete'] })).rejects.toThrow('unknown scope: assets:delete');
    await expect(mintApiKey(svc.service.ctx, { orgId, scopes: [] })).rejects.toThrow('at least one scope');
    await expect(mintApiKey(svc.service.ctx, { orgId: 999_999, scopes: ['assets:read'] })).rejects.toThrow('organization 999999 does not exist');
  });
});

describe('sessions', () => {
  it("the CLI's session of an email that is no member: passes every scope check, carries keys:admin and the org", async () => {
    const session = await mintSession(svc.service.ctx, { user: 'ops@example.com', orgId });
    for (const [path, method] of [['/probe/assets', 'GET'], ['/probe/assets', 'POST'], ['/probe/tracking', 'GET']] as const) {
      expect((await call(path, session.token, method)).status).toBe(200);
    }
    expect((await call('/probe/assets', session.token)).body).toEqual({
      data: { kind: 'session', orgId, scopes: ['keys:admin'], keyId: null, subject: 'ops@example.com', userId: null, role: 'admin' },
    });
  });

  it('last one hour by default', async () => {
    const before = Date.now();
    const session = await mintSession(svc.service.ctx, { user: 'ops@example.com', orgId });
    const expiresIn = new Date(session.expires_at).getTime() - before;
    expect(expiresIn).toBeGreaterThan(3600_000 - 2000);
    expect(expiresIn).toBeLessThanOrEqual(3600_000 + 1000);
    const claims = JSON.parse(Buffer.from(session.token.split('.')[1]!, 'base64url').toString()) as { exp: number; iat: number };
    expect(claims.exp - claims.iat).toBe(3600);
  });

  it('without an organization are refused by public endpoints with 403', async () => {
    const session = await mintSession(svc.service.ctx, { user: 'ops@example.com' });
    const response = await call('/probe/assets', session.token);
    expect(response.status).toBe(403);
    expect((response.body as ErrorBody).error.detail).toBe('This session has no organization; mint the session with --org to use this endpoint');
  });

  it('are refused once expired', async () => {
    // `exp` is whole seconds after a floored `iat`: a session lives between ttl - 1 and ttl seconds,
    // so a 1-second session could already be over at its first use. Two seconds leave more than one.
    const session = await mintSession(svc.service.ctx, { user: 'ops@example.com', orgId, ttlSeconds: 2 });
    expect((await call('/probe/assets', session.token)).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, new Date(session.expires_at).getTime() - Date.now() + 50));
    const response = await call('/probe/assets', session.token);
    expect(response.status).toBe(401);
    expect((response.body as ErrorBody).error.detail).toBe('Invalid or expired token');
  });

  it('from another environment are refused', async () => {
    const ctx = svc.service.ctx;
    const other = { ...ctx, ...postgresCommandPorts(ctx.pool, ctx.keyEncryption, { ENVIRONMENT: 'production' }) };
    const session = await mintSession(other, { user: 'ops@example.com', orgId });
    const key = await mintApiKey(other, { orgId, scopes: ['assets:read'] });
    for (const token of [session.token, key.token]) {
      const response = await call('/probe/assets', token);
      expect(response.status).toBe(401);
      expect((response.body as ErrorBody).error.detail).toBe('Invalid or expired token');
    }
  });
});

describe('no CORS', () => {
  it('no Access-Control-Allow-* header on any response, preflight included', async () => {
    const key = await mintApiKey(svc.service.ctx, { orgId, scopes: ['assets:read'] });
    const origin = { origin: 'https://evil.example', 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' };
    const responses = [
      await fetch(`${svc.apiUrl}/orgs/me`, { method: 'OPTIONS', headers: origin }),
      await fetch(`${svc.apiUrl}/orgs/me`, { headers: { ...origin, ...bearer(key.token) } }),
      await fetch(`${svc.apiUrl}/orgs/me`, { headers: origin }),
      await fetch(`${svc.apiUrl}/nowhere`, { headers: origin }),
    ];
    expect(responses[0]!.status).toBe(204);
    expect(responses[0]!.headers.get('allow')).toBe('GET, HEAD');
    expect(responses.map((r) => r.status)).toEqual([204, 200, 401, 404]);
    for (const response of responses) {
      const cors = [...response.headers.keys()].filter((name) => name.startsWith('access-control-'));
      expect(cors).toEqual([]);
    }
  });
});
