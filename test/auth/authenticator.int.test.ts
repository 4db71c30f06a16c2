import { base64url } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { AUTH_DETAILS, TokenAuthenticator } from '../../shared/auth/authenticator.js';
import { createAuthentication } from '../../shared/auth/index.js';
import { KeyRing, generateKeyEncryptionKey } from '../../shared/auth/key-encryption.js';
import { activeSigningKey, rotateSigningKey } from '../../shared/auth/signing-keys.js';
import { signApiKeyToken } from '../../shared/auth/tokens.js';
import { loadConfig } from '../../shared/config.js';
import { ConfigError } from '../../shared/errors.js';
import { postgresCommandPorts, type ServiceContext } from '../../shared/service-context.js';
import { singleUrlTarget } from '../../shared/db/connections.js';
import { createPool, type Pool } from '../../shared/db/pool.js';
import { createOrg, mintApiKey, revokeApiKey } from '../../shared/domain/orgs-and-keys/commands.js';
import { mintSession } from '../../shared/domain/people/session-tokens.js';
import { UnauthorizedError } from '../../shared/errors.js';
import type { Principal } from '../../shared/auth/principal.js';
import { createLogger } from '../../shared/logger.js';
import { comparePositions, type Position } from '../../shared/event-store/port.js';
import { authProjection } from '../../projections/orgs-and-keys/projection.js';
import { readModelQueries } from '../../projections/read-model-queries.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import { closeContext, openContextOn } from '../../services/open-context.js';
import { capturedLog } from '../support/logs.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { bearer, foreignSigningKey, freezeClock, nowSeconds, outcome, queriesLike, request, until } from './authenticator-helpers.js';

// The authenticator called directly (no HTTP): every 401 cause of docs/api.md "Authentication" with
// its detail, and the caches that keep a warm request off the database without letting a
// revocation or a rotation wait. Auth code runs only inside the tests (see test/mutation/modules.ts).

let db: TestDatabase;
let base: ServiceContext;
let runtime: ProjectorRuntime;
const extraPools: Pool[] = [];

beforeAll(async () => {
  db = await createTestDatabase('auth_authenticator');
  const config = loadConfig({ LOG_LEVEL: 'silent' });
  const pool = createPool(db.url, { max: 10, searchPath: 'read_model' });
  base = await openContextOn(pool, config, singleUrlTarget(db.url), { keys: null, source: { kind: 'variable' } }, createLogger('silent'));
  runtime = new ProjectorRuntime({ store: base.store, pool, projections: [authProjection], log: base.log });
});

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

afterAll(async () => {
  await Promise.all(extraPools.map((pool) => pool.end().catch(() => undefined)));
  if (base) await closeContext(base);
  await db?.drop();
});

/**
 * What the CLI does when no projector runs: catch up until the read model holds `position`. Its
 * log horizon is cluster-wide, so a transaction of another test file can hold it back a moment.
 */
const project = {
  project: async (position: Position) => {
    while (comparePositions((await runtime.catchUp()).position, position) < 0) await new Promise((resolve) => setTimeout(resolve, 10));
  },
};

let fileKeys: KeyRing | null = null;
function keysOfFile(): KeyRing {
  fileKeys ??= new KeyRing([generateKeyEncryptionKey()]);
  return fileKeys;
}

function ctxOf(overrides: Partial<ServiceContext> = {}): ServiceContext {
  return withPorts({ ...base, keyEncryption: { keys: keysOfFile(), source: { kind: 'variable' } }, ...overrides });
}

/** A context whose ids and token signer use its own pool, keys and environment (as opening one builds them). */
function withPorts(ctx: ServiceContext): ServiceContext {
  return { ...ctx, ...postgresCommandPorts(ctx.pool, ctx.keyEncryption, ctx.config) };
}

async function org(ctx: ServiceContext): Promise<number> {
  return (await createOrg(ctx, `org ${Math.random().toString(36).slice(2)}`, project)).id;
}

async function started(ctx: ServiceContext): Promise<TokenAuthenticator> {
  const authenticator = new TokenAuthenticator(ctx);
  await authenticator.start();
  running.push(authenticator);
  return authenticator;
}
const running: TokenAuthenticator[] = [];
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (running.length > 0) await running.pop()!.stop().catch(() => undefined);
  while (cleanups.length > 0) await cleanups.pop()!();
});

