import type { FastifyRequest } from 'fastify';
import type { CryptoKey } from 'jose';
import type pg from 'pg';
import { NotificationListener } from '../db/listener.js';
import { UnauthorizedError } from '../errors.js';
import type { Logger } from '../logger.js';
import { API_KEY_CHANGED_CHANNEL, type ApiKeyState, type ApiKeyStates } from './api-key-states.js';
import type { Authenticator, Principal } from './principal.js';
import { APP_SESSION_CHANGED_CHANNEL } from './app-sessions.js';
import { MEMBERSHIP_CHANGED_CHANNEL, type SessionTokenState, type SessionTokenStates } from './session-token-states.js';
import { KID_PATTERN, SIGNING_KEYS_CHANNEL, loadVerificationKey, loadVerificationKeys } from './signing-keys.js';
import { InvalidTokenError, verifyToken, type VerifiedToken } from './tokens.js';

/** The 401 details (docs/api.md "Authentication"), one per cause. */
export const AUTH_DETAILS = {
  missing: 'Missing authorization header',
  otherHeader: 'Use Authorization: Bearer <token>',
  format: 'Invalid authorization header format',
  invalid: 'Invalid or expired token',
  revoked: 'API key has been revoked',
  expired: 'API key has expired',
} as const;

/** Our tokens are well under 2 KB; anything far longer is not one of them and is not parsed. */
const MAX_TOKEN_LENGTH = 8 * 1024;
/** How long a key's revocation state may be served from memory. Notifications usually clear it sooner. */
const KEY_STATE_TTL_MS = 1000;
/** How long a `kid` this installation does not have is refused without asking the database again. */
const UNKNOWN_KID_TTL_MS = 1000;
const VERIFIED_CACHE_SIZE = 10_000;
const USAGE_FLUSH_MS = 1000;

/** Headers clients put keys in by mistake. */
const OTHER_TOKEN_HEADERS = new Set(['x-api-key', 'api-key', 'apikey', 'x-auth-token', 'x-access-token', 'x-token', 'token', 'x-authorization', 'authentication']);
const LOOKS_LIKE_TOKEN = /^(Bearer\s+)?eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*$/i;

function tokenInAnotherHeader(headers: FastifyRequest['headers']): boolean {
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    if (OTHER_TOKEN_HEADERS.has(name)) return true;
    const values = Array.isArray(value) ? value : [value];
    if (values.some((v) => v.length < MAX_TOKEN_LENGTH && LOOKS_LIKE_TOKEN.test(v.trim()))) return true;
  }
  return false;
}

interface CachedKeyState {
  state: ApiKeyState | null;
  loadedAt: number;
}

interface CachedSessionState {
  state: SessionTokenState | null;
  loadedAt: number;
}

/**
 * When keys were last used: operational metadata, so it is written straight to
 * `service.api_key_usage` rather than appended as events (an event per request would turn every
 * read into a write to the log). Uses are coalesced per key in memory and flushed once a second
 * in one statement, off the request path.
 */
class UsageRecorder {
  private pending = new Map<string, Date>();
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly pool: pg.Pool,
    private readonly onError: (error: unknown) => void,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.flush(), USAGE_FLUSH_MS);
    this.timer.unref();
  }

  touch(keyId: string): void {
    this.pending.set(keyId, new Date());
  }

  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      if (this.pending.size === 0) return;
      const batch = this.pending;
      this.pending = new Map();
      try {
        await this.pool.query(
          `INSERT INTO service.api_key_usage (key_id, last_used_at)
           SELECT * FROM unnest($1::text[], $2::timestamptz[])
           ON CONFLICT (key_id) DO UPDATE SET last_used_at = GREATEST(api_key_usage.last_used_at, EXCLUDED.last_used_at)`,
          [[...batch.keys()], [...batch.values()]],
        );
      } catch (error) {
        this.onError(error);
      }
    });
    return this.flushing;
  }

  async stop(): Promise<void> {
    // Stryker disable next-line ConditionalExpression: `true` is equivalent (clearInterval(null) does nothing); `false` is killed (authenticator.int.test.ts: stopping leaves no timer) but falls under this line-wide disable
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.flush();
  }
}

