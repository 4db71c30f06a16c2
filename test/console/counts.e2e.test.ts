import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { parse } from 'csv-parse/sync';
import { createOrg, mintApiKey } from '../support/auth.js';
import { chromiumMissing, expectAccessible, launchBrowser, openContext, screenshot, type TestBrowser } from '../support/browser.js';
import { hex, unique } from '../support/reader-corpus.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';
import type { AppClient, Json } from '../people/app-client.js';
import { signedInUser } from '../operator/sse-client.js';
import { eventually, gateway, kafkaEnv } from '../support/kafka.js';
import { signIn, SLOW } from './harness.js';

/**
 * The Counts pages and the Scan page's count panel (docs/console.md, "Counts" and "Scan"), in
 * Debian's Chromium (issue 36's second browser test): a count started on a zone holding four
 * assets; a fixed reader at the zone, publishing to a real Kafka-protocol broker, reads one of
 * them; on the Scan page (a phone) two more and one from elsewhere are scanned, and the panel
 * shows found 3, missing 1, unexpected 1; the count's page shows the same, is closed there, lists
 * the missing asset, and its CSV export holds what the API's missing list holds.
 */

const missing = chromiumMissing();
const reader = `aisle-gate-${randomUUID().slice(0, 8)}`;
let topic: string;
let gw: Awaited<ReturnType<typeof gateway>>;

let svc: TestService;
let browser: TestBrowser;
let origin: string;
let operator: AppClient & { email: string };
let admin: AppClient & { email: string };
let api: ReturnType<typeof client>;

beforeAll(async () => {
  if (missing) return;
  const env = await kafkaEnv('console-counts');
  topic = env.KAFKA_SCAN_TOPIC;
  svc = await startTestService('console_counts', env);
  gw = await gateway();
  origin = new URL(svc.apiUrl).origin;
  const orgId = (await createOrg(svc.service.ctx, 'Acme')).id;
  const key = await mintApiKey(svc.service.ctx, { orgId, name: 'checker', scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read', 'counts:read', 'counts:write'] });
  api = client(svc.apiUrl, key.token);
  operator = await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'operator');
  admin = await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'admin');
  browser = await launchBrowser();
}, SLOW);

afterAll(async () => {
  await browser?.close();
  await gw?.close();
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
    'a fixed reader and the Scan page both read into an open count; the count’s page shows its numbers, closes it, lists the missing asset, and exports it as the API lists it',
    async () => {
      const aisle = (await api<Json>('POST', '/locations', { body: { name: 'Aisle', external_key: unique('AISLE') } })).body.data;
      const dock = (await api<Json>('POST', '/locations', { body: { name: 'Dock', external_key: unique('DOCK') } })).body.data;
      const expected = [await createAsset('Drill'), await createAsset('Saw'), await createAsset('Ladder <3>'), await createAsset('Crate')];
      const stray = await createAsset('Stray');
      // Where they are before the count: four in the aisle, one at the dock (a minute ago).
      const before = new Date(Date.now() - 60_000).toISOString();
      const place = (locationId: number, assets: Array<{ epc: string }>) =>
        operator.request('POST', '/scans', { submission_id: unique('before'), device_id: 'setup', location: { id: locationId }, reads: assets.map((a) => ({ tag_type: 'rfid', value: a.epc, observed_at: before })) });
      expect((await place(aisle.id, expected)).status).toBe(202);
      expect((await place(dock.id, [stray])).status).toBe(202);
      const started = await api<Json>('POST', '/counts', { body: { location_id: aisle.id, name: 'Weekly <i>' } });
      expect(started.status).toBe(201);
      const countId = started.body.data.id as number;

      // The aisle's fixed reader (over Kafka) reads the crate.
      expect((await admin.request('POST', '/readers', { reader_id: reader })).status).toBe(200);
      expect((await admin.request('POST', '/scan-points', { reader_id: reader, capture_point: `${reader}-1`, location: { id: aisle.id } })).status).toBe(200);
      await eventually(async () => expect((await svc.service.ctx.readModels.scanPointLocations([reader])).get(`${reader}\u0000${reader}-1`)).toBe(aisle.id), SLOW);
      await gw.publish(topic, reader, { reader_id: reader, reads: [{ capture_point: `${reader}-1`, tag_type: 'rfid', value: expected[3]!.epc, observed_at: new Date().toISOString(), rssi: -60 }] });
      await eventually(async () => expect((await api<Json>('GET', `/counts/${countId}`)).body.data.found).toBe(1), SLOW);

      const { page, context, problems } = await openContext(browser.browser, origin, { mobile: true });
      await signIn(page, operator.email);
      await page.goto('/scan');
      await page.locator('#scan-location-q').fill('Aisle');
      await page.keyboard.press('Enter');
      await page.getByRole('button', { name: 'Scan at Aisle' }).click();
      await page.locator('.count-panel').waitFor();
      const number = (name: string) => page.locator(`.count-panel [data-number="${name}"]`).textContent();
      expect([await number('found'), await number('missing'), await number('unexpected')]).toEqual(['1', '3', '0']);
      for (const value of [expected[0]!.epc, expected[1]!.epc, stray.epc]) await wedge(page, value);
      await expect.poll(() => page.locator('tbody tr[data-status="pending"]').count(), { timeout: 20_000 }).toBe(0);
      await expect.poll(async () => [await number('found'), await number('missing'), await number('unexpected')], { timeout: 10_000 }).toEqual(['3', '1', '1']);
      await context.close();

      const desk = await openContext(browser.browser, origin);
      await signIn(desk.page, operator.email);
      await desk.page.getByRole('link', { name: 'Counts', exact: true }).click();
      await desk.page.getByRole('link', { name: 'Weekly <i>' }).click();
      await desk.page.getByRole('heading', { level: 1, name: 'Weekly <i>' }).waitFor();
      const shown = (name: string) => desk.page.locator(`.count-numbers [data-number="${name}"]`).textContent();
      expect([await shown('expected'), await shown('found'), await shown('missing'), await shown('misplaced'), await shown('unexpected')]).toEqual(['4', '3', '1', '0', '1']);
      // Names first, keys second (docs/console.md "Names first"); the list shown is the one chosen.
      expect(await desk.page.locator('.count-numbers dd').first().locator('.name').textContent()).toBe('Aisle');
      expect(await desk.page.locator('.count-numbers dd').first().locator('.key').textContent()).toBe(aisle.external_key);
      const chosen = desk.page.getByRole('group', { name: 'Lists' }).getByRole('button', { name: 'Missing (1)' });
      expect(await chosen.getAttribute('aria-pressed')).toBe('true');
      expect(await chosen.evaluate((b) => getComputedStyle(b).backgroundColor)).not.toBe(await desk.page.getByRole('button', { name: 'Found (3)' }).evaluate((b) => getComputedStyle(b).backgroundColor));
      await expectAccessible(desk.page, 'a count');
      await screenshot(desk.page, 'count-open');
      await desk.page.getByRole('button', { name: 'Close count' }).click();
      await desk.page.getByRole('dialog').getByRole('button', { name: 'Close count' }).click();
      await expect.poll(() => desk.page.locator('.count-numbers').getAttribute('data-status')).toBe('closed');
      expect((await api<Json>('GET', `/counts/${countId}`)).body.data.status).toBe('closed');
      await expect.poll(() => desk.page.locator('tbody tr').count()).toBe(1);
      expect(await desk.page.locator('tbody tr .name').textContent()).toBe('Ladder <3>');
      await screenshot(desk.page, 'count-closed');

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
