import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { createOrg } from '../support/auth.js';
import { chromiumMissing, expectAccessible, launchBrowser, openContext, type TestBrowser } from '../support/browser.js';
import { startTestService, type TestService } from '../support/service.js';
import type { AppClient, Json } from '../people/app-client.js';
import { signedInUser } from '../operator/sse-client.js';
import { signIn, SLOW } from './harness.js';

/**
 * The console's papercuts of issue 33 (docs/console.md): an API field error in words, never a
 * pattern or a JSON key; the API keys table with revoked keys fits a 1280 px screen with every
 * Revoke button in view, and on a phone (390 px) its rows are cards with the button reachable.
 */

const missing = chromiumMissing();

let svc: TestService;
let origin: string;
let browser: TestBrowser;
let admin: AppClient & { email: string };

beforeAll(async () => {
  if (missing) return;
  svc = await startTestService('console_papercuts');
  origin = new URL(svc.apiUrl).origin;
  const orgId = (await createOrg(svc.service.ctx, 'Acme')).id;
  admin = await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'admin');
  // Keys with long names and every scope, half of them revoked: the widest rows the table has.
  const access = { assets: 'read_write', locations: 'read_write', tracking: 'read', webhooks: 'read_write', audit: 'read', scans: 'write' };
  for (let i = 0; i < 6; i++) {
    const minted = await admin.request('POST', '/keys', { name: `warehouse-integration-partner-system-${i}-with-a-long-name`, access, expires_at: null });
    expect(minted.status).toBe(201);
    if (i % 2 === 0) expect((await admin.request('DELETE', `/keys/${encodeURIComponent((minted.body as Json).data.id)}`)).status).toBe(200);
  }
  browser = await launchBrowser();
}, SLOW);

afterAll(async () => {
  await browser?.close();
  await svc?.stop();
});

/** The page's and the keys region's widths, and every Revoke button's box. */
async function layout(page: Page) {
  return page.evaluate(() => {
    const region = document.querySelector('[role="region"][aria-label="API keys"]')!;
    const boxes = [...document.querySelectorAll('button')]
      .filter((b) => b.textContent === 'Revoke')
      .map((b) => {
        const r = b.getBoundingClientRect();
        return { left: r.left, right: r.right, width: r.width };
      });
    return {
      viewport: window.innerWidth,
      page: document.documentElement.scrollWidth,
      region: { scroll: region.scrollWidth, client: region.clientWidth },
      boxes,
    };
  });
}

describe.skipIf(missing !== null)('papercuts in a browser', () => {
  it(
    'the API keys table with revoked keys: no overflow at 1280 px and every Revoke button in view; cards on a phone with each button in view',
    async () => {
      for (const mobile of [false, true]) {
        const { page, context, problems } = await openContext(browser.browser, origin, { mobile });
        await signIn(page, admin.email);
        await page.goto('/keys');
        await page.locator('tr[data-key-id]').nth(5).waitFor();
        const seen = await layout(page);
        expect(seen.viewport).toBe(mobile ? 390 : 1280);
        expect(seen.boxes).toHaveLength(3);
        // Nothing wider than the screen, and the table does not scroll inside its region either.
        expect(seen.page).toBeLessThanOrEqual(seen.viewport);
        expect(seen.region.scroll).toBeLessThanOrEqual(seen.region.client);
        for (const box of seen.boxes) {
          expect(box.width).toBeGreaterThan(0);
          expect(box.left).toBeGreaterThanOrEqual(0);
          expect(box.right).toBeLessThanOrEqual(seen.viewport);
        }
        // The button works where it is: the question opens.
        await page.getByRole('button', { name: 'Revoke' }).first().click();
        await page.getByRole('dialog', { name: 'Revoke this key?' }).waitFor();
        await page.getByRole('button', { name: 'Cancel' }).click();
        await expectAccessible(page, `keys at ${seen.viewport} px`);
        expect(problems).toEqual([]);
        await context.close();
      }
    },
    SLOW,
  );

  it(
    'an invalid filter is said in words: no pattern, no JSON key',
    async () => {
      const { page, context, problems } = await openContext(browser.browser, origin);
      await signIn(page, admin.email);
      await page.getByLabel('Location key').fill('DOCK 1!');
      await page.getByRole('button', { name: 'Apply' }).click();
      const alert = page.getByRole('alert');
      await alert.waitFor();
      expect(await alert.textContent()).toBe('A location key may contain only letters, digits and hyphens.');
      expect(await page.locator('main').textContent()).not.toMatch(/\^|location_external_key/);
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );
});
