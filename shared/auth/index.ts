import { TokenAuthenticator, type AuthenticatorContext } from './authenticator.js';
import type { KeyEncryption } from './key-encryption-source.js';
import type { Authenticator, RateLimiter } from './principal.js';
import { TokenBucketRateLimiter } from './rate-limiter.js';
import { activeSigningKey } from './signing-keys.js';

export interface Authentication {
  authenticator: Authenticator;
  rateLimiter: RateLimiter;
  stop(): Promise<void>;
}

/**
 * A listener's authentication: verifies bearer tokens (public keys only) and meters API keys.
 * The api role also makes sure a signing key exists (the first start creates it, which needs the
 * key-encryption key); the ingest listener only verifies, so it runs without that key.
 */
export async function createAuthentication(
  ctx: AuthenticatorContext & {
    keyEncryption: Pick<KeyEncryption, 'keys'>;
    config: { ENVIRONMENT: string; RATE_LIMIT_PER_MINUTE: number; RATE_LIMIT_BURST: number };
  },
  options: { ensureSigningKey?: boolean } = {},
): Promise<Authentication> {
  if (options.ensureSigningKey !== false) await activeSigningKey(ctx.pool, ctx.keyEncryption.keys);
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
