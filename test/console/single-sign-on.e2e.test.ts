import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { bearer } from '../support/auth.js';
import { chromiumMissing, expectAccessible, launchBrowser, openContext, screenshot, type TestBrowser } from '../support/browser.js';
import { createTestDatabase } from '../support/database.js';
import { startOidcProvider, signInAtProvider, type TestProvider } from '../support/oidc-provider.js';
import { freePorts } from '../support/ports.js';
import { startTestService, type TestService } from '../support/service.js';
import { AppClient, type Json } from '../people/app-client.js';
import { findUserByEmail } from '../../shared/domain/people/commands.js';
import { ConfigError } from '../../shared/errors.js';
import { cliJson, SLOW } from './harness.js';

/**
 * Single sign-on (docs/web-app.md, "Single sign-on") in Debian's Chromium, end to end: the
 * console's sign-in page → the service's /app/api/oidc/start → a real OpenID provider
 * (oidc-provider, in a process of its own, test/support/oidc-provider.mjs) on another site
 * (localhost, where the service is 127.0.0.1) → its login page → the service's callback →
 * the console, signed in; or the page that says why not. Every refusal leaves no session and
 * creates nobody.
 */

const missing = chromiumMissing();

const CLIENT_ID = 'tracking-console';
const CLIENT_SECRET = 'a-client-secret-for-the-tests-only';
const JOIN_DOMAIN = 'join.example';

/** Logins at the provider, and what its ID tokens say of each. */
const ACCOUNTS = {
  ada: { email: 'Ada@Example.com', email_verified: true },
  eve: { email: 'eve@example.com', email_verified: false },
  stranger: { email: 'ada@other.example', email_verified: true },
  joiner: { email: `jo@${JOIN_DOMAIN}`, email_verified: true },
  linus: { email: 'linus@invited.example', email_verified: true },
  grace: { email: 'grace@example.com', email_verified: true },
  locked: { email: 'locked@example.com', email_verified: true },
};

let svc: TestService;
let provider: TestProvider;
let browser: TestBrowser;
let origin: string;
let acme: number;
let joinery: number;

beforeAll(async () => {
  if (missing) return;
  // The provider must know the service's callback and the service the provider's issuer: the
  // service's port is chosen first. The organization people of the allowed domain join must exist
  // before the service starts (it checks at start), so the database is prepared first.
  const [port] = await freePorts(1);
  origin = `http://127.0.0.1:${port}`;
  const db = await createTestDatabase('sso');
  acme = (await cliJson({ db }, origin, 'orgs', 'create', '--name', 'Acme')).id;
  joinery = (await cliJson({ db }, origin, 'orgs', 'create', '--name', 'Joinery')).id;
  provider = await startOidcProvider({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, redirectUri: `${origin}/app/api/oidc/callback`, accounts: ACCOUNTS, forgedIdTokens: ['grace'] });
  svc = await startTestService(
    'sso',
    {
      PORT: String(port!),
      PUBLIC_URL: origin,
      OIDC_ISSUER: provider.issuer,
      OIDC_CLIENT_ID: CLIENT_ID,
      OIDC_CLIENT_SECRET: CLIENT_SECRET,
      OIDC_ALLOWED_DOMAINS: JOIN_DOMAIN,
      OIDC_DEFAULT_ORG: String(joinery),
    },
    { db },
  );
  // People who have an account: made by `users create` (they never chose a password).
  for (const email of ['ada@example.com', 'eve@example.com', 'grace@example.com', 'locked@example.com']) {
    await cliJson(svc, origin, 'users', 'create', '--email', email, '--org', String(acme), '--role', 'admin');
  }
  browser = await launchBrowser();
}, SLOW);

afterAll(async () => {
  await browser?.close();
  await svc?.stop();
  await provider?.stop();
});

/** From the console's sign-in page through the provider's login as `login`; the callback's answer. */
async function signOnThroughProvider(page: Page, login: string): Promise<{ status: number }> {
  await page.goto('/sign-in');
  await page.getByRole('link', { name: 'Sign in with SSO' }).click();
  await page.waitForURL((url) => url.origin === provider.issuer);
  const callback = page.waitForResponse((response) => response.url().startsWith(`${origin}/app/api/oidc/callback`));
  await signInAtProvider(page, login);
  return { status: (await callback).status() };
}