/** A pool of its own (a process's), so a test can end it under a running authenticator. */
function ownPool(): Pool {
  const pool = createPool(db.url, { max: 4, searchPath: 'read_model' });
  extraPools.push(pool);
  return pool;
}

describe('the authenticator: who is calling', () => {
  it("an API key stands for its key, org and scopes; the CLI's session of an email that is no user for that email, an admin, with or without an org", async () => {
    const ctx = ctxOf();
    const orgId = await org(ctx);
    const key = await mintApiKey(ctx, { orgId, scopes: ['assets:read', 'tracking:read'] }, project);
    const withOrg = await mintSession(ctx, { user: 'ada@example.com', orgId });
    const withoutOrg = await mintSession(ctx, { user: 'bob@example.com' });
    const auth = await started(ctx);
    expect(await outcome(auth, bearer(key.token))).toEqual({ kind: 'api_key', orgId, scopes: ['assets:read', 'tracking:read'], keyId: key.id, subject: key.id, keyName: 'api key' });
    expect(await outcome(auth, bearer(withOrg.token))).toEqual({ kind: 'session', orgId, scopes: ['keys:admin'], keyId: null, subject: 'ada@example.com', userId: null, role: 'admin' });
    expect(await outcome(auth, bearer(withoutOrg.token))).toEqual({ kind: 'session', orgId: null, scopes: ['keys:admin'], keyId: null, subject: 'bob@example.com', userId: null, role: 'admin' });
    // Asked again (from the verified-token cache), the same answers.
    expect(await outcome(auth, bearer(key.token))).toMatchObject({ kind: 'api_key', keyId: key.id });
    expect(await outcome(auth, bearer(withOrg.token))).toMatchObject({ kind: 'session', subject: 'ada@example.com' });
  });

  it('the details are the contract\'s (docs/api.md "Authentication")', () => {
    expect(AUTH_DETAILS).toEqual({
      missing: 'Missing authorization header',
      otherHeader: 'Use Authorization: Bearer <token>',
      format: 'Invalid authorization header format',
      invalid: 'Invalid or expired token',
      revoked: 'API key has been revoked',
      expired: 'API key has expired',
    });
  });
});

