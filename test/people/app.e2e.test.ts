import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createOrg } from '../support/auth.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY, startTestService, type TestService } from '../support/service.js';
import { inviteUser } from '../../shared/domain/people/commands.js';
import { LINK_LIFETIME_MS } from '../../shared/domain/people/decider.js';
import { SIGN_IN_LIMITS } from '../../shared/auth/sign-in-attempts.js';
import { AppClient, tokenOf, type Json } from './app-client.js';

/**
 * The web application's people and sessions over real HTTP against a started service, with the
 * CLI's `users` commands as child processes on its database (docs/web-app.md, docs/cli.md "users").
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');
const SLOW = 120_000;
const PASSWORD = 'correct horse battery';

let svc: TestService;
let orgA: number;
let orgB: number;

function cliJson(...args: string[]): Promise<Json> {
  return new Promise((resolve, reject) => {
    execFile(
      TSX,
      ['services/cli/main.ts', ...args, '--json'],
      {
        cwd: ROOT,
        env: { ...process.env, DATABASE_URL: svc.db.url, SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY, PUBLIC_URL: new URL(svc.apiUrl).origin, LOG_LEVEL: 'warn', NODE_NO_WARNINGS: '1' },
        timeout: 60_000,
      },
      (error, stdout, stderr) => (error ? reject(new Error(`${args.join(' ')}: ${stderr}`)) : resolve(JSON.parse(stdout))),
    );
  });
}

/** A signed-in admin of a new organization, set up as an operator would: `users create`, then the setup link. */
async function firstAdmin(orgId: number, email: string): Promise<AppClient> {
  const created = await cliJson('users', 'create', '--email', email, '--org', String(orgId), '--role', 'admin');
  const client = new AppClient(svc.apiUrl);
  expect((await client.request('POST', '/password-setup', { token: tokenOf(created.setup_url), password: PASSWORD })).status).toBe(200);
  expect((await client.signIn(email, PASSWORD)).status).toBe(200);
  return client;
}

beforeAll(async () => {
  svc = await startTestService('people_app');
  orgA = (await createOrg(svc.service.ctx, 'Acme')).id;
  orgB = (await createOrg(svc.service.ctx, 'Globex')).id;
}, SLOW);

afterAll(async () => {
  await svc?.stop();
});

