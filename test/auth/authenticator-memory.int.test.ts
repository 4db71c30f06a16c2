import { base64url } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { AUTH_DETAILS, TokenAuthenticator } from '../../shared/auth/authenticator.js';
import { signSessionToken } from '../../shared/auth/tokens.js';
import { openCliSession } from '../../shared/auth/app-sessions.js';
import { loadConfig } from '../../shared/config.js';
import type { ServiceContext } from '../../shared/service-context.js';
import { singleUrlTarget } from '../../shared/db/connections.js';
import { createPool } from '../../shared/db/pool.js';
import { createLogger } from '../../shared/logger.js';
import { closeContext, openContextOn } from '../../services/open-context.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { bearer, foreignSigningKey, freezeClock, nowSeconds, outcome, queriesLike, until } from './authenticator-helpers.js';

// The authenticator's caches stay bounded: 10,000 unknown kids and 10,000 verified tokens at most.
// Tens of thousands of requests each (seconds): apart from authenticator.int.test.ts, and left out
// of the mutation run (test/mutation/modules.ts), where every mutant they cover would pay for them.

let db: TestDatabase;
let ctx: ServiceContext;
const running: TokenAuthenticator[] = [];

beforeAll(async () => {
  db = await createTestDatabase('auth_authenticator_memory');
  const pool = createPool(db.url, { max: 10, searchPath: 'read_model' });
  ctx = await openContextOn(pool, loadConfig({ LOG_LEVEL: 'silent' }), singleUrlTarget(db.url), { keys: null, source: { kind: 'variable' } }, createLogger('silent'));
});

afterEach(async () => {
  vi.useRealTimers();
  vi.restoreAllMocks();
  while (running.length > 0) await running.pop()!.stop();
});

afterAll(async () => {
  if (ctx) await closeContext(ctx);
  await db?.drop();
});

function ctxOf(): ServiceContext {
  return ctx;
}

async function started(context: ServiceContext): Promise<TokenAuthenticator> {
  const authenticator = new TokenAuthenticator(context);
  await authenticator.start();
  running.push(authenticator);
  return authenticator;
}

describe('the authenticator: bounded memory', () => {
  /** A token whose header names `kid`: refused as soon as the kid is looked up, so no signature is needed. */
  const withKid = (kid: string) => `${base64url.encode(JSON.stringify({ alg: 'EdDSA', kid }))}.${base64url.encode('{}')}.AAAA`;
  const kidOf = (i: number) => `sk_${i.toString(32).padStart(26, '0')}`;

  it('unknown kids are remembered each on its own, up to 10,000, then forgotten all at once', async () => {
    const ctx = ctxOf();
    const auth = await started(ctx);
    const lookups = queriesLike(ctx.pool, /FROM service\.signing_keys WHERE kid = \$1/);
    freezeClock();
    const refuse = async (kid: string) => expect(await outcome(auth, bearer(withKid(kid)))).toBe(AUTH_DETAILS.invalid);
    await refuse(kidOf(0));
    await refuse(kidOf(1));
    await refuse(kidOf(0));
    await refuse(kidOf(1));
    expect(lookups()).toBe(2);
    for (let batch = 2; batch < 10_000; batch += 100) {
      await Promise.all(Array.from({ length: Math.min(100, 10_000 - batch) }, (_, i) => refuse(kidOf(batch + i))));
    }
    expect(lookups()).toBe(10_000);
    await refuse(kidOf(0));
    expect(lookups()).toBe(10_000);
    // The 10,001st forgets the others.
    await refuse(kidOf(10_000));
    await refuse(kidOf(10_000));
    await refuse(kidOf(0));
    expect(lookups()).toBe(10_002);
  });

  it('verified tokens are kept up to 10,000, the oldest dropped first', async () => {
    const ctx = ctxOf();
    const auth = await started(ctx);
    freezeClock();
    // Sessions signed by a key of their own, so that the key can be taken away afterwards.
    const signer = await foreignSigningKey();
    await signer.insert(ctx.pool);
    const issuedAt = nowSeconds();
    // Every token belongs to one session of the CLI's, open for the hour.
    const sessionId = await openCliSession(ctx.pool, { userId: null, email: 'ops@example.com', orgId: null, expiresAt: new Date((issuedAt + 3600) * 1000) });
    const session = { sessionId, tokenGeneration: 0, userId: null, membership: null };
    const tokens = await Promise.all(
      Array.from({ length: 10_001 }, (_, i) =>
        signSessionToken(signer, { environment: 'development', user: `u${i}@example.com`, ...session, orgId: null, issuedAt, expiresAt: issuedAt + 3600 }),
      ),
    );
    for (const token of tokens) await auth.authenticate(bearer(token));
    await ctx.pool.query('DELETE FROM service.signing_keys WHERE kid = $1', [signer.kid]);
    await ctx.pool.query(`SELECT pg_notify('signing_keys_changed', $1)`, [signer.kid]);
    // A token never seen before (each poll its own, as a verified one would be kept) is refused once the key is gone.
    let polls = 0;
    const fresh = () => signSessionToken(signer, { environment: 'development', user: `new${polls++}@example.com`, ...session, orgId: null, issuedAt, expiresAt: issuedAt + 3600 });
    expect(await until(async () => (await outcome(auth, bearer(await fresh()))) === AUTH_DETAILS.invalid)).toBe(true);
    // Verified before the key went: the newest 10,000 are still known, less the polls accepted above
    // (all but the last), each of which took the place of the oldest: exactly 10,000 are kept.
    expect(await outcome(auth, bearer(tokens[polls]!))).toMatchObject({ subject: `u${polls}@example.com` });
    expect(await outcome(auth, bearer(tokens[polls - 1]!))).toBe(AUTH_DETAILS.invalid);
    expect(await outcome(auth, bearer(tokens[10_000]!))).toMatchObject({ subject: 'u10000@example.com' });
    expect(await outcome(auth, bearer(tokens[0]!))).toBe(AUTH_DETAILS.invalid);
  });
});
