import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { chromiumMissing, expectAccessible, launchBrowser, openContext, screenshot, type TestBrowser } from '../support/browser.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';
import type { AppClient, Json } from '../people/app-client.js';
import { signedInUser } from '../operator/sse-client.js';
import { signIn, SLOW, XSS } from './harness.js';

/**
 * The console's Audit log page (docs/console.md "Audit log (admins)") in Debian's Chromium: the
 * organization's changes, newest first, with who made them (an API key, the admin herself), the
 * changes of an update, markup as text; its filters; an API key with audit:read minted from the
 * keys page; an operator kept out.
 */

const missing = chromiumMissing();

let svc: TestService;
let origin: string;
let browser: TestBrowser;
let admin: AppClient & { email: string };
let operator: AppClient & { email: string };
let key: { id: string; token: string };
let assetId: number;

beforeAll(async () => {
  if (missing) return;
  svc = await startTestService('console_audit');
  origin = new URL(svc.apiUrl).origin;
  const orgId = (await createOrg(svc.service.ctx, 'Acme')).id;
  admin = await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'admin');
  operator = await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'operator');
  key = await mintApiKey(svc.service.ctx, { orgId, name: 'partner', scopes: ['assets:read', 'assets:write'] });
  const partner = client(svc.apiUrl, key.token);
  const created = await partner<Json>('POST', '/assets', { body: { name: `Forklift ${XSS}`, external_key: 'FORK-7' } });
  expect(created.status).toBe(201);
  assetId = created.body.data.id;
  // The admin renames it with her session token, as the console's own pages do.
  const session = (await admin.request('POST', '/session-token')).body.data.token as string;
  expect((await client(svc.apiUrl, session)<Json>('PATCH', `/assets/${assetId}`, { body: { name: 'Lift' } })).status).toBe(200);
  browser = await launchBrowser();
}, SLOW);

afterAll(async () => {
  await browser?.close();
  await svc?.stop();
});

describe.skipIf(missing !== null)('the Audit log page in a browser', () => {
  it(
    'lists the changes newest first with who made them and what changed; filters; markup is text',
    async () => {
      const { page, context, problems } = await openContext(browser.browser, origin);
      await signIn(page, admin.email);
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Audit log' }).click();
      await page.getByRole('heading', { level: 1, name: 'Audit log' }).waitFor();
      const rows = page.locator('tbody tr');
      await rows.first().waitFor();

      const updated = rows.filter({ hasText: 'asset.updated' });
      const cells = await updated.locator('td').allTextContents();
      expect([cells[1], cells[2], cells[4]]).toEqual(['asset.updated', `asset FORK-7 #${assetId}`, `name: Forklift ${XSS} → Lift`]);
      // Her session token names her by email, and by user id once tokens carry one.
      expect(cells[3]).toMatch(new RegExp(`^Person: ${admin.email.replace(/[.]/g, '\\.')}( usr_\\S+)?$`));
      const createdCells = await rows.filter({ hasText: 'asset.created' }).locator('td').allTextContents();
      expect(createdCells.slice(1, 5)).toEqual(['asset.created', `asset FORK-7 #${assetId}`, `API key: partner ${key.id}`, '—']);
      // Newest first: the update above the create.
      const actions = await rows.locator('td:nth-child(2)').allTextContents();
      expect(actions.indexOf('asset.updated')).toBeLessThan(actions.indexOf('asset.created'));
      expect(await page.locator('tbody img').count()).toBe(0);
      await expectAccessible(page, 'audit');
      await screenshot(page, 'audit');

      // Filters: the API key's changes only, then one action; Clear shows everything again.
      await page.getByLabel('Who').selectOption('api_key');
      await page.getByLabel('Key or user id').fill(key.id);
      await page.getByRole('button', { name: 'Apply' }).click();
      await expect.poll(() => rows.locator('td:nth-child(2)').allTextContents()).toEqual(['asset.created']);
      await page.getByRole('button', { name: 'Clear' }).click();
      await page.getByLabel('Action').selectOption('asset.updated');
      await page.getByRole('button', { name: 'Apply' }).click();
      await expect.poll(() => rows.locator('td:nth-child(2)').allTextContents()).toEqual(['asset.updated']);
      await page.getByLabel('Action').selectOption('');
      await page.getByLabel('Resource', { exact: true }).selectOption('membership');
      await page.getByRole('button', { name: 'Apply' }).click();
      // The two people's memberships, granted by the CLI.
      await expect.poll(() => rows.locator('td:nth-child(2)').allTextContents()).toEqual(['membership.granted', 'membership.granted']);
      expect(await rows.first().locator('td').nth(3).textContent()).toBe('CLI');
      await page.getByLabel('From').fill('2999-01-01T00:00:00');
      await page.getByRole('button', { name: 'Apply' }).click();
      await page.getByText('No entries.').waitFor();
      await page.getByRole('button', { name: 'Clear' }).click();
      await expect.poll(() => rows.count()).toBeGreaterThan(4);
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'the keys page mints a key that reads the audit log (Audit log: Read)',
    async () => {
      const { page, context, problems } = await openContext(browser.browser, origin);
      await signIn(page, admin.email);
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'API keys' }).click();
      await page.getByLabel('Name').fill('auditor');
      expect(await page.getByLabel('Audit log').locator('option').allTextContents()).toEqual(['None', 'Read']);
      await page.getByLabel('Audit log').selectOption('read');
      await page.getByLabel('Assets').selectOption('none');
      await page.getByLabel('Locations').selectOption('none');
      await page.getByLabel('Tracking').selectOption('none');
      await page.getByRole('button', { name: 'Mint key' }).click();
      const token = await page.getByLabel('Token').inputValue();
      const row = page.locator('tbody tr').filter({ hasText: 'auditor' });
      await row.waitFor();
      expect(await row.locator('.scopes li').allTextContents()).toEqual(['audit:read']);
      const listed = await fetch(`${svc.apiUrl}/audit-events?action=api_key.minted&limit=1`, { headers: { authorization: `Bearer ${token}` } });
      expect(listed.status).toBe(200);
      const [entry] = ((await listed.json()) as Json).data;
      expect(entry).toMatchObject({ action: 'api_key.minted', resource_id: await row.getAttribute('data-key-id'), actor: { type: 'user', name: admin.email } });
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'an operator has no Audit log page: not in the navigation, and the path says administrators only',
    async () => {
      const { page, context, problems } = await openContext(browser.browser, origin);
      await signIn(page, operator.email);
      const nav = await page.getByRole('navigation', { name: 'Main' }).getByRole('link').allTextContents();
      expect(nav).not.toContain('Audit log');
      await page.goto('/audit');
      await page.getByRole('heading', { level: 1, name: 'Administrators only' }).waitFor();
      // The page's chunk is not even fetched for an operator.
      const scripts = await page.evaluate(() => performance.getEntriesByType('resource').map((entry) => entry.name));
      expect(scripts.filter((name) => /\/static\/audit-[^/]+\.js$/.test(name))).toEqual([]);
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );
});
