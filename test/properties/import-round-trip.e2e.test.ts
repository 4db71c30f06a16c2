import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { allPages, download, XLSX } from '../export/support.js';
import { CSV, importClient } from '../imports/support.js';

/**
 * An export imports back unchanged (docs/api.md, "Import" and "Export"), as a property: each run
 * makes a small random world in a fresh organization A through the API (a location tree of some
 * depth, assets), exports `GET /locations` and `GET /assets` as CSV and as XLSX, imports each
 * format into another fresh organization (locations first, then assets) and compares the lists of
 * A and of B field by field.
 *
 * The names and descriptions are the hostile ones: quotes, commas, CR, LF and CRLF, tabs,
 * formula-looking text (`=1+2`, `+x`, `-y`, `@z`, a leading `'`), leading and trailing spaces,
 * unicode beyond the BMP; optional fields empty or not; metadata objects; validity windows; tags
 * of every type whose values hold `|`, `\`, `:` and formula characters.
 *
 * Compared are all the fields but those an import into another organization must change:
 * - `id`, `parent_id` and a tag's `id`: ids are the new organization's (rows are matched by
 *   `external_key`, parents by `parent_external_key`);
 * - `created_at`, `updated_at` and a tag's `created_at`: the instants of the import's commands;
 * - an asset's `location_id` (null on both sides: no scan in either organization).
 * A tag's `is_active` and validity are compared too: the generated tags keep their defaults,
 * because the export's `tags` column carries `type:value` only (docs/api.md "Export").
 *
 * Reproduce: PROPERTY_SEED=<seed> PROPERTY_RUNS=<n> npx vitest run test/properties/import-round-trip.e2e.test.ts
 */

const SEED = Number(process.env.PROPERTY_SEED ?? 20261129);
const RUNS = Number(process.env.PROPERTY_RUNS ?? 20);
const SCOPES = ['assets:read', 'assets:write', 'locations:read', 'locations:write'];
/**
 * Lists and exports leave out what is outside its validity window unless asked (docs/api.md,
 * "Currently effective"); the world has windows in the past and the future, and no deleted row.
 */
const WHOLE = 'include_deleted=true';

let svc: TestService;

beforeAll(async () => {
  svc = await startTestService('import_round_trip', { RATE_LIMIT_PER_MINUTE: '1000000', RATE_LIMIT_BURST: '1000000' });
}, 120_000);
afterAll(async () => {
  await svc?.stop();
});

// ---- the world --------------------------------------------------------------------------------

/** Text a spreadsheet or a CSV reader could get wrong. */
const HOSTILE = ['=1+2', '+x', '-y', '@z', "'quoted", "''two", '\tTab', '\rCR', 'a,b', 'say "hi"', '"', 'line\nfeed', 'cr\r\nlf', 'lone\rcr', ' lead', 'trail ', '0042', '1e3', 'true', 'null', '|', '\\', 'Zoë 🚚 倉庫', '-', '_x000D_', 'a_x0041_b', '_x005F_'];

/** A valid `name`/`description`: 1..max characters, no control other than tab, LF and CR. */
function textArb(max: number): fc.Arbitrary<string> {
  const piece = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...HOSTILE) },
    { weight: 2, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 8 }) },
    { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom('a', ' ', ',', '"', '\n', '\r', '\t', "'", '=', '|'), minLength: 1, maxLength: 6 }) },
  );
  return fc
    .array(piece, { minLength: 1, maxLength: 3 })
    .map((parts) => parts.join('').replace(/[\x00-\x08\x0B\x0C\x0E-\x1F\x7F]/g, '?').slice(0, max))
    .filter((s) => s.length > 0);
}

const instantArb = fc.date({ min: new Date('1990-01-01T00:00:00Z'), max: new Date('2060-01-01T00:00:00Z'), noInvalidDate: true });

/** valid_from < valid_to, either of them absent. */
const windowArb = fc
  .tuple(fc.option(instantArb, { nil: null }), fc.option(instantArb, { nil: null }))
  .map(([a, b]) => {
    if (a && b) {
      if (a.getTime() === b.getTime()) return { valid_from: a.toISOString(), valid_to: null };
      return a < b ? { valid_from: a.toISOString(), valid_to: b.toISOString() } : { valid_from: b.toISOString(), valid_to: a.toISOString() };
    }
    return { valid_from: a?.toISOString() ?? null, valid_to: b?.toISOString() ?? null };
  });

const metadataArb = fc.dictionary(
  fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom('=k', 'a,b', 'q"', 'n\nl')),
  fc.oneof(fc.string({ maxLength: 10 }), fc.integer(), fc.boolean(), fc.constant(null), fc.constantFrom('=1+2', '-1', '@x'), fc.array(fc.integer({ min: -5, max: 5 }), { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 3 }), fc.integer(), { maxKeys: 2 })),
  { maxKeys: 4 },
);

const tagArb = fc.record({ tag_type: fc.constantFrom('rfid', 'ble', 'barcode'), suffix: fc.constantFrom('', '|', '\\', ':x', '=1', '+', 'a|b\\c', ' sp', ',') });

interface ItemSpec {
  name: string;
  description: string | null;
  is_active: boolean | undefined;
  window: { valid_from: string | null; valid_to: string | null };
  tags: Array<{ tag_type: string; suffix: string }>;
}

const itemArb: fc.Arbitrary<ItemSpec> = fc.record({
  name: textArb(255),
  description: fc.option(textArb(1024), { nil: null }),
  is_active: fc.option(fc.boolean(), { nil: undefined }),
  window: windowArb,
  tags: fc.array(tagArb, { maxLength: 3 }),
});

