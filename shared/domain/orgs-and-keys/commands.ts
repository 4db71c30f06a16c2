import { ulid } from 'ulid';
import { WrongExpectedRevisionError, type Position } from '../../event-store/port.js';
import type { ServiceContext } from '../../context.js';
import { ApiKeyMinted, ApiKeyRevoked, OrgCreated, apiKeyStream, orgStream, type ApiKeyMintedData, type ApiKeyRevokedData } from './events.js';
import { activeSigningKey } from '../../auth/signing-keys.js';
import { ADMIN_SCOPE, MINTABLE_SCOPES } from '../../auth/scopes.js';
import { signApiKeyToken, signSessionToken, tokenPrefix } from '../../auth/tokens.js';

/**
 * Organization, API key and session commands. The CLI and the test helpers call these same
 * functions. Each appends its events and then waits until the read model shows them
 * (`project`: the checkpoint wait by default; the CLI passes its own, which also runs the
 * projections when no server does).
 */

/** A refused command; the message is one line meant for the operator. */
export class AuthCommandError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AuthCommandError';
  }
}

export interface CommandOptions {
  project?: (position: Position) => Promise<void>;
}

const DEFAULT_SESSION_TTL_SECONDS = 3600;
const MAX_SESSION_TTL_SECONDS = 24 * 3600;
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

function projectWith(ctx: ServiceContext, options: CommandOptions): (position: Position) => Promise<void> {
  return options.project ?? ((position) => ctx.checkpoints.waitForCheckpoint(position));
}

function checkName(what: string, name: string): string {
  if (name.trim().length === 0) throw new AuthCommandError(`${what} must not be empty`);
  if (name.length > 255) throw new AuthCommandError(`${what} must be at most 255 characters long`);
  if (CONTROL_CHARACTERS.test(name)) throw new AuthCommandError(`${what} must not contain control characters`);
  return name;
}

async function requireOrg(ctx: ServiceContext, orgId: number): Promise<void> {
  if (!Number.isInteger(orgId) || orgId < 1) throw new AuthCommandError(`org id must be a positive integer`);
  const [created] = await ctx.store.readStream(orgStream(orgId), { maxCount: 1 });
  if (!created) throw new AuthCommandError(`organization ${orgId} does not exist`);
}

export async function createOrg(ctx: ServiceContext, name: string, options: CommandOptions = {}): Promise<{ id: number; name: string }> {
  checkName('organization name', name);
  const { rows } = await ctx.pool.query<{ id: number }>(`SELECT nextval('service.org_ids')::int AS id`);
  const id = rows[0]!.id;
  const result = await ctx.store.appendToStream(
    orgStream(id),
    [{ type: OrgCreated.type, data: { org_id: id, name, created_at: new Date().toISOString() } }],
    'no_stream',
  );
  await projectWith(ctx, options)(result.position);
  return { id, name };
}

/** Scopes as given, in order, without duplicates; refuses `keys:admin` and unknown scopes. */
export function checkMintableScopes(scopes: readonly string[]): string[] {
  const unique = [...new Set(scopes.map((s) => s.trim()).filter((s) => s !== ''))];
  if (unique.length === 0) throw new AuthCommandError(`at least one scope is required (${MINTABLE_SCOPES.join(', ')})`);
  for (const scope of unique) {
    if (scope === ADMIN_SCOPE) throw new AuthCommandError(`${ADMIN_SCOPE} is reserved for session tokens and cannot be minted`);
    if (!(MINTABLE_SCOPES as readonly string[]).includes(scope)) {
      throw new AuthCommandError(`unknown scope: ${scope} (allowed: ${MINTABLE_SCOPES.join(', ')})`);
    }
  }
  return unique;
}

export interface MintApiKeyInput {
  orgId: number;
  name?: string;
  scopes: readonly string[];
  expiresAt?: Date | null;
}

export interface MintedApiKey {
  id: string;
  token: string;
  name: string;
  scopes: string[];
  expires_at: string | null;
}

