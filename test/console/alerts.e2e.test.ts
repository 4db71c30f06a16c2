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
 * The console's Alerts inbox and rule editor (docs/console.md "Alerts") in Debian's Chromium:
 * open alerts first, names before keys (rule, asset, location), times to the second, filters by
 * status and rule, Acknowledge for operators (one event), none for viewers; the rule editor for
 * admins (create, edit as a merge patch, deactivate, delete after a question, field errors and the
 * 100-rules limit in words), read-only for the others; a phone's width. The alerts are real: a
 * rule, and handheld scans that take a tagged drill out of the cage three times, a second apart
 * (the alerts subscriber raises a `left` alert each time); the first one is acknowledged through
 * the API, which resolves it.
 */

const missing = chromiumMissing();

let svc: TestService;
let origin: string;
let browser: TestBrowser;
let orgId: number;
let operator: AppClient & { email: string };
let viewer: AppClient & { email: string };
let admin: AppClient & { email: string };
let api: ReturnType<typeof client>;
let cage: number;
let drill: number;
const ids: Record<string, string> = {};

beforeAll(async () => {
  if (missing) return;
  svc = await startTestService('console_alerts');
  origin = new URL(svc.apiUrl).origin;
  orgId = (await createOrg(svc.service.ctx, 'Acme')).id;
  operator = await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'operator');
  viewer = await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'viewer');
  admin = await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'admin');
  api = client(svc.apiUrl, (await mintApiKey(svc.service.ctx, { orgId, scopes: ['alerts:read', 'alerts:write', 'assets:write', 'locations:write'] })).token);
  cage = (await api<{ data: { id: number } }>('POST', '/locations', { body: { name: 'Cage', external_key: 'CAGE' } })).body.data.id;
  const dock = (await api<{ data: { id: number } }>('POST', '/locations', { body: { name: 'Dock', external_key: 'DOCK' } })).body.data.id;
  drill = (await api<{ data: { id: number } }>('POST', '/assets', { body: { name: 'Drill', external_key: 'DRILL', tags: [{ tag_type: 'barcode', value: 'DRILL-BC' }] } })).body.data.id;
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
      const rows = page.locator('tr[data-alert-id]');
      await expect.poll(() => rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-alert-id')))).toEqual([ids.open, ids.older]);
      const cells = await rows.first().locator('td').allTextContents();
      // Names first, keys second (docs/console.md "Names first"); the status in words.
      expect(cells.slice(1, 5)).toEqual(['Left the cage Left', 'Drill DRILL', 'Dock DOCK', 'Open']);
      // Alerts a second apart are told apart: their raised times show the seconds.
      const raised = await rows.evaluateAll((trs) => trs.map((tr) => tr.querySelector('td')!.textContent));
      expect(raised[0]).toMatch(/\d{1,2}:\d{2}:\d{2}/);
      expect(new Set(raised).size).toBe(raised.length);
      await expectAccessible(page, 'alerts');
      await screenshot(page, 'alerts');
      await page.getByLabel('Status').selectOption('resolved');
      await expect.poll(() => rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-alert-id')))).toEqual([ids.resolved]);
      // Acknowledged and resolved, each with its time to the second; by whom.
      expect(await page.locator(`tr[data-alert-id="${ids.resolved}"] td[data-label="Status"]`).textContent()).toMatch(/^ResolvedAcknowledged .*\d:\d{2}:\d{2}.* by .+Resolved .*\d:\d{2}:\d{2}/);
      await page.getByLabel('Status').selectOption('open');
      await rows.first().getByRole('button', { name: /^Acknowledge/ }).click();
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
      expect(await page.getByRole('button', { name: /^Acknowledge/ }).count()).toBe(0);
      // The rules, read-only: by name, the zone by name and key, and no control to change them.
      await page.locator('tr[data-rule-id]').first().waitFor();
      expect((await page.locator('tr[data-rule-id]').first().locator('td').allTextContents()).slice(0, 5)).toEqual(['Left the cage', 'Left', 'Cage CAGE', 'Every asset', 'Active']);
      expect(await page.getByRole('button', { name: /New rule|Edit rule|Delete rule|Deactivate rule/ }).count()).toBe(0);
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'an admin creates, edits (a merge patch of what changed), deactivates and deletes a rule; field errors are words beside their fields',
    async () => {
      const { page, context, problems } = await openContext(browser.browser, origin);
      await signIn(page, admin.email);
      await page.goto('/alerts');
      await page.getByRole('heading', { level: 2, name: 'Rules' }).waitFor();
      await page.locator('tr[data-rule-id]').first().waitFor();
      await page.getByRole('button', { name: 'New rule' }).click();
      const form = page.locator('form[aria-labelledby="new-rule-title"]');
      await form.getByLabel('Name').fill('Stayed in the cage');
      // The threshold is asked only for the kinds that have one.
      await form.getByLabel('When').selectOption('left');
      expect(await form.getByLabel('Threshold', { exact: true }).count()).toBe(0);
      await form.getByLabel('When').selectOption('dwell_exceeded');
      await form.getByLabel('Threshold', { exact: true }).fill('0.5');
      await form.getByLabel('Threshold unit').selectOption('minutes');
      await form.getByRole('button', { name: 'Create rule' }).click();
      await expect.poll(() => page.locator('#new-rule-threshold-error').textContent()).toBe('The threshold must be at least 1 minute.');
      await form.getByLabel('Threshold', { exact: true }).fill('2');
      await form.getByLabel('Threshold unit').selectOption('hours');
      await form.getByRole('button', { name: 'Create rule' }).click();
      await expect.poll(() => page.locator('#new-rule-zone-error').textContent()).toBe('Location is required.');
      expect(await page.locator('#new-rule-threshold-error').textContent()).toBe('');
      await expectAccessible(page, 'rule editor (refused)');
      await form.getByLabel('Zone').fill('cag');
      await form.getByRole('button', { name: 'Find location' }).click();
      await form.getByRole('button', { name: 'Choose Cage (CAGE)' }).click();
      await form.getByRole('button', { name: 'Create rule' }).click();
      await page.getByRole('status').filter({ hasText: 'Rule "Stayed in the cage" created.' }).waitFor();
      const rules = async () => (await api<{ data: Array<{ id: number; name: string; kind: string; location_id: number; threshold_seconds: number | null; asset_ids: number[] | null; is_active: boolean }> }>('GET', '/alert-rules')).body.data;
      const created = (await rules()).find((r) => r.name === 'Stayed in the cage')!;
      expect(created).toMatchObject({ kind: 'dwell_exceeded', location_id: cage, threshold_seconds: 7200, asset_ids: null, is_active: true });
      const row = page.locator(`tr[data-rule-id="${created.id}"]`);
      expect((await row.locator('td').allTextContents()).slice(0, 5)).toEqual(['Stayed in the cage', 'Stayed too long after 2 hours', 'Cage CAGE', 'Every asset', 'Active']);
      await screenshot(page, 'alert-rules');

      // Edit: only what changed is sent, as a merge patch.
      await page.getByRole('button', { name: 'Edit rule Stayed in the cage' }).click();
      const edit = page.locator(`form[aria-labelledby="rule-${created.id}-title"]`);
      expect(await edit.getByLabel('Threshold', { exact: true }).inputValue()).toBe('2');
      expect(await edit.getByLabel('Threshold unit').inputValue()).toBe('hours');
      await edit.getByLabel('Name').fill('Long stay');
      await edit.getByLabel('Only these assets').check();
      await edit.getByLabel('Add an asset').fill('Drill');
      await edit.getByRole('button', { name: 'Find asset' }).click();
      await edit.getByRole('button', { name: 'Choose Drill (DRILL)' }).click();
      await edit.locator(`li[data-asset-id="${drill}"]`).waitFor();
      const sent = page.waitForRequest((request) => request.method() === 'PATCH' && request.url().endsWith(`/api/v1/alert-rules/${created.id}`));
      await edit.getByRole('button', { name: 'Save rule' }).click();
      const patch = await sent;
      expect(patch.headers()['content-type']).toBe('application/merge-patch+json');
      expect(JSON.parse(patch.postData()!)).toEqual({ name: 'Long stay', asset_ids: [drill] });
      await page.getByRole('status').filter({ hasText: 'Rule "Long stay" saved.' }).waitFor();
      expect((await rules()).find((r) => r.id === created.id)).toMatchObject({ name: 'Long stay', asset_ids: [drill], threshold_seconds: 7200 });
      expect(await row.locator('td[data-label="Assets"]').textContent()).toBe('1 asset');

      await page.getByRole('button', { name: 'Deactivate rule Long stay' }).click();
      await page.getByRole('button', { name: 'Activate rule Long stay', exact: true }).waitFor();
      expect((await rules()).find((r) => r.id === created.id)!.is_active).toBe(false);
      expect(await row.locator('td[data-label="Active"]').textContent()).toBe('Inactive');

      // Delete asks first; Cancel keeps it.
      await page.getByRole('button', { name: 'Delete rule Long stay' }).click();
      await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
      expect((await rules()).some((r) => r.id === created.id)).toBe(true);
      await page.getByRole('button', { name: 'Delete rule Long stay' }).click();
      await page.getByRole('dialog').getByRole('button', { name: 'Delete rule' }).click();
      await page.getByRole('status').filter({ hasText: 'Rule "Long stay" deleted.' }).waitFor();
      await row.waitFor({ state: 'detached' });
      expect((await api('GET', `/alert-rules/${created.id}`)).status).toBe(404);
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'usable on a phone (390 px): the inbox and the editor fit the screen',
    async () => {
      const { page, context, problems } = await openContext(browser.browser, origin, { mobile: true });
      await signIn(page, admin.email);
      await page.goto('/alerts');
      await page.getByLabel('Status').selectOption('');
      await page.locator('tr[data-alert-id]').first().waitFor();
      await page.locator('tr[data-rule-id]').first().waitFor();
      expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
      await expectAccessible(page, 'alerts (phone)');
      await screenshot(page, 'alerts-phone');
      await page.getByRole('button', { name: 'New rule' }).click();
      const form = page.locator('form[aria-labelledby="new-rule-title"]');
      await form.getByLabel('When').selectOption('not_seen');
      await form.getByLabel('Only these assets').check();
      await form.getByRole('button', { name: 'Create rule' }).click();
      await expect.poll(() => page.locator('#new-rule-name-error').textContent()).not.toBe('');
      expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
      for (const button of await form.getByRole('button').all()) {
        const box = await button.boundingBox();
        expect(box!.x + box!.width).toBeLessThanOrEqual(390);
      }
      await expectAccessible(page, 'rule editor (phone)');
      await screenshot(page, 'alert-rules-phone');
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    "the 100-rules limit: the API's refusal is shown in words",
    async () => {
      const before = (await api<{ total_count: number }>('GET', '/alert-rules')).body.total_count;
      const extra: number[] = [];
      for (let k = before; k < 100; k++) extra.push((await api<{ data: { id: number } }>('POST', '/alert-rules', { body: { name: `Filler ${k}`, kind: 'entered', location_id: cage } })).body.data.id);
      const { page, context, problems } = await openContext(browser.browser, origin);
      await signIn(page, admin.email);
      await page.goto('/alerts');
      await page.getByRole('button', { name: 'New rule' }).click();
      const form = page.locator('form[aria-labelledby="new-rule-title"]');
      await form.getByLabel('Name').fill('One too many');
      // A key typed without choosing is sent as the zone's key.
      await form.getByLabel('Zone').fill('CAGE');
      await form.getByRole('button', { name: 'Create rule' }).click();
      await form.getByRole('alert').filter({ hasText: 'This organization already has 100 alert rules, the most it may have. Delete a rule (or change one) first.' }).waitFor();
      expect(problems).toEqual([]);
      await context.close();
      for (const id of extra) expect((await api('DELETE', `/alert-rules/${id}`)).status).toBe(204);
    },
    SLOW,
  );
});
