import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg } from '../support/auth.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY, startTestService, type TestService } from '../support/service.js';
import { cliJson as cli } from '../console/harness.js';
import { cancelInvitation, inviteUser, issuePasswordSetup } from '../../shared/domain/people/commands.js';
import { LINK_LIFETIME_MS } from '../../shared/domain/people/decider.js';
import { AppClient, tokenOf, type Json } from './app-client.js';

/**
 * Lost links and passwords (docs/web-app.md, "Lost links and passwords", "Checking a link"): a
 * new link from the CLI (`users reset-link`) or from an admin (`POST /app/api/members/{id}/setup-link`),
 * the old password until it is used and every session ended when it is, what a link's page asks
 * first (`POST /app/api/links/check`), and people who never chose a password listed as invited.
 * Over real HTTP against a started service, the CLI as child processes on its database.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');
const SLOW = 120_000;
const PASSWORD = 'correct horse battery';
const NEW_PASSWORD = 'a brand new passphrase';

let svc: TestService;
let origin: string;
let org: number;
let otherOrg: number;

const cliJson = (...args: string[]) => cli(svc, origin, ...args);

/** The CLI without --json: its exit code and both streams. */
function cliRun(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      TSX,
      ['services/cli/main.ts', ...args],
      {
        cwd: ROOT,
        env: { ...process.env, DATABASE_URL: svc.db.url, SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY, PUBLIC_URL: origin, LOG_LEVEL: 'warn', NODE_NO_WARNINGS: '1' },
        timeout: 60_000,
      },
      (error, stdout, stderr) => resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

/** A user made with `users create` who has chosen their password through the setup link. */
async function userWithPassword(orgId: number, email: string, role = 'admin'): Promise<{ id: string }> {
  const created = await cliJson('users', 'create', '--email', email, '--org', String(orgId), '--role', role);
  expect((await new AppClient(svc.apiUrl).request('POST', '/password-setup', { token: tokenOf(created.setup_url), password: PASSWORD })).status).toBe(200);
  return { id: created.id };
}

async function signedIn(email: string, password = PASSWORD): Promise<AppClient> {
  const client = new AppClient(svc.apiUrl);
  expect((await client.signIn(email, password)).status).toBe(200);
  return client;
}

const check = (kind: 'setup' | 'invitation', token: string) => new AppClient(svc.apiUrl).request('POST', '/links/check', { kind, token });

beforeAll(async () => {
  svc = await startTestService('people_recovery');
  origin = new URL(svc.apiUrl).origin;
  org = (await createOrg(svc.service.ctx, 'Acme')).id;
  otherOrg = (await createOrg(svc.service.ctx, 'Globex')).id;
}, SLOW);

afterAll(async () => {
  await svc?.stop();
});

describe('users reset-link', () => {
  it(
    'prints a new link; the old password works until it is used and not after; using it ends every session of the user and lifts a lock',
    async () => {
      await userWithPassword(org, 'ada@example.com');
      const [laptop, phone] = [await signedIn('ada@example.com'), await signedIn('ada@example.com')];

      const link = await cliJson('users', 'reset-link', '--email', 'ADA@example.com');
      expect(Object.keys(link)).toEqual(['email', 'setup_url', 'expires_at']);
      expect(link.email).toBe('ada@example.com');
      expect(link.setup_url).toMatch(new RegExp(`^${origin}/setup#token=usr_`));
      expect(Date.parse(link.expires_at) - Date.now()).toBeGreaterThan(LINK_LIFETIME_MS - 120_000);
      expect(Date.parse(link.expires_at) - Date.now()).toBeLessThanOrEqual(LINK_LIFETIME_MS);

      // Until the link is used, nothing changes: the old password signs in, the sessions go on.
      await signedIn('ada@example.com');
      expect((await laptop.request('GET', '/me')).status).toBe(200);
      // Someone guessed meanwhile, and the address is locked.
      await svc.service.ctx.pool.query(
        `INSERT INTO service.sign_in_attempts (email, failures, next_attempt_at, locked_at) VALUES ($1, 10, now(), now())
         ON CONFLICT (email) DO UPDATE SET failures = 10, locked_at = now()`,
        ['ada@example.com'],
      );
      expect((await new AppClient(svc.apiUrl).signIn('ada@example.com', PASSWORD)).status).toBe(403);

      const set = await new AppClient(svc.apiUrl).request('POST', '/password-setup', { token: tokenOf(link.setup_url), password: NEW_PASSWORD });
      expect(set).toMatchObject({ status: 200, body: { data: { email: 'ada@example.com' } } });
      for (const client of [laptop, phone]) {
        expect((await client.request('GET', '/me')).body.error).toMatchObject({ status: 401, detail: 'Sign in first: no valid session cookie' });
      }
      expect((await new AppClient(svc.apiUrl).signIn('ada@example.com', PASSWORD)).status).toBe(401);
      await signedIn('ada@example.com', NEW_PASSWORD);
      // Once.
      const again = await new AppClient(svc.apiUrl).request('POST', '/password-setup', { token: tokenOf(link.setup_url), password: 'yet another password' });
      expect(again.body.error.fields[0]).toMatchObject({ field: 'token', message: 'This setup link is not valid or has already been used' });
    },
    SLOW,
  );

  it(
    'for someone who never set a password (a lost setup link): the new link works, the lost one no longer does; only the newest link works',
    async () => {
      const created = await cliJson('users', 'create', '--email', 'lost@example.com', '--org', String(org), '--role', 'viewer');
      const first = await cliJson('users', 'reset-link', '--email', 'lost@example.com');
      const second = await cliJson('users', 'reset-link', '--email', 'lost@example.com');
      for (const replaced of [created.setup_url, first.setup_url]) {
        expect((await check('setup', tokenOf(replaced))).body.data).toEqual({ kind: 'setup', status: 'replaced' });
        const refused = await new AppClient(svc.apiUrl).request('POST', '/password-setup', { token: tokenOf(replaced), password: PASSWORD });
        expect(refused.status).toBe(400);
      }
      expect((await new AppClient(svc.apiUrl).request('POST', '/password-setup', { token: tokenOf(second.setup_url), password: PASSWORD })).status).toBe(200);
      await signedIn('lost@example.com');
    },
    SLOW,
  );

  it('an unknown email: a non-zero exit and one line on stderr, nothing on stdout', async () => {
    const run = await cliRun('users', 'reset-link', '--email', 'nobody@example.com', '--json');
    expect(run.code).not.toBe(0);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe('error: no user has the email address nobody@example.com\n');
  }, SLOW);
});

describe('an admin sends a new link', () => {
  it(
    'for a member of their organization: 201 with the link, which works; a non-admin gets 403, another organization\'s user 404, someone who also belongs elsewhere 403',
    async () => {
      await userWithPassword(org, 'boss@example.com');
      const admin = await signedIn('boss@example.com');
      const member = await userWithPassword(org, 'grace@example.com', 'operator');
      const grace = await signedIn('grace@example.com');

      const sent = await admin.request('POST', `/members/${member.id}/setup-link`);
      expect(sent.status).toBe(201);
      expect(Object.keys(sent.body.data)).toEqual(['email', 'setup_url', 'expires_at']);
      expect(sent.body.data).toMatchObject({ email: 'grace@example.com', setup_url: expect.stringMatching(new RegExp(`^${origin}/setup#token=${member.id}\\.`)) });
      // Grace's password still works; the link then replaces it and ends her session.
      await signedIn('grace@example.com');
      expect((await new AppClient(svc.apiUrl).request('POST', '/password-setup', { token: tokenOf(sent.body.data.setup_url), password: NEW_PASSWORD })).status).toBe(200);
      expect((await grace.request('GET', '/me')).status).toBe(401);
      const graceAgain = await signedIn('grace@example.com', NEW_PASSWORD);

      // Not an admin.
      expect((await graceAgain.request('POST', `/members/${member.id}/setup-link`)).body.error).toMatchObject({ status: 403, detail: 'Your role (operator) does not allow this' });
      // Another organization's user, and a user that does not exist: 404 alike.
      const stranger = await userWithPassword(otherOrg, 'hedy@example.com');
      for (const id of [stranger.id, 'usr_nobody']) {
        expect((await admin.request('POST', `/members/${id}/setup-link`)).body.error).toMatchObject({ status: 404, detail: `user is not a member of organization ${org}` });
      }
      // A member who also belongs to an organization this admin does not administer: the link would open that one too.
      const invited = await inviteUser(svc.service.ctx, { email: 'hedy@example.com', orgId: org, role: 'viewer', by: { kind: 'cli' }, publicUrl: origin });
      expect((await new AppClient(svc.apiUrl).request('POST', '/invitations/accept', { token: tokenOf(invited.invite_url), password: PASSWORD })).status).toBe(200);
      expect((await admin.request('POST', `/members/${stranger.id}/setup-link`)).body.error).toMatchObject({
        status: 403,
        detail: "hedy@example.com also belongs to an organization you do not administer: ask the installation's operator for a new link (npx tracking users reset-link)",
      });
      // A state-changing request like any other: the CSRF token is required.
      expect((await admin.request('POST', `/members/${member.id}/setup-link`, undefined, { csrf: null })).status).toBe(403);
    },
    SLOW,
  );
});

describe('the members list', () => {
  it(
    'shows who never chose a password as invited, then active; users list prints the same status',
    async () => {
      const listOrg = (await createOrg(svc.service.ctx, 'Initech')).id;
      await userWithPassword(listOrg, 'first@initech.example');
      const admin = await signedIn('first@initech.example');
      const created = await cliJson('users', 'create', '--email', 'pending@initech.example', '--org', String(listOrg), '--role', 'operator');

      const statuses = async () => Object.fromEntries(((await admin.request('GET', '/members')).body.data as Json[]).map((m) => [m.email, m.status]));
      expect(await statuses()).toEqual({ 'first@initech.example': 'active', 'pending@initech.example': 'invited' });
      const listed = await cliJson('users', 'list', '--org', String(listOrg));
      expect(Object.keys(listed[0])).toEqual(['id', 'email', 'role', 'created_at', 'last_sign_in_at', 'locked', 'status']);
      expect(listed.map((m: Json) => [m.email, m.status])).toEqual([
        ['first@initech.example', 'active'],
        ['pending@initech.example', 'invited'],
      ]);

      const sent = await admin.request('POST', `/members/${created.id}/setup-link`);
      expect((await new AppClient(svc.apiUrl).request('POST', '/password-setup', { token: tokenOf(sent.body.data.setup_url), password: PASSWORD })).status).toBe(200);
      expect(await statuses()).toEqual({ 'first@initech.example': 'active', 'pending@initech.example': 'active' });
    },
    SLOW,
  );
});

describe('POST /app/api/links/check', () => {
  it(
    'a setup link: valid (with its email), used, expired, replaced, invalid; the answer never needs a session',
    async () => {
      const created = await cliJson('users', 'create', '--email', 'check@example.com', '--org', String(org), '--role', 'operator');
      const token = tokenOf(created.setup_url);
      const valid = await check('setup', token);
      expect(valid).toMatchObject({ status: 200, body: { data: { kind: 'setup', status: 'valid', email: 'check@example.com', expires_at: expect.any(String) } } });
      expect(Object.keys(valid.body.data)).toEqual(['kind', 'status', 'email', 'expires_at']);
      expect(valid.headers.get('cache-control')).toBe('no-store');

      expect((await new AppClient(svc.apiUrl).request('POST', '/password-setup', { token, password: PASSWORD })).status).toBe(200);
      expect((await check('setup', token)).body.data).toEqual({ kind: 'setup', status: 'used' });

      const expired = await issuePasswordSetup(svc.service.ctx, { userId: created.id, orgId: null, by: { kind: 'cli' }, publicUrl: origin }, { now: Date.now() - LINK_LIFETIME_MS - 1000 });
      expect((await check('setup', tokenOf(expired.setup_url))).body.data).toEqual({ kind: 'setup', status: 'expired' });
      const newest = await cliJson('users', 'reset-link', '--email', 'check@example.com');
      expect((await check('setup', tokenOf(expired.setup_url))).body.data).toEqual({ kind: 'setup', status: 'replaced' });

      const [userId, setupId] = tokenOf(newest.setup_url).split('.');
      for (const bad of [`${userId}.${setupId}.not-the-secret`, 'garbage', `usr_nobody.${setupId}.x`, tokenOf(newest.setup_url).split('.').slice(0, 2).join('.')]) {
        expect((await check('setup', bad)).body.data, bad).toEqual({ kind: 'setup', status: 'invalid' });
      }
      // A setup link checked as an invitation is no invitation.
      expect((await check('invitation', tokenOf(newest.setup_url))).body.data).toEqual({ kind: 'invitation', status: 'invalid' });
      // The body is validated like any other.
      const bad = await new AppClient(svc.apiUrl).request('POST', '/links/check', { kind: 'reset', token: '' });
      expect(bad.status).toBe(400);
      expect(bad.body.error.fields.map((f: Json) => f.field)).toEqual(['kind', 'token']);
      // From another site's page: refused, as every state-changing request.
      expect((await new AppClient(svc.apiUrl).request('POST', '/links/check', { kind: 'setup', token }, { origin: 'https://evil.example' })).status).toBe(403);
    },
    SLOW,
  );

  it(
    'an invitation link: valid (saying whether the address has an account), used, expired, cancelled, invalid',
    async () => {
      const fresh = await cliJson('users', 'invite', '--email', 'newcomer@example.com', '--org', String(org), '--role', 'viewer');
      expect((await check('invitation', tokenOf(fresh.invite_url))).body.data).toEqual({
        kind: 'invitation',
        status: 'valid',
        email: 'newcomer@example.com',
        expires_at: fresh.expires_at,
        existing_account: false,
      });
      await userWithPassword(otherOrg, 'known@example.com');
      const known = await cliJson('users', 'invite', '--email', 'known@example.com', '--org', String(org), '--role', 'viewer');
      expect((await check('invitation', tokenOf(known.invite_url))).body.data).toMatchObject({ status: 'valid', existing_account: true });

      expect((await new AppClient(svc.apiUrl).request('POST', '/invitations/accept', { token: tokenOf(fresh.invite_url), password: PASSWORD })).status).toBe(200);
      expect((await check('invitation', tokenOf(fresh.invite_url))).body.data).toEqual({ kind: 'invitation', status: 'used' });

      const old = await inviteUser(svc.service.ctx, { email: 'late@example.com', orgId: org, role: 'viewer', by: { kind: 'cli' }, publicUrl: origin }, { now: Date.now() - LINK_LIFETIME_MS - 1000 });
      expect((await check('invitation', tokenOf(old.invite_url))).body.data).toEqual({ kind: 'invitation', status: 'expired' });

      const withdrawn = await cliJson('users', 'invite', '--email', 'withdrawn@example.com', '--org', String(org), '--role', 'viewer');
      await cancelInvitation(svc.service.ctx, { invitationId: tokenOf(withdrawn.invite_url).split('.')[0]!, orgId: org, by: { kind: 'cli' } });
      expect((await check('invitation', tokenOf(withdrawn.invite_url))).body.data).toEqual({ kind: 'invitation', status: 'cancelled' });

      for (const bad of [`${tokenOf(known.invite_url).split('.')[0]}.not-the-secret`, 'inv_nothing.secret', 'garbage']) {
        expect((await check('invitation', bad)).body.data, bad).toEqual({ kind: 'invitation', status: 'invalid' });
      }
    },
    SLOW,
  );
});
