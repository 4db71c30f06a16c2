import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { AUTH_DETAILS, TokenAuthenticator } from '../../shared/auth/authenticator.js';
import { closeAppSession, closeOtherAppSessions, openAppSession, switchAppSessionOrg, type AppSession } from '../../shared/auth/app-sessions.js';
import { signInFailed, takeSignInAttempt } from '../../shared/auth/sign-in-attempts.js';
import { loadConfig } from '../../shared/config.js';
import { postgresCommandPorts, type ServiceContext } from '../../shared/service-context.js';
import { KeyRing, generateKeyEncryptionKey } from '../../shared/auth/key-encryption.js';
import { singleUrlTarget } from '../../shared/db/connections.js';
import { createPool } from '../../shared/db/pool.js';
import { createOrg } from '../../shared/domain/orgs-and-keys/commands.js';
import { changeMemberRole, createUser, removeMember } from '../../shared/domain/people/commands.js';
import { mintAppSessionToken, mintSession } from '../../shared/domain/people/session-tokens.js';
import type { MemberRole } from '../../shared/auth/member-roles.js';
import { createLogger } from '../../shared/logger.js';
import { comparePositions, type Position } from '../../shared/event-store/port.js';
import { authProjection } from '../../projections/orgs-and-keys/projection.js';
import { peopleProjection } from '../../projections/people/projection.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import { closeContext, openContextOn } from '../../services/open-context.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { bearer, freezeClock, outcome, until } from './authenticator-helpers.js';
import { APP_SESSION_CHANGED_CHANNEL } from '../../shared/auth/app-sessions.js';
import { API_KEY_CHANGED_CHANNEL } from '../../shared/auth/api-key-states.js';
import { MEMBERSHIP_CHANGED_CHANNEL } from '../../shared/auth/session-token-states.js';

// Session tokens belong to their app session and to the person's membership (docs/web-app.md,
// "Session tokens"): whatever ends either ends the token on every api process within a second.
// Two authenticators stand for two api processes, each with its own cache and listener; each has
// accepted the token (so it is cached) before the change.

let db: TestDatabase;
let ctx: ServiceContext;
let runtime: ProjectorRuntime;

beforeAll(async () => {
  db = await createTestDatabase('auth_session_tokens');
  const pool = createPool(db.url, { max: 10, searchPath: 'read_model' });
  const opened = await openContextOn(pool, loadConfig({ LOG_LEVEL: 'silent' }), singleUrlTarget(db.url), { keys: null, source: { kind: 'variable' } }, createLogger('silent'));
  // The signing key is made and opened with a key-encryption key of this file's.
  const keyEncryption = { keys: new KeyRing([generateKeyEncryptionKey()]), source: { kind: 'variable' as const } };
  ctx = { ...opened, keyEncryption, ...postgresCommandPorts(pool, keyEncryption, opened.config) };
  runtime = new ProjectorRuntime({ store: ctx.store, pool, projections: [authProjection, peopleProjection], log: ctx.log });
});

const running: TokenAuthenticator[] = [];
afterEach(async () => {
  vi.useRealTimers();
  vi.restoreAllMocks();
  while (running.length > 0) await running.pop()!.stop();
});

afterAll(async () => {
  if (ctx) await closeContext(ctx);
  await db?.drop();
});

/** What the CLI does when no projector runs: catch up until the read model holds `position`. */
const project = {
  project: async (position: Position) => {
    while (comparePositions((await runtime.catchUp()).position, position) < 0) await new Promise((resolve) => setTimeout(resolve, 10));
  },
};

async function twoProcesses(): Promise<[TokenAuthenticator, TokenAuthenticator]> {
  const pair: [TokenAuthenticator, TokenAuthenticator] = [new TokenAuthenticator(ctx), new TokenAuthenticator(ctx)];
  for (const authenticator of pair) {
    await authenticator.start();
    running.push(authenticator);
  }
  return pair;
}

let people = 0;
async function person(orgId: number, role: MemberRole): Promise<{ userId: string; email: string; session: AppSession }> {
  const email = `p${++people}@example.com`;
  const user = await createUser(ctx, { email, orgId, role, by: { kind: 'cli' }, publicUrl: 'http://127.0.0.1' }, project);
  const { session } = await openAppSession(ctx.pool, { userId: user.id, email }, orgId);
  return { userId: user.id, email, session };
}

const tokenOf = async (who: { email: string; session: AppSession }, orgId: number | null) =>
  (await mintAppSessionToken(ctx, who.session, { email: who.email, orgId })).token;

