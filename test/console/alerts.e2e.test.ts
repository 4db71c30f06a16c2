import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { chromiumMissing, expectAccessible, launchBrowser, openContext, screenshot, type TestBrowser } from '../support/browser.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';
import type { AppClient } from '../people/app-client.js';
import { signedInUser } from '../operator/sse-client.js';
import { signIn, SLOW } from './harness.js';
import { alertStream } from '../../shared/domain/alerts/events.js';
import { scanner } from '../support/scans.js';

/**
 * The console's Alerts inbox (docs/console.md "Alerts") in Debian's Chromium: open alerts first,
 * rule names before ids, filters by status and rule, Acknowledge for operators (one event),
 * none for viewers. The alerts are real: a rule, and handheld scans that take a tagged drill out
 * of the cage three times (the alerts subscriber raises a `left` alert each time); the first one
 * is acknowledged through the API, which resolves it.
 */

const missing = chromiumMissing();

let svc: TestService;
let origin: string;
let browser: TestBrowser;
let orgId: number;
let operator: AppClient & { email: string };
let viewer: AppClient & { email: string };
const ids: Record<string, string> = {};

beforeAll(async () => {
  if (missing) return;
  svc = await startTestService('console_alerts');
  origin = new URL(svc.apiUrl).origin;
  orgId = (await createOrg(svc.service.ctx, 'Acme')).id;
  operator = await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'operator');
  viewer = await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'viewer');
  const api = client(svc.apiUrl, (await mintApiKey(svc.service.ctx, { orgId, scopes: ['alerts:read', 'alerts:write', 'assets:write', 'locations:write'] })).token);
  const cage = (await api<{ data: { id: number } }>('POST', '/locations', { body: { name: 'Cage', external_key: 'CAGE' } })).body.data.id;
  const dock = (await api<{ data: { id: number } }>('POST', '/locations', { body: { name: 'Dock', external_key: 'DOCK' } })).body.data.id;
  const drill = (await api<{ data: { id: number } }>('POST', '/assets', { body: { name: 'Drill', external_key: 'DRILL', tags: [{ tag_type: 'barcode', value: 'DRILL-BC' }] } })).body.data.id;
  const left = (await api<{ data: { id: number } }>('POST', '/alert-rules', { body: { name: 'Left the cage', kind: 'left', location_id: cage } })).body.data.id;
  const scans = await scanner(svc, orgId);
  const start = Date.now() - 10 * 60_000;
  for (let k = 0; k < 6; k++) {
    await scans.scan({ id: k % 2 === 0 ? cage : dock }, [{ tag_type: 'barcode', value: 'DRILL-BC', observed_at: new Date(start + k * 1000).toISOString() }]);
  }
  const id = (n: number) => `${left}-${drill}-${n}`;
  const deadline = Date.now() + 60_000;
  while ((await api<{ data: unknown[] }>('GET', '/alerts')).body.data.length < 3) {
    if (Date.now() > deadline) throw new Error('the three left alerts were not raised within 60 s');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect((await api('POST', `/alerts/${id(1)}/acknowledge`)).status).toBe(200);
  Object.assign(ids, { resolved: id(1), older: id(2), open: id(3) });
  browser = await launchBrowser();
}, SLOW);

afterAll(async () => {
  await browser?.close();
  await svc?.stop();
});

describe.skipIf(missing !== null)('the Alerts inbox in a browser', () => {
  it(
    'an operator sees the open alerts with the rule by name, filters by status, and acknowledges one (one event)',
    async () => {
      const { page, context, problems } = await openContext(browser.browser, origin);
      await signIn(page, operator.email);
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Alerts' }).click();
      await page.getByRole('heading', { level: 1, name: 'Alerts' }).waitFor();
      const rows = page.locator('tbody tr');
      await expect.poll(() => rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-alert-id')))).toEqual([ids.open, ids.older]);
      const cells = await rows.first().locator('td').allTextContents();
      expect(cells.slice(1, 5)).toEqual(['Left the cage Left', 'DRILL', 'DOCK', 'open']);
      await expectAccessible(page, 'alerts');
      await screenshot(page, 'alerts');
      await page.getByLabel('Status').selectOption('resolved');
      await expect.poll(() => rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-alert-id')))).toEqual([ids.resolved]);
      await page.getByLabel('Status').selectOption('open');
      await rows.first().getByRole('button', { name: 'Acknowledge' }).click();
      await page.getByRole('status').filter({ hasText: 'Acknowledged.' }).waitFor();
      expect((await svc.service.ctx.store.readStream(alertStream(orgId, ids.open!))).map((e) => e.type)).toEqual(['AlertAcknowledged']);
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'a viewer reads the inbox and has no Acknowledge button',
    async () => {
      const { page, context, problems } = await openContext(browser.browser, origin);
      await signIn(page, viewer.email);
      await page.goto(`${origin}/alerts`);
      await page.getByRole('heading', { level: 1, name: 'Alerts' }).waitFor();
      // The operator's test acknowledged the newest; the older one is still open.
      await page.locator(`tr[data-alert-id="${ids.older}"]`).waitFor();
      expect(await page.getByRole('button', { name: 'Acknowledge' }).count()).toBe(0);
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );
});
