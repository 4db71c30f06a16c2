import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  APP_SESSION_CHANGED_CHANNEL,
  APP_SESSION_SECONDS,
  closeAppSession,
  closeAppSessionsOfEmail,
  closeOtherAppSessions,
  findAppSession,
  openAppSession,
  openCliSession,
  recordSignIn,
  switchAppSessionOrg,
} from '../../shared/auth/app-sessions.js';
import { dummyPasswordHash, hashPassword, verifyPassword } from '../../shared/auth/passwords.js';
import { LOCKED_NOW_SQL, SIGN_IN_LIMITS, clearSignInAttempts, signInFailed, signInLocked, takeSignInAttempt } from '../../shared/auth/sign-in-attempts.js';
import { createPool, type Pool } from '../../shared/db/pool.js';
import { applyMigrationGroup } from '../../shared/db/migrate.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

// The people's side of auth called directly (docs/web-app.md): password hashes, failed sign-ins
// and locks, and the app sessions that session tokens belong to, with what each tells the other
// api processes. The e2e tests of test/people drive the same code through HTTP.

let db: TestDatabase;
let pool: Pool;
let listener: pg.Client;
const notified: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase('auth_people_state');
  pool = createPool(db.url, { max: 6, searchPath: 'read_model' });
  await applyMigrationGroup(pool, 'service');
  listener = new pg.Client({ connectionString: db.url });
  await listener.connect();
  listener.on('notification', (message) => notified.push(message.payload ?? ''));
  await listener.query(`LISTEN ${APP_SESSION_CHANGED_CHANNEL}`);
});

beforeEach(async () => {
  await pool.query('TRUNCATE service.app_sessions, service.sign_in_attempts, service.user_sign_ins');
  notified.length = 0;
});

afterAll(async () => {
  await listener?.end();
  await pool?.end();
  await db?.drop();
});

/** The notifications received so far, once the server has sent what it committed. */
async function notifications(): Promise<string[]> {
  await listener.query('SELECT 1');
  await new Promise((resolve) => setTimeout(resolve, 20));
  return [...notified].sort();
}

describe('password hashes', () => {
  it('scrypt with its parameters in the hash; the password verifies, another does not; NFC and NFD are one password', async () => {
    const hash = await hashPassword('correct horse battery');
    const parts = hash.split('$');
    expect(parts.slice(0, 4)).toEqual(['scrypt', '32768', '8', '1']);
    expect(Buffer.from(parts[4]!, 'base64url')).toHaveLength(16);
    expect(Buffer.from(parts[5]!, 'base64url')).toHaveLength(32);
    expect(await verifyPassword('correct horse battery', hash)).toBe(true);
    expect(await verifyPassword('correct horse batterY', hash)).toBe(false);
    expect(await hashPassword('correct horse battery')).not.toBe(hash);
    const composed = await hashPassword('caf\u00e9 au lait!');
    expect(await verifyPassword('cafe\u0301 au lait!', composed)).toBe(true);
  });

  it('a hash this module cannot read verifies nothing', async () => {
    const hash = await hashPassword('correct horse battery');
    const [, N, r, p, salt, key] = hash.split('$') as [string, string, string, string, string, string];
    for (const bad of [
      '',
      `bcrypt$${N}$${r}$${p}$${salt}$${key}`,
      `scrypt$${N}$${r}$${p}$${salt}`,
      `scrypt$${N}$${r}$${p}$${salt}$${key}$x`,
      `scrypt$0$${r}$${p}$${salt}$${key}`,
      `scrypt$${N}$0$${p}$${salt}$${key}`,
      `scrypt$${N}$${r}$0$${salt}$${key}`,
      `scrypt$x$${r}$${p}$${salt}$${key}`,
      `scrypt$${N}$1.5$${p}$${salt}$${key}`,
      `scrypt$${N}$${r}$-1$${salt}$${key}`,
      `scrypt$${N}$${r}$${p}$${salt}$`,
    ]) {
      expect(await verifyPassword('correct horse battery', bad), bad).toBe(false);
    }
    // Another salt or key of the same shape: a mismatch, not an error.
    expect(await verifyPassword('correct horse battery', `scrypt$${N}$${r}$${p}$${Buffer.alloc(16).toString('base64url')}$${key}`)).toBe(false);
    // Parameters the hash names are the ones used: a hash made with others still verifies.
    const cheap = `scrypt$1024$8$1$${salt}$`;
    const { scryptSync } = await import('node:crypto');
    const derived = scryptSync('correct horse battery', Buffer.from(salt, 'base64url'), 16, { N: 1024, r: 8, p: 1 }).toString('base64url');
    expect(await verifyPassword('correct horse battery', cheap + derived)).toBe(true);
  });

  it('the dummy hash is made once per process, of a password nobody knows', async () => {
    const first = dummyPasswordHash();
    expect(dummyPasswordHash()).toBe(first);
    const hash = await first;
    expect(hash.startsWith('scrypt$32768$8$1$')).toBe(true);
    expect(await verifyPassword('', hash)).toBe(false);
  });
});

