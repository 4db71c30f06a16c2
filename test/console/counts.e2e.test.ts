import fs from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { parse } from 'csv-parse/sync';
import { createOrg, mintApiKey } from '../support/auth.js';
import { chromiumMissing, expectAccessible, launchBrowser, openContext, type TestBrowser } from '../support/browser.js';
import { hex, unique } from '../support/reader-corpus.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';
import type { AppClient, Json } from '../people/app-client.js';
import { signedInUser } from '../operator/sse-client.js';
import { ROOT, signIn, SLOW } from './harness.js';

/**
 * The Counts pages and the Scan page's count panel (docs/console.md, "Counts" and "Scan"), in
 * Debian's Chromium: a count started on a zone holding three assets; on the Scan page (a phone)
 * two of them and one from elsewhere are scanned, and the panel shows found 2, missing 1,
 * unexpected 1; the count's page shows the same, is closed there, lists the missing asset, and
 * its CSV export holds what the API's missing list holds.
 *
 * The counts API comes with the counts branch: until it is merged this file is skipped.
 */

const missing = chromiumMissing() ?? (fs.existsSync(path.join(ROOT, 'projections', 'counts')) ? null : 'the counts API is not in this tree yet');

let svc: TestService;
let browser: TestBrowser;
let origin: string;
let operator: AppClient & { email: string };
let api: ReturnType<typeof client>;

beforeAll(async () => {
  if (missing) return;
  svc = await startTestService('console_counts');
  origin = new URL(svc.apiUrl).origin;
  const orgId = (await createOrg(svc.service.ctx, 'Acme')).id;
  const key = await mintApiKey(svc.service.ctx, { orgId, name: 'checker', scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read', 'counts:read', 'counts:write'] });
  api = client(svc.apiUrl, key.token);
  operator = await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'operator');
  browser = await launchBrowser();
}, SLOW);

afterAll(async () => {
  await browser?.close();
  await svc?.stop();
});

async function wedge(page: Page, value: string): Promise<void> {
  await page.keyboard.type(value);
  await page.keyboard.press('Enter');
}

async function createAsset(name: string): Promise<{ id: number; epc: string }> {
  const epc = hex();
  const created = await api<Json>('POST', '/assets', { body: { name, external_key: unique('TOOL'), tags: [{ tag_type: 'rfid', value: epc }] } });
  expect(created.status).toBe(201);
  return { id: created.body.data.id, epc };
}

describe.skipIf(missing !== null)('counts in the console', () => {
  it(
    'the Scan page shows an open count’s numbers after each read; the count’s page shows them, closes it, lists the missing asset, and exports it as the API lists it',
    async () => {
      const aisle = (await api<Json>('POST', '/locations', { body: { name: 'Aisle', external_key: unique('AISLE') } })).body.data;
      const dock = (await api<Json>('POST', '/locations', { body: { name: 'Dock', external_key: unique('DOCK') } })).body.data;
      const expected = [await createAsset('Drill'), await createAsset('Saw'), await createAsset('Ladder <3>')];
      const stray = await createAsset('Stray');
      // Where they are before the count: three in the aisle, one at the dock (a minute ago).
      const before = new Date(Date.now() - 60_000).toISOString();
      const place = (locationId: number, assets: Array<{ epc: string }>) =>
        operator.request('POST', '/scans', { submission_id: unique('before'), device_id: 'setup', location: { id: locationId }, reads: assets.map((a) => ({ tag_type: 'rfid', value: a.epc, observed_at: before })) });
      expect((await place(aisle.id, expected)).status).toBe(202);
      expect((await place(dock.id, [stray])).status).toBe(202);
      const started = await api<Json>('POST', '/counts', { body: { location_id: aisle.id, name: 'Weekly <i>' } });
      expect(started.status).toBe(201);
      const countId = started.body.data.id as number;

      const { page, context, problems } = await openContext(browser.browser, origin, { mobile: true });
      await signIn(page, operator.email);
      await page.goto('/scan');
      await page.locator('#scan-location-q').fill('Aisle');
      await page.keyboard.press('Enter');
      await page.getByRole('button', { name: 'Scan at Aisle' }).click();
      await page.locator('.count-panel').waitFor();
      const number = (name: string) => page.locator(`.count-panel [data-number="${name}"]`).textContent();
      expect([await number('found'), await number('missing'), await number('unexpected')]).toEqual(['0', '3', '0']);
      for (const value of [expected[0]!.epc, expected[1]!.epc, stray.epc]) await wedge(page, value);
      await expect.poll(() => page.locator('tbody tr[data-status="pending"]').count(), { timeout: 20_000 }).toBe(0);
      await expect.poll(async () => [await number('found'), await number('missing'), await number('unexpected')], { timeout: 10_000 }).toEqual(['2', '1', '1']);
      await context.close();

      const desk = await openContext(browser.browser, origin);
      await signIn(desk.page, operator.email);
      await desk.page.getByRole('link', { name: 'Counts', exact: true }).click();
      await desk.page.getByRole('link', { name: 'Weekly <i>' }).click();
      await desk.page.getByRole('heading', { level: 1, name: 'Weekly <i>' }).waitFor();
      const shown = (name: string) => desk.page.locator(`.count-numbers [data-number="${name}"]`).textContent();
      expect([await shown('expected'), await shown('found'), await shown('missing'), await shown('misplaced'), await shown('unexpected')]).toEqual(['3', '2', '1', '0', '1']);
      await expectAccessible(desk.page, 'a count');
      await desk.page.getByRole('button', { name: 'Close count' }).click();
      await desk.page.getByRole('dialog').getByRole('button', { name: 'Close count' }).click();
      await expect.poll(() => desk.page.locator('.count-numbers').getAttribute('data-status')).toBe('closed');
      expect((await api<Json>('GET', `/counts/${countId}`)).body.data.status).toBe('closed');
      await expect.poll(() => desk.page.locator('tbody tr').count()).toBe(1);
      expect(await desk.page.locator('tbody tr .name').textContent()).toBe('Ladder <3>');

      const [download] = await Promise.all([desk.page.waitForEvent('download'), desk.page.getByRole('group', { name: 'Export missing assets' }).getByRole('button', { name: 'Export CSV' }).click()]);
      const rows = parse(await readFile((await download.path())!, 'utf8'), { columns: true }) as Array<Record<string, string>>;
      const listed = (await api<Json>('GET', `/counts/${countId}/items?status=missing`)).body.data as Json[];
      expect(rows.map((r) => Number(r.asset_id))).toEqual(listed.map((i) => i.asset_id));
      expect(rows.map((r) => Number(r.asset_id))).toEqual([expected[2]!.id]);
      expect(desk.problems).toEqual([]);
      expect(problems).toEqual([]);
      await desk.context.close();
    },
    SLOW,
  );
});
