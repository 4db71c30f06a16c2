import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createOrg, mintApiKey, mintSession } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { startProbeServer, type ErrorBody, type ProbeServer } from './harness.js';

/** A tiny bucket (5 at once, 60 a minute = one a second) so the limit is reached in a few requests. */

let svc: TestService;
let probe: ProbeServer;
let orgId: number;

beforeAll(async () => {
  svc = await startTestService('auth_rate_limit', { RATE_LIMIT_PER_MINUTE: '60', RATE_LIMIT_BURST: '5' });
  probe = await startProbeServer(svc.service.ctx);
  orgId = (await createOrg(svc.service.ctx, 'Metered')).id;
});

afterAll(async () => {
  await probe?.close();
  await svc?.stop();
});

function limits(response: Response) {
  return {
    limit: response.headers.get('x-ratelimit-limit'),
    remaining: response.headers.get('x-ratelimit-remaining'),
    reset: response.headers.get('x-ratelimit-reset'),
  };
}

describe('rate limit', () => {
  it('counts down, then answers 429 with Retry-After; keys have separate buckets', async () => {
    const key = await mintApiKey(svc.service.ctx, { orgId, scopes: ['assets:read'] });
    const remaining: string[] = [];
    for (let i = 0; i < 5; i++) {
      const response = await fetch(`${svc.apiUrl}/orgs/me`, { headers: bearer(key.token) });
      expect(response.status).toBe(200);
      expect(limits(response).limit).toBe('5');
      remaining.push(limits(response).remaining!);
      expect(Number(limits(response).reset)).toBeGreaterThanOrEqual(1);
    }
    // The bucket refills one token a second; the loop is far faster than that.
    expect(remaining.slice(0, 3)).toEqual(['4', '3', '2']);

    const refused = await fetch(`${svc.apiUrl}/orgs/me`, { headers: bearer(key.token) });
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(Number.isInteger(retryAfter) && retryAfter >= 1).toBe(true);
    expect(limits(refused)).toMatchObject({ limit: '5', remaining: '0' });
    const body = (await refused.json()) as ErrorBody;
    expect(body.error).toMatchObject({ type: 'rate_limited', title: 'Rate limited', status: 429, detail: `Retry after ${retryAfter} seconds` });

    const other = await mintApiKey(svc.service.ctx, { orgId, scopes: ['assets:read'] });
    expect((await fetch(`${svc.apiUrl}/orgs/me`, { headers: bearer(other.token) })).status).toBe(200);

    await new Promise((resolve) => setTimeout(resolve, retryAfter * 1000));
    expect((await fetch(`${svc.apiUrl}/orgs/me`, { headers: bearer(key.token) })).status).toBe(200);
  });

  it('does not meter sessions', async () => {
    const session = await mintSession(svc.service.ctx, { user: 'ops@example.com', orgId });
    for (let i = 0; i < 12; i++) {
      const response = await fetch(`${probe.url}/probe/assets`, { headers: bearer(session.token) });
      expect(response.status).toBe(200);
      expect(limits(response)).toEqual({ limit: '5', remaining: '5', reset: '0' });
    }
  });

  it('every /api/v1 response carries the headers, even those refused before the rate-limit step', async () => {
    const responses = [
      await fetch(`${svc.apiUrl}/orgs/me`),
      await fetch(`${svc.apiUrl}/no-such-route`),
      await fetch(`${svc.apiUrl}/orgs/me`, { method: 'DELETE' }),
      await fetch(`${svc.apiUrl}/orgs/me`, { method: 'OPTIONS' }),
    ];
    expect(responses.map((r) => r.status)).toEqual([401, 404, 405, 204]);
    for (const response of responses) expect(limits(response)).toEqual({ limit: '5', remaining: '5', reset: '0' });
  });
});
