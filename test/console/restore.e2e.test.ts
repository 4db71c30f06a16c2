import { describe, expect, it } from 'vitest';
import { chromiumMissing, expectAccessible, openContext } from '../support/browser.js';
import { client } from '../master-data/http.js';
import type { Json } from '../people/app-client.js';
import { keepingWorld, signIn, SLOW } from './harness.js';

/**
 * Restoring deleted assets and locations in the console (docs/console.md, "Keeping assets and
 * locations"), in Debian's Chromium: with "Include deleted" a deleted record shows, marked, with
 * Restore for an operator; the API's refusal (a key taken since, a deleted parent) in words beside
 * the button; each restore checked through /api/v1 with a key. A viewer sees deleted records but
 * no Restore, and the API refuses its session token 403.
 */

const missing = chromiumMissing();

const world = keepingWorld('console_restore', missing);

/** Creates a record through the API and returns its id. */
async function created(kind: 'assets' | 'locations', body: Json): Promise<number> {
  const answer = await world.api<Json>('POST', `/${kind}`, { body });
  expect(answer.status, answer.text).toBe(201);
  return answer.body.data.id as number;
}

async function remove(kind: 'assets' | 'locations', id: number): Promise<void> {
  expect((await world.api('DELETE', `/${kind}/${id}`)).status).toBe(204);
}

/** deleted_at of a record through the API (deleted ones too). */
async function deletedAt(kind: 'assets' | 'locations', key: string): Promise<Array<string | null>> {
  const answer = await world.api<Json>('GET', `/${kind}?external_key=${key}&include_deleted=true`);
  return answer.body.data.map((r: Json) => r.deleted_at as string | null);
}

describe.skipIf(missing !== null)('restoring in a browser', () => {
  it(
    'an operator: a deleted asset found with "Include deleted assets" is restored; one whose key was taken says so in words',
    async () => {
      const one = await created('assets', { external_key: 'CRATE-1', name: 'Crate one' });
      await remove('assets', one);
      const two = await created('assets', { external_key: 'CRATE-2', name: 'Crate two' });
      await remove('assets', two);
      await created('assets', { external_key: 'CRATE-2', name: 'Crate two bis' });

      const { page, context, problems } = await openContext(world.browser.browser, world.origin);
      await signIn(page, world.operator.email);
      const search = page.getByRole('search', { name: 'Assets' });
      await search.getByLabel('Find an asset (name, key, description or tag)').fill('Crate');
      await search.getByRole('button', { name: 'Search' }).click();
      await search.getByText('Crate two bis').waitFor();
      // Without "Include deleted assets": only the existing one, and nothing to restore.
      expect(await search.getByRole('button', { name: /^Restore / }).count()).toBe(0);
      await search.getByLabel('Include deleted assets').check();
      await search.getByRole('button', { name: 'Search' }).click();
      const restoreOne = search.getByRole('button', { name: 'Restore asset Crate one' });
      await restoreOne.waitFor();
      expect(await search.locator(`[data-asset-id="${one}"] .badge`).textContent()).toBe('deleted');
      await expectAccessible(page, 'where things are (deleted assets)');

      await restoreOne.click();
      await restoreOne.waitFor({ state: 'detached' });
      expect(await deletedAt('assets', 'CRATE-1')).toEqual([null]);
      expect((await world.api<Json>('GET', `/assets/${one}`)).status).toBe(200);

      // The key was taken since: the API's 409, in words, beside the button; nothing changes.
      await search.getByRole('button', { name: 'Restore asset Crate two' }).click();
      const refusal = search.locator(`[data-asset-id="${two}"] [role="alert"]`);
      await expect.poll(() => refusal.textContent()).toBe('Another asset has the key CRATE-2 now. Rename or delete that asset first, then try again.');
      expect((await deletedAt('assets', 'CRATE-2')).filter((d) => d === null)).toHaveLength(1);
      expect((await world.api<Json>('GET', `/assets/${two}`)).status).toBe(404);
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'an operator: deleted locations shown with "Include deleted locations"; a child under a deleted parent is refused in words, then parent and child restored',
    async () => {
      const site = await created('locations', { external_key: 'SITE-R', name: 'Site R' });
      const aisle = await created('locations', { external_key: 'AISLE-R', name: 'Aisle R', parent_id: site });
      await remove('locations', aisle);
      await remove('locations', site);

      const { page, context, problems } = await openContext(world.browser.browser, world.origin);
      await signIn(page, world.operator.email);
      await page.goto('/locations');
      await page.getByRole('heading', { level: 1, name: 'Locations' }).waitFor();
      expect(await page.getByText('Site R').count()).toBe(0);
      await page.getByLabel('Include deleted locations').check();
      const restoreAisle = page.getByRole('button', { name: 'Restore location Aisle R' });
      await restoreAisle.waitFor();
      // A deleted location is restored, not edited.
      expect(await page.getByRole('button', { name: 'Edit Site R (SITE-R)' }).count()).toBe(0);
      await expectAccessible(page, 'locations (deleted shown)');

      await restoreAisle.click();
      const refusal = page.locator('.tree .restore [role="alert"]');
      await expect.poll(() => refusal.textContent()).toBe('Its parent location SITE-R is deleted. Restore the parent first.');
      expect(await deletedAt('locations', 'AISLE-R')).not.toEqual([null]);

      await page.getByRole('button', { name: 'Restore location Site R' }).click();
      await page.getByRole('button', { name: 'Edit Site R (SITE-R)' }).waitFor();
      expect(await deletedAt('locations', 'SITE-R')).toEqual([null]);
      await page.getByRole('button', { name: 'Restore location Aisle R' }).click();
      await page.getByRole('button', { name: 'Edit Aisle R (AISLE-R)' }).waitFor();
      expect(await deletedAt('locations', 'AISLE-R')).toEqual([null]);
      expect((await world.api<Json>('GET', `/locations/${aisle}`)).body.data).toMatchObject({ parent_id: site, deleted_at: null });
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'a viewer sees deleted records but no Restore, and the API refuses its session token 403',
    async () => {
      const asset = await created('assets', { external_key: 'BIN-9', name: 'Bin nine' });
      await remove('assets', asset);
      const place = await created('locations', { external_key: 'SHED-9', name: 'Shed nine' });
      await remove('locations', place);

      const { page, context, problems } = await openContext(world.browser.browser, world.origin);
      await signIn(page, world.viewer.email);
      const search = page.getByRole('search', { name: 'Assets' });
      await search.getByLabel('Find an asset (name, key, description or tag)').fill('Bin');
      await search.getByLabel('Include deleted assets').check();
      await search.getByRole('button', { name: 'Search' }).click();
      await search.locator(`[data-asset-id="${asset}"] .badge`, { hasText: 'deleted' }).waitFor();
      expect(await page.getByRole('button', { name: /^Restore / }).count()).toBe(0);
      await page.goto('/locations');
      await page.getByLabel('Include deleted locations').check();
      await page.getByText('Shed nine').waitFor();
      expect(await page.getByRole('button', { name: /^Restore / }).count()).toBe(0);

      const token = (await world.viewer.request('POST', '/session-token')).body.data.token as string;
      const asViewer = client(world.svc.apiUrl, token);
      expect((await asViewer<Json>('POST', `/assets/${asset}/restore`)).status).toBe(403);
      expect((await asViewer<Json>('POST', `/locations/${place}/restore`)).status).toBe(403);
      expect(await deletedAt('assets', 'BIN-9')).not.toEqual([null]);
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );
});
