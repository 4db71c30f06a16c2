import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { chromiumMissing, expectAccessible, launchBrowser, openContext, screenshot, type TestBrowser } from '../support/browser.js';
import { AppClient } from '../people/app-client.js';
import { inviteUser } from '../../shared/domain/people/commands.js';
import { LINK_LIFETIME_MS } from '../../shared/domain/people/decider.js';
import { cliJson as cli, PASSWORD, signIn, SLOW } from './harness.js';

/**
 * The console's password forms and lost links (docs/console.md, "Getting in" and "Members (admins)") in
 * Debian's Chromium against a started service: every form that sets a password asks twice and
 * sends nothing on a mismatch, a link that no longer works shows why and a sign-in link instead
 * of a form, and an admin sees who is invited and sends them a new link.
 */

const missing = chromiumMissing();

let svc: TestService;
let origin: string;
let browser: TestBrowser;
let org: number;

const cliJson = (...args: string[]) => cli(svc, origin, ...args);

/** The requests the page sends to an app endpoint, counted from now. */
function requestsTo(page: Page, path: string): { count: number } {
  const seen = { count: 0 };
  page.on('request', (request) => {
    if (new URL(request.url()).pathname === `/app/api${path}`) seen.count++;
  });
  return seen;
}

beforeAll(async () => {
  if (missing) return;
  svc = await startTestService('console_recovery');
  origin = new URL(svc.apiUrl).origin;
  org = (await createOrg(svc.service.ctx, 'Acme')).id;
  browser = await launchBrowser();
}, SLOW);

afterAll(async () => {
  await browser?.close();
  await svc?.stop();
});