describe('failed sign-ins', () => {
  const email = 'guess@example.com';
  const locked = async () =>
    (await pool.query<{ locked: boolean }>(`SELECT coalesce(${LOCKED_NOW_SQL}, false) AS locked FROM service.sign_in_attempts a WHERE email = $1`, [email])).rows[0]?.locked ?? false;

  it('five answered at once, then one a second, and the tenth failure locks the address until an unlock', async () => {
    expect(SIGN_IN_LIMITS).toEqual({ freeFailures: 5, delaySeconds: 1, lockAfterFailures: 10, lockSeconds: 3600 });
    for (let i = 1; i <= 4; i++) {
      expect(await takeSignInAttempt(pool, email), `attempt ${i}`).toEqual({ allowed: true });
      await signInFailed(pool, email);
    }
    expect(await takeSignInAttempt(pool, email)).toEqual({ allowed: true });
    await signInFailed(pool, email);
    // The fifth failure starts the wait.
    expect(await takeSignInAttempt(pool, email)).toEqual({ allowed: false, locked: false, retryAfterSeconds: 1 });
    for (let i = 6; i <= 10; i++) {
      await pool.query('UPDATE service.sign_in_attempts SET next_attempt_at = now() WHERE email = $1', [email]);
      expect(await takeSignInAttempt(pool, email), `attempt ${i}`).toEqual({ allowed: true });
      expect(await locked()).toBe(false);
      await signInFailed(pool, email);
    }
    expect(await locked()).toBe(true);
    await pool.query('UPDATE service.sign_in_attempts SET next_attempt_at = now() WHERE email = $1', [email]);
    expect(await takeSignInAttempt(pool, email)).toEqual({ allowed: false, locked: true });
    // Failing again while locked does not move the lock on.
    const lockedAt = (await pool.query('SELECT locked_at FROM service.sign_in_attempts WHERE email = $1', [email])).rows[0].locked_at;
    await signInFailed(pool, email);
    expect((await pool.query('SELECT locked_at FROM service.sign_in_attempts WHERE email = $1', [email])).rows[0].locked_at).toEqual(lockedAt);
    await clearSignInAttempts(pool, email);
    expect(await takeSignInAttempt(pool, email)).toEqual({ allowed: true });
  });

  it('a lock ends after an hour: the next attempt counts as the first', async () => {
    await pool.query(`INSERT INTO service.sign_in_attempts VALUES ($1, 10, now(), now() - interval '3601 seconds')`, [email]);
    expect(await takeSignInAttempt(pool, email)).toEqual({ allowed: true });
    expect((await pool.query('SELECT failures, locked_at FROM service.sign_in_attempts WHERE email = $1', [email])).rows[0]).toEqual({ failures: 1, locked_at: null });
    await pool.query(`UPDATE service.sign_in_attempts SET failures = 10, locked_at = now() - interval '3599 seconds' WHERE email = $1`, [email]);
    expect(await takeSignInAttempt(pool, email)).toEqual({ allowed: false, locked: true });
  });

  it('single sign-on asks whether the address is locked now, without counting an attempt', async () => {
    expect(await signInLocked(pool, email)).toBe(false);
    await pool.query(`INSERT INTO service.sign_in_attempts VALUES ($1, 9, now(), NULL)`, [email]);
    expect(await signInLocked(pool, email)).toBe(false);
    await signInFailed(pool, email);
    expect(await signInLocked(pool, email)).toBe(false);
    await pool.query(`UPDATE service.sign_in_attempts SET failures = 10 WHERE email = $1`, [email]);
    await signInFailed(pool, email);
    expect(await signInLocked(pool, email)).toBe(true);
    // Another address is not locked by this one's lock.
    expect(await signInLocked(pool, 'other@example.com')).toBe(false);
    expect((await pool.query('SELECT failures FROM service.sign_in_attempts WHERE email = $1', [email])).rows[0].failures).toBe(10);
    await pool.query(`UPDATE service.sign_in_attempts SET locked_at = now() - interval '3601 seconds' WHERE email = $1`, [email]);
    expect(await signInLocked(pool, email)).toBe(false);
  });

  it('a refused attempt whose row a success has just cleared is answered, not an error', async () => {
    // The second statement of a refusal finds no row when a sign-in cleared the count in between.
    for (let round = 0; round < 20; round++) {
      await pool.query(`INSERT INTO service.sign_in_attempts VALUES ($1, 5, now() + interval '10 seconds', NULL) ON CONFLICT (email) DO UPDATE SET failures = 5, next_attempt_at = EXCLUDED.next_attempt_at, locked_at = NULL`, [email]);
      const [answer] = await Promise.all([takeSignInAttempt(pool, email), clearSignInAttempts(pool, email)]);
      expect(answer.allowed === true || (answer.locked === false && answer.retryAfterSeconds >= 1)).toBe(true);
    }
  });

  it("parallel guesses are counted one by one; the wait's seconds are whole and at least one", async () => {
    const answers = await Promise.all(Array.from({ length: 12 }, () => takeSignInAttempt(pool, email)));
    expect(answers.filter((a) => a.allowed)).toHaveLength(5);
    await pool.query(`UPDATE service.sign_in_attempts SET next_attempt_at = now() + interval '2.2 seconds' WHERE email = $1`, [email]);
    expect(await takeSignInAttempt(pool, email)).toEqual({ allowed: false, locked: false, retryAfterSeconds: 3 });
  });

  it('the lock ends every session of the address, and tells every api process; a failure short of it ends none', async () => {
    const one = await openAppSession(pool, { userId: 'usr_g', email }, 1);
    const two = await openAppSession(pool, { userId: 'usr_g', email }, null);
    const other = await openAppSession(pool, { userId: 'usr_o', email: 'other@example.com' }, 1);
    await pool.query(`INSERT INTO service.sign_in_attempts VALUES ($1, 9, now(), NULL)`, [email]);
    await signInFailed(pool, email);
    expect(await findAppSession(pool, one.value)).not.toBeNull();
    await pool.query(`UPDATE service.sign_in_attempts SET failures = 10 WHERE email = $1`, [email]);
    await signInFailed(pool, email);
    expect(await findAppSession(pool, one.value)).toBeNull();
    expect(await findAppSession(pool, two.value)).toBeNull();
    expect(await findAppSession(pool, other.value)).not.toBeNull();
    expect(await notifications()).toEqual([one.session.id, two.session.id].sort());
  });
});

