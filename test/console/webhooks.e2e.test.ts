import { randomUUID } from 'node:crypto';
import type { Page } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg } from '../support/auth.js';
import { chromiumMissing, expectAccessible, launchBrowser, openContext, screenshot, type TestBrowser } from '../support/browser.js';
import { eventually } from '../support/kafka.js';
import { scanner } from '../support/scans.js';
import { startTestService, type TestService } from '../support/service.js';
import { webhookReceiver, type Received, type WebhookReceiver } from '../support/webhook-receiver.js';
import { client } from '../master-data/http.js';
import type { AppClient, Json } from '../people/app-client.js';
import { signedInUser } from '../operator/sse-client.js';
import { signIn, SLOW, XSS } from './harness.js';

/**
 * The console's Webhooks page (docs/console.md "Webhooks (admins)") in Debian's Chromium against
 * a started service with the webhooks role, delivering to a real HTTP receiver in this process
 * (private targets allowed, as in development): an endpoint created in the page, its secret
 * copied from the page verifying a signed asset.moved that a handheld scan caused, the delivery
 * shown as succeeded and sent again, the secret rotated, the endpoint edited, disabled and
 * deleted; refusals by field, markup as text, a member kept out, a phone's screen.
 */

const missing = chromiumMissing();

let svc: TestService;
let origin: string;
let browser: TestBrowser;
let receiver: WebhookReceiver;
let orgId: number;
let admin: AppClient & { email: string };
let member: AppClient & { email: string };
let api: ReturnType<typeof client>;
let scans: Awaited<ReturnType<typeof scanner>>;
let dock: { id: number; external_key: string };
let aisle: { id: number; external_key: string };
let pallet: { id: number; external_key: string; tag: string };

const suffix = () => randomUUID().slice(0, 8);

/** The requests the receiver got on `path` (the query aside). */
const to = (path: string): Received[] => receiver.received.filter((r) => r.path.split('?')[0] === path);

/** Where the pallet was last read. */
let palletAt: number | null = null;

/** A handheld read of the pallet at `location`, observed now. */
async function scanAt(location: { id: number }) {
  await scans.scan({ id: location.id }, [{ tag_type: 'barcode', value: pallet.tag, observed_at: new Date().toISOString() }]);
  palletAt = location.id;
}

/** What the page's Copy button put on the clipboard. */
async function copied(page: Page): Promise<string> {
  await page.getByRole('button', { name: 'Copy' }).click();
  await page.getByText('Copied.').waitFor();
  return page.evaluate(() => navigator.clipboard.readText());
}

beforeAll(async () => {
  if (missing) return;
  svc = await startTestService('console_webhooks', { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', WEBHOOK_RETRY_SCALE: '0.0001', WEBHOOK_TIMEOUT_MS: '1500' });
  origin = new URL(svc.apiUrl).origin;
  receiver = await webhookReceiver();
  orgId = (await createOrg(svc.service.ctx, 'Acme')).id;
  admin = await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'admin');
  member = await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'operator');
  const token = (await admin.request('POST', '/session-token')).body.data.token as string;
  api = client(svc.apiUrl, token);
  const created = async (path: string, body: Json) => {
    const reply = await api<Json>('POST', path, { body });
    expect(reply.status, JSON.stringify(reply.body)).toBe(201);
    return reply.body.data;
  };
  dock = await created('/locations', { name: 'Dock', external_key: `DOCK-${suffix()}` });
  aisle = await created('/locations', { name: 'Aisle', external_key: `AISLE-${suffix()}` });
  const tag = `SN-${suffix()}`;
  pallet = { ...(await created('/assets', { name: 'Pallet', external_key: `PALLET-${suffix()}`, tags: [{ tag_type: 'barcode', value: tag }] })), tag };
  scans = await scanner(svc, orgId);
  browser = await launchBrowser();
}, SLOW);

afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await svc?.stop();
});

