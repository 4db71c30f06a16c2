import type { ServiceContext } from '../../shared/service-context.js';
import { createOrg as createOrgCommand, mintApiKey as mintApiKeyCommand } from '../../shared/domain/orgs-and-keys/commands.js';
import { mintSession as mintSessionCommand } from '../../shared/domain/people/session-tokens.js';
import { createUser } from '../../shared/domain/people/commands.js';
import type { MemberRole } from '../../shared/auth/member-roles.js';

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

let people = 0;

/**
 * A person of the organization with this role (created as `users create` does) and a session token
 * of theirs, bound to their membership as `sessions mint` mints it.
 */
export async function personWithToken(ctx: ServiceContext, orgId: number, role: MemberRole): Promise<{ userId: string; email: string; token: string }> {
  const email = `${role}-${process.pid}-${++people}-${Date.now()}@example.com`;
  const user = await createUser(ctx, { email, orgId, role, by: { kind: 'cli' }, publicUrl: 'http://127.0.0.1' });
  const { token } = await mintSessionCommand(ctx, { user: email, orgId });
  return { userId: user.id, email, token };
}

/** `Authorization` header value for a token. */
export function bearer(token: string): { authorization: string } {
  return { authorization: `Bearer ${token}` };
}