describe('the first admin', () => {
  it(
    'setup link → password → sign in → mint a key → the token works on /api/v1 → revoke → refused; the key names who minted and revoked it',
    async () => {
      const created = await cliJson('users', 'create', '--email', 'Ada@Example.com', '--org', String(orgA), '--role', 'admin');
      expect(Object.keys(created)).toEqual(['id', 'email', 'org_id', 'role', 'setup_url']);
      expect(created).toMatchObject({ email: 'ada@example.com', org_id: orgA, role: 'admin' });
      expect(created.setup_url).toMatch(new RegExp(`^${new URL(svc.apiUrl).origin}/setup#token=`));

      const ada = new AppClient(svc.apiUrl);
      expect((await ada.signIn('ada@example.com', PASSWORD)).status).toBe(401);
      const setup = await ada.request('POST', '/password-setup', { token: tokenOf(created.setup_url), password: PASSWORD });
      expect(setup).toMatchObject({ status: 200, body: { data: { user_id: created.id, email: 'ada@example.com' } } });
      // The link works once.
      expect((await ada.request('POST', '/password-setup', { token: tokenOf(created.setup_url), password: 'another password' })).body.error.detail).toBe(
        'This setup link is not valid or has already been used',
      );

      const signedIn = await ada.signIn('ADA@example.com', PASSWORD);
      expect(signedIn.status).toBe(200);
      const cookie = signedIn.headers.get('set-cookie')!;
      expect(cookie).toMatch(/^app_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=43200$/);
      expect(signedIn.body.data).toMatchObject({ user: { id: created.id, email: 'ada@example.com' }, current_org: { id: orgA, name: 'Acme', role: 'admin' } });
      expect(signedIn.headers.get('access-control-allow-origin')).toBeNull();

      const minted = await ada.request('POST', '/keys', { name: 'partner', access: { assets: 'read_write', tracking: 'read' } });
      expect(minted.status).toBe(201);
      expect(minted.body.data).toMatchObject({
        name: 'partner',
        scopes: ['assets:read', 'assets:write', 'tracking:read'],
        expires_at: null,
        revoked_at: null,
        minted_by: { kind: 'user', user_id: created.id, email: 'ada@example.com' },
      });
      const token = minted.body.data.token as string;
      expect((await fetch(`${svc.apiUrl}/orgs/me`, { headers: bearer(token) })).status).toBe(200);

      const listed = await ada.request('GET', '/keys');
      expect(listed.body.data).toHaveLength(1);
      expect(listed.body.data[0]).not.toHaveProperty('token');
      expect(listed.body.data[0].prefix).toBe(token.split('.')[2]!.slice(0, 12));

      const revoked = await ada.request('DELETE', `/keys/${minted.body.data.id}`);
      expect(revoked.status).toBe(200);
      const started = Date.now();
      let status = 200;
      while (status !== 401 && Date.now() - started < 1000) status = (await fetch(`${svc.apiUrl}/orgs/me`, { headers: bearer(token) })).status;
      expect(status).toBe(401);
      expect((await ada.request('GET', '/keys')).body.data[0].revoked_by).toEqual({ kind: 'user', user_id: created.id, email: 'ada@example.com' });

      // The contract's session token: an hour, keys:admin for an admin, works on /api/v1.
      const session = await ada.request('POST', '/session-token');
      expect(session.status).toBe(200);
      const claims = JSON.parse(Buffer.from(session.body.data.token.split('.')[1], 'base64url').toString());
      expect(claims).toMatchObject({ sub: 'ada@example.com', scopes: ['keys:admin'], org_id: orgA });
      expect(claims.exp - claims.iat).toBe(3600);
      expect((await fetch(`${svc.apiUrl}/assets`, { headers: bearer(session.body.data.token) })).status).toBe(200);

      // CLI keys list keeps its --json fields exactly.
      const cliKeys = await cliJson('keys', 'list', '--org', String(orgA));
      expect(Object.keys(cliKeys[0])).toEqual(['id', 'name', 'prefix', 'scopes', 'created_at', 'last_used_at', 'expires_at', 'revoked_at']);

      // Sign-out ends the session.
      expect((await ada.request('POST', '/sign-out')).status).toBe(204);
      expect(ada.cookie).toBeNull();
    },
    SLOW,
  );
});

