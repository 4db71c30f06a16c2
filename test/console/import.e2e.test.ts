import ExcelJS from 'exceljs';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { chromiumMissing, expectAccessible, openContext, screenshot } from '../support/browser.js';
import { client } from '../master-data/http.js';
import type { Json } from '../people/app-client.js';
import { keepingWorld, signIn, SLOW, XSS } from './harness.js';

/**
 * The console's Import page (docs/console.md, "Import") in Debian's Chromium: as an operator, a
 * file with two bad rows dropped on the page shows both errors in words beside their rows and
 * columns in the dry run's preview and changes nothing; a clean file is previewed, applied with
 * its progress shown, and its rows are then in the assets list; refused files say why at once; a
 * viewer has no Import control and the API refuses its session token 403. Each check goes through
 * /api/v1 with a key.
 */

const missing = chromiumMissing();

const world = keepingWorld('console_import', missing);

/** The records of `kind` whose key starts with `prefix`, through the API (deleted ones too). */
async function withPrefix(kind: 'assets' | 'locations', prefix: string): Promise<Json[]> {
  const rows: Json[] = [];
  for (let offset = 0; ; offset += 200) {
    const answer = await world.api<Json>('GET', `/${kind}?q=${encodeURIComponent(prefix)}&include_deleted=true&limit=200&offset=${offset}`);
    expect(answer.status).toBe(200);
    rows.push(...answer.body.data.filter((row: Json) => String(row.external_key).startsWith(prefix)));
    if (offset + answer.body.data.length >= answer.body.total_count) return rows;
  }
}

/** Drops a file on the page's drop zone, as a person dragging it from their files would. */
async function dropFile(page: Page, name: string, text: string): Promise<void> {
  const dataTransfer = await page.evaluateHandle(
    ([fileName, content]) => {
      const transfer = new DataTransfer();
      transfer.items.add(new File([content!], fileName!, { type: 'text/csv' }));
      return transfer;
    },
    [name, text],
  );
  await page.dispatchEvent('.drop-zone', 'dragover', { dataTransfer });
  await page.dispatchEvent('.drop-zone', 'drop', { dataTransfer });
}

/** The page's status texts of the import's progress, recorded as they change (a MutationObserver in the page). */
async function recordProgress(page: Page): Promise<() => Promise<string[]>> {
  await page.evaluate(() => {
    const seen: string[] = [];
    (window as unknown as { progressSeen: string[] }).progressSeen = seen;
    new MutationObserver(() => {
      const text = document.querySelector('.import-done')?.textContent;
      const bar = document.querySelector('.import-progress progress') as HTMLProgressElement | null;
      if (text && seen[seen.length - 1] !== `${text}|${bar?.value}/${bar?.max}`) seen.push(`${text}|${bar?.value}/${bar?.max}`);
    }).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
  });
  return () => page.evaluate(() => (window as unknown as { progressSeen: string[] }).progressSeen);
}