/** The refusal page's reason, once it shows. */
async function refusalOf(page: Page): Promise<string> {
  await page.getByRole('heading', { level: 1, name: 'Sign-in refused' }).waitFor();
  return (await page.locator('#reason').textContent())!;
}

/** Whether the context's cookies hold a session of the service: /app/api/me from a console page (the refusal page allows no fetch). */
async function meOf(page: Page): Promise<{ status: number; body: Json }> {
  await page.goto('/sign-in');
  return page.evaluate(async () => {
    const response = await fetch('/app/api/me');
    return { status: response.status, body: await response.json() };
  });
}

/** The cookies the service's callback receives. */
const callbackCookies = async (context: BrowserContext) => context.cookies(`${origin}/app/api/oidc/callback`);

/** No session, and the pending flow is gone with its answer. */
async function refusedWithoutSession(context: BrowserContext, page: Page): Promise<void> {
  expect((await callbackCookies(context)).map((c) => c.name)).toEqual([]);
  expect((await meOf(page)).status).toBe(401);
}

/** A flow started as the page would, without following the redirect: the provider's authorization URL (the flow's cookie is in the context). */
async function startedFlow(context: BrowserContext): Promise<URL> {
  const started = await context.request.get(`${origin}/app/api/oidc/start`, { maxRedirects: 0 });
  expect(started.status()).toBe(303);
  return new URL(started.headers().location!);
}