describe('invitations and member roles', () => {
  it(
    'invite → accept → the member is refused on key and member endpoints; their session token has no keys:admin; users list shows them',
    async () => {
      const admin = await firstAdmin(orgA, 'grace@example.com');
      const invited = await admin.request('POST', '/members/invitations', { email: 'Linus@example.com', role: 'operator' });
      expect(invited.status).toBe(201);
      expect(invited.body.data).toMatchObject({ email: 'linus@example.com', org_id: orgA, role: 'operator' });
      expect(Date.parse(invited.body.data.expires_at) - Date.now()).toBeGreaterThan(LINK_LIFETIME_MS - 60_000);

      const linus = new AppClient(svc.apiUrl);
      // Two acceptances at once: exactly one wins.
      const token = tokenOf(invited.body.data.invite_url);
      const both = await Promise.all([
        linus.request('POST', '/invitations/accept', { token, password: PASSWORD }),
        new AppClient(svc.apiUrl).request('POST', '/invitations/accept', { token, password: 'another good password' }),
      ]);
      expect(both.map((a) => a.status).sort()).toEqual([200, 400]);
      const refused = both.find((a) => a.status === 400)!;
      expect(refused.body.error.fields[0]).toMatchObject({ field: 'token', message: 'This invitation link has already been used' });
      const winner = both.find((a) => a.status === 200)!;
      const chosen = winner === both[0] ? PASSWORD : 'another good password';

      expect((await linus.signIn('linus@example.com', chosen)).body.data.current_org).toEqual({ id: orgA, name: 'Acme', role: 'operator' });
      for (const [method, route, body] of [
        ['GET', '/keys', undefined],
        ['POST', '/keys', { name: 'x', access: { assets: 'read' } }],
        ['DELETE', '/keys/ak_x', undefined],
        ['GET', '/members', undefined],
        ['POST', '/members/invitations', { email: 'x@example.com', role: 'admin' }],
      ] as const) {
        const answer = await linus.request(method, route, body);
        expect([route, answer.status, answer.body.error.detail]).toEqual([route, 403, 'Your role (operator) does not allow this']);
      }
      const session = await linus.request('POST', '/session-token');
      expect(JSON.parse(Buffer.from(session.body.data.token.split('.')[1], 'base64url').toString()).scopes).toEqual([]);

      const members = await cliJson('users', 'list', '--org', String(orgA));
      expect(Object.keys(members[0])).toEqual(['id', 'email', 'role', 'created_at', 'last_sign_in_at', 'locked', 'status']);
      expect(members.find((m: Json) => m.email === 'linus@example.com')).toMatchObject({ role: 'operator', locked: false, last_sign_in_at: expect.any(String) });

      // Promoted, the same session may now do it.
      const linusId = members.find((m: Json) => m.email === 'linus@example.com').id;
      expect((await admin.request('PATCH', `/members/${linusId}`, { role: 'admin' })).body.data).toMatchObject({ role: 'admin' });
      expect((await linus.request('GET', '/members')).status).toBe(200);
      // Nobody changes their own role or removes themselves.
      expect((await linus.request('DELETE', `/members/${linusId}`)).status).toBe(403);
      expect((await admin.request('DELETE', `/members/${linusId}`)).status).toBe(204);
      expect((await linus.request('GET', '/me')).body.data.current_org).toBeNull();
      expect((await linus.request('GET', '/members')).status).toBe(403);
    },
    SLOW,
  );

  it(
    'an expired invitation is refused; `users invite` prints its shape',
    async () => {
      const printed = await cliJson('users', 'invite', '--email', 'late@example.com', '--org', String(orgA), '--role', 'operator');
      expect(Object.keys(printed)).toEqual(['email', 'org_id', 'role', 'invite_url', 'expires_at']);
      const old = await inviteUser(
        svc.service.ctx,
        { email: 'late@example.com', orgId: orgA, role: 'operator', by: { kind: 'cli' }, publicUrl: svc.apiUrl },
        { now: Date.now() - LINK_LIFETIME_MS - 1000 },
      );
      const answer = await new AppClient(svc.apiUrl).request('POST', '/invitations/accept', { token: tokenOf(old.invite_url), password: PASSWORD });
      expect(answer.status).toBe(400);
      expect(answer.body.error).toMatchObject({ type: 'validation_error', detail: 'This invitation link has expired; ask an administrator for a new one' });
      // The fresh one still works.
      expect((await new AppClient(svc.apiUrl).request('POST', '/invitations/accept', { token: tokenOf(printed.invite_url), password: PASSWORD })).status).toBe(200);
    },
    SLOW,
  );
});

describe('pending invitations', () => {
  it(
    'an admin lists the pending ones (an expired one marked) and cancels one: its link is refused; another organization\'s, or an accepted one, cannot be cancelled; members may not list them',
    async () => {
      const org = (await createOrg(svc.service.ctx, 'Umbrella')).id;
      const admin = await firstAdmin(org, 'boss@umbrella.example');
      const first = await admin.request('POST', '/members/invitations', { email: 'one@umbrella.example', role: 'operator' });
      const second = await admin.request('POST', '/members/invitations', { email: 'two@umbrella.example', role: 'admin' });
      await inviteUser(
        svc.service.ctx,
        { email: 'old@umbrella.example', orgId: org, role: 'operator', by: { kind: 'cli' }, publicUrl: svc.apiUrl },
        { now: Date.now() - LINK_LIFETIME_MS - 1000 },
      );
      const listed = await admin.request('GET', '/members/invitations');
      expect(listed.status).toBe(200);
      expect(listed.body.data.map((i: Json) => [i.email, i.role, i.issued_by, i.expired])).toEqual([
        ['two@umbrella.example', 'admin', 'boss@umbrella.example', false],
        ['one@umbrella.example', 'operator', 'boss@umbrella.example', false],
        ['old@umbrella.example', 'operator', 'cli', true],
      ]);
      const [two, one] = listed.body.data as Json[];

      // Accepted: no longer pending, and not cancellable.
      const member = new AppClient(svc.apiUrl);
      expect((await member.request('POST', '/invitations/accept', { token: tokenOf(first.body.data.invite_url), password: PASSWORD })).status).toBe(200);
      expect((await admin.request('DELETE', `/members/invitations/${one.id}`)).body.error).toMatchObject({ status: 409, detail: 'this invitation was already accepted; remove the member instead' });

      // Another organization's admin cannot see or cancel it.
      const other = await firstAdmin((await createOrg(svc.service.ctx, 'Tyrell')).id, 'boss@tyrell.example');
      expect((await other.request('GET', '/members/invitations')).body.data).toEqual([]);
      expect((await other.request('DELETE', `/members/invitations/${two.id}`)).body.error).toMatchObject({ status: 404, detail: 'invitation not found' });

      expect((await admin.request('DELETE', `/members/invitations/${two.id}`)).status).toBe(204);
      expect((await admin.request('DELETE', `/members/invitations/${two.id}`)).status).toBe(204);
      expect((await admin.request('GET', '/members/invitations')).body.data.map((i: Json) => i.email)).toEqual(['old@umbrella.example']);
      const refused = await new AppClient(svc.apiUrl).request('POST', '/invitations/accept', { token: tokenOf(second.body.data.invite_url), password: PASSWORD });
      expect(refused.status).toBe(400);
      expect(refused.body.error.fields[0]).toMatchObject({ field: 'token', message: 'This invitation link was cancelled; ask an administrator for a new one' });

      expect((await member.signIn('one@umbrella.example', PASSWORD)).status).toBe(200);
      for (const [method, route] of [['GET', '/members/invitations'], ['DELETE', `/members/invitations/${two.id}`]] as const) {
        expect((await member.request(method, route)).status).toBe(403);
      }
    },
    SLOW,
  );
});

