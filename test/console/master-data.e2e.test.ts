import { describe, expect, it } from 'vitest';
import { chromiumMissing, expectAccessible, openContext, screenshot } from '../support/browser.js';
import { client } from '../master-data/http.js';
import type { Json } from '../people/app-client.js';
import { keepingWorld, signIn, SLOW } from './harness.js';

/**
 * Keeping assets and locations in the console (docs/console.md, "Keeping assets and locations"),
 * in Debian's Chromium: an operator creates, edits, renames, tags, moves and deletes, each change
 * checked through /api/v1 with a key; a field error beside its field in words; a cycle refused
 * with the API's message; a viewer sees no write control, and the API refuses its token 403.
 */

const missing = chromiumMissing();

const world = keepingWorld('console_master_data', missing);

/** The one record of `kind` with this key, through the API (deleted ones too). */
async function byKey(kind: 'assets' | 'locations', key: string): Promise<Json | undefined> {
  const answer = await world.api<Json>('GET', `/${kind}?external_key=${key}&include_deleted=true`);
  expect(answer.status).toBe(200);
  return answer.body.data[0];
}

describe.skipIf(missing !== null)('keeping assets and locations in a browser', () => {
  it(
    'an operator: create → edit (a field error in words beside its field) → rename → tags → delete, each checked through /api/v1',
    async () => {
      const { page, context, problems } = await openContext(world.browser.browser, world.origin);
      await signIn(page, world.operator.email);
      await page.locator('#new-asset-key').fill('PALLET-1');
      await page.locator('#new-asset-name').fill('Pallet one');
      await expectAccessible(page, 'where things are (new asset form)');
      await page.getByRole('button', { name: 'Create asset' }).click();
      await page.getByRole('heading', { level: 1, name: 'Pallet one' }).waitFor();
      const created = await byKey('assets', 'PALLET-1');
      expect(created).toMatchObject({ name: 'Pallet one', is_active: true, deleted_at: null });

      // A refusal of the API beside its field, in words.
      await page.locator('#edit-asset-name').fill('');
      await page.getByRole('button', { name: 'Save' }).click();
      await expect.poll(() => page.locator('#edit-asset-name-error').textContent()).toBe('Name cannot be empty.');
      expect(await page.locator('#edit-asset-name').getAttribute('aria-invalid')).toBe('true');
      await expectAccessible(page, 'asset (refused edit)');

      await page.locator('#edit-asset-name').fill('Pallet 1 (blue)');
      await page.locator('#edit-asset-description').fill('Euro pallet');
      await page.locator('#edit-asset-metadata').fill('{"size": "1200x800"}');
      await page.locator('#edit-asset-valid-to').fill('2031-01-02T03:04');
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByRole('heading', { level: 1, name: 'Pallet 1 (blue)' }).waitFor();
      const edited = await byKey('assets', 'PALLET-1');
      expect(edited).toMatchObject({ name: 'Pallet 1 (blue)', description: 'Euro pallet', metadata: { size: '1200x800' } });
      expect(Date.parse(edited!.valid_to)).toBe(new Date('2031-01-02T03:04').getTime());

      await page.getByLabel('New key').fill('PALLET-BLUE');
      await page.getByRole('button', { name: 'Rename', exact: true }).click();
      await page.locator('.facts dd.mono', { hasText: 'PALLET-BLUE' }).waitFor();
      expect(await byKey('assets', 'PALLET-BLUE')).toMatchObject({ id: created!.id });

      await page.getByLabel('Tag value').fill('E2801160600002');
      await page.getByRole('button', { name: 'Attach tag' }).click();
      await page.getByRole('button', { name: 'Detach rfid E2801160600002' }).waitFor();
      expect((await world.api<Json>('GET', `/assets/${created!.id}/tags`)).body.data.map((t: Json) => `${t.tag_type} ${t.value}`)).toEqual(['rfid E2801160600002']);
      await page.getByRole('button', { name: 'Detach rfid E2801160600002' }).click();
      await page.getByText('No tags.').waitFor();
      expect((await world.api<Json>('GET', `/assets/${created!.id}/tags`)).body.data).toEqual([]);
      await screenshot(page, 'asset-edit');

      await page.getByRole('button', { name: 'Delete asset' }).click();
      const dialog = page.getByRole('dialog', { name: 'Delete this asset?' });
      await dialog.waitFor();
      await expectAccessible(page, 'asset (delete dialog)');
      await dialog.getByRole('button', { name: 'Delete asset' }).click();
      await page.getByRole('heading', { level: 1, name: 'Where things are' }).waitFor();
      expect((await world.api<Json>('GET', `/assets/${created!.id}`)).status).toBe(404);
      expect((await byKey('assets', 'PALLET-BLUE'))?.deleted_at).not.toBeNull();
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'an operator: locations created, moved with the tree picker, a cycle refused beside the field with the API message, tags, deleted',
    async () => {
      const { page, context, problems } = await openContext(world.browser.browser, world.origin);
      await signIn(page, world.operator.email);
      await page.goto('/locations');
      await page.getByRole('heading', { level: 1, name: 'Locations' }).waitFor();
      for (const [key, name] of [
        ['SITE-1', 'Site one'],
        ['DOCK-1', 'Dock one'],
      ]) {
        await page.locator('#new-location-key').fill(key!);
        await page.locator('#new-location-name').fill(name!);
        await page.getByRole('button', { name: 'Create location' }).click();
        await page.getByRole('button', { name: `Edit ${name} (${key})` }).waitFor();
      }
      const site = (await byKey('locations', 'SITE-1'))!;
      const dock = (await byKey('locations', 'DOCK-1'))!;

      await page.getByRole('button', { name: 'Edit Dock one (DOCK-1)' }).click();
      await page.getByLabel('Parent location').selectOption(String(site.id));
      await expectAccessible(page, 'locations (editor)');
      await page.getByRole('button', { name: 'Move', exact: true }).click();
      await expect.poll(async () => (await byKey('locations', 'DOCK-1'))!.parent_id).toBe(site.id);

      // The site under its own child: the API refuses, and says why beside the picker.
      await page.getByRole('button', { name: 'Edit Site one (SITE-1)' }).click();
      await page.getByLabel('Parent location').selectOption(String(dock.id));
      await page.getByRole('button', { name: 'Move', exact: true }).click();
      const cycle = await world.api<Json>('PATCH', `/locations/${site.id}`, { body: { parent_id: dock.id }, contentType: 'application/merge-patch+json' });
      const message = page.locator(`#move-${site.id}-error`);
      await expect.poll(() => message.textContent()).not.toBe('');
      expect(cycle.status).toBe(409);
      expect(await message.textContent()).toBe(cycle.body.error.detail);
      expect((await byKey('locations', 'SITE-1'))!.parent_id).toBeNull();

      await page.getByRole('button', { name: 'Edit Dock one (DOCK-1)' }).click();
      await page.getByLabel('Tag value').fill('DOCK-BARCODE-1');
      await page.getByLabel('Tag type').fill('barcode');
      await page.getByRole('button', { name: 'Attach tag' }).click();
      await expect.poll(async () => (await byKey('locations', 'DOCK-1'))!.tags.map((t: Json) => t.value)).toEqual(['DOCK-BARCODE-1']);

      await page.getByRole('button', { name: 'Delete location' }).click();
      await page.getByRole('dialog', { name: 'Delete this location?' }).getByRole('button', { name: 'Delete location' }).click();
      await expect.poll(async () => (await byKey('locations', 'DOCK-1'))!.deleted_at).not.toBeNull();
      await page.getByRole('button', { name: 'Edit Dock one (DOCK-1)' }).waitFor({ state: 'detached' });
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'a viewer sees no write control, and the API refuses its session token 403',
    async () => {
      const asset = await world.api<Json>('POST', '/assets', { body: { name: 'Crate', external_key: 'CRATE-1' } });
      expect(asset.status).toBe(201);
      const { page, context, problems } = await openContext(world.browser.browser, world.origin);
      await signIn(page, world.viewer.email);
      expect(await page.getByRole('button', { name: 'Create asset' }).count()).toBe(0);
      await page.goto(`/assets/${asset.body.data.id}`);
      await page.getByRole('heading', { level: 1, name: 'Crate' }).waitFor();
      for (const name of ['Save', 'Rename', 'Attach tag', 'Delete asset']) expect(await page.getByRole('button', { name, exact: true }).count()).toBe(0);
      expect(await page.locator('form input, form textarea').count()).toBe(0);
      await page.goto('/locations');
      await page.getByRole('heading', { level: 1, name: 'Locations' }).waitFor();
      await page.getByText('Site one').waitFor();
      expect(await page.getByRole('button', { name: /^Edit / }).count()).toBe(0);
      expect(await page.getByRole('button', { name: 'Create location' }).count()).toBe(0);
      await expectAccessible(page, 'locations (viewer)');

      const token = (await world.viewer.request('POST', '/session-token')).body.data.token as string;
      const asViewer = client(world.svc.apiUrl, token);
      expect((await asViewer<Json>('POST', '/assets', { body: { name: 'Nope' } })).status).toBe(403);
      expect((await asViewer<Json>('PATCH', `/assets/${asset.body.data.id}`, { body: { name: 'Nope' }, contentType: 'application/merge-patch+json' })).status).toBe(403);
      expect((await asViewer<Json>('DELETE', `/assets/${asset.body.data.id}`)).status).toBe(403);
      expect((await world.api<Json>('GET', `/assets/${asset.body.data.id}`)).body.data.name).toBe('Crate');
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );
});