describe('app sessions', () => {
  it('open: a cookie of 32 random bytes, its SHA-256 kept, a CSRF token, twelve hours; found by the cookie only while it lasts', async () => {
    const { value, session } = await openAppSession(pool, { userId: 'usr_a', email: 'ada@example.com' }, 3);
    expect(value).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(session).toMatchObject({ userId: 'usr_a', orgId: 3, tokenGeneration: 0, id: expect.stringMatching(/^ses_[0-9a-z]{26}$/) });
    expect(session.csrfToken).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(session.idSha256).toMatch(/^[0-9a-f]{64}$/);
    expect(Math.abs(session.expiresAt.getTime() - Date.now() - APP_SESSION_SECONDS * 1000)).toBeLessThan(5000);
    expect(await findAppSession(pool, value)).toEqual(session);
    const row = (await pool.query('SELECT id_sha256, email, kind FROM service.app_sessions WHERE id = $1', [session.id])).rows[0];
    expect(row).toEqual({ id_sha256: session.idSha256, email: 'ada@example.com', kind: 'cookie' });
    expect(await findAppSession(pool, `${value.slice(0, 42)}x`)).toBeNull();
    for (const malformed of ['', value.slice(1), `${value}=`, `${value.slice(0, 42)}+`]) expect(await findAppSession(pool, malformed)).toBeNull();
    // A value that is no cookie of ours costs no database round trip: it is refused before the
    // query, so even a pool that is closed answers null (a well-formed one would be looked up).
    const closed = createPool(db.url, { max: 1, searchPath: 'read_model' });
    await closed.end();
    for (const malformed of [`!${value}`, `${value}!`, `x${value}`, `${value}x`, value.slice(1)]) expect(await findAppSession(closed, malformed), malformed).toBeNull();
    await expect(findAppSession(closed, value)).rejects.toThrow();
    await pool.query(`UPDATE service.app_sessions SET expires_at = now() WHERE id = $1`, [session.id]);
    expect(await findAppSession(pool, value)).toBeNull();
  });

  it("opening one deletes the user's expired sessions, not the others'", async () => {
    const old = await openAppSession(pool, { userId: 'usr_a', email: 'ada@example.com' }, 1);
    const others = await openAppSession(pool, { userId: 'usr_b', email: 'bob@example.com' }, 1);
    await pool.query(`UPDATE service.app_sessions SET expires_at = now() - interval '1 second'`);
    await openAppSession(pool, { userId: 'usr_a', email: 'ada@example.com' }, 1);
    const ids = (await pool.query('SELECT id FROM service.app_sessions')).rows.map((r) => r.id);
    expect(ids).not.toContain(old.session.id);
    expect(ids).toContain(others.session.id);
  });

  it("a CLI session: no cookie finds it; it ends when its token does", async () => {
    const expiresAt = new Date(Date.now() + 60_000);
    const id = await openCliSession(pool, { userId: null, email: 'ops@example.com', orgId: 2, expiresAt });
    const row = (await pool.query('SELECT user_id, email, org_id, kind, expires_at, token_generation, csrf_token FROM service.app_sessions WHERE id = $1', [id])).rows[0];
    expect(row).toEqual({ user_id: null, email: 'ops@example.com', org_id: 2, kind: 'cli', expires_at: expiresAt, token_generation: 0, csrf_token: '' });
    expect(id).toMatch(/^ses_[0-9a-z]{26}$/);
  });

  it('sign-out, an org switch, a password change: each ends what it should, and names it to every api process', async () => {
    const ada = { userId: 'usr_a', email: 'ada@example.com' };
    const here = await openAppSession(pool, ada, 1);
    const there = await openAppSession(pool, ada, 1);
    const bob = await openAppSession(pool, { userId: 'usr_b', email: 'bob@example.com' }, 1);

    await switchAppSessionOrg(pool, here.session.idSha256, 2);
    expect(await findAppSession(pool, here.value)).toMatchObject({ orgId: 2, tokenGeneration: 1 });
    expect(await notifications()).toEqual([here.session.id]);

    notified.length = 0;
    await closeOtherAppSessions(pool, 'usr_a', here.session.idSha256);
    expect(await findAppSession(pool, here.value)).toMatchObject({ tokenGeneration: 2 });
    expect(await findAppSession(pool, there.value)).toBeNull();
    expect(await findAppSession(pool, bob.value)).not.toBeNull();
    expect(await notifications()).toEqual([here.session.id, there.session.id].sort());

    notified.length = 0;
    await closeAppSession(pool, here.session.idSha256);
    expect(await findAppSession(pool, here.value)).toBeNull();
    expect(await notifications()).toEqual([here.session.id]);

    notified.length = 0;
    expect(await closeAppSessionsOfEmail(pool, 'nobody@example.com')).toBe(0);
    expect(await closeAppSessionsOfEmail(pool, 'bob@example.com')).toBe(1);
    expect(await notifications()).toEqual([bob.session.id]);
  });

  it('the last sign-in is recorded, and moves on', async () => {
    await recordSignIn(pool, 'usr_a');
    const first = (await pool.query('SELECT last_sign_in_at FROM service.user_sign_ins WHERE user_id = $1', ['usr_a'])).rows[0].last_sign_in_at as Date;
    await new Promise((resolve) => setTimeout(resolve, 5));
    await recordSignIn(pool, 'usr_a');
    const second = (await pool.query('SELECT last_sign_in_at FROM service.user_sign_ins WHERE user_id = $1', ['usr_a'])).rows[0].last_sign_in_at as Date;
    expect(second.getTime()).toBeGreaterThan(first.getTime());
    expect((await pool.query('SELECT count(*)::int AS n FROM service.user_sign_ins')).rows[0].n).toBe(1);
  });
});
