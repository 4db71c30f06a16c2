import type { ServiceContext } from '../context.js';
import type { Authenticator, RateLimiter } from '../http/principal.js';
import { TokenAuthenticator } from './authenticator.js';
import { TokenBucketRateLimiter } from './rate-limiter.js';
import { activeSigningKey } from './signing-keys.js';

export interface Authentication {
  authenticator: Authenticator;
  rateLimiter: RateLimiter;
  stop(): Promise<void>;
}

/**
 * The api role's authentication: makes sure a signing key exists (the first start creates it),
 * then verifies bearer tokens and meters API keys.
 */
export async function createAuthentication(ctx: ServiceContext): Promise<Authentication> {
  await activeSigningKey(ctx.pool, ctx.keyEncryption.keys);
  const authenticator = new TokenAuthenticator(ctx);
  await authenticator.start();
  const rateLimiter = new TokenBucketRateLimiter(ctx.config.RATE_LIMIT_PER_MINUTE, ctx.config.RATE_LIMIT_BURST);
  rateLimiter.start();
  return {
    authenticator,
    rateLimiter,
    async stop() {
      rateLimiter.stop();
      await authenticator.stop();
    },
  };
}
