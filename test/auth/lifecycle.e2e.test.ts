import { decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKey } from '../../shared/domain/orgs-and-keys/commands.js';
import { rotateSigningKey } from '../../shared/auth/signing-keys.js';
import { startService, type RunningService } from '../../services/service.js';
import { loadConfig } from '../../shared/config.js';
import { createLogger } from '../../shared/logger.js';
import { bearer, createOrg, mintApiKey } from '../support/auth.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY, startTestService, type TestService } from '../support/service.js';
import type { ErrorBody } from './harness.js';

/** Revocation, expiry, rotation and last-used, with two service instances on one database. */

let a: TestService;
let b: RunningService;
let orgId: number;

beforeAll(async () => {
  a = await startTestService('auth_lifecycle');
  const config = loadConfig({
    PORT: '0',
    OPS_PORT: '0',
    INGEST_PORT: '0',
    LOG_LEVEL: 'silent',
    PG_POOL_SIZE: '10',
    SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY,
  });
  b = await startService(config, a.db.url, createLogger('silent'));
  orgId = (await createOrg(a.service.ctx, 'Lifecycle')).id;
});

afterAll(async () => {
  await b?.stop();
  await a?.stop();
});

async function orgsMe(apiUrl: string, token: string): Promise<{ status: number; detail?: string }> {
  const response = await fetch(`${apiUrl}/orgs/me`, { headers: bearer(token) });
  const body = (await response.json()) as Partial<ErrorBody>;
  return { status: response.status, detail: body.error?.detail };
}