describe('the authenticator: the Authorization header', () => {
  const eyJ = 'eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl';

  it('no Authorization header: "missing", or "use Authorization: Bearer" when a token is elsewhere', async () => {
    const auth = await started(ctxOf());
    const other = AUTH_DETAILS.otherHeader;
    const missing = AUTH_DETAILS.missing;
    const cases: Array<[Record<string, string | string[] | undefined>, string]> = [
      [{}, missing],
      [{ 'x-unrelated': 'hello', accept: 'application/json' }, missing],
      // A header that is declared but absent is no header.
      [{ 'x-api-key': undefined }, missing],
      // The names clients put keys under, whatever the value.
      ...['x-api-key', 'api-key', 'apikey', 'x-auth-token', 'x-access-token', 'x-token', 'token', 'x-authorization', 'authentication'].map(
        (name): [Record<string, string>, string] => [{ [name]: 'anything' }, other],
      ),
      // A JWT-looking value in any header, bare or as "Bearer …", in any case and spacing.
      [{ 'x-custom': eyJ }, other],
      [{ 'x-custom': `Bearer ${eyJ}` }, other],
      [{ 'x-custom': `bearer   ${eyJ}` }, other],
      [{ 'x-custom': `Bearer\t${eyJ}` }, other],
      [{ 'x-custom': `  ${eyJ}  ` }, other],
      [{ 'x-custom': 'EYJa.b.c' }, other],
      [{ 'x-custom': 'eyJ..' }, other],
      [{ 'x-custom': 'eyJa-_.b-_.c-_' }, other],
      [{ 'x-custom': ['first', eyJ] }, other],
      // Not one: text around it, a segment more or less, other characters, another prefix.
      [{ 'x-custom': `see ${eyJ}` }, missing],
      [{ 'x-custom': `${eyJ} trailing` }, missing],
      [{ 'x-custom': 'eyJa.b' }, missing],
      [{ 'x-custom': 'eyJa.b.c.d' }, missing],
      [{ 'x-custom': 'eyJa!.b.c' }, missing],
      [{ 'x-custom': 'eyJa.b!.c' }, missing],
      [{ 'x-custom': 'eyJa.b.c!' }, missing],
      [{ 'x-custom': 'abc.def.ghi' }, missing],
      [{ 'x-custom': 'eyJ.eyJ' }, missing],
      [{ 'x-custom': `Basic ${eyJ}` }, missing],
      [{ 'x-custom': `Bearer${eyJ}` }, missing],
      [{ 'x-custom': ['first', 'second'] }, missing],
      // Values from 8 KiB on are not looked at.
      [{ 'x-custom': `eyJ${'a'.repeat(8 * 1024 - 8)}.b.c` }, other],
      [{ 'x-custom': `eyJ${'a'.repeat(8 * 1024 - 7)}.b.c` }, missing],
    ];
    for (const [headers, detail] of cases) expect([headers, await outcome(auth, request(headers))]).toEqual([headers, detail]);
  });

  it('exactly "Bearer <token>": anything else is a format error; an over-long token is invalid', async () => {
    const ctx = ctxOf();
    const key = await mintApiKey(ctx, { orgId: await org(ctx), scopes: ['assets:read'] }, project);
    const auth = await started(ctx);
    const format = AUTH_DETAILS.format;
    const cases: Array<[string, string]> = [
      ['', format],
      ['Bearer', format],
      ['Bearer ', format],
      [`Bearer  ${key.token}`, format],
      [`bearer ${key.token}`, format],
      [`Bearer\t${key.token}`, format],
      [`Basic ${key.token}`, format],
      [key.token, format],
      [`Bearer ${key.token} extra`, format],
      [`Bearer ${key.token}\n`, format],
      [`Bearer ${key.token}\u00a0`, format],
      // Length is checked first: 8 KiB with a space is a format error, a byte more is invalid.
      [`Bearer ${'a'.repeat(8 * 1024 - 1)} `, format],
      [`Bearer ${'a'.repeat(8 * 1024)} `, AUTH_DETAILS.invalid],
      [`Bearer ${'a'.repeat(100 * 1024)}`, AUTH_DETAILS.invalid],
      [`Bearer ${key.token}${'A'.repeat(8 * 1024)}`, AUTH_DETAILS.invalid],
    ];
    for (const [authorization, detail] of cases) expect([authorization.slice(0, 40), await outcome(auth, request({ authorization }))]).toEqual([authorization.slice(0, 40), detail]);
    expect(await outcome(auth, bearer(key.token))).toMatchObject({ keyId: key.id });
  });
});