export async function mintApiKey(ctx: ServiceContext, input: MintApiKeyInput, options: CommandOptions = {}): Promise<MintedApiKey> {
  const name = checkName('key name', input.name ?? 'api key');
  const scopes = checkMintableScopes(input.scopes);
  const now = Date.now();
  let exp: number | null = null;
  if (input.expiresAt) {
    if (Number.isNaN(input.expiresAt.getTime())) throw new AuthCommandError('expiry is not a valid time');
    // `exp` is whole seconds; the key expires at that second.
    exp = Math.floor(input.expiresAt.getTime() / 1000);
    if (exp * 1000 <= now) throw new AuthCommandError('expiry must be in the future');
  }
  await requireOrg(ctx, input.orgId);
  const signingKey = await activeSigningKey(ctx.pool, ctx.keyEncryption.keys);
  const id = `ak_${ulid(now).toLowerCase()}`;
  const token = await signApiKeyToken(signingKey, {
    environment: ctx.config.ENVIRONMENT,
    keyId: id,
    orgId: input.orgId,
    scopes,
    issuedAt: Math.floor(now / 1000),
    expiresAt: exp,
  });
  const expiresAt = exp === null ? null : new Date(exp * 1000).toISOString();
  const data: ApiKeyMintedData = {
    key_id: id,
    org_id: input.orgId,
    name,
    scopes,
    prefix: tokenPrefix(token),
    signing_kid: signingKey.kid,
    created_at: new Date(now).toISOString(),
    expires_at: expiresAt,
  };
  const result = await ctx.store.appendToStream(apiKeyStream(id), [{ type: ApiKeyMinted.type, data }], 'no_stream');
  await projectWith(ctx, options)(result.position);
  return { id, token, name, scopes, expires_at: expiresAt };
}

/** Revokes a key. Revoking a revoked key changes nothing and answers the first revocation. */
export async function revokeApiKey(ctx: ServiceContext, keyId: string, options: CommandOptions = {}): Promise<{ id: string; revoked_at: string }> {
  for (;;) {
    const events = await ctx.store.readStream(apiKeyStream(keyId));
    const minted = events.find((e) => e.type === ApiKeyMinted.type);
    if (!minted) throw new AuthCommandError(`API key ${keyId} does not exist`);
    const revoked = events.find((e) => e.type === ApiKeyRevoked.type);
    if (revoked) {
      await projectWith(ctx, options)(revoked.position);
      return { id: keyId, revoked_at: (revoked.data as ApiKeyRevokedData).revoked_at };
    }
    const data: ApiKeyRevokedData = {
      key_id: keyId,
      org_id: (minted.data as ApiKeyMintedData).org_id,
      revoked_at: new Date().toISOString(),
    };
    try {
      const result = await ctx.store.appendToStream(
        apiKeyStream(keyId),
        [{ type: ApiKeyRevoked.type, data }],
        events[events.length - 1]!.revision,
      );
      await projectWith(ctx, options)(result.position);
      return { id: keyId, revoked_at: data.revoked_at };
    } catch (error) {
      // Someone else revoked it at the same moment: answer theirs.
      if (!(error instanceof WrongExpectedRevisionError)) throw error;
    }
  }
}

export interface MintSessionInput {
  user: string;
  orgId?: number | null;
  ttlSeconds?: number;
}

/** A web-application session: unscoped (`keys:admin`), 1 hour by default, not an event (stateless). */
export async function mintSession(ctx: ServiceContext, input: MintSessionInput): Promise<{ token: string; expires_at: string }> {
  if (!/^[^\s@]+@[^\s@]+$/.test(input.user) || input.user.length > 320) {
    throw new AuthCommandError('user must be an email address');
  }
  const ttl = input.ttlSeconds ?? DEFAULT_SESSION_TTL_SECONDS;
  if (!Number.isInteger(ttl) || ttl < 1 || ttl > MAX_SESSION_TTL_SECONDS) {
    throw new AuthCommandError(`ttl must be a whole number of seconds between 1 and ${MAX_SESSION_TTL_SECONDS}`);
  }
  const orgId = input.orgId ?? null;
  if (orgId !== null) await requireOrg(ctx, orgId);
  const issuedAt = Math.floor(Date.now() / 1000);
  const expiresAt = issuedAt + ttl;
  const token = await signSessionToken(await activeSigningKey(ctx.pool, ctx.keyEncryption.keys), {
    environment: ctx.config.ENVIRONMENT,
    user: input.user,
    orgId,
    issuedAt,
    expiresAt,
  });
  return { token, expires_at: new Date(expiresAt * 1000).toISOString() };
}