/** What the authenticator needs from the service (the service context has all of it). */
export interface AuthenticatorContext {
  /** Signing keys, and `service.api_key_usage`. */
  pool: pg.Pool;
  /** Where the listener for key changes connects. */
  databaseUrl: string;
  log: Logger;
  /** `ENVIRONMENT` is the issuer every token must name. */
  config: { ENVIRONMENT: string };
  readModels: ApiKeyStates & SessionTokenStates;
}

/**
 * Verifies bearer tokens per request. Costs per request, when warm: one map lookup for a token
 * already verified (its signature cannot change), one for the key's revocation state (or the
 * session token's session and membership), and a timestamp for last-used. Revocation, a session
 * that ended and a membership that changed reach every api process through NOTIFY at once, and in
 * any case within KEY_STATE_TTL_MS.
 */
export class TokenAuthenticator implements Authenticator {
  private verificationKeys = new Map<string, CryptoKey>();
  private readonly unknownKids = new Map<string, number>();
  private readonly kidLookups = new Map<string, Promise<CryptoKey | undefined>>();
  private keysLoading: Promise<void> | null = null;
  private readonly verified = new Map<string, VerifiedToken>();
  private readonly keyStates = new Map<string, CachedKeyState>();
  private readonly keyStateLoads = new Map<string, Promise<ApiKeyState | null>>();
  /** By `<session id> <org id>`. */
  private readonly sessionStates = new Map<string, CachedSessionState>();
  private readonly sessionStateLoads = new Map<string, Promise<SessionTokenState | null>>();
  private readonly usage: UsageRecorder;
  private readonly listener: NotificationListener;

  constructor(private readonly ctx: AuthenticatorContext) {
    this.usage = new UsageRecorder(ctx.pool, (error) => ctx.log.warn({ err: error }, 'recording API key usage failed'));
    this.listener = new NotificationListener({
      connectionString: ctx.databaseUrl,
      channels: [API_KEY_CHANGED_CHANNEL, SIGNING_KEYS_CHANNEL, APP_SESSION_CHANGED_CHANNEL, MEMBERSHIP_CHANGED_CHANNEL],
      onNotification: (message) => {
        if (message.channel === APP_SESSION_CHANGED_CHANNEL) this.invalidateSessions((sessionId) => sessionId === message.payload);
        // Whose membership changed is in the payload; their sessions are not known by user here, so all go (they are few, and cheap to load).
        if (message.channel === MEMBERSHIP_CHANGED_CHANNEL) this.invalidateSessions(() => true);
        // Stryker disable next-line ConditionalExpression,LogicalOperator: equivalent, the other channel's payload is a kid (sk_…) and an empty payload names no key, so invalidating by either drops nothing
        if (message.channel === API_KEY_CHANGED_CHANNEL && message.payload) this.invalidateKey(message.payload);
        if (message.channel === SIGNING_KEYS_CHANNEL) void this.reloadVerificationKeys().catch(() => undefined);
      },
      onListening: (reconnected) => {
        if (!reconnected) return;
        // Whatever changed while nobody listened is read again.
        this.keyStates.clear();
        this.invalidateSessions(() => true);
        void this.reloadVerificationKeys().catch(() => undefined);
      },
      onLost: (error) => this.ctx.log.warn({ err: error }, 'auth notification listener lost; reconnecting'),
    });
  }

  async start(): Promise<void> {
    await this.reloadVerificationKeys();
    await this.listener.start();
    this.usage.start();
  }

  async stop(): Promise<void> {
    await this.listener.stop();
    await this.usage.stop();
  }