describe('two admins acting on each other at once', () => {
  it(
    'demote or remove each other at the same moment: exactly one wins, every round, so an organization with admins keeps one',
    async () => {
      const org = (await createOrg(svc.service.ctx, 'Initech')).id;
      const first = await firstAdmin(org, 'first@initech.example');
      const newAdmin = async (email: string) => {
        const invited = await first.request('POST', '/members/invitations', { email, role: 'admin' });
        const client = new AppClient(svc.apiUrl);
        expect((await client.request('POST', '/invitations/accept', { token: tokenOf(invited.body.data.invite_url), password: PASSWORD })).status).toBe(200);
        expect((await client.signIn(email, PASSWORD)).status).toBe(200);
        return { client, id: (await client.request('GET', '/me')).body.data.user.id as string };
      };
      for (let round = 0; round < 6; round++) {
        const [p, q] = await Promise.all([newAdmin(`p${round}@initech.example`), newAdmin(`q${round}@initech.example`)]);
        const act = (by: typeof p, on: typeof p) =>
          round % 2 === 0 ? by.client.request('PATCH', `/members/${on.id}`, { role: 'operator' }) : by.client.request('DELETE', `/members/${on.id}`);
        const answers = await Promise.all([act(p, q), act(q, p)]);
        const statuses = answers.map((a) => a.status).sort();
        expect(statuses).toEqual(round % 2 === 0 ? [200, 403] : [204, 403]);
        // Refused by the decision (both asked at once) or, when the other's change was already
        // visible, by the session's own standing (an operator now, or no member any more):
        // either way, not an admin any more.
        expect(["Only the organization's admins can do this", 'Your role (operator) does not allow this', 'Select an organization first']).toContain(
          answers.find((a) => a.status === 403)!.body.error.detail,
        );
        const admins = (await first.request('GET', '/members')).body.data.filter((m: Json) => m.role === 'admin' && [p.id, q.id].includes(m.id));
        expect(admins).toHaveLength(1);
      }
    },
    SLOW,
  );
});