interface World {
  /** Each location's parent: an earlier location's index, or null (a tree of some depth). */
  locations: Array<ItemSpec & { parent: number | null }>;
  assets: Array<ItemSpec & { metadata: Record<string, unknown> | undefined }>;
}

const worldArb: fc.Arbitrary<World> = fc.record({
  locations: fc.array(fc.tuple(itemArb, fc.nat()), { minLength: 1, maxLength: 6 }).map((items) =>
    // Mostly under the location just before, so that chains get deep.
    items.map(([item, pick], i) => ({ ...item, parent: i === 0 || pick % 4 === 0 ? null : pick % 4 === 1 ? i - 1 : pick % i })),
  ),
  assets: fc.array(fc.tuple(itemArb, fc.option(metadataArb, { nil: undefined })), { minLength: 1, maxLength: 6 }).map((items) => items.map(([item, metadata]) => ({ ...item, metadata }))),
});

// ---- one run ----------------------------------------------------------------------------------

async function api(token: string, method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const response = await fetch(`${svc.apiUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status >= 300) throw new Error(`${method} ${path} ${JSON.stringify(body)}: ${response.status} ${text}`);
  return (JSON.parse(text) as { data: Record<string, unknown> }).data;
}

async function freshOrg(label: string): Promise<string> {
  const { ctx } = svc.service;
  const org = await createOrg(ctx, label);
  return (await mintApiKey(ctx, { orgId: org.id, scopes: SCOPES })).token;
}

async function build(run: number, world: World, token: string): Promise<void> {
  let tagN = 0;
  const tagsOf = (item: ItemSpec) => item.tags.map((t) => ({ tag_type: t.tag_type, value: `T${run}-${++tagN}${t.suffix}` }));
  const common = (item: ItemSpec) => ({
    name: item.name,
    ...(item.description === null ? {} : { description: item.description }),
    ...(item.is_active === undefined ? {} : { is_active: item.is_active }),
    ...item.window,
    tags: tagsOf(item),
  });
  const locationIds: number[] = [];
  for (const [i, location] of world.locations.entries()) {
    const parent = location.parent === null ? {} : { parent_id: locationIds[location.parent] };
    const made = await api(token, 'POST', '/locations', { external_key: `L${run}-${i}`, ...common(location), ...parent });
    locationIds.push(made.id as number);
  }
  for (const [i, asset] of world.assets.entries()) {
    await api(token, 'POST', '/assets', { external_key: `A${run}-${i}`, ...common(asset), ...(asset.metadata === undefined ? {} : { metadata: asset.metadata }) });
  }
}

/** A list as the comparison sees it: by external_key, without what must differ (see above). */
function comparable(items: Array<Record<string, unknown>>): Array<Record<string, unknown> & { external_key?: unknown }> {
  return items
    .map((item) => {
      const { id: _id, parent_id: _parent, location_id: _location, created_at: _c, updated_at: _u, tags, ...rest } = item;
      const kept = (tags as Array<Record<string, unknown>>).map(({ id: _tid, created_at: _tc, ...tag }) => tag);
      kept.sort((a, b) => `${a.tag_type}:${a.value}`.localeCompare(`${b.tag_type}:${b.value}`));
      return { ...rest, tags: kept } as Record<string, unknown>;
    })
    .sort((a, b) => String(a.external_key).localeCompare(String(b.external_key)));
}

async function lists(token: string) {
  return {
    locations: comparable(await allPages(`${svc.apiUrl}/locations?${WHOLE}`, token)),
    assets: comparable(await allPages(`${svc.apiUrl}/assets?${WHOLE}`, token)),
  };
}

async function roundTrip(run: number, world: World): Promise<void> {
  const tokenA = await freshOrg(`round trip ${run} A`);
  await build(run, world, tokenA);
  const source = await lists(tokenA);
  expect(source.locations).toHaveLength(world.locations.length);
  expect(source.assets).toHaveLength(world.assets.length);

  for (const [format, accept] of [
    ['csv', CSV],
    ['xlsx', XLSX],
  ] as const) {
    const tokenB = await freshOrg(`round trip ${run} B ${format}`);
    const imports = importClient(svc.apiUrl, tokenB);
    for (const resource of ['locations', 'assets'] as const) {
      const exported = await download(`${svc.apiUrl}/${resource}?${WHOLE}`, tokenA, accept);
      expect(exported.status, `${format} export of ${resource}`).toBe(200);
      const job = await imports.run(`?resource=${resource}`, exported.bytes, accept);
      expect({ format, resource, status: job.status, rejected: job.rejected, errors: job.errors }).toEqual({ format, resource, status: 'succeeded', rejected: 0, errors: [] });
      expect(job.created, `${format} ${resource}`).toBe(source[resource].length);
    }
    // The lists of B, waited for (a projection may be a moment behind a succeeded job, a known
    // defect written in test/imports/imports.e2e.test.ts), then compared field by field.
    let target = await lists(tokenB);
    const until = Date.now() + 15_000;
    while (JSON.stringify(target) !== JSON.stringify(source) && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 200));
      target = await lists(tokenB);
    }
    expect(target.locations, `${format}: locations of B as those of A`).toEqual(source.locations);
    expect(target.assets, `${format}: assets of B as those of A`).toEqual(source.assets);
  }
}

describe('export then import into a fresh organization (property)', () => {
  it('gives the same lists of locations and assets, through CSV and through XLSX', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(worldArb, async (world) => {
        run++;
        await roundTrip(run, world);
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    );
  }, 900_000);
});