describe.skipIf(missing !== null)('the Webhooks page in a browser', () => {
  const path = `/hook/${suffix()}`;
  let url = '';
  let endpointId = 0;
  /** The secrets the page showed, oldest first. */
  const secrets: string[] = [];

  it(
    'create an endpoint in the page → copy its secret → a handheld scan moves an asset → the receiver verifies the signed asset.moved → the page lists the delivery as succeeded and sends it again',
    async () => {
      url = `${receiver.url(path)}?note=${XSS}`;
      const { page, context, problems } = await openContext(browser.browser, origin);
      await signIn(page, admin.email);
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Webhooks' }).click();
      await page.getByRole('heading', { level: 1, name: 'Webhooks' }).waitFor();
      await page.getByText('No webhook endpoints yet.').waitFor();
      await expectAccessible(page, 'webhooks (empty)');

      // The server's refusals, by field: a URL that is not one, no event type.
      await page.getByLabel('URL').fill('not a url');
      for (const type of ['asset.first_seen', 'asset.moved']) await page.getByLabel(type, { exact: true }).uncheck();
      expect(await page.getByLabel('Not seen after (seconds)').count()).toBe(0);
      await page.getByRole('button', { name: 'Create endpoint' }).click();
      await expect.poll(() => page.locator('#new-url-error').textContent()).toMatch(/url/i);
      // In words beside the boxes, never the JSON key (docs/console.md, "Messages").
      await expect.poll(() => page.locator('#new-types-error').textContent()).toMatch(/event/);
      expect(await page.locator('#new-types-error').textContent()).not.toMatch(/event_types/);
      expect(await page.getByLabel('URL').getAttribute('aria-invalid')).toBe('true');
      await expectAccessible(page, 'webhooks (refused)');

      // asset.not_seen asks for its delay; one under a minute is refused on that field.
      await page.getByLabel('URL').fill(url);
      await page.getByLabel('asset.moved', { exact: true }).check();
      await page.getByLabel('asset.not_seen', { exact: true }).check();
      await page.getByLabel('Not seen after (seconds)').fill('30');
      await page.getByLabel('Description (optional)').fill(`Dock feed ${XSS}`);
      await page.getByRole('button', { name: 'Create endpoint' }).click();
      await expect.poll(() => page.locator('#new-not-seen-error').textContent()).not.toBe('');
      expect(await page.locator('#new-url-error').textContent()).toBe('');
      expect(await page.getByLabel('Not seen after (seconds)').getAttribute('aria-invalid')).toBe('true');
      await page.getByLabel('asset.not_seen', { exact: true }).uncheck();
      await page.getByLabel('asset.first_seen', { exact: true }).check();
      await page.getByRole('button', { name: 'Create endpoint' }).click();

      // The secret, once, with Copy; the note on verifying links to the API reference.
      await page.getByRole('heading', { name: `Signing secret for ${url}` }).waitFor();
      const secret = await copied(page);
      expect(secret).toMatch(/^whsec_[A-Za-z0-9+/=]+$/);
      expect(await page.getByLabel('Secret', { exact: true }).inputValue()).toBe(secret);
      expect(await page.getByRole('link', { name: 'API reference' }).getAttribute('href')).toBe('/docs#/Webhooks');
      await expectAccessible(page, 'webhooks (secret)');
      await screenshot(page, 'webhooks-secret');
      await page.getByRole('button', { name: 'Done' }).click();
      expect(await page.getByLabel('Secret', { exact: true }).count()).toBe(0);

      const row = page.locator('tbody tr').filter({ hasText: url });
      await row.waitFor();
      endpointId = Number(await row.getAttribute('data-endpoint-id'));
      expect((await row.locator('td').allTextContents()).slice(0, 4)).toEqual([`${url}Dock feed ${XSS}`, 'asset.first_seenasset.moved', 'Active', 'Not used']);
      // Created through the contract: the API shows what the page made, and never the secret.
      const listed = await api<Json>('GET', `/webhook-endpoints/${endpointId}`);
      expect(listed.body.data).toMatchObject({ url, description: `Dock feed ${XSS}`, event_types: ['asset.first_seen', 'asset.moved'], is_active: true, disabled_reason: null });
      expect(listed.body.data.secret).toBeUndefined();

      // A handheld places the pallet, then moves it: the receiver gets both, signed with the page's secret.
      await scanAt(dock);
      await eventually(async () => expect(to(path).map((r) => r.json.type)).toEqual(['asset.first_seen']), 20_000);
      await scanAt(aisle);
      await eventually(async () => expect(to(path).map((r) => r.json.type)).toEqual(['asset.first_seen', 'asset.moved']), 20_000);
      const moved = to(path)[1]!;
      const wh = new Webhook(secret);
      expect(wh.verify(moved.body, moved.headers as Record<string, string>)).toMatchObject({
        type: 'asset.moved',
        data: { asset_id: pallet.id, from_location_id: dock.id, to_location_id: aisle.id, source: { kind: 'handheld', device_id: 'test-handheld' } },
      });
      // Another secret does not verify it: the check above means something.
      expect(() => new Webhook(`whsec_${Buffer.alloc(32, 7).toString('base64')}`).verify(moved.body, moved.headers as Record<string, string>)).toThrow();

      // The page lists the deliveries, newest first, succeeded with the receiver's 200.
      await row.getByRole('button', { name: `Deliveries to ${url}` }).click();
      const deliveries = page.locator('section.deliveries');
      await expect.poll(() => deliveries.getByRole('heading', { level: 2 }).evaluate((h) => h === document.activeElement)).toBe(true);
      const first = deliveries.locator('tbody tr').first();
      await eventually(async () => {
        await deliveries.getByRole('button', { name: 'Refresh' }).click();
        expect((await first.locator('td').allTextContents()).slice(1, 5)).toEqual(['asset.moved', 'Succeeded', '1', '200']);
      }, 10_000);
      expect(await deliveries.locator('tbody tr').count()).toBe(2);
      expect(await first.locator('td').nth(5).textContent()).toMatch(/^\d+ ms$/);
      await expectAccessible(page, 'webhooks (deliveries)');
      await screenshot(page, 'webhooks');

      // Redeliver: the same event again, same webhook-id, and a new row.
      await first.getByRole('button', { name: /^Redeliver asset\.moved delivery/ }).click();
      await deliveries.getByText(/The asset\.moved event is queued to be sent again/).waitFor();
      await eventually(async () => expect(to(path)).toHaveLength(3), 20_000);
      expect(to(path)[2]!.headers['webhook-id']).toBe(moved.headers['webhook-id']);
      wh.verify(to(path)[2]!.body, to(path)[2]!.headers as Record<string, string>);
      await eventually(async () => {
        await deliveries.getByRole('button', { name: 'Refresh' }).click();
        expect(await deliveries.locator('tbody tr').count()).toBe(3);
        expect((await first.locator('td').allTextContents()).slice(1, 3)).toEqual(['asset.moved', 'Succeeded']);
      }, 10_000);
      expect(await page.locator('img').count()).toBe(0);
      expect(problems).toEqual([]);
      await context.close();

      // The rotation test below signs with both.
      secrets.push(secret);
    },
    SLOW,
  );

  it(
    'rotate the secret in the page (asked first, by keyboard): the new one is shown once, and both sign for 24 hours',
    async () => {
      expect(endpointId).toBeGreaterThan(0);
      const { page, context, problems } = await openContext(browser.browser, origin);
      await signIn(page, admin.email);
      await page.goto('/webhooks');
      const row = page.locator(`tr[data-endpoint-id="${endpointId}"]`);
      const rotate = row.getByRole('button', { name: `Rotate secret of ${url}` });
      // Keyboard: Enter opens the question, focus is on Cancel, Escape cancels; Tab to the confirmation.
      await rotate.focus();
      await page.keyboard.press('Enter');
      const dialog = page.getByRole('dialog', { name: "Rotate this endpoint's secret?" });
      await dialog.waitFor();
      expect(await dialog.getByRole('button', { name: 'Cancel' }).evaluate((b) => b === document.activeElement)).toBe(true);
      await expect.poll(() => dialog.textContent()).toContain('keeps signing beside it for 24 hours');
      await expectAccessible(page, 'webhooks (rotate dialog)');
      await screenshot(page, 'webhooks-rotate');
      await page.keyboard.press('Escape');
      await expect.poll(() => dialog.count()).toBe(0);
      expect(await page.getByLabel('Secret', { exact: true }).count()).toBe(0);
      await rotate.focus();
      await page.keyboard.press('Enter');
      await dialog.waitFor();
      await page.keyboard.press('Shift+Tab');
      await page.keyboard.press('Enter');

      await page.getByRole('heading', { name: `New secret for ${url}` }).waitFor();
      await page.getByText(/The previous secret also signs every delivery for 24 hours/).waitFor();
      const rotated = await copied(page);
      expect(rotated).toMatch(/^whsec_/);
      expect(rotated).not.toBe(secrets[0]);
      await expectAccessible(page, 'webhooks (rotated)');

      // The next move is signed by both secrets.
      const before = to(path).length;
      await scanAt(dock);
      await eventually(async () => expect(to(path).length).toBe(before + 1), 20_000);
      const next = to(path)[before]!;
      expect(next.json.type).toBe('asset.moved');
      expect((next.headers['webhook-signature'] as string).split(' ')).toHaveLength(2);
      new Webhook(rotated).verify(next.body, next.headers as Record<string, string>);
      new Webhook(secrets[0]!).verify(next.body, next.headers as Record<string, string>);
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'edit (a refusal by field, then the not-seen delay), disable (nothing more is sent), enable, delete after confirmation',
    async () => {
      expect(endpointId).toBeGreaterThan(0);
      const { page, context, problems } = await openContext(browser.browser, origin);
      await signIn(page, admin.email);
      await page.goto('/webhooks');
      const row = page.locator(`tr[data-endpoint-id="${endpointId}"]`);
      await row.getByRole('button', { name: `Edit endpoint ${url}` }).click();
      await page.getByRole('heading', { name: 'Edit endpoint' }).waitFor();
      // The edit starts in its URL field, holding the current values.
      await expect.poll(() => page.getByLabel('URL').evaluate((f) => f === document.activeElement)).toBe(true);
      expect(await page.getByLabel('URL').inputValue()).toBe(url);
      expect(await page.getByLabel('Description (optional)').inputValue()).toBe(`Dock feed ${XSS}`);
      await page.getByLabel('URL').fill('ftp://example.com/hook');
      await page.getByLabel('asset.not_seen', { exact: true }).check();
      await page.getByLabel('Not seen after (seconds)').fill('120');
      await page.getByRole('button', { name: 'Save endpoint' }).click();
      await expect.poll(() => page.locator('#edit-url-error').textContent()).toMatch(/https/);
      // Refused whole: nothing changed.
      expect((await api<Json>('GET', `/webhook-endpoints/${endpointId}`)).body.data.url).toBe(url);
      await page.getByLabel('URL').fill(url);
      await page.getByLabel('Description (optional)').fill('');
      await page.getByLabel('Description (optional)').press('Enter');
      await page.getByText(`Endpoint ${url} is saved.`).waitFor();
      expect((await row.locator('td').allTextContents()).slice(0, 4)).toEqual([url, 'asset.first_seenasset.movedasset.not_seen', 'Active', '2 min']);
      expect((await api<Json>('GET', `/webhook-endpoints/${endpointId}`)).body.data).toMatchObject({ description: null, not_seen_after_seconds: 120 });

      // Disabled: the page says so, and a move sends it nothing. A witness endpoint, still active,
      // gets that move: its delivery is queued in the same transaction as the disabled one's would be.
      const witnessPath = `/witness/${suffix()}`;
      expect((await api<Json>('POST', '/webhook-endpoints', { body: { url: receiver.url(witnessPath), event_types: ['asset.moved'] } })).status).toBe(201);
      await row.getByRole('button', { name: `Disable endpoint ${url}` }).click();
      await page.getByText(`Endpoint ${url} is disabled: nothing is sent to it until it is enabled.`).waitFor();
      expect(await row.locator('td').nth(2).textContent()).toBe('Disabled');
      expect((await api<Json>('GET', `/webhook-endpoints/${endpointId}`)).body.data.is_active).toBe(false);
      const before = to(path).length;
      const from = palletAt === dock.id ? dock : aisle;
      const other = from === dock ? aisle : dock;
      await scanAt(other);
      await eventually(async () => expect(to(witnessPath).map((r) => r.json.data.to_location_id)).toEqual([other.id]), 20_000);
      await new Promise((r) => setTimeout(r, 1000));
      expect(to(path)).toHaveLength(before);
      await expectAccessible(page, 'webhooks (disabled)');

      // Enabled again: the next move is sent; the one made while it was disabled never is.
      await row.getByRole('button', { name: `Enable endpoint ${url}` }).click();
      await page.getByText(`Endpoint ${url} is enabled: deliveries resume.`).waitFor();
      expect(await row.locator('td').nth(2).textContent()).toBe('Active');
      await scanAt(from);
      await eventually(async () => expect(to(witnessPath)).toHaveLength(2), 20_000);
      await eventually(async () => expect(to(path).length).toBe(before + 1), 20_000);
      expect(to(path)[before]!.json).toMatchObject({ type: 'asset.moved', data: { from_location_id: other.id, to_location_id: from.id } });

      // Delete asks first; Cancel keeps it.
      await row.getByRole('button', { name: `Delete endpoint ${url}` }).click();
      const dialog = page.getByRole('dialog', { name: 'Delete this endpoint?' });
      await dialog.waitFor();
      await expectAccessible(page, 'webhooks (delete dialog)');
      await dialog.getByRole('button', { name: 'Cancel' }).click();
      expect(await row.count()).toBe(1);
      await row.getByRole('button', { name: `Delete endpoint ${url}` }).click();
      await dialog.getByRole('button', { name: 'Delete endpoint' }).click();
      await page.getByText(`Endpoint ${url} is deleted.`).waitFor();
      await expect.poll(() => row.count()).toBe(0);
      expect((await api<Json>('GET', `/webhook-endpoints/${endpointId}`)).status).toBe(404);
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'a member has no Webhooks page: not in the navigation, and the path says administrators only',
    async () => {
      const { page, context, problems } = await openContext(browser.browser, origin);
      await signIn(page, member.email);
      const nav = await page.getByRole('navigation', { name: 'Main' }).getByRole('link').allTextContents();
      expect(nav).not.toContain('Webhooks');
      await page.goto('/webhooks');
      await page.getByRole('heading', { level: 1, name: 'Administrators only' }).waitFor();
      expect(await page.getByRole('button', { name: 'Create endpoint' }).count()).toBe(0);
      // The page's chunk is not even fetched for a member.
      const scripts = await page.evaluate(() => performance.getEntriesByType('resource').map((entry) => entry.name));
      expect(scripts.filter((name) => /\/static\/webhooks-[^/]+\.js$/.test(name))).toEqual([]);
      await expectAccessible(page, 'webhooks (member)');
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'an endpoint the service disabled after its last retry: the page shows why (markup as text) and the deliveries; Enable sends the event queued behind, Redeliver the one given up',
    async () => {
      const failingPath = `/failing/${suffix()}`;
      const failingUrl = receiver.url(failingPath);
      receiver.answer(failingPath, () => ({ status: 302, location: `/elsewhere/${XSS}` }));
      const created = await api<Json>('POST', '/webhook-endpoints', { body: { url: failingUrl, event_types: ['asset.moved'] } });
      expect(created.status).toBe(201);
      const id = created.body.data.id as number;
      // Two moves: the first is retried until given up; the second waits behind it (same asset).
      const from = palletAt === dock.id ? dock : aisle;
      const other = from === dock ? aisle : dock;
      await scanAt(other);
      await scanAt(from);
      await eventually(async () => expect((await api<Json>('GET', `/webhook-endpoints/${id}`)).body.data.is_active).toBe(false), 75_000, 500);
      const gaveUp = to(failingPath);
      expect(gaveUp).toHaveLength(10);
      expect(new Set(gaveUp.map((r) => r.json.data.to_location_id))).toEqual(new Set([other.id]));

      const { page, context, problems } = await openContext(browser.browser, origin);
      await signIn(page, admin.email);
      await page.goto('/webhooks');
      const row = page.locator(`tr[data-endpoint-id="${id}"]`);
      const state = await row.locator('td').nth(2).textContent();
      expect(state).toMatch(/^Disableddisabled after 10 failed attempts to deliver msg_\w+ \(last: redirect to .*not followed\)$/);
      expect(state).toContain(XSS);
      await row.getByRole('button', { name: `Deliveries to ${failingUrl}` }).click();
      const deliveries = page.locator('section.deliveries');
      const rows = deliveries.locator('tbody tr');
      await rows.first().waitFor();
      expect(await rows.count()).toBe(2);
      expect((await rows.nth(0).locator('td').allTextContents()).slice(1, 5)).toEqual(['asset.moved', 'Pending', '0', '—']);
      const failed = await rows.nth(1).locator('td').allTextContents();
      expect(failed.slice(1, 5)).toEqual(['asset.moved', 'Failed', '10', '302']);
      expect(failed[6]).toContain(XSS);
      expect(failed[7]).toBe('—');
      await expectAccessible(page, 'webhooks (disabled by the service)');

      // The receiver is fixed; Enable sends the event that waited.
      receiver.answer(failingPath, () => ({ status: 200 }));
      await row.getByRole('button', { name: `Enable endpoint ${failingUrl}` }).click();
      await page.getByText(`Endpoint ${failingUrl} is enabled: deliveries resume.`).waitFor();
      expect(await row.locator('td').nth(2).textContent()).toBe('Active');
      await eventually(async () => expect(to(failingPath)).toHaveLength(11), 20_000);
      const waited = to(failingPath)[10]!;
      expect(waited.json.data.to_location_id).toBe(from.id);
      const wh = new Webhook(created.body.data.secret as string);
      wh.verify(waited.body, waited.headers as Record<string, string>);

      // Redeliver sends the one given up, under its webhook-id.
      await eventually(async () => {
        await deliveries.getByRole('button', { name: 'Refresh' }).click();
        expect((await rows.nth(0).locator('td').nth(2).textContent())).toBe('Succeeded');
      }, 10_000);
      await rows.nth(1).getByRole('button', { name: /^Redeliver asset\.moved delivery/ }).click();
      await deliveries.getByText(/queued to be sent again/).waitFor();
      await eventually(async () => expect(to(failingPath)).toHaveLength(12), 20_000);
      const again = to(failingPath)[11]!;
      expect(again.headers['webhook-id']).toBe(gaveUp[0]!.headers['webhook-id']);
      wh.verify(again.body, again.headers as Record<string, string>);
      expect(await page.locator('img').count()).toBe(0);
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'usable on a phone: the page and its deliveries no wider than the screen',
    async () => {
      const phonePath = `/phone/${suffix()}`;
      const created = await api<Json>('POST', '/webhook-endpoints', { body: { url: receiver.url(phonePath), event_types: ['asset.moved'], description: 'Yard gate' } });
      expect(created.status).toBe(201);
      // A move, wherever the tests above left the pallet.
      await scanAt(palletAt === dock.id ? aisle : dock);
      await eventually(async () => expect(to(phonePath)).toHaveLength(1), 20_000);
      const { page, context, problems } = await openContext(browser.browser, origin, { mobile: true });
      await signIn(page, admin.email);
      await page.goto('/webhooks');
      const row = page.locator(`tr[data-endpoint-id="${created.body.data.id as number}"]`);
      await row.waitFor();
      expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
      await row.getByRole('button', { name: /^Deliveries to / }).click();
      await page.locator('section.deliveries tbody tr').first().waitFor();
      expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
      await expectAccessible(page, 'webhooks (phone)');
      await screenshot(page, 'webhooks-phone');
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );
});