describe.skipIf(missing !== null)('single sign-on in a browser', () => {
  it(
    'the sign-in page offers it; through the provider, a person who has an account lands on the console signed in, with the session a password sign-in opens',
    async () => {
      const { context, page, problems } = await openContext(browser.browser, origin);
      await page.goto('/sign-in');
      const offered = page.getByRole('link', { name: 'Sign in with SSO' });
      await offered.waitFor();
      expect(await offered.getAttribute('href')).toBe('/app/api/oidc/start');
      await expectAccessible(page, 'sign-in with SSO');
      await screenshot(page, 'sign-in-sso');

      await offered.click();
      await page.waitForURL((url) => url.origin === provider.issuer);
      const callback = page.waitForResponse((response) => response.url().startsWith(`${origin}/app/api/oidc/callback`));
      await signInAtProvider(page, 'ada');
      const answer = await callback;
      expect(answer.status()).toBe(303);
      expect(answer.headers().location).toBe('/');
      expect(answer.url()).toMatch(/\?code=[^&]+&state=[^&]+&iss=/);

      await page.getByRole('heading', { level: 1, name: 'Where things are' }).waitFor();
      expect(new URL(page.url()).pathname).toBe('/assets');
      expect(await page.locator('.who').textContent()).toBe('ada@example.com');
      expect(await page.locator('.org').textContent()).toBe('Acme (admin)');
      const cookies = await callbackCookies(context);
      expect(cookies.find((c) => c.name === 'app_session')).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/' });
      // The pending flow is gone with its answer.
      expect(cookies.map((c) => c.name)).toEqual(['app_session']);
      // Recorded as a sign-in, as the members page shows it.
      const members = await page.evaluate(async () => (await (await fetch('/app/api/members')).json()) as { data: Array<{ email: string; last_sign_in_at: string | null }> });
      expect(members.data.find((m) => m.email === 'ada@example.com')!.last_sign_in_at).not.toBeNull();
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'the authorization request: code flow, PKCE S256, a state, a nonce, the registered callback; the flow cookie HttpOnly, SameSite=Lax, for ten minutes',
    async () => {
      const { context } = await openContext(browser.browser, origin);
      const authorization = await startedFlow(context);
      expect(authorization.origin + authorization.pathname).toBe(`${provider.issuer}/auth`);
      const params = Object.fromEntries(authorization.searchParams);
      expect(params).toMatchObject({ client_id: CLIENT_ID, response_type: 'code', scope: 'openid email', code_challenge_method: 'S256', redirect_uri: `${origin}/app/api/oidc/callback` });
      expect(params.code_challenge).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(params.state!.length).toBeGreaterThanOrEqual(32);
      expect(params.nonce!.length).toBeGreaterThanOrEqual(32);
      expect(params.response_mode).toBeUndefined();
      const flow = (await callbackCookies(context)).find((c) => c.name === 'oidc_flow')!;
      expect(flow).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/app/api/oidc' });
      expect(flow.expires - Date.now() / 1000).toBeGreaterThan(590);
      expect(flow.expires - Date.now() / 1000).toBeLessThanOrEqual(600);
      // A second flow gets its own state.
      expect((await startedFlow(context)).searchParams.get('state')).not.toBe(params.state);
      await context.close();
    },
    SLOW,
  );

  it(
    'an email address the provider has not verified is refused, though its user exists',
    async () => {
      const { context, page, problems } = await openContext(browser.browser, origin);
      expect((await signOnThroughProvider(page, 'eve')).status).toBe(403);
      expect(await refusalOf(page)).toBe('Your identity provider has not verified this email address (eve@example.com): verify it there, then sign in again');
      await expectAccessible(page, 'sign-in refused');
      await screenshot(page, 'sign-in-refused');
      // The page's own style is allowed by its hash, and nothing else runs on it.
      expect(problems).toEqual([]);
      await refusedWithoutSession(context, page);
      await context.close();
    },
    SLOW,
  );

  it(
    'an email nobody has, of a domain not allowed to join, is refused with a page that says why, and nobody is created',
    async () => {
      const { context, page } = await openContext(browser.browser, origin);
      expect((await signOnThroughProvider(page, 'stranger')).status).toBe(403);
      expect(await refusalOf(page)).toBe('No account for ada@other.example: ask an administrator to invite you');
      await page.getByRole('link', { name: 'Back to sign-in' }).click();
      await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
      await refusedWithoutSession(context, page);
      expect(await findUserByEmail(svc.service.ctx, 'ada@other.example')).toBeNull();
      const users = await svc.service.ctx.pool.query('SELECT 1 FROM read_model.users WHERE email = $1', ['ada@other.example']);
      expect(users.rowCount).toBe(0);
      await context.close();
    },
    SLOW,
  );

  it(
    'someone of an allowed domain joins its organization as a viewer on the first sign-in: no admin pages, and their session token is not an admin’s',
    async () => {
      expect(await findUserByEmail(svc.service.ctx, `jo@${JOIN_DOMAIN}`)).toBeNull();
      const { context, page } = await openContext(browser.browser, origin);
      expect((await signOnThroughProvider(page, 'joiner')).status).toBe(303);
      await page.getByRole('heading', { level: 1, name: 'Where things are' }).waitFor();
      expect(await page.locator('.org').textContent()).toBe('Joinery (viewer)');
      const me = (await meOf(page)).body.data;
      expect(me.memberships).toEqual([{ org_id: joinery, org_name: 'Joinery', role: 'viewer' }]);
      expect(me.current_org).toEqual({ id: joinery, name: 'Joinery', role: 'viewer' });
      // Made by the sign-in, with no password: a password sign-in is refused.
      const user = await findUserByEmail(svc.service.ctx, `jo@${JOIN_DOMAIN}`);
      expect(user).toMatchObject({ password: null, memberships: new Map([[joinery, 'viewer']]) });
      expect((await new AppClient(origin).signIn(`jo@${JOIN_DOMAIN}`, 'any password at all')).status).toBe(401);
      // The console's session token for /api/v1 carries the viewer's role: admins' endpoints refuse it.
      const token = await page.evaluate(async () => {
        const csrf = ((await (await fetch('/app/api/me')).json()) as { data: { csrf_token: string } }).data.csrf_token;
        const response = await fetch('/app/api/session-token', { method: 'POST', headers: { 'x-csrf-token': csrf } });
        return ((await response.json()) as { data: { token: string } }).data.token;
      });
      expect((await fetch(`${origin}/api/v1/webhook-endpoints`, { headers: bearer(token) })).status).toBe(403);
      // It reads master data, and writes none.
      expect((await fetch(`${origin}/api/v1/assets`, { headers: bearer(token) })).status).toBe(200);
      const write = await fetch(`${origin}/api/v1/assets`, { method: 'POST', headers: { ...bearer(token), 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Forklift' }) });
      expect(write.status).toBe(403);
      expect(((await write.json()) as { error: { detail: string } }).error.detail).toBe('Your role (viewer) does not allow this');
      const members = await page.evaluate(async () => (await fetch('/app/api/members')).status);
      expect(members).toBe(403);
      await context.close();

      // The second sign-in signs the same user in, and joins nothing more.
      const again = await openContext(browser.browser, origin);
      expect((await signOnThroughProvider(again.page, 'joiner')).status).toBe(303);
      await again.page.getByRole('heading', { level: 1, name: 'Where things are' }).waitFor();
      expect((await meOf(again.page)).body.data.user.id).toBe(user!.userId);
      await again.context.close();
    },
    SLOW,
  );

  it(
    'a pending invitation is accepted by the sign-in, with the invitation’s role',
    async () => {
      const invitation = await cliJson(svc, origin, 'users', 'invite', '--email', 'linus@invited.example', '--org', String(acme), '--role', 'operator');
      expect(invitation.role).toBe('operator');
      const { context, page } = await openContext(browser.browser, origin);
      expect((await signOnThroughProvider(page, 'linus')).status).toBe(303);
      await page.getByRole('heading', { level: 1, name: 'Where things are' }).waitFor();
      expect(await page.locator('.org').textContent()).toBe('Acme (operator)');
      expect((await meOf(page)).body.data.memberships).toEqual([{ org_id: acme, org_name: 'Acme', role: 'operator' }]);
      // No longer pending, and its link is used up.
      const pending = await svc.service.ctx.pool.query('SELECT accepted_at FROM read_model.invitations WHERE email = $1', ['linus@invited.example']);
      expect(pending.rows).toEqual([{ accepted_at: expect.any(Date) }]);
      const link = await new AppClient(origin).request('POST', '/invitations/accept', { token: decodeURIComponent(invitation.invite_url.split('#token=')[1]), password: 'a long enough password' });
      expect(link.status).toBe(400);
      expect(link.body.error.fields[0]).toMatchObject({ field: 'token', message: 'This invitation link has already been used' });
      await context.close();
    },
    SLOW,
  );

  it(
    'an answer whose state is not the one this browser’s flow holds is refused',
    async () => {
      const { context, page } = await openContext(browser.browser, origin);
      const authorization = await startedFlow(context);
      // The provider sends back whatever state it was given: another flow's.
      authorization.searchParams.set('state', 'state-of-another-browser-s-flow-0123456789');
      await page.goto(authorization.href);
      const callback = page.waitForResponse((response) => response.url().startsWith(`${origin}/app/api/oidc/callback`));
      await signInAtProvider(page, 'ada');
      expect((await callback).status()).toBe(400);
      expect(await refusalOf(page)).toBe(
        'The answer of your identity provider does not belong to the sign-in this browser started (its state does not match): start again from the sign-in page',
      );
      await refusedWithoutSession(context, page);
      await context.close();
    },
    SLOW,
  );

  it(
    'an ID token whose nonce is not the one this browser’s flow holds is refused',
    async () => {
      const { context, page } = await openContext(browser.browser, origin);
      const authorization = await startedFlow(context);
      authorization.searchParams.set('nonce', 'nonce-of-another-browser-s-flow-0123456789');
      await page.goto(authorization.href);
      const callback = page.waitForResponse((response) => response.url().startsWith(`${origin}/app/api/oidc/callback`));
      await signInAtProvider(page, 'ada');
      expect((await callback).status()).toBe(400);
      expect(await refusalOf(page)).toBe('The ID token was not issued for the sign-in this browser started (its nonce does not match): start again from the sign-in page');
      await refusedWithoutSession(context, page);
      await context.close();
    },
    SLOW,
  );

  it(
    'an ID token signed by a key the provider does not publish is refused, though the person has an account',
    async () => {
      const { context, page } = await openContext(browser.browser, origin);
      expect((await signOnThroughProvider(page, 'grace')).status).toBe(400);
      expect(await refusalOf(page)).toBe('The answer of your identity provider could not be verified (JWT signature verification failed): start again from the sign-in page');
      await refusedWithoutSession(context, page);
      await context.close();
    },
    SLOW,
  );

  it(
    'a callback without the flow this browser started (another browser, or none) is refused',
    async () => {
      const first = await openContext(browser.browser, origin);
      const authorization = await startedFlow(first.context);
      // The same answer reaches a browser that started nothing.
      const other = await openContext(browser.browser, origin);
      await other.page.goto(authorization.href);
      const callback = other.page.waitForResponse((response) => response.url().startsWith(`${origin}/app/api/oidc/callback`));
      await signInAtProvider(other.page, 'ada');
      expect((await callback).status()).toBe(400);
      expect(await refusalOf(other.page)).toBe('This sign-in was not started in this browser, or took longer than 10 minutes: start again from the sign-in page');
      await refusedWithoutSession(other.context, other.page);
      await first.context.close();
      await other.context.close();
    },
    SLOW,
  );

  it(
    'a sign-in the person cancels at the provider comes back as its error, and is refused',
    async () => {
      const { context, page } = await openContext(browser.browser, origin);
      await page.goto('/sign-in');
      await page.getByRole('link', { name: 'Sign in with SSO' }).click();
      await page.waitForURL((url) => url.origin === provider.issuer);
      const callback = page.waitForResponse((response) => response.url().startsWith(`${origin}/app/api/oidc/callback`));
      await page.getByRole('link', { name: '[ Cancel ]' }).click();
      const answer = await callback;
      expect(answer.status()).toBe(403);
      expect(new URL(answer.url()).searchParams.get('error')).toBe('access_denied');
      expect(await refusalOf(page)).toBe('Your identity provider did not sign you in (End-User aborted interaction): start again from the sign-in page');
      await refusedWithoutSession(context, page);
      await context.close();
    },
    SLOW,
  );

  it(
    'a locked account is refused by single sign-on too',
    async () => {
      await svc.service.ctx.pool.query(
        `INSERT INTO service.sign_in_attempts (email, failures, next_attempt_at, locked_at) VALUES ($1, 10, now(), now())
         ON CONFLICT (email) DO UPDATE SET failures = 10, locked_at = now()`,
        ['locked@example.com'],
      );
      const { context, page } = await openContext(browser.browser, origin);
      expect((await signOnThroughProvider(page, 'locked')).status).toBe(403);
      expect(await refusalOf(page)).toBe('Too many failed sign-ins: this account is locked until an administrator unlocks it');
      await refusedWithoutSession(context, page);
      await context.close();
    },
    SLOW,
  );
});

describe('single sign-on settings at start', () => {
  it('an OIDC_DEFAULT_ORG that names no organization stops the service at start, naming the variable', async () => {
    const db = await createTestDatabase('sso_no_org');
    const settings = { PUBLIC_URL: 'http://127.0.0.1:9', OIDC_ISSUER: 'http://localhost:9', OIDC_CLIENT_ID: CLIENT_ID, OIDC_CLIENT_SECRET: CLIENT_SECRET, OIDC_ALLOWED_DOMAINS: JOIN_DOMAIN };
    const refused = await startTestService('sso-no-org', { ...settings, OIDC_DEFAULT_ORG: '4242' }, { db }).then(
      async (started) => {
        await started.stop();
        return null;
      },
      async (error: unknown) => {
        await db.drop();
        return error;
      },
    );
    expect(refused).toBeInstanceOf(ConfigError);
    expect((refused as Error).message).toBe('Invalid configuration: OIDC_DEFAULT_ORG: organization 4242 does not exist');
  }, SLOW);

  it('a provider that cannot be reached stops no start; a sign-in then gets a page that says so', async () => {
    const [closed] = await freePorts(1);
    const unreachable = await startTestService('sso-unreachable', {
      PUBLIC_URL: 'http://127.0.0.1:9',
      OIDC_ISSUER: `http://127.0.0.1:${closed!}`,
      OIDC_CLIENT_ID: CLIENT_ID,
      OIDC_CLIENT_SECRET: CLIENT_SECRET,
    });
    try {
      const answer = await fetch(`${new URL(unreachable.apiUrl).origin}/app/api/oidc/start`, { redirect: 'manual' });
      expect(answer.status).toBe(502);
      expect(answer.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(answer.headers.get('set-cookie')).toBeNull();
      expect(await answer.text()).toContain('<p id="reason">Your identity provider could not be reached: try again later</p>');
    } finally {
      await unreachable.stop();
    }
  }, SLOW);

  it('the sign-in page is told whether single sign-on is on', async () => {
    const off = await startTestService('sso-off');
    try {
      const answer = await new AppClient(off.apiUrl).request('GET', '/sign-in/options');
      expect(answer).toMatchObject({ status: 200, body: { data: { sso: false } } });
      // Its navigations are not there either.
      expect((await fetch(`${new URL(off.apiUrl).origin}/app/api/oidc/start`, { redirect: 'manual' })).status).toBe(404);
    } finally {
      await off.stop();
    }
    if (missing) return;
    expect(await new AppClient(origin).request('GET', '/sign-in/options')).toMatchObject({ status: 200, body: { data: { sso: true } } });
  }, SLOW);
});
