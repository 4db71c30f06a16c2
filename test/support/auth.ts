import type { ServiceContext } from '../../shared/service-context.js';
import { createOrg as createOrgCommand, mintApiKey as mintApiKeyCommand, mintSession as mintSessionCommand } from '../../shared/domain/orgs-and-keys/commands.js';

/**
 * Organizations, API keys and sessions for tests, through the same commands the CLI runs.
 * `ctx` is a started test service's context (`TestService.service.ctx`), whose projector makes
 * each result visible before these return.
 */

export function createOrg(ctx: ServiceContext, name: string): Promise<{ id: number; name: string }> {
  return createOrgCommand(ctx, name);
}

export async function mintApiKey(
  ctx: ServiceContext,
  input: { orgId: number; name?: string; scopes: readonly string[]; expiresAt?: Date | null },
): Promise<{ id: string; token: string }> {
  const key = await mintApiKeyCommand(ctx, input);
  return { id: key.id, token: key.token };
}

export function mintSession(
  ctx: ServiceContext,
  input: { user: string; orgId?: number | null; ttlSeconds?: number },
): Promise<{ token: string; expires_at: string }> {
  return mintSessionCommand(ctx, input);
}

/** `Authorization` header value for a token. */
export function bearer(token: string): { authorization: string } {
  return { authorization: `Bearer ${token}` };
}
