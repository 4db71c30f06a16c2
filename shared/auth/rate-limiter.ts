import type { Principal, RateLimiter, RateLimitState } from './principal.js';

interface Bucket {
  tokens: number;
  updatedAt: number;
}

/**
 * A token bucket per API key: `burst` tokens at most, refilled at `perMinute` a minute. Buckets
 * live in this process, so with several api processes each enforces the limit on its own.
 * Sessions are not metered.
 *
 * Headers: `X-RateLimit-Limit` is the bucket size (the most requests that can be made at once),
 * `X-RateLimit-Remaining` the whole tokens left, `X-RateLimit-Reset` the seconds until the bucket
 * is full again. Responses that take no token (unauthenticated, unknown route, sessions) show a
 * full bucket: limit = remaining = burst, reset 0.
 */
export class TokenBucketRateLimiter implements RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly perMs: number;
  private sweeper: NodeJS.Timeout | null = null;

  constructor(
    private readonly perMinute: number,
    private readonly burst: number,
    private readonly now: () => number = () => Date.now(),
  ) {
    this.perMs = perMinute / 60_000;
  }

  start(): void {
    // A bucket that has refilled holds nothing worth keeping.
    this.sweeper = setInterval(() => this.sweep(), 60_000);
    this.sweeper.unref();
  }

  stop(): void {
    // Stryker disable next-line ConditionalExpression: equivalent, clearInterval(null) does nothing
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
  }

  unmetered(): RateLimitState {
    return { limit: this.burst, remaining: this.burst, resetSeconds: 0 };
  }

  take(principal: Principal): RateLimitState | null {
    if (principal.kind !== 'api_key' || principal.keyId === null) return null;
    const now = this.now();
    const bucket = this.buckets.get(principal.keyId) ?? { tokens: this.burst, updatedAt: now };
    bucket.tokens = Math.min(this.burst, bucket.tokens + (now - bucket.updatedAt) * this.perMs);
    bucket.updatedAt = now;
    this.buckets.set(principal.keyId, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return {
        limit: this.burst,
        remaining: Math.floor(bucket.tokens),
        resetSeconds: Math.ceil((this.burst - bucket.tokens) / this.perMs / 1000),
      };
    }
    return {
      limit: this.burst,
      remaining: 0,
      resetSeconds: Math.ceil((this.burst - bucket.tokens) / this.perMs / 1000),
      retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / this.perMs / 1000)),
    };
  }

  private sweep(): void {
    const now = this.now();
    for (const [keyId, bucket] of this.buckets) {
      if (bucket.tokens + (now - bucket.updatedAt) * this.perMs >= this.burst) this.buckets.delete(keyId);
    }
  }
}