describe('CSRF, origin and tenancy', () => {
  it(
    'a state-changing request without the CSRF token, or from another origin, is refused; reads need no token',
    async () => {
      const admin = await firstAdmin(orgA, 'csrf@example.com');
      const noToken = await admin.request('POST', '/keys', { name: 'x', access: { assets: 'read' } }, { csrf: null });
      expect(noToken).toMatchObject({ status: 403, body: { error: { type: 'forbidden', detail: 'Missing or wrong X-CSRF-Token header (GET /app/api/me gives the token)' } } });
      expect((await admin.request('POST', '/keys', { name: 'x', access: { assets: 'read' } }, { csrf: 'guess' })).status).toBe(403);
      expect((await admin.request('POST', '/keys', { name: 'x', access: { assets: 'read' } }, { origin: 'https://evil.example' })).status).toBe(403);
      expect((await admin.request('POST', '/keys', { name: 'x', access: { assets: 'read' } }, { origin: null })).status).toBe(403);
      expect((await new AppClient(svc.apiUrl).request('POST', '/sign-in', { email: 'csrf@example.com', password: PASSWORD }, { origin: 'https://evil.example' })).status).toBe(403);
      expect((await admin.request('GET', '/keys')).status).toBe(200);
      // Without a session.
      expect((await new AppClient(svc.apiUrl).request('GET', '/me')).status).toBe(401);
    },
    SLOW,
  );

  it(
    "a session of one organization's user cannot act in another organization",
    async () => {
      const globexAdmin = await firstAdmin(orgB, 'hedy@example.com');
      const globexKey = (await globexAdmin.request('POST', '/keys', { name: 'globex', access: { locations: 'read' } })).body.data;
      const acmeAdmin = await firstAdmin(orgA, 'alan@example.com');

      expect((await acmeAdmin.request('POST', '/session/org', { org_id: orgB })).status).toBe(403);
      expect((await acmeAdmin.signIn('alan@example.com', PASSWORD, orgB)).body.data.current_org.id).toBe(orgA);
      const revoke = await acmeAdmin.request('DELETE', `/keys/${globexKey.id}`);
      expect(revoke.status).toBe(404);
      expect((await acmeAdmin.request('GET', '/keys')).body.data.map((k: Json) => k.id)).not.toContain(globexKey.id);
      const hedyId = (await globexAdmin.request('GET', '/me')).body.data.user.id;
      expect((await acmeAdmin.request('PATCH', `/members/${hedyId}`, { role: 'operator' })).status).toBe(404);
      expect((await acmeAdmin.request('DELETE', `/members/${hedyId}`)).status).toBe(404);
      expect((await acmeAdmin.request('POST', `/members/${hedyId}/unlock`)).status).toBe(404);
      expect((await acmeAdmin.request('GET', '/members')).body.data.map((m: Json) => m.email)).not.toContain('hedy@example.com');
      // The contract session token of an Acme session is refused in Globex's data: it only names Acme.
      expect((await globexAdmin.request('GET', '/keys')).body.data[0]).toMatchObject({ id: globexKey.id, revoked_at: null });
    },
    SLOW,
  );

  it(
    'names with markup are stored and returned verbatim, as JSON',
    async () => {
      const admin = await firstAdmin(orgA, 'markup@example.com');
      const name = `<script>alert("x")</script><img src=x onerror=alert(1)> & 'quotes'`;
      const minted = await admin.request('POST', '/keys', { name, access: { scans: 'write' } });
      expect(minted.status).toBe(201);
      expect(minted.headers.get('content-type')).toMatch(/^application\/json/);
      expect(minted.body.data).toMatchObject({ name, scopes: ['scans:write'] });
      expect((await admin.request('GET', '/keys')).body.data.find((k: Json) => k.id === minted.body.data.id).name).toBe(name);
      const bad = await admin.request('POST', '/keys', { name: '', access: {}, extra: 1 });
      expect(bad.status).toBe(400);
      expect(bad.body.error).toMatchObject({ type: 'validation_error', request_id: expect.any(String) });
      expect(bad.body.error.fields.map((f: Json) => f.field)).toEqual(['name', 'extra']);
    },
    SLOW,
  );
});