  async authenticate(request: FastifyRequest): Promise<Principal> {
    const header = request.headers.authorization;
    if (header === undefined) {
      throw new UnauthorizedError(tokenInAnotherHeader(request.headers) ? AUTH_DETAILS.otherHeader : AUTH_DETAILS.missing);
    }
    // Exactly `Bearer <token>`: the scheme as written, one space, no whitespace in the token.
    if (!header.startsWith('Bearer ')) throw new UnauthorizedError(AUTH_DETAILS.format);
    const token = header.slice('Bearer '.length);
    if (token.length > MAX_TOKEN_LENGTH) throw new UnauthorizedError(AUTH_DETAILS.invalid);
    if (token === '' || /\s/.test(token)) throw new UnauthorizedError(AUTH_DETAILS.format);
    const nowMs = Date.now();
    const verified = this.verified.get(token) ?? (await this.verify(token, nowMs));

    if (verified.kind === 'session') {
      if (verified.expiresAt * 1000 <= nowMs) throw new UnauthorizedError(AUTH_DETAILS.invalid);
      // The token lives as long as its session at the generation it names, and its membership as it was at mint.
      const state = await this.sessionState(verified.sessionId, verified.orgId, nowMs);
      if (!state || state.expiresAt.getTime() <= nowMs || state.tokenGeneration !== verified.tokenGeneration) throw new UnauthorizedError(AUTH_DETAILS.invalid);
      let role: Principal['role'] = null;
      if (verified.membership !== null) {
        if (state.membership === null || state.membership.revision !== verified.membership.revision) throw new UnauthorizedError(AUTH_DETAILS.invalid);
        role = state.membership.role;
      } else if (state.kind === 'cli') {
        // The CLI's unscoped session of an email that is no member: the contract's session token.
        role = 'admin';
      } else if (verified.orgId !== null) {
        // A cookie session's token always names the membership of its organization.
        throw new UnauthorizedError(AUTH_DETAILS.invalid);
      }
      return { kind: 'session', orgId: verified.orgId, scopes: verified.scopes, keyId: null, subject: verified.user, userId: verified.userId, role };
    }

    const state = await this.keyState(verified.keyId, nowMs);
    if (!state || state.orgId !== verified.orgId) throw new UnauthorizedError(AUTH_DETAILS.invalid);
    if (state.revokedAt !== null) throw new UnauthorizedError(AUTH_DETAILS.revoked);
    if (verified.expiresAt !== null && verified.expiresAt * 1000 <= nowMs) throw new UnauthorizedError(AUTH_DETAILS.expired);
    this.usage.touch(verified.keyId);
    return { kind: 'api_key', orgId: verified.orgId, scopes: verified.scopes, keyId: verified.keyId, subject: verified.keyId, keyName: state.name };
  }

  private async verify(token: string, nowMs: number): Promise<VerifiedToken> {
    let verified: VerifiedToken;
    try {
      verified = await verifyToken(token, (kid) => this.verificationKey(kid), this.ctx.config.ENVIRONMENT, Math.floor(nowMs / 1000));
    } catch (error) {
      if (error instanceof InvalidTokenError) throw new UnauthorizedError(AUTH_DETAILS.invalid);
      throw error;
    }
    // Stryker disable next-line ConditionalExpression,EqualityOperator,BlockStatement: the 10,000-token bound is killed by authenticator-memory.int.test.ts (npm test), kept out of the mutation run for its 8 s
    if (this.verified.size >= VERIFIED_CACHE_SIZE) {
      // Drop the oldest entry (maps iterate in insertion order).
      this.verified.delete(this.verified.keys().next().value!);
    }
    this.verified.set(token, verified);
    return verified;
  }

