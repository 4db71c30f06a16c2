import { ADMIN_SCOPE, MINTABLE_SCOPES } from '../../auth/scopes.js';
import type { Actor } from '../actor.js';
import type { Decider } from '../decider.js';
import { refuse } from '../refusal.js';
import type { ApiKeyEvent, OrgEvent } from './events.js';

/**
 * The deciders of organizations (stream `org-<id>`) and API keys (stream `apikey-<id>`): pure,
 * no I/O. What a decision needs from elsewhere (a fresh org id, whether the key's organization
 * exists, the clock, the signed token's prefix) is passed in on the command. Refusals are
 * DomainRefusals (refusal.ts) whose message is one line meant for the operator.
 */

const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

/** A name an operator gave (an organization's, a key's): 1..255 characters, no control characters. */
export function checkName(what: string, name: string): string {
  if (name.trim().length === 0) throw refuse.badRequest(`${what} must not be empty`);
  if (name.length > 255) throw refuse.badRequest(`${what} must be at most 255 characters long`);
  if (CONTROL_CHARACTERS.test(name)) throw refuse.badRequest(`${what} must not contain control characters`);
  return name;
}

// ---- organizations --------------------------------------------------------------------------

export type OrgState = { status: 'absent' } | { status: 'created'; id: number; name: string };

export interface CreateOrg {
  type: 'CreateOrg';
  orgId: number;
  name: string;
  at: string;
}

export type OrgCommand = CreateOrg;

export const orgDecider: Decider<OrgState, OrgCommand, OrgEvent> = {
  initialState: { status: 'absent' },
  evolve(_state, event) {
    return { status: 'created', id: event.data.org_id, name: event.data.name };
  },
  decide(command, state) {
    checkName('organization name', command.name);
    if (state.status !== 'absent') throw refuse.badRequest(`organization ${command.orgId} already exists`);
    return [{ type: 'OrgCreated', data: { org_id: command.orgId, name: command.name, created_at: command.at } }];
  },
};

// ---- API keys -------------------------------------------------------------------------------

export type ApiKeyState =
  | { status: 'absent' }
  | { status: 'active'; keyId: string; orgId: number }
  | { status: 'revoked'; keyId: string; orgId: number; revokedAt: string };

export interface MintApiKey {
  type: 'MintApiKey';
  keyId: string;
  orgId: number;
  name: string;
  scopes: readonly string[];
  /** Null or absent: the key never expires. */
  expiresAt?: Date | null;
  /** The clock, in milliseconds. */
  now: number;
  /** Whether the organization exists (its stream has its creation). */
  orgExists: boolean;
  /** The token signed for exactly the claims `mintClaims` accepted: its display prefix and signing key. */
  token: { prefix: string; signingKid: string };
  /** Who mints it: a user of the web application, or the CLI. */
  by: Actor;
}

export interface RevokeApiKey {
  type: 'RevokeApiKey';
  keyId: string;
  at: string;
  by: Actor;
}

export type ApiKeyCommand = MintApiKey | RevokeApiKey;

/** Scopes as given, in order, without duplicates; refuses `keys:admin` and unknown scopes. */
export function checkMintableScopes(scopes: readonly string[]): string[] {
  const unique = [...new Set(scopes.map((s) => s.trim()).filter((s) => s !== ''))];
  if (unique.length === 0) throw refuse.badRequest(`at least one scope is required (${MINTABLE_SCOPES.join(', ')})`);
  for (const scope of unique) {
    if (scope === ADMIN_SCOPE) throw refuse.badRequest(`${ADMIN_SCOPE} is reserved for session tokens and cannot be minted`);
    if (!(MINTABLE_SCOPES as readonly string[]).includes(scope)) {
      throw refuse.badRequest(`unknown scope: ${scope} (allowed: ${MINTABLE_SCOPES.join(', ')})`);
    }
  }
  return unique;
}

/** What a minted key's token says, once the mint is accepted. */
export interface MintClaims {
  name: string;
  scopes: string[];
  /** `exp` in whole seconds (the key expires at that second), or null. */
  expiresAtSeconds: number | null;
}

/**
 * The rules of a mint, in the order an operator hears of them: the name, the scopes, an expiry in
 * the future, an existing organization. The handler asks first, because the token it then signs
 * names these claims and the event names the token; `decide` applies the same rules again.
 */
export function mintClaims(command: Omit<MintApiKey, 'type' | 'token' | 'by'>): MintClaims {
  const name = checkName('key name', command.name);
  const scopes = checkMintableScopes(command.scopes);
  let expiresAtSeconds: number | null = null;
  if (command.expiresAt) {
    if (Number.isNaN(command.expiresAt.getTime())) throw refuse.badRequest('expiry is not a valid time');
    expiresAtSeconds = Math.floor(command.expiresAt.getTime() / 1000);
    if (expiresAtSeconds * 1000 <= command.now) throw refuse.badRequest('expiry must be in the future');
  }
  if (!Number.isInteger(command.orgId) || command.orgId < 1) throw refuse.badRequest(`org id must be a positive integer`);
  if (!command.orgExists) throw refuse.notFound(`organization ${command.orgId} does not exist`);
  return { name, scopes, expiresAtSeconds };
}

export const apiKeyDecider: Decider<ApiKeyState, ApiKeyCommand, ApiKeyEvent> = {
  initialState: { status: 'absent' },
  evolve(state, event) {
    switch (event.type) {
      case 'ApiKeyMinted':
        return { status: 'active', keyId: event.data.key_id, orgId: event.data.org_id };
      case 'ApiKeyRevoked':
        return { status: 'revoked', keyId: event.data.key_id, orgId: event.data.org_id, revokedAt: event.data.revoked_at };
    }
  },
  decide(command, state) {
    switch (command.type) {
      case 'MintApiKey': {
        const claims = mintClaims(command);
        if (state.status !== 'absent') throw refuse.badRequest(`API key ${command.keyId} already exists`);
        return [
          {
            type: 'ApiKeyMinted',
            data: {
              key_id: command.keyId,
              org_id: command.orgId,
              name: claims.name,
              scopes: claims.scopes,
              prefix: command.token.prefix,
              signing_kid: command.token.signingKid,
              created_at: new Date(command.now).toISOString(),
              expires_at: claims.expiresAtSeconds === null ? null : new Date(claims.expiresAtSeconds * 1000).toISOString(),
              minted_by: command.by,
            },
          },
        ];
      }
      case 'RevokeApiKey':
        if (state.status === 'absent') throw refuse.notFound(`API key ${command.keyId} does not exist`);
        // Revoking a revoked key changes nothing (the handler answers the first revocation).
        if (state.status === 'revoked') return [];
        return [{ type: 'ApiKeyRevoked', data: { key_id: command.keyId, org_id: state.orgId, revoked_at: command.at, revoked_by: command.by } }];
    }
  },
};
