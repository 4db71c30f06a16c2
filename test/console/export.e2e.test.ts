import fs from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { chromiumMissing, launchBrowser, openContext, type TestBrowser } from '../support/browser.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';
import { signedInUser } from '../operator/sse-client.js';
import type { AppClient } from '../people/app-client.js';
import { allPages, csvRows, xlsxRows } from '../export/support.js';
import { signIn, SLOW } from './harness.js';

/**
 * The console's Export buttons (docs/console.md "Export") in Debian's Chromium: the list the page
 * shows, with its filters, downloaded whole as CSV and XLSX with the person's session token.
 */

const missing = chromiumMissing();

let svc: TestService;
let origin: string;
let browser: TestBrowser;
let admin: AppClient & { email: string };
let token: string;

beforeAll(async () => {
  if (missing) return;
  svc = await startTestService('console_export');
  origin = new URL(svc.apiUrl).origin;
  const orgId = (await createOrg(svc.service.ctx, 'Acme')).id;
  admin = await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'admin');
  token = (await mintApiKey(svc.service.ctx, { orgId, scopes: ['assets:write', 'locations:write', 'audit:read'] })).token;
  const api = client(svc.apiUrl, token);
  for (let i = 0; i < 80; i++) {
    const reply = await api('POST', i % 4 === 0 ? '/locations' : '/assets', { body: { name: `=Thing ${i}`, external_key: `K-${i}` } });
    expect(reply.status, reply.text).toBe(201);
  }
  browser = await launchBrowser();
}, SLOW);

afterAll(async () => {
  await browser?.close();
  await svc?.stop();
});

describe.skipIf(missing !== null)('Export on a list page', () => {
  it(
    'downloads the whole filtered list (more than the page shows) as CSV and as XLSX',
    async () => {
      const { page, context, problems } = await openContext(browser.browser, origin);
      await signIn(page, admin.email);
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Audit log' }).click();
      await page.getByRole('heading', { level: 1, name: 'Audit log' }).waitFor();
      await page.getByLabel('Resource', { exact: true }).selectOption('asset');
      await page.getByRole('button', { name: 'Apply' }).click();
      const rows = page.locator('tbody tr');
      await expect.poll(async () => new Set(await rows.locator('td:nth-child(2)').allTextContents())).toEqual(new Set(['asset.created']));
      const expected = await allPages(`${svc.apiUrl}/audit-events?resource_type=asset`, token);
      expect(expected.length).toBe(60);
      expect(await rows.count()).toBeLessThan(expected.length);

      const [csvDownload] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export CSV' }).click()]);
      expect(csvDownload.suggestedFilename()).toMatch(/^audit-events-\d{8}T\d{6}Z\.csv$/);
      const csv = csvRows(await fs.readFile((await csvDownload.path())!, 'utf8'));
      expect(csv[0]!.slice(0, 3)).toEqual(['id', 'occurred_at', 'action']);
      expect(csv.slice(1).map((row) => row[0])).toEqual(expected.map((item) => item.id));
      expect(new Set(csv.slice(1).map((row) => row[3]))).toEqual(new Set(['asset']));

      const [xlsxDownload] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export XLSX' }).click()]);
      expect(xlsxDownload.suggestedFilename()).toMatch(/^audit-events-\d{8}T\d{6}Z\.xlsx$/);
      const xlsx = await xlsxRows(await fs.readFile((await xlsxDownload.path())!));
      expect(xlsx.slice(1).map((row) => row[0])).toEqual(expected.map((item) => item.id));
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );
});