/** Milliseconds until `token` is refused as revoked by the api at `url` (polled; Infinity past one second). */
async function refusedWithin(url: string, token: string): Promise<number> {
  const start = Date.now();
  for (;;) {
    const reply = await orgsMe(url, token);
    if (reply.status === 401) {
      expect(reply.detail).toBe('API key has been revoked');
      return Date.now() - start;
    }
    expect(reply.status).toBe(200);
    if (Date.now() - start > 1000) return Number.POSITIVE_INFINITY;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('key lifecycle across two instances', () => {
  it('a revocation made through one instance is refused by both within the one-second bound, and for good', async () => {
    // Each process learns of a revocation from Postgres NOTIFY, delivered a few milliseconds after
    // the revoking command returns; the issue bounds what a cache may hide at one second.
    const latencies: number[] = [];
    for (let round = 0; round < 5; round++) {
      const key = await mintApiKey(a.service.ctx, { orgId, name: `revocable-${round}`, scopes: ['assets:read'] });
      // Warm both instances' caches with the key's current state.
      expect(await orgsMe(b.urls.api!, key.token)).toEqual({ status: 200, detail: undefined });
      expect(await orgsMe(a.apiUrl, key.token)).toEqual({ status: 200, detail: undefined });
      await revokeApiKey(round % 2 === 0 ? a.service.ctx : b.ctx, key.id);
      const [onB, onA] = await Promise.all([refusedWithin(b.urls.api!, key.token), refusedWithin(a.apiUrl, key.token)]);
      expect(onB).toBeLessThanOrEqual(1000);
      expect(onA).toBeLessThanOrEqual(1000);
      latencies.push(onA, onB);
      // Once refused, always refused.
      for (const url of [a.apiUrl, b.urls.api!]) expect(await orgsMe(url, key.token)).toEqual({ status: 401, detail: 'API key has been revoked' });
    }
    // The notification, not the cache's one-second expiry, is what refuses it: typically within
    // tens of milliseconds. The caches were warmed just before each revocation, so an expiry alone
    // could refuse no sooner than about a second after the warming: the fastest of the ten under
    // half a second tells them apart on a loaded machine too (a fresh-clone CI run at load 20
    // measured a median of 710 ms, so the median does not).
    latencies.sort((x, y) => x - y);
    console.info(`revocation refused after ${latencies.map((l) => l.toFixed(0)).join(', ')} ms`);
    expect(latencies[0]!).toBeLessThan(500);
  });

  it('without a notification, a cached key state is trusted for at most a second', async () => {
    const key = await mintApiKey(a.service.ctx, { orgId, scopes: ['assets:read'] });
    expect((await orgsMe(b.urls.api!, key.token)).status).toBe(200);
    // A change that reaches the read model without the projection's NOTIFY (a lost notification).
    const changedAt = Date.now();
    await a.service.ctx.pool.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [key.id]);
    // Judged by when each probe was sent, not by when its answer came (a loaded machine delays
    // answers): no probe sent more than a second after the change is accepted.
    let acceptedLastSentAfterMs = -1;
    let refused = false;
    while (!refused && Date.now() - changedAt < 3000) {
      const sentAfterMs = Date.now() - changedAt;
      if ((await orgsMe(b.urls.api!, key.token)).status === 401) refused = true;
      else {
        acceptedLastSentAfterMs = sentAfterMs;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
    expect(refused).toBe(true);
    expect(acceptedLastSentAfterMs).toBeLessThanOrEqual(1000);
  });

  it('revoking twice answers the first revocation', async () => {
    const key = await mintApiKey(a.service.ctx, { orgId, scopes: ['assets:read'] });
    const first = await revokeApiKey(a.service.ctx, key.id);
    const second = await revokeApiKey(b.ctx, key.id);
    expect(second).toEqual(first);
    await expect(revokeApiKey(a.service.ctx, 'ak_does_not_exist')).rejects.toThrow('API key ak_does_not_exist does not exist');
  });

  it('an expiring key works until its exp and is refused after it', async () => {
    const expiresAt = new Date(Math.ceil(Date.now() / 1000) * 1000 + 2000);
    const key = await mintApiKey(a.service.ctx, { orgId, scopes: ['assets:read'], expiresAt });
    expect((await orgsMe(b.urls.api!, key.token)).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, expiresAt.getTime() - Date.now() + 50));
    expect(await orgsMe(b.urls.api!, key.token)).toEqual({ status: 401, detail: 'API key has expired' });
    expect(await orgsMe(a.apiUrl, key.token)).toEqual({ status: 401, detail: 'API key has expired' });
  });

  it('a key without expiry has no exp claim; one with expiry has a numeric exp', async () => {
    const forever = await mintApiKey(a.service.ctx, { orgId, scopes: ['assets:read'] });
    const claims = JSON.parse(Buffer.from(forever.token.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
    expect(Object.keys(claims).sort()).toEqual(['aud', 'iat', 'iss', 'org_id', 'scopes', 'sub']);
    expect(claims).toMatchObject({ iss: 'development', aud: 'tracking-api', sub: forever.id, org_id: orgId, scopes: ['assets:read'] });
    const dated = await mintApiKey(a.service.ctx, { orgId, scopes: ['assets:read'], expiresAt: new Date('2099-01-01T00:00:00Z') });
    const datedClaims = JSON.parse(Buffer.from(dated.token.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
    expect(datedClaims.exp).toBe(Date.UTC(2099, 0, 1) / 1000);
  });

  it('rotation: new tokens use the new key, old tokens stay valid until revoked', async () => {
    const before = await mintApiKey(a.service.ctx, { orgId, scopes: ['assets:read'] });
    const rotation = await rotateSigningKey(a.service.ctx.pool, a.service.ctx.keyEncryption.keys);
    expect(rotation.previous_kid).toBe(decodeProtectedHeader(before.token).kid);
    const after = await mintApiKey(b.ctx, { orgId, scopes: ['assets:read'] });
    expect(decodeProtectedHeader(after.token).kid).toBe(rotation.kid);
    for (const api of [a.apiUrl, b.urls.api!]) {
      expect((await orgsMe(api, before.token)).status).toBe(200);
      expect((await orgsMe(api, after.token)).status).toBe(200);
    }
    await revokeApiKey(a.service.ctx, before.id);
    // The other instance learns of it by NOTIFY, within the one-second bound (typically at once).
    expect(await refusedWithin(b.urls.api!, before.token)).toBeLessThanOrEqual(1000);
    expect(await orgsMe(b.urls.api!, before.token)).toEqual({ status: 401, detail: 'API key has been revoked' });
    expect((await orgsMe(b.urls.api!, after.token)).status).toBe(200);
    const active = await a.service.ctx.pool.query<{ kid: string }>('SELECT kid FROM service.signing_keys WHERE retired_at IS NULL');
    expect(active.rows).toEqual([{ kid: rotation.kid }]);
  });

  it('records last use without a write per request', async () => {
    const key = await mintApiKey(a.service.ctx, { orgId, scopes: ['assets:read'] });
    const lastUsed = async () =>
      (await a.service.ctx.pool.query<{ last_used_at: Date }>('SELECT last_used_at FROM service.api_key_usage WHERE key_id = $1', [key.id])).rows[0]
        ?.last_used_at ?? null;
    expect(await lastUsed()).toBeNull();
    const startedAt = Date.now();
    for (let i = 0; i < 20; i++) expect((await orgsMe(a.apiUrl, key.token)).status).toBe(200);
    // Written in the background, about once a second.
    let seen: Date | null = null;
    for (let waited = 0; waited < 3000 && seen === null; waited += 100) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      seen = await lastUsed();
    }
    expect(seen).not.toBeNull();
    expect(seen!.getTime()).toBeGreaterThanOrEqual(startedAt - 5);
    expect(seen!.getTime()).toBeLessThanOrEqual(Date.now());
  });
});