describe.skipIf(missing !== null)('the Import page in a browser', () => {
  it(
    'an operator: a dropped file with two bad rows shows both errors in words beside row and column, and nothing is applied',
    async () => {
      const { page, context, problems } = await openContext(world.browser.browser, world.origin);
      await signIn(page, world.operator.email);
      // Reached from the assets page.
      await page.getByRole('link', { name: 'Import assets from a file' }).click();
      await page.getByRole('heading', { level: 1, name: 'Import' }).waitFor();
      expect(await page.getByLabel('Assets').isChecked()).toBe(true);
      await expectAccessible(page, 'import (empty)');

      const csv = [
        'external_key,name,is_active,valid_from',
        'BAD-1,Good one,true,',
        `BAD-2,${XSS},maybe,`,
        'BAD-3,Good three,,2026-01-01T00:00:00Z',
        'bad key!,Bad key,,',
      ].join('\r\n');
      await dropFile(page, 'two-bad-rows.csv', csv);
      const preview = page.locator('.import-preview');
      await preview.waitFor();
      await expect.poll(() => preview.locator('[data-count="rejected"] dd').textContent()).toBe('2');
      expect(await preview.locator('[data-count="created"] dd').textContent()).toBe('2');
      expect(await preview.locator('[data-count="rows"] dd').textContent()).toBe('4');
      expect(await preview.locator('[data-count="created"] dt').textContent()).toBe('To create');

      // Each error beside its row and its column, in words: no pattern, no code.
      const active = preview.locator('tr[data-row="2"][data-field="is_active"] td');
      expect(await active.allTextContents()).toEqual(['2', 'active is_active', 'Active must be true or false.']);
      const key = preview.locator('tr[data-row="4"][data-field="external_key"] td');
      expect(await key.allTextContents()).toEqual(['4', 'key external_key', 'A key may contain only letters, digits and hyphens.']);
      expect(await preview.locator('tbody tr').count()).toBe(2);
      expect(await preview.textContent()).not.toMatch(/\^|\$|invalid_value/);
      await expectAccessible(page, 'import (preview with errors)');
      await screenshot(page, 'import-preview');

      // A dry run: nothing was created, and no import was applied.
      expect(await withPrefix('assets', 'BAD-')).toEqual([]);
      const imports = (await world.api<Json>('GET', '/imports')).body.data as Json[];
      expect(imports.map((job) => job.dry_run)).toEqual([true]);
      // The recent imports list shows the dry run.
      await expect.poll(() => page.getByRole('region', { name: 'Recent imports' }).locator('tbody tr').first().locator('td').nth(2).textContent()).toBe('Check (dry run)');
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'an operator: a clean file is previewed, applied with its progress shown live, and its rows are then in the assets list',
    async () => {
      const { page, context, problems } = await openContext(world.browser.browser, world.origin);
      await signIn(page, world.operator.email);
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Import' }).click();
      await page.getByRole('heading', { level: 1, name: 'Import' }).waitFor();
      const rows = 1500;
      const lines = ['external_key,name,description,tags'];
      for (let i = 1; i <= rows; i++) lines.push(`CLEAN-${String(i).padStart(4, '0')},Clean ${i},"Row ${i}, imported",barcode:CLEAN-BC-${i}`);
      await page.locator('#import-file').setInputFiles({ name: 'clean.csv', mimeType: 'text/csv', buffer: Buffer.from(lines.join('\n')) });
      const preview = page.locator('.import-preview');
      await preview.waitFor({ timeout: 60_000 });
      expect(await preview.locator('[data-count="created"] dd').textContent()).toBe(String(rows));
      expect(await preview.locator('[data-count="rejected"] dd').textContent()).toBe('0');
      expect(await withPrefix('assets', 'CLEAN-')).toEqual([]);

      const seen = await recordProgress(page);
      // The import may not finish before the page has shown its progress: the assets projection's
      // checkpoint row is held here, so its next batch waits before it commits, and the job, which
      // succeeds only once its rows are visible (docs/api.md "Import"), waits for it. Let go once
      // the page has shown rows done: however fast the import, the progress is seen.
      const hold = await world.svc.service.ctx.pool.connect();
      await hold.query('BEGIN');
      await hold.query(`SELECT 1 FROM read_model.projection_checkpoints WHERE name = 'assets' FOR UPDATE`);
      try {
        await page.getByRole('button', { name: 'Apply import' }).click();
        await expect.poll(async () => (await seen()).some((text) => / rows done\|/.test(text)), { timeout: 120_000 }).toBe(true);
        expect(await page.locator('.import-applied').count()).toBe(0);
      } finally {
        await hold.query('COMMIT');
        hold.release();
      }
      await page.locator('.import-applied').waitFor({ timeout: 120_000 });
      const progress = await seen();
      console.info(`console import: progress shown ${progress.join(' → ')}`);
      // The progress came first, live: rows done of the file's rows, rising, before the outcome.
      const counts = progress.map((text) => /^(\d+) of (\d+) rows done\|(\d+)\/(\d+)$/.exec(text)).filter((m) => m !== null);
      expect(progress[0]).toMatch(/^Waiting for the file to be read…/);
      expect(counts.length).toBeGreaterThan(0);
      for (const m of counts) {
        expect(Number(m[2])).toBe(rows);
        expect(Number(m[3])).toBe(Number(m[1]));
      }
      const done = counts.map((m) => Number(m[1]));
      expect(done).toEqual([...done].sort((a, b) => a - b));
      expect(Math.max(...done)).toBeLessThan(rows);

      const applied = page.locator('.import-applied');
      await applied.getByText(`Import finished: ${rows} created, 0 updated, 0 unchanged, 0 rejected.`).waitFor();
      expect(await applied.locator('[data-count="created"] dt').textContent()).toBe('Created');
      const created = await withPrefix('assets', 'CLEAN-');
      expect(created.length).toBe(rows);
      const first = created.find((asset) => asset.external_key === 'CLEAN-0001')!;
      expect(first).toMatchObject({ name: 'Clean 1', description: 'Row 1, imported' });
      expect(first.tags.map((t: Json) => `${t.tag_type}:${t.value}`)).toEqual(['barcode:CLEAN-BC-1']);
      await expectAccessible(page, 'import (applied)');
      await screenshot(page, 'import');

      // The link to the list; the assets are there (its search finds assets not placed by a read yet).
      await applied.getByRole('link', { name: 'See the assets' }).click();
      await page.getByRole('heading', { level: 1, name: 'Where things are' }).waitFor();
      await page.getByLabel(/Find an asset/).fill('Clean 1234');
      await page.getByRole('button', { name: 'Search' }).click();
      await page.getByRole('link', { name: 'Clean 1234', exact: true }).waitFor();

      // Applied once: the same file again changes nothing, as its preview says.
      await page.goto('/import');
      await page.locator('#import-file').setInputFiles({ name: 'clean.csv', mimeType: 'text/csv', buffer: Buffer.from(lines.join('\n')) });
      await preview.waitFor({ timeout: 60_000 });
      expect(await preview.locator('[data-count="unchanged"] dd').textContent()).toBe(String(rows));
      await preview.getByText('Nothing to apply: every row is unchanged.').waitFor();
      expect(await preview.getByRole('button', { name: 'Apply import' }).count()).toBe(0);
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'locations from an XLSX, a parent after its child in the file; refused files say why at once and start no import',
    async () => {
      const { page, context, problems } = await openContext(world.browser.browser, world.origin);
      await signIn(page, world.operator.email);
      await page.goto('/locations');
      await page.getByRole('link', { name: 'Import locations from a file' }).click();
      await page.getByRole('heading', { level: 1, name: 'Import' }).waitFor();
      expect(await page.getByLabel('Locations').isChecked()).toBe(true);
      const before = (await world.api<Json>('GET', '/imports')).body.total_count as number;

      // An unknown column, named as the file spells it, with the columns the import reads.
      await page.locator('#import-file').setInputFiles({ name: 'colour.csv', mimeType: 'text/csv', buffer: Buffer.from('external_key,name,colour\nDOCK-1,Dock,red\n') });
      const refused = page.locator('.import-refused');
      await refused.waitFor();
      expect(await refused.locator('li').allTextContents()).toEqual([
        'The file has a column "colour" that locations do not have; the columns an import reads are: external_key, name, description, parent_external_key, is_active, valid_from, valid_to, tags.',
      ]);
      await expectAccessible(page, 'import (refused file)');

      // No external_key column.
      await page.locator('#import-file').setInputFiles({ name: 'nokey.csv', mimeType: 'text/csv', buffer: Buffer.from('name\nDock\n') });
      await expect.poll(() => refused.locator('li').allTextContents()).toEqual(['The file has no "external_key" column: every row needs its key.']);

      // Neither CSV nor XLSX.
      const png = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a9f60000000049454e44ae426082', 'hex');
      await page.locator('#import-file').setInputFiles({ name: 'picture.png', mimeType: 'image/png', buffer: png });
      await expect.poll(() => refused.locator('li').allTextContents()).toEqual(['The file is neither CSV (UTF-8 text) nor XLSX.']);
      expect((await world.api<Json>('GET', '/imports')).body.total_count).toBe(before);

      // An XLSX: the child row before its parent's.
      const book = new ExcelJS.Workbook();
      const sheet = book.addWorksheet('locations');
      sheet.addRow(['external_key', 'name', 'parent_external_key']);
      sheet.addRow(['XDOCK-1', 'Dock one', 'XSITE-1']);
      sheet.addRow(['XSITE-1', 'Site one', '']);
      const xlsx = Buffer.from(await book.xlsx.writeBuffer());
      await page.locator('#import-file').setInputFiles({ name: 'locations.xlsx', mimeType: '', buffer: xlsx });
      const preview = page.locator('.import-preview');
      await preview.waitFor();
      expect(await preview.locator('[data-count="created"] dd').textContent()).toBe('2');
      await preview.getByRole('button', { name: 'Apply import' }).click();
      await page.locator('.import-applied').getByText('Import finished: 2 created, 0 updated, 0 unchanged, 0 rejected.').waitFor();
      const [dock] = await withPrefix('locations', 'XDOCK-1');
      const [site] = await withPrefix('locations', 'XSITE-1');
      expect(dock?.parent_id).toBe(site?.id);
      await page.locator('.import-applied').getByRole('link', { name: 'See the locations' }).click();
      await page.getByRole('heading', { level: 1, name: 'Locations' }).waitFor();
      await page.getByText('Dock one').waitFor();
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'a viewer sees no Import control, the page says who it is for, and the API refuses its session token 403',
    async () => {
      const { page, context, problems } = await openContext(world.browser.browser, world.origin);
      await signIn(page, world.viewer.email);
      expect(await page.getByRole('navigation', { name: 'Main' }).getByRole('link').allTextContents()).not.toContain('Import');
      expect(await page.getByRole('link', { name: /^Import/ }).count()).toBe(0);
      await page.goto('/locations');
      await page.getByRole('heading', { level: 1, name: 'Locations' }).waitFor();
      expect(await page.getByRole('link', { name: /^Import/ }).count()).toBe(0);
      await page.goto('/import');
      await page.getByRole('heading', { level: 1, name: 'Operators and administrators only' }).waitFor();
      expect(await page.locator('input[type="file"]').count()).toBe(0);
      await expectAccessible(page, 'import (viewer)');

      const token = (await world.viewer.request('POST', '/session-token')).body.data.token as string;
      const asViewer = client(world.svc.apiUrl, token);
      for (const dryRun of ['true', 'false']) {
        const answer = await asViewer<Json>('POST', `/imports?resource=assets&dry_run=${dryRun}`, { raw: 'external_key,name\nVIEWER-1,Nope\n', contentType: 'text/csv' });
        expect(answer.status, answer.text).toBe(403);
      }
      expect(await withPrefix('assets', 'VIEWER-')).toEqual([]);
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );

  it(
    'on a phone (390 px) the page fits the screen, the preview and its errors included',
    async () => {
      const { page, context, problems } = await openContext(world.browser.browser, world.origin, { mobile: true });
      await signIn(page, world.operator.email);
      await page.goto('/import');
      await page.getByRole('heading', { level: 1, name: 'Import' }).waitFor();
      await page.locator('#import-file').setInputFiles({
        name: 'phone.csv',
        mimeType: 'text/csv',
        buffer: Buffer.from('external_key,name,metadata\nPHONE-1,Phone one,\nPHONE-2,Phone two,not json\n'),
      });
      const preview = page.locator('.import-preview');
      await preview.waitFor();
      await preview.locator('tr[data-row="2"][data-field="metadata"]').getByText('Metadata must be a JSON object.').waitFor();
      // Nothing wider than the screen but the tables' own scrolling regions.
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      expect(overflow).toBeLessThanOrEqual(0);
      const apply = await preview.getByRole('button', { name: 'Apply import' }).boundingBox();
      expect(apply!.x + apply!.width).toBeLessThanOrEqual(390);
      // Recent imports are cards on a phone (docs/console.md, "Import"): its region never scrolls sideways.
      const recent = page.locator('[role="region"][aria-label="Recent imports"]');
      await expect.poll(() => recent.locator('tbody tr').count()).toBeGreaterThan(0);
      expect(await recent.evaluate((region) => region.scrollWidth - region.clientWidth)).toBeLessThanOrEqual(0);
      expect(await recent.locator('tbody td').first().evaluate((cell) => getComputedStyle(cell).display)).toBe('grid');
      // A status badge is as wide as its word, not stretched across its card's column.
      const badge = recent.locator('tbody .badge').first();
      const widths = await badge.evaluate((b) => ({ badge: b.getBoundingClientRect().width, cell: b.parentElement!.getBoundingClientRect().width }));
      expect(widths.badge).toBeLessThan(widths.cell / 2);
      await expectAccessible(page, 'import (phone)');
      await screenshot(page, 'import-phone');
      expect(problems).toEqual([]);
      await context.close();
    },
    SLOW,
  );
});
