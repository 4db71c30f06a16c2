import type { ServiceContext } from '../../context.js';
import type { Authenticator, RateLimiter } from '../http/principal.js';

export interface Authentication {
  authenticator: Authenticator;
  rateLimiter: RateLimiter;
  stop(): Promise<void>;
}

/** Placeholder until the auth slice lands: refuses every request. */
export async function createAuthentication(_ctx: ServiceContext): Promise<Authentication> {
  throw new Error('authentication is not implemented yet');
}