describe('sign-in', () => {
  it(
    'a wrong password answers exactly like an unknown email, in text and in time',
    async () => {
      // Several users, so that there are enough samples within the free failures of each address.
      const users = ['timing1@example.com', 'timing2@example.com', 'timing3@example.com', 'timing4@example.com', 'timing5@example.com'];
      for (const user of users) await firstAdmin(orgA, user);
      const client = new AppClient(svc.apiUrl);
      const timed = async (email: string) => {
        const started = process.hrtime.bigint();
        const answer = await client.request('POST', '/sign-in', { email, password: 'wrong password!' });
        return { ms: Number(process.hrtime.bigint() - started) / 1e6, answer };
      };
      const wrong: number[] = [];
      const unknown: number[] = [];
      // Within the free failures of each address, alternating so load affects both alike.
      for (let i = 0; i < users.length * (SIGN_IN_LIMITS.freeFailures - 1); i++) {
        const a = await timed(users[i % users.length]!);
        const b = await timed(`nobody${i}@example.com`);
        expect(a.answer.status).toBe(401);
        expect(a.answer.body.error).toEqual({ ...b.answer.body.error, request_id: a.answer.body.error.request_id });
        expect(a.answer.body.error.detail).toBe('Wrong email or password');
        expect([...a.answer.headers.keys()].sort()).toEqual([...b.answer.headers.keys()].sort());
        wrong.push(a.ms);
        unknown.push(b.ms);
      }
      const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
      // Both pay one scrypt hash (tens of ms); without the dummy hash an unknown email answers in a few ms.
      const difference = Math.abs(median(wrong) - median(unknown));
      expect(difference, `wrong password ${median(wrong)} ms, unknown email ${median(unknown)} ms`).toBeLessThan(Math.max(25, 0.5 * median(wrong)));
      expect(median(unknown)).toBeGreaterThan(10);
    },
    SLOW,
  );

  it(
    'repeated failures slow down, then lock; parallel attempts are counted; the lock shows in users list and the members endpoint; an admin unlocks',
    async () => {
      const admin = await firstAdmin(orgA, 'keeper@example.com');
      await admin.request('POST', '/members/invitations', { email: 'target@example.com', role: 'operator' }).then((r) =>
        new AppClient(svc.apiUrl).request('POST', '/invitations/accept', { token: tokenOf(r.body.data.invite_url), password: PASSWORD }),
      );
      const attacker = () => new AppClient(svc.apiUrl).request('POST', '/sign-in', { email: 'target@example.com', password: 'not the password' });
      // 20 at once: only the free failures reach a password check (and one more per second the burst lasts); the rest must wait.
      const started = Date.now();
      const burst = await Promise.all(Array.from({ length: 20 }, attacker));
      const lasted = Math.ceil((Date.now() - started) / 1000);
      const statuses = burst.map((a) => a.status);
      const checked = statuses.filter((s) => s === 401).length;
      expect(checked).toBeGreaterThanOrEqual(SIGN_IN_LIMITS.freeFailures);
      expect(checked).toBeLessThanOrEqual(SIGN_IN_LIMITS.freeFailures + lasted);
      expect(statuses.filter((s) => s === 429)).toHaveLength(20 - checked);
      expect(Number(burst.find((a) => a.status === 429)!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      // Then one attempt a second: exactly as many password checks as the threshold, then locked.
      let answers = checked;
      for (;;) {
        await new Promise((r) => setTimeout(r, SIGN_IN_LIMITS.delaySeconds * 1000 + 50));
        const answer = await attacker();
        if (answer.status === 403) break;
        expect(answer.status).toBe(401);
        answers++;
      }
      expect(answers).toBe(SIGN_IN_LIMITS.lockAfterFailures);
      const locked = await new AppClient(svc.apiUrl).signIn('target@example.com', PASSWORD);
      expect(locked).toMatchObject({ status: 403, body: { error: { detail: 'Too many failed sign-ins: this account is locked until an administrator unlocks it' } } });

      const members = (await admin.request('GET', '/members')).body.data;
      const target = members.find((m: Json) => m.email === 'target@example.com');
      expect(target.locked).toBe(true);
      expect((await cliJson('users', 'list', '--org', String(orgA))).find((m: Json) => m.email === 'target@example.com').locked).toBe(true);

      expect((await admin.request('POST', `/members/${target.id}/unlock`)).body.data.locked).toBe(false);
      expect((await new AppClient(svc.apiUrl).signIn('target@example.com', PASSWORD)).status).toBe(200);
    },
    SLOW,
  );

  it(
    'password change: the old password stops working, other sessions end, this one goes on',
    async () => {
      const one = await firstAdmin(orgA, 'change@example.com');
      const two = new AppClient(svc.apiUrl);
      await two.signIn('change@example.com', PASSWORD);
      expect((await one.request('POST', '/password', { current_password: 'wrong wrong', new_password: 'a brand new password' })).status).toBe(400);
      expect((await one.request('POST', '/password', { current_password: PASSWORD, new_password: 'short' })).status).toBe(400);
      expect((await one.request('POST', '/password', { current_password: PASSWORD, new_password: 'a brand new password' })).status).toBe(204);
      expect((await one.request('GET', '/me')).status).toBe(200);
      expect((await two.request('GET', '/me')).status).toBe(401);
      expect((await new AppClient(svc.apiUrl).signIn('change@example.com', PASSWORD)).status).toBe(401);
      expect((await new AppClient(svc.apiUrl).signIn('change@example.com', 'a brand new password')).status).toBe(200);
    },
    SLOW,
  );
});
