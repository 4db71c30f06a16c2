import type { EventStore } from '../event-store/port.js';
import type { CheckpointWatcher } from '../projection/checkpoints.js';
import type { ReadModelQueries } from './read-model-queries.js';
import type { SessionTokenInput } from '../auth/tokens.js';

/**
 * What a command handler is handed: the narrow port of everything a command does outside its
 * decision. Never the whole service context, never a database pool: the service context has
 * every member (it builds the ids, the token signer and the credentials once at start, over
 * Postgres and the signing keys), and a handler's unit tests hand in the in-memory port of
 * `test/support/in-memory/`, so no handler needs a database to be tested.
 */
export interface CommandPort {
  /** The event log: streams are read and appended here. */
  store: EventStore;
  /** Read-your-writes: the wait for the projections that apply an append, and who they are. */
  checkpoints: Pick<CheckpointWatcher, 'waitForCheckpoint' | 'consumersOf'>;
  /** The read models' answers to what decisions need (see `read-model-queries.ts`). */
  readModels: ReadModelQueries;
  /** Surrogate ids and minted-key numbers. */
  ids: Ids;
  /** Tokens signed with the installation's active signing key. */
  tokens: Tokens;
  /** Password hashes, kept out of the log: the credentials `PasswordSet` events name. */
  credentials: Credentials;
  /** The app sessions that the CLI's session tokens belong to (operational state, not events). */
  sessions: CliSessions;
}

/** Opens an app session for the tokens `sessions mint` mints (docs/web-app.md, "Session tokens"); its id. */
export interface CliSessions {
  openCliSession(input: { userId: string | null; email: string; orgId: number | null; expiresAt: Date }): Promise<string>;
}

/** A sequence of surrogate ids, one per entity type. */
export type IdSequence = 'asset_ids' | 'location_ids' | 'tag_ids' | 'alert_rule_ids' | 'count_ids';

/** The resource types whose external_key is auto-minted (`ASSET-0001`, `LOC-0001`). */
export type MintedKeyResource = 'asset' | 'location';

/**
 * Ids drawn from counters that never go back: a surrogate id is unique per entity type,
 * 1..2147483647, never reused; a minted-key number counts up per org and resource type from 1.
 * The domain formats the numbers into keys (`external-keys.ts`).
 */
export interface Ids {
  nextId(sequence: IdSequence): Promise<number>;
  /** `count` new ids in one round trip, ascending. */
  nextIds(sequence: IdSequence, count: number): Promise<number[]>;
  /** The next number of an org's minted keys of a resource type. */
  nextKeyNumber(orgId: number, resource: MintedKeyResource): Promise<number>;
  /** A new id and the next minted-key number together (a create without a key: one round trip). */
  nextIdAndKeyNumber(sequence: IdSequence, orgId: number, resource: MintedKeyResource): Promise<{ id: number; keyNumber: number }>;
  /** A new organization id. */
  nextOrgId(): Promise<number>;
}

/** A token and the signing key that signed it (the API key's event names that key). */
export interface SignedToken {
  token: string;
  kid: string;
}

/**
 * Signing with the installation's active signing key; the issuer is the installation's
 * environment, which the signer knows. Times are Unix seconds.
 */
export interface Tokens {
  signApiKeyToken(claims: { keyId: string; orgId: number; scopes: readonly string[]; issuedAt: number; expiresAt: number | null }): Promise<SignedToken>;
  signSessionToken(claims: Omit<SessionTokenInput, 'environment'>): Promise<SignedToken>;
}

/** A password hash stored under its own id, for one user. */
export interface StoredCredential {
  credentialId: string;
  userId: string;
  passwordHash: string;
}

/**
 * Password hashes, outside the append-only log so that a replaced one can really be erased
 * (docs/design.md, "Secrets are not events"). A handler stores the new hash before it appends the
 * `PasswordSet` that names it, and forgets the user's other credentials once that is appended; a
 * credential stored for an append that then failed is never named, so never read.
 */
export interface Credentials {
  store(credential: StoredCredential): Promise<void>;
  /** The hash of the user's credential `credentialId`; null when there is none (forgotten, or never stored). */
  read(userId: string, credentialId: string): Promise<string | null>;
  /** Deletes every credential of the user but `keep` (every one when null): older passwords, and orphans of failed appends. */
  forgetAllBut(userId: string, keep: string | null): Promise<void>;
}
