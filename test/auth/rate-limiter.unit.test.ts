import { describe, expect, it } from 'vitest';
import { TokenBucketRateLimiter } from '../../shared/auth/rate-limiter.js';
import type { Principal } from '../../shared/http/principal.js';

const key = (keyId: string): Principal => ({ kind: 'api_key', orgId: 1, scopes: [], keyId, subject: keyId });

function limiter(perMinute: number, burst: number) {
  let now = 1_000_000;
  const bucket = new TokenBucketRateLimiter(perMinute, burst, () => now);
  return { bucket, advance: (ms: number) => (now += ms) };
}

describe('token bucket', () => {
  it('allows a burst, then refuses with whole seconds to wait', () => {
    const { bucket } = limiter(60, 3);
    expect(bucket.take(key('a'))).toEqual({ limit: 3, remaining: 2, resetSeconds: 1 });
    expect(bucket.take(key('a'))).toEqual({ limit: 3, remaining: 1, resetSeconds: 2 });
    expect(bucket.take(key('a'))).toEqual({ limit: 3, remaining: 0, resetSeconds: 3 });
    expect(bucket.take(key('a'))).toEqual({ limit: 3, remaining: 0, resetSeconds: 3, retryAfterSeconds: 1 });
  });

  it('refills at the configured rate and never beyond the burst', () => {
    const { bucket, advance } = limiter(600, 1200);
    for (let i = 0; i < 1200; i++) expect(bucket.take(key('a'))!.retryAfterSeconds).toBeUndefined();
    expect(bucket.take(key('a'))!.retryAfterSeconds).toBe(1);
    advance(100); // 600 a minute = one token per 100 ms
    expect(bucket.take(key('a'))).toMatchObject({ remaining: 0 });
    expect(bucket.take(key('a'))!.retryAfterSeconds).toBe(1);
    advance(3_600_000);
    expect(bucket.take(key('a'))).toEqual({ limit: 1200, remaining: 1199, resetSeconds: 1 });
  });

  it('rounds Retry-After up to whole seconds of at least 1', () => {
    const { bucket, advance } = limiter(6, 1); // one token every 10 s
    bucket.take(key('a'));
    expect(bucket.take(key('a'))!.retryAfterSeconds).toBe(10);
    advance(9_500);
    expect(bucket.take(key('a'))!.retryAfterSeconds).toBe(1);
  });

  it('keeps one bucket per key and does not meter sessions', () => {
    const { bucket } = limiter(60, 1);
    bucket.take(key('a'));
    expect(bucket.take(key('a'))!.retryAfterSeconds).toBe(1);
    expect(bucket.take(key('b'))!.retryAfterSeconds).toBeUndefined();
    expect(bucket.take({ kind: 'session', orgId: 1, scopes: ['keys:admin'], keyId: null, subject: 'ada@example.com' })).toBeNull();
    expect(bucket.unmetered()).toEqual({ limit: 1, remaining: 1, resetSeconds: 0 });
  });
});
