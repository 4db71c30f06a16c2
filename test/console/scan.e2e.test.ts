import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { createOrg, mintApiKey } from '../support/auth.js';
import { chromiumMissing, expectAccessible, launchBrowser, openContext, screenshot, type TestBrowser } from '../support/browser.js';
import { hex, unique } from '../support/reader-corpus.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';
import type { AppClient, Json } from '../people/app-client.js';
import { signedInUser } from '../operator/sse-client.js';
import { locationScansStream, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import { signIn, SLOW } from './harness.js';

/**
 * The console's Scan page (docs/console.md, "Scan") in Debian's Chromium at a phone's size
 * (390×844): an operator picks a location by scanning its label, types tag values as a keyboard
 * wedge scanner does (keystrokes ending in Enter), goes offline for some of them (they wait, on
 * the page), comes back; a reload while the server cannot be reached keeps the waiting reads.
 * Each read is recorded exactly once, checked through the log and /api/v1, and the count open on
 * the aisle (12 expected) shows found 10, missing 2, unexpected 5 on the page and in the API.
 */

const missing = chromiumMissing();

let svc: TestService;
let browser: TestBrowser;
let origin: string;
let orgId: number;
let operator: AppClient & { email: string };
let viewer: AppClient & { email: string };
let api: ReturnType<typeof client>;

beforeAll(async () => {
  if (missing) return;
  svc = await startTestService('console_scan');
  origin = new URL(svc.apiUrl).origin;
  orgId = (await createOrg(svc.service.ctx, 'Acme')).id;
  const key = await mintApiKey(svc.service.ctx, { orgId, name: 'checker', scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read', 'counts:read', 'counts:write'] });
  api = client(svc.apiUrl, key.token);
  operator = await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'operator');
  viewer = await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'viewer');
  browser = await launchBrowser();
}, SLOW);

afterAll(async () => {
  await browser?.close();
  await svc?.stop();
});

async function createAsset(name: string): Promise<{ id: number; epc: string }> {
  const epc = hex();
  const created = await api<Json>('POST', '/assets', { body: { name, external_key: unique('TOOL'), tags: [{ tag_type: 'rfid', value: epc }] } });
  expect(created.status).toBe(201);
  return { id: created.body.data.id, epc };
}

/** Types a value as a keyboard wedge does: its keystrokes into whatever has the focus, then Enter. */
async function wedge(page: Page, value: string): Promise<void> {
  await page.keyboard.type(value);
  await page.keyboard.press('Enter');
}

const rowsWith = (page: Page, status: string) => page.locator(`tbody tr[data-status="${status}"]`).count();

/** Rows shown and rows waiting: a read is a row once the page has kept it (IndexedDB), a moment after its Enter. */
const shownAndWaiting = async (page: Page) => [await page.locator('tbody tr').count(), await rowsWith(page, 'pending')];

/** The handheld submissions recorded at the location: one ScansRecorded per submission, with its reads' values. */
async function recorded(locationId: number): Promise<Array<{ submission: string; values: string[] }>> {
  const events = await svc.service.ctx.store.readStream(locationScansStream(orgId, locationId));
  return events.map((e) => {
    const data = e.data as ScansRecordedData;
    return { submission: data.source.kind === 'handheld' ? data.source.submission_id : '', values: data.tags.map((t) => t[1]) };
  });
}

describe.skipIf(missing !== null)('the Scan page on a phone', () => {
  it(
    '20 reads typed as a wedge scanner does, 5 of them offline: each is shown, waits while offline, and is recorded exactly once; the open count of the aisle is right; a reload keeps waiting reads',
    async () => {
      const label = hex();
      const aisle = (await api<Json>('POST', '/locations', { body: { name: 'Aisle <4>', external_key: unique('AISLE'), tags: [{ tag_type: 'rfid', value: label }] } })).body.data;
      const assets = await Promise.all(Array.from({ length: 15 }, (_, i) => createAsset(`Tool ${i} <b>`)));
      const strangers = Array.from({ length: 5 }, () => hex());
      // Known and unknown values mixed: 8 sent, 5 offline, 7 sent.
      const values = [...assets.map((a) => a.epc), ...strangers];
      const order = [0, 15, 1, 2, 16, 3, 4, 5, /* offline: */ 6, 17, 7, 8, 18, /* back online: */ 9, 10, 19, 11, 12, 13, 14].map((i) => values[i]!);
      expect(new Set(order).size).toBe(20);
      // Before the count: 10 of the 15 and two more are in the aisle (a minute ago), so the count
      // expects 12: 10 are scanned (found), 2 are not (missing), 5 scanned were not there (unexpected).
      const absent = await Promise.all(Array.from({ length: 2 }, (_, i) => createAsset(`Absent ${i}`)));
      const placed = await operator.request('POST', '/scans', {
        submission_id: unique('before'),
        device_id: 'setup',
        location: { id: aisle.id },
        reads: [...assets.slice(0, 10), ...absent].map((a) => ({ tag_type: 'rfid', value: a.epc, observed_at: new Date(Date.now() - 60_000).toISOString() })),
      });
      expect(placed.status).toBe(202);
      const setup = (await recorded(aisle.id)).length;

      const { page, context, problems } = await openContext(browser.browser, origin, { mobile: true });
      await signIn(page, operator.email);
      await page.getByRole('link', { name: 'Scan', exact: true }).click();
      await page.getByRole('heading', { level: 1, name: 'Scan' }).waitFor();
      // No count API answers here (or none is open): no count panel.
      expect(await page.locator('.count-panel').count()).toBe(0);
      expect(await page.getByRole('button', { name: 'Scan with camera' }).count(), 'no camera button without BarcodeDetector').toBe(await page.evaluate(() => ('BarcodeDetector' in window ? 1 : 0)));
      await expectAccessible(page, 'scan (pick a location)');

      // The location's label, scanned into the search field: picked at once.
      await page.locator('#scan-location-q').focus();
      await wedge(page, label);
      await page.getByText('Scanning at').waitFor();
      expect(await page.locator('.scan-page .panel .name').first().textContent()).toBe('Aisle <4>');
      expect(await page.evaluate(() => document.activeElement?.id)).toBe('scan-value');
      const started = await api<Json>('POST', '/counts', { body: { location_id: aisle.id } });
      expect(started.status).toBe(201);
      const countId = started.body.data.id as number;

      for (const value of order.slice(0, 8)) await wedge(page, value);
      await expect.poll(() => shownAndWaiting(page), { timeout: 20_000 }).toEqual([8, 0]);
      // The field kept the focus through every read, and nothing reloaded the page.
      expect(await page.evaluate(() => document.activeElement?.id)).toBe('scan-value');

      await context.setOffline(true);
      for (const value of order.slice(8, 13)) await wedge(page, value);
      await expect.poll(() => rowsWith(page, 'pending')).toBe(5);
      await expect.poll(() => page.locator('.scan-status').textContent()).toBe('Offline: 5 reads waiting; they are sent when the connection is back.');
      for (const value of order.slice(8, 13)) expect(await page.locator(`tbody tr[data-value="${value}"]`).getAttribute('data-status')).toBe('pending');
      expect(await page.locator('tbody tr[data-status="pending"]').first().textContent()).toContain('Waiting');
      await screenshot(page, 'scan-offline-phone');
      // Nothing of them reached the server.
      expect((await recorded(aisle.id)).slice(setup).flatMap((r) => r.values).sort()).toEqual(order.slice(0, 8).sort());

      await context.setOffline(false);
      await expect.poll(() => shownAndWaiting(page), { timeout: 20_000 }).toEqual([13, 0]);
      for (const value of order.slice(13)) await wedge(page, value);
      await expect.poll(() => shownAndWaiting(page), { timeout: 20_000 }).toEqual([20, 0]);
      expect(await rowsWith(page, 'placed')).toBe(15);
      expect(await rowsWith(page, 'unknown')).toBe(5);
      for (const value of strangers) expect(await page.locator(`tbody tr[data-value="${value}"]`).textContent()).toContain('Unknown tag');
      // Names first (as text), keys second.
      expect(await page.locator(`tbody tr[data-value="${assets[0]!.epc}"] .name`).textContent()).toBe('Tool 0 <b>');
      expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
      await expectAccessible(page, 'scan (reads)');
      await screenshot(page, 'scan-phone');

      // Every read recorded exactly once: one submission each, 20 distinct ids, in the order scanned.
      const once = (await recorded(aisle.id)).slice(setup);
      expect(once.map((r) => r.values)).toEqual(order.map((v) => [v]));
      expect(new Set(once.map((r) => r.submission)).size).toBe(20);
      for (const asset of assets) {
        expect((await api<Json>('GET', `/assets/${asset.id}`)).body.data.location_id).toBe(aisle.id);
        const history = (await api<Json>('GET', `/assets/${asset.id}/history`)).body;
        expect(history.total_count).toBe(1);
        expect(history.data[0].location_id).toBe(aisle.id);
      }

      // The open count, on the page and in the API: each read counted once.
      const number = (name: string) => page.locator(`.count-panel [data-number="${name}"]`).textContent();
      await expect.poll(async () => [await number('found'), await number('missing'), await number('unexpected')], { timeout: 10_000 }).toEqual(['10', '2', '5']);
      expect((await api<Json>('GET', `/counts/${countId}`)).body.data).toMatchObject({ status: 'open', expected: 12, found: 10, missing: 2, misplaced: 0, unexpected: 5 });
      // Each number stands under its own word, on a phone: the same column, below it.
      const layout = await page.locator('.count-panel dl').evaluate((dl) =>
        [...dl.querySelectorAll('dt')].map((dt) => {
          const dd = dt.nextElementSibling!;
          const [a, b] = [dt.getBoundingClientRect(), dd.getBoundingClientRect()];
          return { word: dt.textContent, under: Math.abs(a.left - b.left) < 2 && b.top >= a.bottom - 1 };
        }),
      );
      expect(layout).toEqual(['Found', 'Missing', 'Unexpected'].map((word) => ({ word, under: true })));

      // The server cannot be reached (each request fails): reads wait; a reload keeps them.
      const late = await Promise.all(Array.from({ length: 3 }, (_, i) => createAsset(`Late ${i}`)));
      await page.route('**/app/api/scans', (route) => route.abort('internetdisconnected'));
      for (const asset of late) await wedge(page, asset.epc);
      await expect.poll(() => shownAndWaiting(page)).toEqual([23, 3]);
      await expect.poll(() => page.locator('.scan-status').textContent()).toMatch(/^3 reads waiting: the server could not be reached; trying again in \d+ s\.$/);
      await page.reload();
      await page.getByRole('heading', { level: 1, name: 'Scan' }).waitFor();
      await expect.poll(() => rowsWith(page, 'pending')).toBe(3);
      expect(await page.locator('tbody tr').count()).toBe(23);
      expect((await recorded(aisle.id)).length).toBe(setup + 20);
      await page.unroute('**/app/api/scans');
      // The retry with backoff sends them, once each.
      await expect.poll(() => rowsWith(page, 'pending'), { timeout: 40_000 }).toBe(0);
      const all = (await recorded(aisle.id)).slice(setup);
      expect(all.map((r) => r.values)).toEqual([...order, ...late.map((a) => a.epc)].map((v) => [v]));
      for (const asset of late) expect((await api<Json>('GET', `/assets/${asset.id}/history`)).body.total_count).toBe(1);
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it('a viewer has no Scan link, the page says it is for operators, and the server refuses a submission', async () => {
    const { page, context, problems } = await openContext(browser.browser, origin, { mobile: true });
    await signIn(page, viewer.email);
    expect(await page.getByRole('link', { name: 'Scan', exact: true }).count()).toBe(0);
    await page.goto('/scan');
    await page.getByRole('heading', { level: 1, name: 'Operators and administrators only' }).waitFor();
    const refused = await viewer.request('POST', '/scans', { submission_id: unique('v'), device_id: 'console', location: { external_key: 'X' }, reads: [{ tag_type: 'rfid', value: 'E2' }] });
    expect(refused.status).toBe(403);
    expect(problems).toEqual([]);
    await context.close();
  });
});