  private async verificationKey(kid: string): Promise<CryptoKey | undefined> {
    const known = this.verificationKeys.get(kid);
    if (known) return known;
    // A key rotated in by another process whose notification has not arrived yet: look it up.
    // Unknown kids are remembered for a while so that garbage cannot make every request query.
    if (!KID_PATTERN.test(kid)) return undefined;
    const refusedAt = this.unknownKids.get(kid);
    // Stryker disable next-line ConditionalExpression: `refusedAt !== undefined` made true is equivalent (Date.now() - undefined is NaN, less than nothing); the line's other conditions are killed by authenticator.int.test.ts but fall under this line-wide disable
    if (refusedAt !== undefined && Date.now() - refusedAt < UNKNOWN_KID_TTL_MS) return undefined;
    let lookup = this.kidLookups.get(kid);
    if (!lookup) {
      lookup = loadVerificationKey(this.ctx.pool, kid)
        .then((key) => {
          if (key) this.verificationKeys.set(kid, key);
          else {
            // Stryker disable next-line ConditionalExpression,EqualityOperator: the 10,000-kid bound is killed by authenticator-memory.int.test.ts (npm test), kept out of the mutation run for its 8 s
            if (this.unknownKids.size >= VERIFIED_CACHE_SIZE) this.unknownKids.clear();
            this.unknownKids.set(kid, Date.now());
          }
          return key ?? undefined;
        })
        .finally(() => this.kidLookups.delete(kid));
      this.kidLookups.set(kid, lookup);
    }
    return lookup;
  }

  private reloadVerificationKeys(): Promise<void> {
    this.keysLoading ??= loadVerificationKeys(this.ctx.pool)
      .then((keys) => {
        this.verificationKeys = keys;
        this.unknownKids.clear();
      })
      .finally(() => {
        this.keysLoading = null;
      });
    return this.keysLoading;
  }

  private async keyState(keyId: string, nowMs: number): Promise<ApiKeyState | null> {
    const cached = this.keyStates.get(keyId);
    if (cached && nowMs - cached.loadedAt < KEY_STATE_TTL_MS) return cached.state;
    let load = this.keyStateLoads.get(keyId);
    if (!load) {
      const startedAt = Date.now();
      load = this.ctx.readModels.findApiKeyStates([keyId])
        .then((states) => {
          const state = states.get(keyId) ?? null;
          // A notification that arrived while loading may describe a newer state: do not cache over it.
          if (this.keyStateLoads.get(keyId) === load) this.keyStates.set(keyId, { state, loadedAt: startedAt });
          return state;
        })
        .finally(() => {
          if (this.keyStateLoads.get(keyId) === load) this.keyStateLoads.delete(keyId);
        });
      this.keyStateLoads.set(keyId, load);
    }
    return load;
  }

  private async sessionState(sessionId: string, orgId: number | null, nowMs: number): Promise<SessionTokenState | null> {
    // Stryker disable next-line LogicalOperator,StringLiteral: equivalent: `orgId && ''` (one entry for every org of a session), since a session's tokens that verify name one organization at a time (a switch of organization starts the next token generation and ends the tokens of the one before); another text than '' for no organization, since no org id is text. The line's other string mutants (an empty key, one key for every session) are killed by session-tokens.int.test.ts but fall under this line-wide disable
    const key = `${sessionId} ${orgId ?? ''}`;
    const cached = this.sessionStates.get(key);
    if (cached && nowMs - cached.loadedAt < KEY_STATE_TTL_MS) return cached.state;
    let load = this.sessionStateLoads.get(key);
    if (!load) {
      const startedAt = Date.now();
      load = this.ctx.readModels
        .findSessionTokenState(sessionId, orgId)
        .then((state) => {
          // A notification that arrived while loading may describe a newer state: do not cache over it.
          if (this.sessionStateLoads.get(key) === load) {
            // Stryker disable next-line ConditionalExpression,EqualityOperator: the 10,000-entry bound is a memory guard; what it keeps is re-read within a second anyway
            if (this.sessionStates.size >= VERIFIED_CACHE_SIZE) this.sessionStates.clear();
            this.sessionStates.set(key, { state, loadedAt: startedAt });
          }
          return state;
        })
        .finally(() => {
          if (this.sessionStateLoads.get(key) === load) this.sessionStateLoads.delete(key);
        });
      this.sessionStateLoads.set(key, load);
    }
    return load;
  }

  private invalidateSessions(matches: (sessionId: string) => boolean): void {
    for (const map of [this.sessionStates, this.sessionStateLoads]) {
      for (const key of map.keys()) if (matches(key.slice(0, key.indexOf(' ')))) map.delete(key);
    }
  }

  private invalidateKey(keyId: string): void {
    this.keyStates.delete(keyId);
    this.keyStateLoads.delete(keyId);
  }
}