describe('the authenticator: tokens', () => {
  it('a token that does not verify is "Invalid or expired token"', async () => {
    const ctx = ctxOf();
    const orgId = await org(ctx);
    const key = await mintApiKey(ctx, { orgId, scopes: ['assets:read'] }, project);
    const signing = await activeSigningKey(ctx.pool, ctx.keyEncryption.keys);
    const stranger = await foreignSigningKey();
    const auth = await started(ctx);
    const claims = { keyId: key.id, orgId, scopes: ['assets:read'], issuedAt: nowSeconds(), expiresAt: null };
    const tokens = [
      'garbage',
      'a.b.c',
      await signApiKeyToken(signing, { ...claims, environment: 'production' }),
      await signApiKeyToken(stranger, { ...claims, environment: 'development' }),
      await signApiKeyToken({ kid: signing.kid, privateKey: stranger.privateKey }, { ...claims, environment: 'development' }),
    ];
    for (const token of tokens) expect(await outcome(auth, bearer(token))).toBe(AUTH_DETAILS.invalid);
    expect(await outcome(auth, bearer(await signApiKeyToken(signing, { ...claims, environment: 'development' })))).toMatchObject({ keyId: key.id });
  });

  it('a token issued in the future (beyond the clock skew) is invalid', async () => {
    const ctx = ctxOf();
    const orgId = await org(ctx);
    const key = await mintApiKey(ctx, { orgId, scopes: ['assets:read'] }, project);
    const signing = await activeSigningKey(ctx.pool, ctx.keyEncryption.keys);
    const auth = await started(ctx);
    const claims = { environment: 'development', keyId: key.id, orgId, scopes: ['assets:read'], expiresAt: null };
    expect(await outcome(auth, bearer(await signApiKeyToken(signing, { ...claims, issuedAt: nowSeconds() + 3600 })))).toBe(AUTH_DETAILS.invalid);
    expect(await outcome(auth, bearer(await signApiKeyToken(signing, { ...claims, issuedAt: nowSeconds() })))).toMatchObject({ keyId: key.id });
  });

  it('a session is refused from its exp on, also when already verified', async () => {
    const ctx = ctxOf();
    const clock = freezeClock(Math.floor(Date.now() / 1000) * 1000);
    const session = await mintSession(ctx, { user: 'ada@example.com', ttlSeconds: 60 });
    const exp = Date.parse(session.expires_at);
    const auth = await started(ctx);
    expect(await outcome(auth, bearer(session.token))).toMatchObject({ kind: 'session' });
    clock.set(exp - 1);
    expect(await outcome(auth, bearer(session.token))).toMatchObject({ kind: 'session' });
    clock.set(exp);
    expect(await outcome(auth, bearer(session.token))).toBe(AUTH_DETAILS.invalid);
    // A fresh authenticator (nothing cached) says the same.
    expect(await outcome(await started(ctx), bearer(session.token))).toBe(AUTH_DETAILS.invalid);
  });

  it('an API key: unknown to the read model or of another org is invalid; revoked beats expired; expired from its exp on', async () => {
    const ctx = ctxOf();
    const orgId = await org(ctx);
    const otherOrg = await org(ctx);
    const signing = await activeSigningKey(ctx.pool, ctx.keyEncryption.keys);
    const clock = freezeClock(Math.floor(Date.now() / 1000) * 1000);
    const expiresAt = new Date(clock.now + 5000);
    const dated = await mintApiKey(ctx, { orgId, scopes: ['assets:read'], expiresAt }, project);
    const forever = await mintApiKey(ctx, { orgId, scopes: ['assets:read'] }, project);
    const doomed = await mintApiKey(ctx, { orgId, scopes: ['assets:read'], expiresAt }, project);
    await revokeApiKey(ctx, doomed.id, project);
    const claims = { environment: 'development', scopes: ['assets:read'], issuedAt: nowSeconds(), expiresAt: null };
    const unknown = await signApiKeyToken(signing, { ...claims, keyId: 'ak_01jdx4a8q0n7yv5k3m2b9c6d1e', orgId });
    const wrongOrg = await signApiKeyToken(signing, { ...claims, keyId: forever.id, orgId: otherOrg });

    const auth = await started(ctx);
    expect(await outcome(auth, bearer(unknown))).toBe(AUTH_DETAILS.invalid);
    expect(await outcome(auth, bearer(wrongOrg))).toBe(AUTH_DETAILS.invalid);
    expect(await outcome(auth, bearer(doomed.token))).toBe(AUTH_DETAILS.revoked);
    expect(await outcome(auth, bearer(dated.token))).toMatchObject({ keyId: dated.id });
    clock.set(expiresAt.getTime() - 1);
    expect(await outcome(auth, bearer(dated.token))).toMatchObject({ keyId: dated.id });
    clock.set(expiresAt.getTime());
    expect(await outcome(auth, bearer(dated.token))).toBe(AUTH_DETAILS.expired);
    expect(await outcome(auth, bearer(doomed.token))).toBe(AUTH_DETAILS.revoked);
    clock.set(Date.UTC(2200, 0, 1));
    expect(await outcome(auth, bearer(forever.token))).toMatchObject({ keyId: forever.id });
    expect(await outcome(auth, bearer(dated.token))).toBe(AUTH_DETAILS.expired);
  });

  it('a database failure is not an invalid token; what needs no database still answers', async () => {
    const pool = ownPool();
    const ctx = ctxOf({ pool, readModels: readModelQueries(pool) });
    const orgId = await org(ctx);
    const key = await mintApiKey(ctx, { orgId, scopes: ['assets:read'] }, project);
    const session = await mintSession(ctx, { user: 'ada@example.com', orgId });
    const stranger = await foreignSigningKey();
    const strangerToken = (kid: string) =>
      signApiKeyToken({ kid, privateKey: stranger.privateKey }, { environment: 'development', keyId: key.id, orgId, scopes: [], issuedAt: nowSeconds(), expiresAt: null });
    const auth = await started(ctx);
    await pool.end();
    // A kid of our shape must be looked up, and that fails: an error, not a 401.
    await expect(auth.authenticate(bearer(await strangerToken(stranger.kid)))).rejects.not.toBeInstanceOf(UnauthorizedError);
    await expect(auth.authenticate(bearer(key.token))).rejects.not.toBeInstanceOf(UnauthorizedError);
    // A kid not of our shape is never looked up.
    expect(await outcome(auth, bearer(await strangerToken('not-a-kid')))).toBe(AUTH_DETAILS.invalid);
    expect(await outcome(auth, bearer(await strangerToken(`${stranger.kid}x`)))).toBe(AUTH_DETAILS.invalid);
    expect(await outcome(auth, bearer(await strangerToken(`x${stranger.kid}`)))).toBe(AUTH_DETAILS.invalid);
    // A session token's session must be looked up too: an error, not a 401.
    await expect(auth.authenticate(bearer(session.token))).rejects.not.toBeInstanceOf(UnauthorizedError);
  });
});

