import { newUlid } from '../../ulid.js';
import { WrongExpectedRevisionError, type Position } from '../../event-store/port.js';
import type { AppendedStream } from '../../projection/checkpoints.js';
import { eventsOf } from '../../event-store/catalogue.js';
import { fold } from '../decider.js';
import type { CommandPort } from '../port.js';
import { CLI_ACTOR, type Actor } from '../actor.js';
import { tokenPrefix } from '../../auth/tokens.js';
import { apiKeyDecider, checkName, mintClaims, orgDecider, type MintApiKey } from './decider.js';
import { apiKeyEvents, apiKeyStream, orgEvents, orgStream } from './events.js';


/**
 * Organization and API key commands (session tokens: ../people/session-tokens.ts). The CLI and the test helpers call these same
 * functions. Each decides (./decider.ts), appends its events and then waits until the read model
 * shows them (`project`: the checkpoint wait by default; the CLI passes its own, which also runs
 * the projections when no server does).
 */

export interface CommandOptions {
  /** How the change becomes visible (the CLI's own); default: the checkpoint wait. */
  project?: (position: Position, streams: readonly AppendedStream[]) => Promise<void>;
}

export interface KeyCommandOptions extends CommandOptions {
  /** Who does it, recorded on the event: a user of the web application; default the CLI. */
  by?: Actor;
}

/**
 * Waits until the read model shows the events of `streamId` up to `position`; when a projection
 * has set that stream aside, fails at once (a 500, or the CLI's error) instead of timing out.
 */
function projectWith(ctx: CommandPort, options: CommandOptions) {
  return (position: Position, streamId: string, events: ReadonlyArray<{ type: string }>): Promise<void> => {
    const streams = [{ streamId, projections: ctx.checkpoints.consumersOf(events.map((e) => e.type)) }];
    return options.project ? options.project(position, streams) : ctx.checkpoints.waitForCheckpoint(position, { streams });
  };
}

async function orgExists(ctx: CommandPort, orgId: number): Promise<boolean> {
  if (!Number.isInteger(orgId) || orgId < 1) return false;
  const recorded = await ctx.store.readStream(orgStream(orgId), { maxCount: 1 });
  return fold(orgDecider, eventsOf(recorded, orgEvents)).status === 'created';
}

export async function createOrg(ctx: CommandPort, name: string, options: CommandOptions = {}): Promise<{ id: number; name: string }> {
  // A refused name takes no id: the decider's rule is asked before the id is drawn.
  checkName('organization name', name);
  const id = await ctx.ids.nextOrgId();
  const events = orgDecider.decide({ type: 'CreateOrg', orgId: id, name, at: new Date().toISOString() }, orgDecider.initialState);
  const result = await ctx.store.appendToStream(orgStream(id), events, 'no_stream');
  await projectWith(ctx, options)(result.position, orgStream(id), events);
  return { id, name };
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

export async function mintApiKey(ctx: CommandPort, input: MintApiKeyInput, options: KeyCommandOptions = {}): Promise<MintedApiKey> {
  const now = Date.now();
  const id = `ak_${newUlid(now).toLowerCase()}`;
  const command: Omit<MintApiKey, 'token' | 'by'> = {
    type: 'MintApiKey',
    keyId: id,
    orgId: input.orgId,
    name: input.name ?? 'api key',
    scopes: input.scopes,
    expiresAt: input.expiresAt,
    now,
    orgExists: await orgExists(ctx, input.orgId),
  };
  // The event names the token, which is signed for the accepted claims: the rules come first.
  const claims = mintClaims(command);
  const { token, kid } = await ctx.tokens.signApiKeyToken({
    keyId: id,
    orgId: input.orgId,
    scopes: claims.scopes,
    issuedAt: Math.floor(now / 1000),
    expiresAt: claims.expiresAtSeconds,
  });
  const by = options.by ?? CLI_ACTOR;
  const events = apiKeyDecider.decide({ ...command, token: { prefix: tokenPrefix(token), signingKid: kid }, by }, apiKeyDecider.initialState);
  const result = await ctx.store.appendToStream(apiKeyStream(id), events, 'no_stream');
  await projectWith(ctx, options)(result.position, apiKeyStream(id), events);
  const [minted] = events.flatMap((e) => (e.type === 'ApiKeyMinted' ? [e.data] : []));
  return { id, token, name: claims.name, scopes: claims.scopes, expires_at: minted!.expires_at };
}

/**
 * Revokes a key. Revoking a revoked key changes nothing and answers the first revocation. With
 * `orgId` (the web application's current organization), a key of another organization is
 * refused as if it did not exist.
 */
export async function revokeApiKey(
  ctx: CommandPort,
  keyId: string,
  options: KeyCommandOptions & { orgId?: number } = {},
): Promise<{ id: string; revoked_at: string }> {
  for (;;) {
    const recorded = await ctx.store.readStream(apiKeyStream(keyId));
    let state = fold(apiKeyDecider, eventsOf(recorded, apiKeyEvents));
    if (options.orgId !== undefined && state.status !== 'absent' && state.orgId !== options.orgId) state = apiKeyDecider.initialState;
    const events = apiKeyDecider.decide({ type: 'RevokeApiKey', keyId, at: new Date().toISOString(), by: options.by ?? CLI_ACTOR }, state);
    const [revocation] = events.flatMap((e) => (e.type === 'ApiKeyRevoked' ? [e.data] : []));
    if (!revocation) {
      // Already revoked: answer the first revocation, once the read model shows it.
      const first = recorded.find((e) => e.type === 'ApiKeyRevoked')!;
      await projectWith(ctx, options)(first.position, apiKeyStream(keyId), [first]);
      return { id: keyId, revoked_at: String(first.data.revoked_at) };
    }
    try {
      const result = await ctx.store.appendToStream(apiKeyStream(keyId), events, recorded[recorded.length - 1]!.revision);
      await projectWith(ctx, options)(result.position, apiKeyStream(keyId), events);
      return { id: keyId, revoked_at: revocation.revoked_at };
    } catch (error) {
      // Someone else revoked it at the same moment: answer theirs.
      if (!(error instanceof WrongExpectedRevisionError)) throw error;
    }
  }
}