describe.skipIf(missing !== null)('password forms and lost links in a browser', () => {
  it(
    'the setup form asks twice and says "at least 10 characters"; a mismatch shows beside the second field and sends nothing; once used, the link shows a sign-in link, not a form',
    async () => {
      const created = await cliJson('users', 'create', '--email', 'ada@example.com', '--org', String(org), '--role', 'admin');
      const { page, context, problems } = await openContext(browser.browser, origin);
      const sent = requestsTo(page, '/password-setup');

      await page.goto(created.setup_url);
      await page.getByRole('heading', { level: 1, name: 'Choose your password' }).waitFor();
      await page.getByText('For ada@example.com.').waitFor();
      expect(await page.getByLabel('New password').getAttribute('aria-describedby')).toContain('new-password-hint');
      expect(await page.locator('#new-password-hint').textContent()).toBe('At least 10 characters.');

      await page.getByLabel('New password').fill(PASSWORD);
      await page.getByLabel('Repeat it').fill(`${PASSWORD}!`);
      await page.getByRole('button', { name: 'Set password' }).click();
      const mismatch = page.locator('#new-password-again-error');
      await expect.poll(() => mismatch.textContent()).toBe('The two passwords differ: type the same one twice.');
      expect(await mismatch.isVisible()).toBe(true);
      expect(await page.getByLabel('Repeat it').getAttribute('aria-invalid')).toBe('true');
      // The message belongs to the field that differs, for a screen reader too.
      expect(await page.getByLabel('Repeat it').getAttribute('aria-describedby')).toBe('new-password-again-error');
      await expectAccessible(page, 'setup (mismatch)');
      await screenshot(page, 'setup-mismatch');
      expect(sent.count).toBe(0);

      // Corrected, the message goes and the password is set.
      await page.getByLabel('Repeat it').fill(PASSWORD);
      await expect.poll(() => mismatch.textContent()).toBe('');
      await page.getByRole('button', { name: 'Set password' }).click();
      await page.getByText('You can now sign in as ada@example.com').waitFor();
      expect(sent.count).toBe(1);

      // The same link again: why it no longer works, and the way to sign in, but no form.
      await page.goto(created.setup_url);
      await page.getByRole('heading', { level: 1, name: 'This link was already used' }).waitFor();
      expect(await page.locator('input[type=password]').count()).toBe(0);
      expect(await page.getByRole('button', { name: 'Set password' }).count()).toBe(0);
      await expectAccessible(page, 'setup (used)');
      await screenshot(page, 'link-used');
      await page.getByRole('link', { name: 'Sign in' }).click();
      await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
      expect(new URL(page.url()).pathname).toBe('/sign-in');
      expect(sent.count).toBe(1);
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'an expired, a cancelled and a garbled invitation link each say why, without a form; a new person chooses a password twice, someone with an account enters theirs once',
    async () => {
      const old = await inviteUser(svc.service.ctx, { email: 'late@example.com', orgId: org, role: 'viewer', by: { kind: 'cli' }, publicUrl: origin }, { now: Date.now() - LINK_LIFETIME_MS - 1000 });
      const withdrawn = await cliJson('users', 'invite', '--email', 'withdrawn@example.com', '--org', String(org), '--role', 'viewer');
      const admin = new AppClient(svc.apiUrl);
      expect((await admin.signIn('ada@example.com', PASSWORD)).status).toBe(200);
      const pending = (await admin.request('GET', '/members/invitations')).body.data.find((i: { email: string }) => i.email === 'withdrawn@example.com');
      expect((await admin.request('DELETE', `/members/invitations/${pending.id}`)).status).toBe(204);

      const { page, context, problems } = await openContext(browser.browser, origin);
      for (const [url, heading] of [
        [old.invite_url, 'This link has expired'],
        [withdrawn.invite_url, 'This invitation was cancelled'],
        [`${origin}/invite#token=inv_nothing.secret`, 'This link is not valid'],
      ] as const) {
        await page.goto(url);
        await page.getByRole('heading', { level: 1, name: heading }).waitFor();
        expect(await page.locator('input[type=password]').count()).toBe(0);
        await page.getByRole('link', { name: 'Sign in' }).waitFor();
      }
      await expectAccessible(page, 'invite (expired)');

      // Someone new: twice, and a mismatch is refused before anything is sent.
      const invited = await cliJson('users', 'invite', '--email', 'grace@example.com', '--org', String(org), '--role', 'operator');
      const accepts = requestsTo(page, '/invitations/accept');
      await page.goto(invited.invite_url);
      await page.getByRole('heading', { level: 1, name: 'Accept the invitation' }).waitFor();
      await page.getByText('grace@example.com is invited.', { exact: false }).waitFor();
      await page.getByLabel('New password').fill(PASSWORD);
      await page.getByLabel('Repeat it').fill('something else entirely');
      await page.getByRole('button', { name: 'Accept' }).click();
      await page.locator('#new-password-again-error', { hasText: 'The two passwords differ' }).waitFor();
      expect(accepts.count).toBe(0);
      await page.getByLabel('Repeat it').fill(PASSWORD);
      await page.getByRole('button', { name: 'Accept' }).click();
      await page.getByText('You can now sign in as grace@example.com').waitFor();
      expect(accepts.count).toBe(1);

      // Someone with an account: their password, once.
      const globex = (await createOrg(svc.service.ctx, 'Globex')).id;
      const again = await cliJson('users', 'invite', '--email', 'grace@example.com', '--org', String(globex), '--role', 'viewer');
      await page.goto(again.invite_url);
      await page.getByText('You already have an account as grace@example.com: enter its password to accept.').waitFor();
      expect(await page.locator('input[type=password]').count()).toBe(1);
      await page.getByLabel('Password').fill('not my password');
      await page.getByRole('button', { name: 'Accept' }).click();
      await page.locator('#password-error', { hasText: 'grace@example.com already has an account: enter its password to accept' }).waitFor();
      await page.getByLabel('Password').fill(PASSWORD);
      await page.getByRole('button', { name: 'Accept' }).click();
      await page.getByText('You can now sign in as grace@example.com').waitFor();
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'the change-password form asks twice too: a mismatch is shown beside the field and nothing is sent',
    async () => {
      const { page, context, problems } = await openContext(browser.browser, origin);
      await signIn(page, 'ada@example.com');
      const sent = requestsTo(page, '/password');
      await page.getByRole('link', { name: 'Password' }).click();
      await page.getByRole('heading', { level: 1, name: 'Change password' }).waitFor();
      expect(await page.locator('#new-password-hint').textContent()).toBe('At least 10 characters.');
      await page.getByLabel('Current password').fill(PASSWORD);
      await page.getByLabel('New password').fill('a brand new passphrase');
      await page.getByLabel('Repeat it').fill('a brand new passphrasf');
      await page.getByRole('button', { name: 'Change password' }).click();
      await page.locator('#new-password-again-error', { hasText: 'The two passwords differ' }).waitFor();
      expect(sent.count).toBe(0);
      // A wrong current password is the server's answer, beside its own field, in words (no JSON key: docs/console.md, "Messages").
      await page.getByLabel('Current password').fill('not the password');
      await page.getByLabel('Repeat it').fill('a brand new passphrase');
      await page.getByRole('button', { name: 'Change password' }).click();
      await page.locator('#current-password-error', { hasText: 'Current password is not your current password' }).waitFor();
      expect(await page.locator('#current-password-error').textContent()).not.toContain('current_password');
      expect(sent.count).toBe(1);
      await expectAccessible(page, 'password (refused)');
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'Members shows who never chose a password as Invited; "Send a new link" shows a link that sets the password, and the member is then Active',
    async () => {
      await cliJson('users', 'create', '--email', 'pending@example.com', '--org', String(org), '--role', 'viewer');
      const admin = await openContext(browser.browser, origin);
      await signIn(admin.page, 'ada@example.com');
      await admin.page.getByRole('link', { name: 'Members' }).click();
      await admin.page.getByRole('heading', { level: 1, name: 'Members' }).waitFor();
      const row = admin.page.locator('tr[data-member="pending@example.com"]');
      await expect.poll(() => row.locator('.badge').textContent()).toBe('Invited');
      await expect.poll(() => admin.page.locator('tr[data-member="grace@example.com"] .badge').textContent()).toBe('Active');
      // Nobody sends themselves a new link from here: their own password is on the Password page.
      expect(await admin.page.locator('tr[data-member="ada@example.com"]').getByRole('button', { name: /Send a new link/ }).count()).toBe(0);

      await row.getByRole('button', { name: 'Send a new link to pending@example.com' }).click();
      const link = await admin.page.getByLabel('New link for pending@example.com').inputValue();
      expect(link).toMatch(new RegExp(`^${origin}/setup#token=usr_`));
      await admin.page.getByText('No mail is sent: give this link to pending@example.com yourself.', { exact: false }).waitFor();
      await expectAccessible(admin.page, 'members (new link)');
      await screenshot(admin.page, 'members-new-link');

      const member = await openContext(browser.browser, origin);
      await member.page.goto(link);
      await member.page.getByRole('heading', { level: 1, name: 'Choose your password' }).waitFor();
      await member.page.getByLabel('New password').fill(PASSWORD);
      await member.page.getByLabel('Repeat it').fill(PASSWORD);
      await member.page.getByRole('button', { name: 'Set password' }).click();
      await member.page.getByText('You can now sign in as pending@example.com').waitFor();

      await admin.page.reload();
      await expect.poll(() => admin.page.locator('tr[data-member="pending@example.com"] .badge').textContent()).toBe('Active');
      expect([...admin.problems, ...member.problems]).toEqual([]);
      await admin.context.close();
      await member.context.close();
    },
    SLOW,
  );
});