describe('the authenticator: signing keys it does not have yet', () => {
  it('a kid of another process is looked up once, then kept; an unknown kid is refused without asking again for a second', async () => {
    const pool = ownPool();
    const ctx = ctxOf({ pool });
    const orgId = await org(ctx);
    const key = await mintApiKey(ctx, { orgId, scopes: ['assets:read'] }, project);
    const auth = await started(ctx);
    const lookups = queriesLike(pool, /FROM service\.signing_keys WHERE kid = \$1/);
    const clock = freezeClock();
    const newcomer = await foreignSigningKey();
    const token = await signApiKeyToken(newcomer, { environment: 'development', keyId: key.id, orgId, scopes: ['assets:read'], issuedAt: nowSeconds(), expiresAt: null });

    expect(await outcome(auth, bearer(token))).toBe(AUTH_DETAILS.invalid);
    expect(lookups()).toBe(1);
    // Another unknown kid in between is remembered beside it, not instead of it.
    const other = `${base64url.encode(JSON.stringify({ alg: 'EdDSA', kid: 'sk_00000000000000000000000000' }))}.${base64url.encode('{}')}.AAAA`;
    expect(await outcome(auth, bearer(other))).toBe(AUTH_DETAILS.invalid);
    expect(lookups()).toBe(2);
    expect(await outcome(auth, bearer(token))).toBe(AUTH_DETAILS.invalid);
    clock.set(clock.now + 999);
    expect(await outcome(auth, bearer(token))).toBe(AUTH_DETAILS.invalid);
    expect(lookups()).toBe(2);

    // Stored without a notification (as by a process whose NOTIFY has not arrived yet).
    await newcomer.insert(pool);
    clock.set(clock.now + 1000);
    // Concurrent requests share one lookup; the key is then kept.
    const answers = await Promise.all(Array.from({ length: 8 }, () => outcome(auth, bearer(token))));
    expect(answers.every((answer) => typeof answer === 'object' && answer.keyId === key.id)).toBe(true);
    expect(lookups()).toBe(3);
    expect(await outcome(auth, bearer(token))).toMatchObject({ keyId: key.id });
    expect(lookups()).toBe(3);
    // Another token of that key (not a verified one served from memory) needs no lookup either.
    const another = await signApiKeyToken(newcomer, { environment: 'development', keyId: key.id, orgId, scopes: [], issuedAt: nowSeconds(), expiresAt: null });
    expect(await outcome(auth, bearer(another))).toMatchObject({ keyId: key.id, scopes: [] });
    expect(lookups()).toBe(3);
  });

  it('a start reads the signing keys once', async () => {
    const ctx = ctxOf();
    const keyReloads = queriesLike(ctx.pool, /^SELECT kid, public_jwk FROM service\.signing_keys$/);
    await started(ctx);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(keyReloads()).toBe(1);
  });

  it('a rotation notified by another process is honoured at once, even for a kid just refused', async () => {
    const ctx = ctxOf();
    const orgId = await org(ctx);
    const key = await mintApiKey(ctx, { orgId, scopes: ['assets:read'] }, project);
    const auth = await started(ctx);
    // The clock stands still: nothing here may wait for a cache to expire.
    freezeClock();
    const newcomer = await foreignSigningKey();
    const token = await signApiKeyToken(newcomer, { environment: 'development', keyId: key.id, orgId, scopes: ['assets:read'], issuedAt: nowSeconds(), expiresAt: null });
    expect(await outcome(auth, bearer(token))).toBe(AUTH_DETAILS.invalid);
    await newcomer.insert(ctx.pool);
    await ctx.pool.query(`SELECT pg_notify('signing_keys_changed', $1)`, [newcomer.kid]);
    expect(await until(async () => typeof (await outcome(auth, bearer(token))) === 'object')).toBe(true);

    // A real rotation: tokens of the new key verify without a lookup (the notification loaded it).
    const lookups = queriesLike(ctx.pool, /FROM service\.signing_keys WHERE kid = \$1/);
    const rotation = await rotateSigningKey(ctx.pool, ctx.keyEncryption.keys);
    const rotated = await signApiKeyToken(await activeSigningKey(ctx.pool, ctx.keyEncryption.keys), {
      environment: 'development',
      keyId: key.id,
      orgId,
      scopes: ['assets:read'],
      issuedAt: nowSeconds(),
      expiresAt: null,
    });
    expect(rotation.kid).not.toBe(newcomer.kid);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await outcome(auth, bearer(rotated))).toMatchObject({ keyId: key.id });
    expect(lookups()).toBe(0);
  });
});

