import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { chromiumMissing, expectAccessible, launchBrowser, openContext, screenshot, type TestBrowser } from '../support/browser.js';
import { AppClient, tokenOf, type Json } from '../people/app-client.js';
import { inviteUser } from '../../shared/domain/people/commands.js';
import { LINK_LIFETIME_MS } from '../../shared/domain/people/decider.js';
import { CONSOLE_CONTENT_SECURITY_POLICY } from '../../services/api/console/serve.js';
import { cliJson as cli, PASSWORD, ROOT, signIn, SLOW, XSS, XSS_NO_SPACE } from './harness.js';

/**
 * The console's pages (docs/console.md) in Debian's Chromium against a started service: the
 * first admin's setup link to a minted and revoked key, an invited member, and what must be
 * refused or rendered as text. axe-core checks every page.
 */

const missing = chromiumMissing();

let svc: TestService;
let origin: string;
let browser: TestBrowser;
let orgA: number;
let orgB: number;

const cliJson = (...args: string[]) => cli(svc, origin, ...args);

/** The status of a call of the public API with this token, retried until `want` (a revocation reaches every process within a second). */
async function apiStatus(token: string, want: number): Promise<number> {
  let status = 0;
  for (let i = 0; i < 30; i++) {
    status = (await fetch(`${svc.apiUrl}/orgs/me`, { headers: bearer(token) })).status;
    if (status === want) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return status;
}

beforeAll(async () => {
  if (missing) return;
  svc = await startTestService('console');
  origin = new URL(svc.apiUrl).origin;
  orgA = (await createOrg(svc.service.ctx, `Acme ${XSS}`)).id;
  orgB = (await createOrg(svc.service.ctx, 'Globex')).id;
  browser = await launchBrowser();
}, SLOW);

afterAll(async () => {
  await browser?.close();
  await svc?.stop();
});

describe.skipIf(missing !== null)('the console in a browser', () => {
  let keyId = '';
  let inviteUrl = '';

  it(
    'the first admin: setup link → password → sign in → mint a key → it works on /api/v1 → revoke in the page → refused',
    async () => {
      const created = await cliJson('users', 'create', '--email', 'ada@example.com', '--org', String(orgA), '--role', 'admin');
      const { page, context, problems } = await openContext(browser.browser, origin);

      await page.goto(created.setup_url);
      await page.getByRole('heading', { name: 'Choose your password' }).waitFor();
      await expectAccessible(page, 'setup');
      await screenshot(page, 'setup');
      await page.getByLabel('New password').fill(PASSWORD);
      await page.getByLabel('Repeat it').fill(PASSWORD);
      await page.getByRole('button', { name: 'Set password' }).click();
      await page.getByText('You can now sign in as ada@example.com').waitFor();
      // The used link's token is gone from the address bar.
      expect(page.url()).not.toContain('token=');

      await page.goto('/sign-in');
      await expectAccessible(page, 'sign-in');
      await screenshot(page, 'sign-in');
      await signIn(page, 'ada@example.com');
      // The organization's name, with markup, is text.
      await expect.poll(() => page.locator('.org').textContent()).toBe(`Acme ${XSS} (admin)`);

      await page.getByRole('link', { name: 'API keys' }).click();
      await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
      await expectAccessible(page, 'keys (empty)');
      await page.getByLabel('Name').fill(`partner ${XSS}`);
      await page.getByLabel('Assets').selectOption('read_write');
      await page.getByLabel('Locations').selectOption('read');
      await page.getByLabel('Tracking').selectOption('read');
      // Tracking has no write level.
      expect(await page.getByLabel('Tracking').locator('option').allTextContents()).toEqual(['None', 'Read']);
      await page.getByRole('button', { name: 'Mint key' }).click();
      const token = await page.getByLabel('Token').inputValue();
      expect(token.length).toBeGreaterThan(40);
      await page.getByRole('button', { name: 'Copy' }).click();
      await page.getByText('Copied.').waitFor();
      expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(token);

      const row = page.locator('tbody tr').first();
      expect(await row.locator('.key-name').textContent()).toBe(`partner ${XSS}`);
      expect(await page.locator('tbody img').count()).toBe(0);
      expect(await row.locator('.scopes li').allTextContents()).toEqual(['assets:read', 'assets:write', 'locations:read', 'tracking:read']);
      expect(await row.textContent()).toContain('ada@example.com');
      keyId = (await row.getAttribute('data-key-id'))!;
      await expectAccessible(page, 'keys (minted)');
      await screenshot(page, 'keys');

      // The token works with a plain HTTP request.
      const me = await fetch(`${svc.apiUrl}/orgs/me`, { headers: bearer(token) });
      expect(me.status).toBe(200);
      expect(((await me.json()) as Json).data.scopes).toContain('assets:write');

      await row.getByRole('button', { name: /^Revoke key/ }).click();
      const dialog = page.getByRole('dialog', { name: 'Revoke this key?' });
      await dialog.waitFor();
      await expectAccessible(page, 'revoke dialog');
      await screenshot(page, 'keys-revoke');
      await dialog.getByRole('button', { name: 'Revoke key' }).click();
      await page.getByText(`Key "partner ${XSS}" revoked.`).waitFor();
      await expect.poll(() => row.locator('.badge').textContent()).toBe('Revoked');
      expect(await apiStatus(token, 401)).toBe(401);

      // A state-changing request from the page's own context without the CSRF header is refused.
      const withoutCsrf = await page.evaluate(async () => {
        const response = await fetch('/app/api/keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'csrf', access: { assets: 'read' } }) });
        return { status: response.status, body: await response.text() };
      });
      expect(withoutCsrf.status).toBe(403);
      expect(withoutCsrf.body).toContain('X-CSRF-Token');

      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'an invited member: the link shown to the admin → accepted in a second context → tracking views, but no keys page and the server refuses it too',
    async () => {
      const admin = await openContext(browser.browser, origin);
      await signIn(admin.page, 'ada@example.com');
      await admin.page.getByRole('link', { name: 'Members' }).click();
      await admin.page.getByRole('heading', { level: 1, name: 'Members' }).waitFor();
      await admin.page.getByLabel('Email').fill('grace@example.com');
      await admin.page.getByLabel('Role', { exact: true }).selectOption('operator');
      await admin.page.getByRole('button', { name: 'Create invitation' }).click();
      inviteUrl = await admin.page.getByLabel('Invitation link').inputValue();
      expect(inviteUrl).toMatch(new RegExp(`^${origin}/invite#token=`));
      await expectAccessible(admin.page, 'members');
      // Pending until accepted; another one cancelled from the page is gone from the list.
      await admin.page.locator('tr[data-invitation="grace@example.com"]').waitFor();
      await admin.page.getByLabel('Email').fill('mallory@example.com');
      await admin.page.getByRole('button', { name: 'Create invitation' }).click();
      const mallory = admin.page.locator('tr[data-invitation="mallory@example.com"]');
      await mallory.getByRole('button', { name: 'Cancel the invitation of mallory@example.com' }).click();
      await admin.page.getByRole('dialog').getByRole('button', { name: 'Cancel invitation' }).click();
      await admin.page.getByText('The invitation of mallory@example.com was cancelled.').waitFor();
      expect(await mallory.count()).toBe(0);

      const member = await openContext(browser.browser, origin);
      await member.page.goto(inviteUrl);
      await member.page.getByRole('heading', { name: 'Accept the invitation' }).waitFor();
      await expectAccessible(member.page, 'invite');
      await screenshot(member.page, 'invite');
      await member.page.getByLabel('New password').fill(PASSWORD);
      await member.page.getByLabel('Repeat it').fill(PASSWORD);
      await member.page.getByRole('button', { name: 'Accept' }).click();
      await member.page.getByText('You can now sign in as grace@example.com').waitFor();

      // Signed in with the keyboard alone.
      await member.page.goto('/sign-in');
      await member.page.getByLabel('Email').focus();
      await member.page.keyboard.type('grace@example.com');
      await member.page.keyboard.press('Tab');
      await member.page.keyboard.type(PASSWORD);
      await member.page.keyboard.press('Enter');
      await member.page.getByRole('heading', { level: 1, name: 'Where things are' }).waitFor();
      const nav = await member.page.getByRole('navigation', { name: 'Main' }).getByRole('link').allTextContents();
      expect(nav).toEqual(['Where things are', 'Locations', 'Import', 'Scan', 'Counts', 'Alerts', 'Live reads', 'Unknown reads', 'Password']);
      await member.page.goto('/keys');
      await member.page.getByRole('heading', { level: 1, name: 'Administrators only' }).waitFor();
      const refused = await member.page.evaluate(async () => {
        const me = (await (await fetch('/app/api/me')).json()) as { data: { csrf_token: string } };
        const headers = { 'content-type': 'application/json', 'x-csrf-token': me.data.csrf_token };
        const list = await fetch('/app/api/keys');
        const mint = await fetch('/app/api/keys', { method: 'POST', headers, body: JSON.stringify({ name: 'sneaky', access: { assets: 'read' } }) });
        return [list.status, mint.status];
      });
      expect(refused).toEqual([403, 403]);

      // The admin sees the new member; after ten failed sign-ins the account shows as locked.
      await admin.page.reload();
      const row = admin.page.locator('tr[data-member="grace@example.com"]');
      await row.waitFor();
      expect(await admin.page.locator('tr[data-invitation="grace@example.com"]').count()).toBe(0);
      await svc.service.ctx.pool.query(
        `INSERT INTO service.sign_in_attempts (email, failures, next_attempt_at, locked_at) VALUES ($1, 10, now(), now())
         ON CONFLICT (email) DO UPDATE SET failures = 10, locked_at = now()`,
        ['grace@example.com'],
      );
      await member.page.getByRole('button', { name: 'Sign out' }).click();
      await member.page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
      await member.page.getByLabel('Email').fill('grace@example.com');
      await member.page.getByLabel('Password').fill(PASSWORD);
      await member.page.getByRole('button', { name: 'Sign in' }).click();
      await member.page.getByRole('alert').filter({ hasText: 'this account is locked' }).waitFor();

      await admin.page.reload();
      await row.locator('.badge', { hasText: 'Locked' }).waitFor();
      await expectAccessible(admin.page, 'members (locked)');
      await screenshot(admin.page, 'members');
      await row.getByRole('button', { name: 'Unlock grace@example.com' }).click();
      await admin.page.getByText('grace@example.com is unlocked.').waitFor();
      await expect.poll(() => row.locator('.badge').textContent()).toBe('Active');

      await row.getByLabel('Role of grace@example.com').selectOption('admin');
      await admin.page.getByText('grace@example.com is now admin.').waitFor();
      await row.getByLabel('Role of grace@example.com').selectOption('operator');
      await admin.page.getByText('grace@example.com is now operator.').waitFor();

      await member.page.getByRole('button', { name: 'Sign in' }).click();
      await member.page.getByRole('heading', { level: 1, name: 'Where things are' }).waitFor();

      expect([...admin.problems, ...member.problems]).toEqual([]);
      await admin.context.close();
      await member.context.close();
    },
    SLOW,
  );

  it(
    'an expired invitation is refused in the page; a used one too: the page says why, with no form',
    async () => {
      const old = await inviteUser(
        svc.service.ctx,
        { email: 'late@example.com', orgId: orgA, role: 'operator', by: { kind: 'cli' }, publicUrl: origin },
        { now: Date.now() - LINK_LIFETIME_MS - 1000 },
      );
      const { page, context, problems } = await openContext(browser.browser, origin);
      for (const [url, refusal] of [
        [old.invite_url, 'This link has expired'],
        [inviteUrl, 'This link was already used'],
      ] as const) {
        await page.goto(url);
        await page.getByRole('heading', { level: 1, name: refusal }).waitFor();
        expect(await page.locator('input[type=password]').count()).toBe(0);
      }
      await expectAccessible(page, 'invite (refused)');
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'markup in names, descriptions, tag values, emails and organizations is shown as text on every page, and no dialog opens',
    async () => {
      const key = await mintApiKey(svc.service.ctx, { orgId: orgA, scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read', 'scans:write'] });
      const post = async (path: string, body: unknown) => {
        const response = await fetch(`${svc.apiUrl}${path}`, { method: 'POST', headers: { ...bearer(key.token), 'content-type': 'application/json' }, body: JSON.stringify(body) });
        expect(response.status).toBe(201);
        return ((await response.json()) as Json).data;
      };
      const site = await post('/locations', { external_key: 'SITE-1', name: `Site ${XSS}` });
      await post('/locations', { external_key: 'DOCK-1', name: `Dock <script>alert(2)</script>`, parent_id: site.id });
      await post('/assets', { external_key: 'FORK-7', name: `Forklift ${XSS}`, description: `<b onmouseover=alert(3)>desc</b>`, tags: [{ tag_type: 'rfid', value: 'E28011606000020' }] });
      const scans = await fetch(`${svc.ingestUrl}/scans`, {
        method: 'POST',
        headers: { ...bearer(key.token), 'content-type': 'application/json' },
        body: JSON.stringify({ submission_id: 'console-1', device_id: 'hh-1', location: { external_key: 'DOCK-1' }, reads: [{ tag_type: 'rfid', value: 'E28011606000020', observed_at: new Date().toISOString() }] }),
      });
      expect(scans.status).toBe(202);
      // A member whose email holds markup (the server takes any text; the page must show it as text).
      const invited = await inviteUser(svc.service.ctx, { email: `x${XSS_NO_SPACE}@example.com`, orgId: orgA, role: 'operator', by: { kind: 'cli' }, publicUrl: origin });
      expect((await new AppClient(svc.apiUrl).request('POST', '/invitations/accept', { token: tokenOf(invited.invite_url), password: PASSWORD })).status).toBe(200);

      const { page, context, problems } = await openContext(browser.browser, origin);
      await signIn(page, 'ada@example.com');
      // Names first, keys second (docs/console.md, "Names first"): the report's row shows both.
      const reportRow = page.locator('tbody tr').filter({ hasText: 'FORK-7' });
      await reportRow.waitFor();
      expect(await reportRow.locator('td').first().locator('.name').textContent()).toBe(`Forklift ${XSS}`);
      expect(await reportRow.locator('td').nth(1).textContent()).toBe('Dock <script>alert(2)</script> DOCK-1');
      await page.getByLabel(/Find an asset/).fill('forklift');
      await page.getByRole('button', { name: 'Search' }).click();
      const found = page.getByRole('search', { name: 'Assets' });
      await found.getByRole('link', { name: `Forklift ${XSS}` }).waitFor();
      await expectAccessible(page, 'where things are');
      await screenshot(page, 'where-things-are');

      await found.getByRole('link', { name: `Forklift ${XSS}` }).click();
      await page.getByRole('heading', { level: 1, name: `Forklift ${XSS}` }).waitFor();
      await page.getByText('<b onmouseover=alert(3)>desc</b>').waitFor();
      await page.locator('.timeline li').first().waitFor();
      await expect.poll(() => page.locator('.timeline .where .name').allTextContents()).toEqual(['Dock <script>alert(2)</script>']);
      expect(await page.locator('.timeline .where .key').allTextContents()).toEqual(['DOCK-1']);
      await expectAccessible(page, 'asset');
      await screenshot(page, 'asset');

      await page.getByRole('link', { name: 'Locations' }).click();
      await page.getByText(`Site ${XSS}`).waitFor();
      await page.getByText('Dock <script>alert(2)</script>').waitFor();
      expect(await page.getByRole('link', { name: /1 assets at Dock/ }).textContent()).toBe('1');
      await expectAccessible(page, 'locations');
      await screenshot(page, 'locations');

      await page.getByRole('link', { name: 'Members' }).click();
      await page.locator('td', { hasText: `x${XSS_NO_SPACE}@example.com` }).waitFor();
      await page.getByRole('link', { name: 'Password' }).click();
      await page.getByRole('heading', { level: 1, name: 'Change password' }).waitFor();
      await expectAccessible(page, 'password');
      await screenshot(page, 'password');

      expect(await page.locator('img').count()).toBe(0);
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    "another organization's session sees and touches only its own organization; the switcher changes organization",
    async () => {
      const created = await cliJson('users', 'create', '--email', 'bob@example.com', '--org', String(orgB), '--role', 'admin');
      const bob = new AppClient(svc.apiUrl);
      expect((await bob.request('POST', '/password-setup', { token: tokenOf(created.setup_url), password: PASSWORD })).status).toBe(200);
      expect((await bob.signIn('bob@example.com', PASSWORD)).status).toBe(200);
      // Bob's cookie in a browser: Acme's key is neither listed nor revocable.
      const { page, context, problems } = await openContext(browser.browser, origin);
      const [name, value] = bob.cookie!.split('=') as [string, string];
      await context.addCookies([{ name, value, url: origin }]);
      await page.goto('/keys');
      await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
      await page.getByText('No keys yet.').waitFor();
      expect(await page.locator('.org').textContent()).toBe('Globex (admin)');
      const revoke = await page.evaluate(async (id) => {
        const me = (await (await fetch('/app/api/me')).json()) as { data: { csrf_token: string } };
        return (await fetch(`/app/api/keys/${id}`, { method: 'DELETE', headers: { 'x-csrf-token': me.data.csrf_token } })).status;
      }, keyId);
      expect(revoke).toBe(404);

      // Ada, admin of Acme, is made a member of Globex too: the switcher appears and changes the pages.
      await cliJson('users', 'invite', '--email', 'ada@example.com', '--org', String(orgB), '--role', 'operator').then(async (invitation: Json) => {
        expect((await new AppClient(svc.apiUrl).request('POST', '/invitations/accept', { token: tokenOf(invitation.invite_url), password: PASSWORD })).status).toBe(200);
      });
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor({ timeout: 5000 }).catch(async (error) => {
        throw new Error(`${error}: ${await page.locator('body').innerText()} ${problems.join(' ')}`);
      });
      await signIn(page, 'ada@example.com');
      const switcher = page.getByLabel('Organization');
      await switcher.selectOption(String(orgB));
      await expect.poll(() => page.getByRole('navigation', { name: 'Main' }).getByRole('link').allTextContents()).toEqual(['Where things are', 'Locations', 'Import', 'Scan', 'Counts', 'Alerts', 'Live reads', 'Unknown reads', 'Password']);
      await expectAccessible(page, 'switched organization');
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'usable on a phone: no page wider than the screen',
    async () => {
      const { page, context, problems } = await openContext(browser.browser, origin, { mobile: true });
      await signIn(page, 'ada@example.com');
      await page.getByLabel('Organization').selectOption(String(orgA));
      await page.getByRole('link', { name: 'API keys' }).waitFor();
      for (const path of ['/assets', '/locations', '/keys', '/members', '/password']) {
        await page.goto(path);
        await page.locator('h1').waitFor();
        await page.waitForLoadState('networkidle');
        expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), path).toBe(true);
      }
      await expectAccessible(page, 'password (phone)');
      await page.goto('/keys');
      await page.locator('tbody tr').first().waitFor();
      await screenshot(page, 'keys-phone');
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it('the first page is usable within a second, with under 200 KB of script', async () => {
    // Each load is a first visit (a fresh context, nothing cached). The page's cost is the fastest
    // of at least three: a shared machine's load only ever adds time to a load, never takes it
    // away, so on a busy machine it tries again, up to ten loads, until one is within the second.
    const loads: Array<{ elapsed: number; scripts: number }> = [];
    for (let i = 0; i < 10 && (i < 3 || Math.min(...loads.map((load) => load.elapsed)) >= 1000); i += 1) {
      const { page, context } = await openContext(browser.browser, origin);
      const started = Date.now();
      await page.goto('/sign-in');
      await page.getByRole('button', { name: 'Sign in' }).waitFor();
      const elapsed = Date.now() - started;
      const sizes = await page.evaluate(() =>
        performance
          .getEntriesByType('resource')
          .filter((entry) => entry.name.endsWith('.js'))
          .map((entry) => (entry as PerformanceResourceTiming).decodedBodySize),
      );
      loads.push({ elapsed, scripts: sizes.reduce((a, b) => a + b, 0) });
      await context.close();
    }
    const fastest = Math.min(...loads.map((load) => load.elapsed));
    console.info(`console: first page usable in ${loads.map((load) => load.elapsed).join(', ')} ms (fastest ${fastest}), ${loads[0]!.scripts} bytes of script`);
    expect(fastest).toBeLessThan(1000);
    for (const load of loads) expect(load.scripts).toBeGreaterThan(0);
    for (const load of loads) expect(load.scripts).toBeLessThan(200 * 1024);
  }, SLOW);
});

describe.skipIf(missing !== null)('the console over HTTP', () => {
  it('pages carry a strict CSP and security headers, are revalidated, hashed files are immutable, and no CORS header anywhere', async () => {
    const page = await fetch(`${origin}/keys`, { headers: { origin: 'https://evil.example' } });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toBe(CONSOLE_CONTENT_SECURITY_POLICY);
    expect(CONSOLE_CONTENT_SECURITY_POLICY).toContain("script-src 'self';");
    expect(CONSOLE_CONTENT_SECURITY_POLICY).not.toContain('unsafe');
    expect(page.headers.get('cache-control')).toBe('no-cache');
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    const html = await page.text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)/);
    expect(html).not.toMatch(/<style|style=/);
    const assets = [...html.matchAll(/(?:src|href)="(\/static\/[^"]+)"/g)].map((m) => m[1]!);
    expect(assets.length).toBe(2);
    for (const asset of assets) {
      const response = await fetch(`${origin}${asset}`, { headers: { 'accept-encoding': 'br, gzip' } });
      expect(response.status).toBe(200);
      expect(response.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(response.headers.get('content-encoding')).toBe('br');
    }
    for (const response of [page, await fetch(`${origin}/static/nope.js`), await fetch(`${origin}/app/api/me`, { headers: { origin: 'https://evil.example' } })]) {
      expect([...response.headers.keys()].filter((h) => h.startsWith('access-control-'))).toEqual([]);
    }
    // The script budget, on the built files themselves.
    const dist = path.join(ROOT, 'services/api/console/web', 'dist', 'static');
    const script = fs.readdirSync(dist).filter((f) => f.endsWith('.js')).reduce((sum, f) => sum + fs.statSync(path.join(dist, f)).size, 0);
    expect(script).toBeLessThan(200 * 1024);
    // A production build: no development JSX carrying the build machine's file names.
    for (const file of fs.readdirSync(dist).filter((f) => f.endsWith('.js'))) expect(fs.readFileSync(path.join(dist, file), 'utf8')).not.toContain(ROOT);
  });
});