/** How long until both processes refuse the token (each had it cached), in milliseconds; fails past 1 second. */
async function endedWithinASecond(processes: TokenAuthenticator[], token: string, change: () => Promise<unknown>): Promise<number> {
  for (const auth of processes) expect(await outcome(auth, bearer(token))).toMatchObject({ kind: 'session' });
  await change();
  const started = Date.now();
  for (const auth of processes) {
    while ((await outcome(auth, bearer(token))) !== AUTH_DETAILS.invalid) {
      expect(Date.now() - started).toBeLessThan(1000);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }
  return Date.now() - started;
}

describe('a session token is the person of now', () => {
  it('carries their member role; a member role change ends it on every process, and the next token carries the new role', async () => {
    const orgId = (await createOrg(ctx, 'Acme', project)).id;
    const admin = await person(orgId, 'admin');
    const pat = await person(orgId, 'admin');
    const processes = await twoProcesses();
    const token = await tokenOf(pat, orgId);
    expect(await outcome(processes[0], bearer(token))).toMatchObject({ userId: pat.userId, role: 'admin', scopes: ['keys:admin'] });
    await endedWithinASecond(processes, token, () => changeMemberRole(ctx, { userId: pat.userId, orgId, role: 'viewer', by: { kind: 'user', user_id: admin.userId, email: admin.email } }, project));
    const next = await tokenOf(pat, orgId);
    for (const auth of processes) expect(await outcome(auth, bearer(next))).toMatchObject({ userId: pat.userId, role: 'viewer', scopes: [] });
    // Back to admin: the first token stays ended (another membership revision), though the role is the same again.
    await changeMemberRole(ctx, { userId: pat.userId, orgId, role: 'admin', by: { kind: 'cli' } }, project);
    for (const auth of processes) expect(await outcome(auth, bearer(token))).toBe(AUTH_DETAILS.invalid);
  });

  it("a removal from the organization ends it, and the console's next token names no organization", async () => {
    const orgId = (await createOrg(ctx, 'Acme', project)).id;
    const pat = await person(orgId, 'operator');
    const processes = await twoProcesses();
    await endedWithinASecond(processes, await tokenOf(pat, orgId), () => removeMember(ctx, { userId: pat.userId, orgId, by: { kind: 'cli' } }, project));
    const next = await mintAppSessionToken(ctx, pat.session, { email: pat.email, orgId });
    expect(next.org_id).toBeNull();
    expect(await outcome(processes[0], bearer(next.token))).toMatchObject({ orgId: null, role: null });
  });

  it('sign-out ends it', async () => {
    const orgId = (await createOrg(ctx, 'Acme', project)).id;
    const pat = await person(orgId, 'operator');
    await endedWithinASecond(await twoProcesses(), await tokenOf(pat, orgId), () => closeAppSession(ctx.pool, pat.session.idSha256));
  });

  it("a password change ends this session's tokens (the session goes on, its next token works) and every other session", async () => {
    const orgId = (await createOrg(ctx, 'Acme', project)).id;
    const pat = await person(orgId, 'operator');
    const elsewhere = { ...pat, session: (await openAppSession(ctx.pool, { userId: pat.userId, email: pat.email }, orgId)).session };
    const processes = await twoProcesses();
    const other = await tokenOf(elsewhere, orgId);
    for (const auth of processes) expect(await outcome(auth, bearer(other))).toMatchObject({ kind: 'session' });
    await endedWithinASecond(processes, await tokenOf(pat, orgId), () => closeOtherAppSessions(ctx.pool, pat.userId, pat.session.idSha256));
    for (const auth of processes) expect(await outcome(auth, bearer(other))).toBe(AUTH_DETAILS.invalid);
    const renewed = { ...pat, session: { ...pat.session, tokenGeneration: pat.session.tokenGeneration + 1 } };
    for (const auth of processes) expect(await outcome(auth, bearer(await tokenOf(renewed, orgId)))).toMatchObject({ role: 'operator' });
  });

  it('a lock of the address ends its sessions', async () => {
    const orgId = (await createOrg(ctx, 'Acme', project)).id;
    const pat = await person(orgId, 'viewer');
    const lockOut = async () => {
      for (let i = 0; i < 10; i++) {
        await ctx.pool.query('UPDATE service.sign_in_attempts SET next_attempt_at = now() WHERE email = $1', [pat.email]);
        expect(await takeSignInAttempt(ctx.pool, pat.email)).toEqual({ allowed: true });
        await signInFailed(ctx.pool, pat.email);
      }
      expect(await takeSignInAttempt(ctx.pool, pat.email)).toEqual({ allowed: false, locked: true });
    };
    await endedWithinASecond(await twoProcesses(), await tokenOf(pat, orgId), lockOut);
  });

  it('switching the organization ends the tokens of the one before', async () => {
    const orgId = (await createOrg(ctx, 'Acme', project)).id;
    const pat = await person(orgId, 'operator');
    await endedWithinASecond(await twoProcesses(), await tokenOf(pat, orgId), () => switchAppSessionOrg(ctx.pool, pat.session.idSha256, orgId));
  });

  it('a session past its end ends its tokens, whatever their exp', async () => {
    const orgId = (await createOrg(ctx, 'Acme', project)).id;
    const pat = await person(orgId, 'operator');
    const processes = await twoProcesses();
    const ending = await ctx.pool.query<{ expires_at: Date }>(`UPDATE service.app_sessions SET expires_at = now() + interval '1 second' WHERE id = $1 RETURNING expires_at`, [
      pat.session.id,
    ]);
    const end = ending.rows[0]!.expires_at.getTime();
    const token = await tokenOf({ ...pat, session: { ...pat.session, expiresAt: new Date(Date.now() + 3600_000) } }, orgId);
    for (const auth of processes) expect(await outcome(auth, bearer(token))).toMatchObject({ kind: 'session' });
    for (const auth of processes) {
      while ((await outcome(auth, bearer(token))) !== AUTH_DETAILS.invalid) await new Promise((resolve) => setTimeout(resolve, 5));
    }
    // Refused from the session's end on, not later than a moment after it (the state was cached before).
    expect(Date.now()).toBeGreaterThanOrEqual(end - 20);
    expect(Date.now() - end).toBeLessThan(250);
  });

  it("the CLI's token of a member carries their role and ends with it; of an email that is no member, the unscoped admin session", async () => {
    const orgId = (await createOrg(ctx, 'Acme', project)).id;
    const pat = await person(orgId, 'operator');
    const processes = await twoProcesses();
    const member = await mintSession(ctx, { user: pat.email, orgId });
    expect(await outcome(processes[0], bearer(member.token))).toMatchObject({ userId: pat.userId, role: 'operator', scopes: [] });
    const stranger = await mintSession(ctx, { user: 'ops@example.com', orgId });
    expect(await outcome(processes[0], bearer(stranger.token))).toMatchObject({ userId: null, role: 'admin', scopes: ['keys:admin'] });
    await endedWithinASecond(processes, member.token, () => changeMemberRole(ctx, { userId: pat.userId, orgId, role: 'viewer', by: { kind: 'cli' } }, project));
    expect(await outcome(processes[1], bearer(stranger.token))).toMatchObject({ role: 'admin' });
  });

  it('a token of another session, generation or membership than its own is refused, as is one whose session is unknown', async () => {
    const orgId = (await createOrg(ctx, 'Acme', project)).id;
    const pat = await person(orgId, 'operator');
    const [auth] = await twoProcesses();
    const sign = (claims: Partial<Parameters<ServiceContext['tokens']['signSessionToken']>[0]>) =>
      ctx.tokens
        .signSessionToken({
          user: pat.email,
          sessionId: pat.session.id,
          tokenGeneration: 0,
          userId: pat.userId,
          orgId,
          membership: null,
          issuedAt: Math.floor(Date.now() / 1000),
          expiresAt: Math.floor(Date.now() / 1000) + 60,
          ...claims,
        })
        .then((t) => t.token);
    // A cookie session's token always names the membership it works in: without one it is no token of ours.
    expect(await outcome(auth, bearer(await sign({})))).toBe(AUTH_DETAILS.invalid);
    expect(await outcome(auth, bearer(await sign({ sessionId: 'ses_unknown' })))).toBe(AUTH_DETAILS.invalid);
    expect(await outcome(auth, bearer(await sign({ tokenGeneration: 1, membership: { role: 'operator', revision: '0' } })))).toBe(AUTH_DETAILS.invalid);
    expect(await outcome(auth, bearer(await sign({ membership: { role: 'admin', revision: '999' } })))).toBe(AUTH_DETAILS.invalid);
    expect(await outcome(auth, bearer(await tokenOf(pat, orgId)))).toMatchObject({ role: 'operator' });
  });
});

/**
 * The authenticator's memory of sessions (shared/auth/authenticator.ts): a warm request reads no
 * database, a change told by NOTIFY drops exactly what it changed, and a change nobody told of
 * shows within a second. "Silently" below is a change of the read model without its NOTIFY.
 */
describe("a session token's state in the authenticator's memory", () => {
  const silently = (sql: string, sessionId: string) => ctx.pool.query(sql, [sessionId]);
  const NEXT_GENERATION = 'UPDATE service.app_sessions SET token_generation = token_generation + 1 WHERE id = $1';
  const notify = (channel: string, payload: string) => ctx.pool.query('SELECT pg_notify($1, $2)', [channel, payload]);
  const oneProcess = async () => (await twoProcesses())[0];

  it('is kept for under a second: a change nobody told of shows from the second on, not before', async () => {
    const orgId = (await createOrg(ctx, 'Acme', project)).id;
    const pat = await person(orgId, 'operator');
    const auth = await oneProcess();
    const token = await tokenOf(pat, orgId);
    const clock = freezeClock();
    expect(await outcome(auth, bearer(token))).toMatchObject({ kind: 'session', role: 'operator' });
    await silently(NEXT_GENERATION, pat.session.id);
    clock.set(clock.now + 999);
    expect(await outcome(auth, bearer(token))).toMatchObject({ kind: 'session' });
    clock.set(clock.now + 1000);
    expect(await outcome(auth, bearer(token))).toBe(AUTH_DETAILS.invalid);
  });

  it('concurrent requests of one session share one read; the state is then served from memory', async () => {
    const orgId = (await createOrg(ctx, 'Acme', project)).id;
    const pat = await person(orgId, 'viewer');
    const auth = await oneProcess();
    const token = await tokenOf(pat, orgId);
    const reads = vi.spyOn(ctx.readModels, 'findSessionTokenState');
    freezeClock();
    const answers = await Promise.all(Array.from({ length: 10 }, () => outcome(auth, bearer(token))));
    expect(answers.every((answer) => typeof answer === 'object' && answer.userId === pat.userId)).toBe(true);
    expect(reads).toHaveBeenCalledTimes(1);
    for (let i = 0; i < 3; i++) await auth.authenticate(bearer(token));
    expect(reads).toHaveBeenCalledTimes(1);
  });

  it("a session's notice drops that session only; a membership's drops every session; another channel's drops none", async () => {
    const orgId = (await createOrg(ctx, 'Acme', project)).id;
    const ann = await person(orgId, 'admin');
    const bob = await person(orgId, 'viewer');
    const auth = await oneProcess();
    const annToken = await tokenOf(ann, orgId);
    const bobToken = await tokenOf(bob, orgId);
    freezeClock();
    // Each token is answered from its own session's state, though both are in memory at once.
    expect(await outcome(auth, bearer(annToken))).toMatchObject({ userId: ann.userId, role: 'admin' });
    expect(await outcome(auth, bearer(bobToken))).toMatchObject({ userId: bob.userId, role: 'viewer' });
    await silently(NEXT_GENERATION, ann.session.id);
    await silently(NEXT_GENERATION, bob.session.id);

    // An API key's notice that happens to carry a session id, and a membership notice's payload is
    // a user id: neither is a session's notice.
    // Notices on one connection arrive in order: once ann's (sent after) has dropped ann, the API
    // key's notice has been handled, so bob's state still in memory is not a matter of timing.
    await notify(API_KEY_CHANGED_CHANNEL, bob.session.id);
    await notify(APP_SESSION_CHANGED_CHANNEL, ann.session.id);
    expect(await until(async () => (await outcome(auth, bearer(annToken))) === AUTH_DETAILS.invalid)).toBe(true);
    expect(await outcome(auth, bearer(bobToken))).toMatchObject({ userId: bob.userId });

    await notify(MEMBERSHIP_CHANGED_CHANNEL, ann.userId);
    expect(await until(async () => (await outcome(auth, bearer(bobToken))) === AUTH_DETAILS.invalid)).toBe(true);
  });

  it('a notice that arrives while the state is being read is not overwritten by that older read', async () => {
    const orgId = (await createOrg(ctx, 'Acme', project)).id;
    const pat = await person(orgId, 'operator');
    const auth = await oneProcess();
    const token = await tokenOf(pat, orgId);
    freezeClock();
    const real = ctx.readModels.findSessionTokenState.bind(ctx.readModels);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let read!: () => void;
    const readDone = new Promise<void>((resolve) => (read = resolve));
    const reads = vi.spyOn(ctx.readModels, 'findSessionTokenState').mockImplementationOnce(async (sessionId, org) => {
      // The real read, answered only after the session has changed and said so.
      const state = await real(sessionId, org);
      read();
      await gate;
      return state;
    });
    const first = outcome(auth, bearer(token));
    await readDone;
    await silently(NEXT_GENERATION, pat.session.id);
    await notify(APP_SESSION_CHANGED_CHANNEL, pat.session.id);
    await new Promise((resolve) => setTimeout(resolve, 300));
    release();
    // The request in flight answers what it read; the next one does not trust that.
    expect(await first).toMatchObject({ userId: pat.userId });
    expect(await outcome(auth, bearer(token))).toBe(AUTH_DETAILS.invalid);
    expect(reads).toHaveBeenCalledTimes(2);
  });

  it('a read started after a notice, while an older read is still out, is the one kept', async () => {
    const orgId = (await createOrg(ctx, 'Acme', project)).id;
    const pat = await person(orgId, 'operator');
    const auth = await oneProcess();
    const token = await tokenOf(pat, orgId);
    freezeClock();
    const real = ctx.readModels.findSessionTokenState.bind(ctx.readModels);
    const gated = () => {
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let read!: () => void;
      const done = new Promise<void>((resolve) => (read = resolve));
      const implementation = async (sessionId: string, org: number | null) => {
        const state = await real(sessionId, org);
        read();
        await gate;
        return state;
      };
      return { release, done, implementation };
    };
    const older = gated();
    const newer = gated();
    const reads = vi.spyOn(ctx.readModels, 'findSessionTokenState').mockImplementationOnce(older.implementation).mockImplementationOnce(newer.implementation);
    const first = outcome(auth, bearer(token));
    await older.done;
    await silently(NEXT_GENERATION, pat.session.id);
    await notify(APP_SESSION_CHANGED_CHANNEL, pat.session.id);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const second = outcome(auth, bearer(token));
    await newer.done;
    older.release();
    // The request in flight answers what it read; the older read is not kept over the newer one.
    expect(await first).toMatchObject({ userId: pat.userId });
    newer.release();
    expect(await second).toBe(AUTH_DETAILS.invalid);
    expect(await outcome(auth, bearer(token))).toBe(AUTH_DETAILS.invalid);
    expect(reads).toHaveBeenCalledTimes(2);
  });

  it('after the listening connection is lost and back, session states are read again', async () => {
    const orgId = (await createOrg(ctx, 'Acme', project)).id;
    const pat = await person(orgId, 'operator');
    const auth = await oneProcess();
    const token = await tokenOf(pat, orgId);
    freezeClock();
    expect(await outcome(auth, bearer(token))).toMatchObject({ userId: pat.userId });
    const listeners = await ctx.pool.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`,
    );
    expect(listeners.rows.length).toBeGreaterThan(0);
    // Ended while nobody listens: the notification is lost.
    await silently(NEXT_GENERATION, pat.session.id);
    for (const { pid } of listeners.rows) await ctx.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    expect(await until(async () => (await outcome(auth, bearer(token))) === AUTH_DETAILS.invalid, 5000)).toBe(true);
  });

  it("is refused from the token's exp on, and from its session's end on, to the millisecond", async () => {
    const orgId = (await createOrg(ctx, 'Acme', project)).id;
    const pat = await person(orgId, 'operator');
    const auth = await oneProcess();
    const issued = await mintAppSessionToken(ctx, pat.session, { email: pat.email, orgId });
    const exp = Date.parse(issued.expires_at);
    // The cookie session outlives the token: only the token's own exp can refuse it here.
    expect(pat.session.expiresAt.getTime()).toBeGreaterThan(exp);
    expect(await outcome(auth, bearer(issued.token))).toMatchObject({ userId: pat.userId });
    const clock = freezeClock(exp - 1);
    expect(await outcome(auth, bearer(issued.token))).toMatchObject({ userId: pat.userId });
    clock.set(exp);
    expect(await outcome(auth, bearer(issued.token))).toBe(AUTH_DETAILS.invalid);

    // A session that ends before its token's exp (shortened in the read model), at a millisecond.
    vi.useRealTimers();
    const other = await person(orgId, 'operator');
    const token = await tokenOf(other, orgId);
    const end = Date.now() + 60_000 + 0.25;
    await ctx.pool.query('UPDATE service.app_sessions SET expires_at = $2 WHERE id = $1', [other.session.id, new Date(Math.floor(end))]);
    const at = freezeClock(Math.floor(end) - 1);
    expect(await outcome(auth, bearer(token))).toMatchObject({ userId: other.userId });
    at.set(Math.floor(end));
    expect(await outcome(auth, bearer(token))).toBe(AUTH_DETAILS.invalid);
  });
});