describe('the authenticator: revocation', () => {
  it('reaches a running authenticator by notification at once; without one, a cached state lasts under a second', async () => {
    const ctx = ctxOf();
    const orgId = await org(ctx);
    const notified = await mintApiKey(ctx, { orgId, scopes: ['assets:read'] }, project);
    const silent = await mintApiKey(ctx, { orgId, scopes: ['assets:read'] }, project);
    const auth = await started(ctx);
    const keyReloads = queriesLike(ctx.pool, /^SELECT kid, public_jwk FROM service\.signing_keys$/);
    const clock = freezeClock();
    expect(await outcome(auth, bearer(notified.token))).toMatchObject({ keyId: notified.id });
    expect(await outcome(auth, bearer(silent.token))).toMatchObject({ keyId: silent.id });

    await revokeApiKey(ctx, notified.id, project);
    expect(await until(async () => (await outcome(auth, bearer(notified.token))) === AUTH_DETAILS.revoked)).toBe(true);
    // A key's notification is about that key only: the signing keys are not read again.
    expect(keyReloads()).toBe(0);

    // Revoked in the read model without the projection's NOTIFY (a lost notification).
    await ctx.pool.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [silent.id]);
    await new Promise((resolve) => setTimeout(resolve, 100));
    clock.set(clock.now + 999);
    expect(await outcome(auth, bearer(silent.token))).toMatchObject({ keyId: silent.id });
    clock.set(clock.now + 1000);
    expect(await outcome(auth, bearer(silent.token))).toBe(AUTH_DETAILS.revoked);
  });

  it('concurrent requests of one key share one read; the state is then served from memory', async () => {
    const ctx = ctxOf();
    const key = await mintApiKey(ctx, { orgId: await org(ctx), scopes: ['assets:read'] }, project);
    const auth = await started(ctx);
    const reads = vi.spyOn(ctx.readModels, 'findApiKeyStates');
    freezeClock();
    const answers = await Promise.all(Array.from({ length: 10 }, () => outcome(auth, bearer(key.token))));
    expect(answers.every((answer) => typeof answer === 'object' && answer.keyId === key.id)).toBe(true);
    expect(reads).toHaveBeenCalledTimes(1);
    for (let i = 0; i < 3; i++) await auth.authenticate(bearer(key.token));
    expect(reads).toHaveBeenCalledTimes(1);
  });

  it('a revocation notified while the state is being read is not overwritten by the older state read', async () => {
    const ctx = ctxOf();
    const key = await mintApiKey(ctx, { orgId: await org(ctx), scopes: ['assets:read'] }, project);
    const auth = await started(ctx);
    freezeClock();
    const real = ctx.readModels.findApiKeyStates.bind(ctx.readModels);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let read!: () => void;
    const readDone = new Promise<void>((resolve) => (read = resolve));
    const reads = vi.spyOn(ctx.readModels, 'findApiKeyStates').mockImplementationOnce(async (ids) => {
      // The real read, answered only after the revocation below has been notified.
      const states = await real(ids);
      read();
      await gate;
      return states;
    });
    const first = outcome(auth, bearer(key.token));
    await readDone;
    await revokeApiKey(ctx, key.id, project);
    // Give the notification time to arrive, then let the older read finish.
    await new Promise((resolve) => setTimeout(resolve, 300));
    release();
    // The request in flight answers what it read; the next one does not trust that.
    expect(await first).toMatchObject({ keyId: key.id });
    expect(await outcome(auth, bearer(key.token))).toBe(AUTH_DETAILS.revoked);
    expect(reads).toHaveBeenCalledTimes(2);
    expect(await outcome(auth, bearer(key.token))).toBe(AUTH_DETAILS.revoked);
    expect(reads).toHaveBeenCalledTimes(2);
  });

  it('a read started after the notification, while the older read is still out, is the one kept', async () => {
    const ctx = ctxOf();
    const key = await mintApiKey(ctx, { orgId: await org(ctx), scopes: ['assets:read'] }, project);
    const auth = await started(ctx);
    freezeClock();
    const real = ctx.readModels.findApiKeyStates.bind(ctx.readModels);
    const gated = () => {
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let read!: () => void;
      const done = new Promise<void>((resolve) => (read = resolve));
      const implementation = async (ids: readonly string[]) => {
        const states = await real(ids);
        read();
        await gate;
        return states;
      };
      return { release, done, implementation };
    };
    const older = gated();
    const newer = gated();
    const reads = vi.spyOn(ctx.readModels, 'findApiKeyStates').mockImplementationOnce(older.implementation).mockImplementationOnce(newer.implementation);
    const first = outcome(auth, bearer(key.token));
    await older.done;
    await revokeApiKey(ctx, key.id, project);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const second = outcome(auth, bearer(key.token));
    await newer.done;
    older.release();
    expect(await first).toMatchObject({ keyId: key.id });
    newer.release();
    expect(await second).toBe(AUTH_DETAILS.revoked);
    // The newer read's state is kept: nothing more is read.
    expect(await outcome(auth, bearer(key.token))).toBe(AUTH_DETAILS.revoked);
    expect(reads).toHaveBeenCalledTimes(2);
  });

  it('after the listening connection is lost and back, key states are read again', async () => {
    const { log, lines } = capturedLog('warn');
    const ctx = ctxOf({ log });
    const key = await mintApiKey(ctx, { orgId: await org(ctx), scopes: ['assets:read'] }, project);
    const auth = await started(ctx);
    freezeClock();
    expect(await outcome(auth, bearer(key.token))).toMatchObject({ keyId: key.id });
    const listeners = await ctx.pool.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`,
    );
    expect(listeners.rows.length).toBeGreaterThan(0);
    // Revoked while nobody listens: the notification is lost.
    await ctx.pool.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [key.id]);
    for (const { pid } of listeners.rows) await ctx.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    expect(await until(async () => (await outcome(auth, bearer(key.token))) === AUTH_DETAILS.revoked, 5000)).toBe(true);
    const lost = lines().find((line) => line.msg === 'auth notification listener lost; reconnecting');
    expect(lost).toMatchObject({ level: 40, err: { message: expect.any(String) } });
  });
});

describe('the authenticator: last use', () => {
  async function lastUsed(pool: Pool, keyId: string): Promise<Date | null> {
    const result = await pool.query<{ last_used_at: Date }>('SELECT last_used_at FROM service.api_key_usage WHERE key_id = $1', [keyId]);
    return result.rows[0]?.last_used_at ?? null;
  }

  it('is written in the background, one statement for many uses, and never moves back', async () => {
    const ctx = ctxOf();
    const orgId = await org(ctx);
    const a = await mintApiKey(ctx, { orgId, scopes: ['assets:read'] }, project);
    const b = await mintApiKey(ctx, { orgId, scopes: ['assets:read'] }, project);
    const later = new Date('2100-01-01T00:00:00Z');
    await ctx.pool.query('INSERT INTO service.api_key_usage (key_id, last_used_at) VALUES ($1, $2)', [b.id, later]);
    const auth = await started(ctx);
    const writes = queriesLike(ctx.pool, /INSERT INTO service\.api_key_usage/);
    const session = await mintSession(ctx, { user: 'ada@example.com', orgId });
    const before = Date.now();
    for (let i = 0; i < 5; i++) {
      await auth.authenticate(bearer(a.token));
      await auth.authenticate(bearer(b.token));
      await auth.authenticate(bearer(session.token));
    }
    expect(await lastUsed(ctx.pool, a.id)).toBeNull();
    expect(await until(async () => (await lastUsed(ctx.pool, a.id)) !== null, 2500)).toBe(true);
    expect(writes()).toBe(1);
    expect((await lastUsed(ctx.pool, a.id))!.getTime()).toBeGreaterThanOrEqual(before - 5);
    expect((await lastUsed(ctx.pool, a.id))!.getTime()).toBeLessThanOrEqual(Date.now());
    expect(await lastUsed(ctx.pool, b.id)).toEqual(later);
    // Nothing used since: stopping writes nothing more.
    await auth.stop();
    expect(writes()).toBe(1);
  });

  it('stopping writes what is pending; a failed write is logged, not thrown', async () => {
    const { log, lines } = capturedLog('warn');
    const pool = ownPool();
    const ctx = ctxOf({ pool, log });
    const orgId = await org(ctx);
    const key = await mintApiKey(ctx, { orgId, scopes: ['assets:read'] }, project);
    const auth = await started(ctx);
    await auth.authenticate(bearer(key.token));
    await auth.stop();
    expect(await lastUsed(base.pool, key.id)).not.toBeNull();

    const failing = await started(ctx);
    await failing.authenticate(bearer(key.token));
    await pool.end();
    await failing.stop();
    const failed = lines().find((line) => line.msg === 'recording API key usage failed');
    expect(failed).toMatchObject({ level: 40, err: { message: 'Cannot use a pool after calling end on the pool' } });
  });
});

describe('createAuthentication', () => {
  it('makes sure a signing key exists unless told not to, and meters with the configured bucket', async () => {
    // A database of its own: this one starts without a signing key.
    const own = await createTestDatabase('auth_create_authentication');
    const pool = createPool(own.url, { max: 4, searchPath: 'read_model' });
    cleanups.push(async () => {
      await pool.end();
      await own.drop();
    });
    const config = loadConfig({ LOG_LEVEL: 'silent', RATE_LIMIT_PER_MINUTE: '60', RATE_LIMIT_BURST: '3' });
    const withoutKeys = withPorts({ ...base, pool, readModels: readModelQueries(pool), config, keyEncryption: { keys: null, source: { kind: 'variable' } } });

    // The ingest listener only verifies: it starts without the key-encryption key.
    const verifying = await createAuthentication(withoutKeys, { ensureSigningKey: false });
    await verifying.stop();
    expect((await pool.query('SELECT 1 FROM service.signing_keys')).rows).toEqual([]);
    await expect(createAuthentication(withoutKeys)).rejects.toBeInstanceOf(ConfigError);

    const ctx = withPorts({ ...withoutKeys, keyEncryption: { keys: new KeyRing([generateKeyEncryptionKey()]), source: { kind: 'variable' as const } } });
    const authentication = await createAuthentication(ctx);
    try {
      expect((await pool.query('SELECT 1 FROM service.signing_keys')).rows).toHaveLength(1);
      const signing = await activeSigningKey(pool, ctx.keyEncryption.keys);
      const session = await mintSession(ctx, { user: 'ada@example.com' });
      expect(await authentication.authenticator.authenticate(bearer(session.token))).toMatchObject({ kind: 'session' });
      const apiKey: Principal = { kind: 'api_key', orgId: 1, scopes: [], keyId: 'ak_1', subject: 'ak_1' };
      expect(signing.kid).toMatch(/^sk_/);
      expect(authentication.rateLimiter.take(apiKey)).toEqual({ limit: 3, remaining: 2, resetSeconds: 1 });
      expect(authentication.rateLimiter.unmetered!()).toEqual({ limit: 3, remaining: 3, resetSeconds: 0 });
    } finally {
      await authentication.stop();
    }
  });

  it('stopping leaves nothing running: no timer, no listening connection, and the pending last use written', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const ctx = ctxOf();
    const key = await mintApiKey(ctx, { orgId: await org(ctx), scopes: ['assets:read'] }, project);
    const listening = async () =>
      (await ctx.pool.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`)).rows.length;
    const before = await listening();
    const authentication = await createAuthentication(ctx, { ensureSigningKey: false });
    expect(vi.getTimerCount()).toBeGreaterThan(0);
    expect(await listening()).toBe(before + 1);
    await authentication.authenticator.authenticate(bearer(key.token));
    await authentication.stop();
    expect(vi.getTimerCount()).toBe(0);
    expect((await ctx.pool.query('SELECT 1 FROM service.api_key_usage WHERE key_id = $1', [key.id])).rows).toHaveLength(1);
    expect(await until(async () => (await listening()) === before)).toBe(true);
  });
});
