import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApiServer } from '../../services/api/server.js';
import { authRoutes } from '../../services/api/orgs/routes.js';
import { apiRoutes } from '../../services/api/routes.js';
import { TokenBucketRateLimiter } from '../../shared/auth/rate-limiter.js';
import type { Principal } from '../../shared/auth/principal.js';
import { bearer, createOrg, mintApiKey, mintSession } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';

let svc: TestService;

beforeAll(async () => {
  svc = await startTestService('auth_orgs_me');
});

afterAll(async () => {
  await svc?.stop();
});

describe('GET /orgs/me', () => {
  it('answers the key’s organization, scopes and key id', async () => {
    const org = await createOrg(svc.service.ctx, 'Acme Logistics');
    const key = await mintApiKey(svc.service.ctx, { orgId: org.id, name: 'reader', scopes: ['assets:read', 'tracking:read'] });
    const response = await fetch(`${svc.apiUrl}/orgs/me`, { headers: bearer(key.token) });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      data: { id: org.id, name: 'Acme Logistics', scopes: ['assets:read', 'tracking:read'], api_key_id: key.id },
    });
  });

  it('refuses session tokens with 401', async () => {
    const org = await createOrg(svc.service.ctx, 'Session Org');
    const session = await mintSession(svc.service.ctx, { user: 'ada@example.com', orgId: org.id });
    const response = await fetch(`${svc.apiUrl}/orgs/me`, { headers: bearer(session.token) });
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Bearer realm="tracking-api"');
    const body = (await response.json()) as { error: { type: string; detail: string } };
    expect(body.error.type).toBe('unauthorized');
    expect(body.error.detail).toBe('Session tokens are not accepted on this endpoint; use an API key');
  });

  it('answers 401 without a key', async () => {
    const response = await fetch(`${svc.apiUrl}/orgs/me`);
    expect(response.status).toBe(401);
    const body = (await response.json()) as { error: { detail: string } };
    expect(body.error.detail).toBe('Missing authorization header');
  });

  it('answers 422 missing_org_context for an API key principal without an organization', async () => {
    // No token we mint lacks an org, so the route is served here with an authenticator that
    // yields such a principal.
    const principal: Principal = { kind: 'api_key', orgId: null, scopes: ['assets:read'], keyId: 'ak_orphan', subject: 'ak_orphan' };
    const app = buildApiServer(svc.service.ctx, {
      authenticator: { authenticate: async () => principal },
      rateLimiter: new TokenBucketRateLimiter(600, 1200),
      routes: authRoutes(svc.service.ctx),
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const response = await fetch(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}/api/v1/orgs/me`);
      expect(response.status).toBe(422);
      const body = (await response.json()) as { error: { type: string; title: string; status: number } };
      expect(body.error).toMatchObject({ type: 'missing_org_context', title: 'Missing org context', status: 422 });
    } finally {
      await app.close();
    }
  });

  it('an API key principal without an organization: 422 on assets and tags, 403 on locations (one orgOf, each endpoint as before)', async () => {
    const principal: Principal = { kind: 'api_key', orgId: null, scopes: ['assets:read', 'locations:read'], keyId: 'ak_orphan', subject: 'ak_orphan' };
    const app = buildApiServer(svc.service.ctx, {
      authenticator: { authenticate: async () => principal },
      rateLimiter: new TokenBucketRateLimiter(600, 1200),
      routes: apiRoutes(svc.service.ctx),
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/api/v1`;
      const status = async (path: string) => {
        const response = await fetch(base + path);
        return [response.status, ((await response.json()) as { error: { type: string } }).error.type];
      };
      expect(await status('/assets')).toEqual([422, 'missing_org_context']);
      expect(await status('/assets/1/tags')).toEqual([422, 'missing_org_context']);
      expect(await status('/locations')).toEqual([403, 'forbidden']);
      expect(await status('/locations/1')).toEqual([403, 'forbidden']);
    } finally {
      await app.close();
    }
  });
});
