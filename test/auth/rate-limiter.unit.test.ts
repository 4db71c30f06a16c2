import { afterEach, describe, expect, it, vi } from 'vitest';
import { TokenBucketRateLimiter } from '../../shared/auth/rate-limiter.js';
import type { Principal } from '../../shared/auth/principal.js';

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

  it('meters only an API key that has an id: a session is never metered, even one carrying a key id', () => {
    const { bucket } = limiter(60, 1);
    expect(bucket.take({ kind: 'session', orgId: 1, scopes: [], keyId: 'a', subject: 'ada@example.com' })).toBeNull();
    expect(bucket.take({ kind: 'api_key', orgId: 1, scopes: [], keyId: null, subject: 'anonymous' })).toBeNull();
    // Neither took a token from key a's bucket.
    expect(bucket.take(key('a'))).toEqual({ limit: 1, remaining: 0, resetSeconds: 1 });
  });

  it('when refused, the reset counts the part of a token already refilled', () => {
    const { bucket, advance } = limiter(60, 3); // a token a second
    for (let i = 0; i < 3; i++) bucket.take(key('a'));
    advance(500); // half a token back: 2.5 tokens (2.5 s) short of full
    expect(bucket.take(key('a'))).toEqual({ limit: 3, remaining: 0, resetSeconds: 3, retryAfterSeconds: 1 });
  });
});

describe('token bucket memory', () => {
  afterEach(() => vi.useRealTimers());

  /** The buckets held (private: the rule here is only that they do not pile up). */
  const held = (bucket: TokenBucketRateLimiter) => (bucket as unknown as { buckets: Map<string, unknown> }).buckets.size;

  it('once a minute, drops the buckets that have refilled, and only those; stop ends it', () => {
    vi.useFakeTimers();
    let now = 1_000_000;
    const bucket = new TokenBucketRateLimiter(60, 120, () => now);
    bucket.start();
    bucket.take(key('a'));
    for (let i = 0; i < 100; i++) bucket.take(key('b'));
    expect(held(bucket)).toBe(2);
    // The sweep runs once a minute: then a (one token short, a token a second) has refilled; b (100 short) has not.
    now += 59_999;
    vi.advanceTimersByTime(59_999);
    expect(held(bucket)).toBe(2);
    now += 1;
    vi.advanceTimersByTime(1);
    expect(held(bucket)).toBe(1);
    // b is full again exactly 100 s after its takes: the sweep that sees it short keeps it, the next drops it.
    now += 40_000 - 1;
    vi.advanceTimersByTime(60_000);
    expect(held(bucket)).toBe(1);
    now += 1;
    vi.advanceTimersByTime(60_000);
    expect(held(bucket)).toBe(0);
    // A dropped bucket comes back full.
    expect(bucket.take(key('b'))).toEqual({ limit: 120, remaining: 119, resetSeconds: 1 });
    bucket.stop();
    now += 3_600_000;
    vi.advanceTimersByTime(3_600_000);
    expect(held(bucket)).toBe(1);
  });
});
