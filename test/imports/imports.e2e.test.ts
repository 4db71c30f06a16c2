import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey, personWithToken } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';
import { CSV, XLSX, importClient, xlsxOf, zipOf } from './support.js';

/**
 * Imports of assets and locations over real HTTP (docs/api.md, "Import"): the rules of the rows,
 * the dry run, the file's refusals at once, hostile files, scopes and member roles.
 */

let svc: TestService;
let imports: ReturnType<typeof importClient>;
let call: ReturnType<typeof client>;
let token: string;
let orgId: number;
let n = 0;
const unique = (p: string) => `${p}-${Date.now().toString(36)}-${++n}`;

interface Asset {
  id: number;
  external_key: string;
  name: string;
  description: string | null;
  is_active: boolean;
  metadata: Record<string, unknown>;
  tags: Array<{ tag_type: string; value: string }>;
}
interface Location {
  id: number;
  external_key: string;
  name: string;
  parent_id: number | null;
  parent_external_key: string | null;
}

/** The asset of `key`: a succeeded job's rows are visible at once (docs/api.md, "Import"; test/imports/visible.e2e.test.ts). */
async function assetByKey(key: string): Promise<Asset> {
  const reply = await call<{ data: Asset[] }>('GET', `/assets?external_key=${key}&include_deleted=false`);
  expect(reply.body.data, key).toHaveLength(1);
  return reply.body.data[0]!;
}

async function locationByKey(key: string): Promise<Location> {
  const reply = await call<{ data: Location[] }>('GET', `/locations?external_key=${key}`);
  expect(reply.body.data, key).toHaveLength(1);
  return reply.body.data[0]!;
}

beforeAll(async () => {
  svc = await startTestService('imports_contract');
  const ctx = svc.service.ctx;
  orgId = (await createOrg(ctx, 'Imports Org')).id;
  token = (await mintApiKey(ctx, { orgId, scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'audit:read'] })).token;
  imports = importClient(svc.apiUrl, token);
  call = client(svc.apiUrl, token);
}, 60_000);

afterAll(async () => {
  await svc?.stop();
});

describe('asset rows', () => {
  it('a row sees what the rows of earlier batches did to its key (batches of 500, the next decided while the last is written)', async () => {
    // docs/design.md, "Imports": K is created in the first batch, renamed in the second and named
    // back in the third; a third batch decided on what it read before the second was written would
    // find K unchanged and leave the second batch's name.
    const key = unique('PIPE');
    const lines = ['external_key,name'];
    for (let row = 1; row <= 1500; row++) lines.push(row === 1 || row === 1200 ? `${key},Name A` : row === 600 ? `${key},Name B` : `${key}-${row},Other ${row}`);
    const job = await imports.run('?resource=assets', `${lines.join('\n')}\n`);
    expect(job).toMatchObject({ status: 'succeeded', rows: 1500, created: 1498, updated: 2, unchanged: 0, rejected: 0 });
    expect(await assetByKey(key)).toMatchObject({ name: 'Name A' });
    expect(await assetByKey(`${key}-1499`)).toMatchObject({ name: 'Other 1499' });
  }, 120_000);

  it('keys named again at random rows across many batches (two appends in flight) end as their last row says, each change counted once', async () => {
    // docs/design.md, "Imports": batches in flight name no key in common; a batch naming a key of
    // one in flight waits for it. Random files: a batch decided before an earlier one with the same
    // key was written would leave that earlier row's name, or count a create twice.
    for (let round = 0; round < 3; round++) {
      const seed = Date.now() + round;
      let state = seed;
      const random = () => ((state = (state * 1103515245 + 12345) % 2147483648) / 2147483648);
      const rows = 2600 + Math.floor(random() * 800);
      const hot = Array.from({ length: 25 }, (_, i) => unique(`HOT${i}`));
      const byRow = new Map<number, string>();
      for (const key of hot) {
        const times = 2 + Math.floor(random() * 4);
        for (let t = 0; t < times; t++) byRow.set(1 + Math.floor(random() * rows), key);
      }
      const cold = unique('COLD');
      const lines = ['external_key,name,tags'];
      const last = new Map<string, number>();
      const seen = new Map<string, number>();
      for (let row = 1; row <= rows; row++) {
        const key = byRow.get(row) ?? `${cold}-${row}`;
        lines.push(`${key},N${row},barcode:${key}-T`);
        last.set(key, row);
        seen.set(key, (seen.get(key) ?? 0) + 1);
      }
      const job = await imports.run('?resource=assets', `${lines.join('\n')}\n`);
      const updated = [...seen.values()].reduce((n, times) => n + times - 1, 0);
      expect(job, `seed ${seed}`).toMatchObject({ status: 'succeeded', rows, created: seen.size, updated, unchanged: 0, rejected: 0 });
      for (const key of hot.filter((k) => last.has(k))) {
        const asset = await assetByKey(key);
        expect(asset.name, `seed ${seed}, ${key}`).toBe(`N${last.get(key)}`);
        expect(asset.tags.map((t) => t.value), `seed ${seed}, ${key}`).toEqual([`${key}-T`]);
      }
    }
  }, 240_000);

  it('a new key creates, a known key merge-patches the columns given, blank cells leave fields as they are, and the same file twice changes nothing', async () => {
    const [a, b] = [unique('IMP-A'), unique('IMP-B')];
    const file = `external_key,name,description,is_active,metadata,tags\r\n${a},Pallet A,first,true,"{""k"":1}",barcode:${a}-1|rfid:E2${n}AA\r\n${b},Pallet B,,false,,\r\n`;
    const first = await imports.run('?resource=assets', file);
    expect(first).toMatchObject({ status: 'succeeded', rows: 2, created: 2, updated: 0, unchanged: 0, rejected: 0, errors: [], dry_run: false, resource: 'assets' });
    // Instants as every view prints them (docs/api.md, "Requests and responses"): UTC with milliseconds.
    expect(first.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(first.finished_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    const assetA = await assetByKey(a);
    expect(assetA).toMatchObject({ name: 'Pallet A', description: 'first', is_active: true, metadata: { k: 1 } });
    // Its tags too, at once: the job waited for every projection of every event it appended (test/imports/visible.e2e.test.ts).
    expect(assetA.tags.map((t) => `${t.tag_type}:${t.value}`).sort()).toEqual([`barcode:${a}-1`, `rfid:E2${n}AA`].sort());
    expect(await assetByKey(b)).toMatchObject({ name: 'Pallet B', description: null, is_active: false });

    const again = await imports.run('?resource=assets', file);
    expect(again).toMatchObject({ status: 'succeeded', rows: 2, created: 0, updated: 0, unchanged: 2, rejected: 0 });

    // Blank description leaves it; a new name updates; an attached tag stays, a new one is added.
    const patch = `EXTERNAL_KEY,Name,description,tags\n${a},Pallet A2,,barcode:${a}-2\n`;
    const third = await imports.run('?resource=assets', patch);
    expect(third).toMatchObject({ created: 0, updated: 1, unchanged: 0, rejected: 0 });
    const after = await assetByKey(a);
    expect(after).toMatchObject({ name: 'Pallet A2', description: 'first' });
    expect(after.tags).toHaveLength(3);

    // A row that only attaches tags is `updated`.
    const onlyTags = await imports.run('?resource=assets', `external_key,tags\n${b},barcode:${b}-x\n`);
    expect(onlyTags).toMatchObject({ updated: 1, unchanged: 0 });
  });

  it('read-only columns are accepted and ignored; a row error never stops the others; errors carry the API’s field codes and messages', async () => {
    const [a, b, c] = [unique('RO-A'), unique('RO-B'), unique('RO-C')];
    const file = [
      'id,external_key,name,location_id,location_external_key,created_at,updated_at,deleted_at,is_active,valid_from,valid_to',
      `999,${a},Fine,5,DOCK-1,2020-01-01T00:00:00Z,x,,true,,`,
      `1,${b},,,,,,,,,`,
      `2,${c},Bad window,,,,,,maybe,2030-01-01T00:00:00Z,2020-01-01T00:00:00Z`,
      `3,bad key!,Name,,,,,,,,`,
    ].join('\n');
    const job = await imports.run('?resource=assets', file);
    expect(job).toMatchObject({ status: 'succeeded', rows: 4, created: 1, rejected: 3 });
    expect(job.errors.map((e) => [e.row, e.field, e.code])).toEqual([
      [2, 'name', 'required'],
      [3, 'is_active', 'invalid_value'],
      [4, 'external_key', 'invalid_value'],
    ]);
    expect(job.errors[2]!.message).toBe('external_key must match ^[A-Za-z0-9-]+$');
    expect((await assetByKey(a)).name).toBe('Fine');
    // The valid window is the API's rule too: a row with only that wrong.
    const window = await imports.run('?resource=assets', `external_key,name,valid_from,valid_to\n${c},W,2030-01-01T00:00:00Z,2020-01-01T00:00:00Z\n`);
    expect(window.rejected).toBe(1);
    expect(window.errors[0]).toMatchObject({ row: 1, field: 'valid_to' });
  });

  it('a tag held by another asset is that row’s error (the API’s 409 message), and formula text loses one leading quote', async () => {
    const [a, b] = [unique('TG-A'), unique('TG-B')];
    await imports.run('?resource=assets', `external_key,name,tags\n${a},A,barcode:${a}\n`);
    const job = await imports.run('?resource=assets', `external_key,name,description,tags\n${b},'=SUM(A1),'-minus,barcode:${a}\n`);
    expect(job.rejected).toBe(1);
    expect(job.errors[0]).toMatchObject({ row: 1, field: 'row', code: 'conflict' });
    expect(job.errors[0]!.message).toContain('is already attached to asset');
    const fine = await imports.run('?resource=assets', `external_key,name,description\n${b},'=SUM(A1),'-minus\n`);
    expect(fine.created).toBe(1);
    expect(await assetByKey(b)).toMatchObject({ name: '=SUM(A1)', description: '-minus' });
  });

  it('the audit log holds one entry per applied row, with the poster as actor and the POST’s request id', async () => {
    const [a, b] = [unique('AU-A'), unique('AU-B')];
    const posted = await imports.post('?resource=assets', `external_key,name\n${a},A\n${b},B\n${b},B\n`);
    expect(posted.status).toBe(202);
    const job = await imports.finished(posted.body.data!.id);
    expect(job).toMatchObject({ created: 2, unchanged: 1 });
    const requestId = posted.headers.get('x-request-id');
    // The audit log is a projection of its own, which may still be catching up on the rows of
    // another test's import: wait for this import's entries (and never more than these two).
    type Entry = { action: string; resource_external_key: string; actor: { type: string }; request_id: string };
    let mine: Entry[] = [];
    await expect
      .poll(
        async () => {
          const audit = await call<{ data: Entry[] }>('GET', `/audit-events?resource_type=asset&action=asset.created&limit=200`);
          mine = audit.body.data.filter((e) => e.resource_external_key === a || e.resource_external_key === b);
          return mine.map((e) => e.action).sort();
        },
        { timeout: 15_000 },
      )
      .toEqual(['asset.created', 'asset.created']);
    for (const entry of mine) {
      expect(entry.actor.type).toBe('api_key');
      expect(entry.request_id).toBe(requestId);
    }
  });
});

describe('location rows', () => {
  it('a parent may come after its child in the file; a cycle and a missing parent are those rows’ errors', async () => {
    const [child, parent, x, y, orphan] = [unique('L-CH'), unique('L-PA'), unique('L-X'), unique('L-Y'), unique('L-OR')];
    const file = [
      'external_key,name,parent_external_key,tags',
      `${child},Child,${parent},`,
      `${parent},Parent,,barcode:${parent}`,
      `${x},X,${y},`,
      `${y},Y,${x},`,
      `${orphan},Orphan,NOWHERE-${n},`,
    ].join('\n');
    const job = await imports.run('?resource=locations', file);
    expect(job).toMatchObject({ status: 'succeeded', rows: 5, created: 2, rejected: 3 });
    expect(job.errors.map((e) => [e.row, e.field, e.code])).toEqual([
      [3, 'parent_external_key', 'conflict'],
      [4, 'parent_external_key', 'conflict'],
      [5, 'parent_external_key', 'fk_not_found'],
    ]);
    const made = await locationByKey(child);
    expect(made.parent_external_key).toBe(parent);
    const again = await imports.run('?resource=locations', `external_key,name,parent_external_key\n${child},Child,${parent}\n${parent},Parent,\n`);
    expect(again).toMatchObject({ unchanged: 2, created: 0, updated: 0 });
  });
});

describe('an export with include_deleted=true', () => {
  it('imports back as the existing records it holds: a deleted record’s row is unchanged, never created or restored, and no row waits for it as a parent', async () => {
    const scopes = ['assets:read', 'assets:write', 'locations:read', 'locations:write'];
    const home = (await createOrg(svc.service.ctx, `Deleted rows ${unique('org')}`)).id;
    const there = (await createOrg(svc.service.ctx, `Deleted rows copy ${unique('org')}`)).id;
    const homeToken = (await mintApiKey(svc.service.ctx, { orgId: home, scopes })).token;
    const thereToken = (await mintApiKey(svc.service.ctx, { orgId: there, scopes })).token;
    const [homeCall, thereCall] = [client(svc.apiUrl, homeToken), client(svc.apiUrl, thereToken)];
    const [homeImports, thereImports] = [importClient(svc.apiUrl, homeToken), importClient(svc.apiUrl, thereToken)];
    const make = async (path: string, body: object): Promise<number> => {
      const reply = await homeCall<{ data: { id: number } }>('POST', path, { body });
      expect(reply.status, JSON.stringify(reply.body)).toBe(201);
      return reply.body.data.id;
    };
    const remove = async (path: string) => expect((await homeCall('DELETE', path)).status).toBe(204);
    // Kept, deleted, and a key deleted then held again by a new asset.
    await make('/assets', { external_key: 'KEPT', name: 'Kept' });
    await remove(`/assets/${await make('/assets', { external_key: 'GONE', name: 'Gone' })}`);
    await remove(`/assets/${await make('/assets', { external_key: 'AGAIN', name: 'Old holder' })}`);
    await make('/assets', { external_key: 'AGAIN', name: 'New holder' });
    const hall = await make('/locations', { external_key: 'HALL', name: 'Hall' });
    await remove(`/locations/${await make('/locations', { external_key: 'BAY', name: 'Bay', parent_id: hall })}`);
    await make('/locations', { external_key: 'BAY', name: 'Bay again', parent_id: hall });

    const exported = async (path: string): Promise<string> => {
      const reply = await fetch(`${svc.apiUrl}${path}`, { headers: { authorization: `Bearer ${homeToken}`, accept: 'text/csv' } });
      expect(reply.status).toBe(200);
      return reply.text();
    };
    const assets = await exported('/assets?include_deleted=true&sort=created_at');
    const locations = await exported('/locations?include_deleted=true&sort=created_at');
    expect(assets.trim().split('\r\n')).toHaveLength(5);
    expect(locations.trim().split('\r\n')).toHaveLength(4);

    // Into the same organization, for real and as a dry run: nothing changes.
    for (const query of ['', '&dry_run=true']) {
      expect(await homeImports.run(`?resource=locations${query}`, locations)).toMatchObject({ status: 'succeeded', rows: 3, created: 0, updated: 0, unchanged: 3, rejected: 0 });
      expect(await homeImports.run(`?resource=assets${query}`, assets)).toMatchObject({ status: 'succeeded', rows: 4, created: 0, updated: 0, unchanged: 4, rejected: 0 });
    }
    const homeAssets = await homeCall<{ data: Asset[] }>('GET', '/assets?include_deleted=true&sort=external_key,created_at');
    expect(homeAssets.body.data.map((a) => [a.external_key, a.name, (a as unknown as { deleted_at: string | null }).deleted_at === null])).toEqual([
      ['AGAIN', 'Old holder', false],
      ['AGAIN', 'New holder', true],
      ['GONE', 'Gone', false],
      ['KEPT', 'Kept', true],
    ]);

    // Into another organization: only the existing records are created, the new BAY under HALL.
    expect(await thereImports.run('?resource=locations', locations)).toMatchObject({ status: 'succeeded', rows: 3, created: 2, unchanged: 1, rejected: 0 });
    expect(await thereImports.run('?resource=assets', assets)).toMatchObject({ status: 'succeeded', rows: 4, created: 2, unchanged: 2, rejected: 0 });
    const copied = await thereCall<{ data: Asset[] }>('GET', '/assets?include_deleted=true&sort=external_key,created_at');
    expect(copied.body.data.map((a) => [a.external_key, a.name])).toEqual([
      ['AGAIN', 'New holder'],
      ['KEPT', 'Kept'],
    ]);
    const tree = await thereCall<{ data: Location[] }>('GET', '/locations?include_deleted=true&sort=external_key,created_at');
    expect(tree.body.data.map((l) => [l.external_key, l.name, l.parent_external_key])).toEqual([
      ['BAY', 'Bay again', 'HALL'],
      ['HALL', 'Hall', null],
    ]);
  });
});

describe('dry run', () => {
  it('validates every row as if applied in order and appends nothing', async () => {
    const [a, parent, child] = [unique('DR-A'), unique('DR-P'), unique('DR-C')];
    const job = await imports.run('?resource=assets&dry_run=true', `external_key,name\n${a},A\n${a},A2\nbad key,X\n`);
    expect(job).toMatchObject({ status: 'succeeded', dry_run: true, rows: 3, created: 1, updated: 1, rejected: 1 });
    const none = await call<{ data: Asset[] }>('GET', `/assets?external_key=${a}`);
    expect(none.body.data).toEqual([]);
    const tree = await imports.run('?resource=locations&dry_run=true', `external_key,name,parent_external_key\n${child},C,${parent}\n${parent},P,\n`);
    expect(tree).toMatchObject({ created: 2, rejected: 0 });
    expect((await call<{ data: Location[] }>('GET', `/locations?external_key=${parent}`)).body.data).toEqual([]);
  });
});

describe('the file, refused at once (400, nothing imported)', () => {
  it('an unknown column, no external_key column, neither CSV nor XLSX, a missing or unknown resource', async () => {
    const unknown = await imports.post('?resource=assets', 'external_key,name,colour\nK,N,red\n');
    expect(unknown.status).toBe(400);
    expect(unknown.body.error!.type).toBe('validation_error');
    expect(unknown.body.error!.fields!.map((f) => [f.field, f.code])).toEqual([['colour', 'unknown_field']]);
    const noKey = await imports.post('?resource=assets', 'name\nN\n');
    expect(noKey.body.error!.fields!.map((f) => [f.field, f.code])).toEqual([['external_key', 'required']]);
    const binary = await imports.post('?resource=assets', Buffer.from([0xff, 0xfe, 0x00, 0x01, 0x80]));
    expect(binary.status).toBe(400);
    expect(binary.body.error!.fields![0]).toMatchObject({ field: 'file', code: 'invalid_value' });
    const notZip = await imports.post('?resource=assets', 'external_key\nK\n', XLSX);
    expect(notZip.body.error!.fields![0]).toMatchObject({ field: 'file', code: 'invalid_value' });
    const missing = await imports.post('', 'external_key\nK\n');
    expect(missing.status).toBe(400);
    expect(missing.body.error!.fields!.map((f) => [f.field, f.code])).toEqual([['resource', 'required']]);
    // The document says so too, so that a client built from it never sends the request without it.
    const doc = (await (await fetch(`${svc.apiUrl.replace(/\/api\/v1$/, '')}/openapi/v1.json`)).json()) as {
      paths: Record<string, Record<string, { parameters: { name: string; required: boolean }[] }>>;
    };
    expect(doc.paths['/imports']!.post!.parameters.map((p) => [p.name, p.required])).toEqual([['resource', true], ['dry_run', false]]);
    const other = await imports.post('?resource=tags', 'external_key\nK\n');
    expect(other.body.error!.fields!.map((f) => [f.field, f.code])).toEqual([['resource', 'invalid_value']]);
    const tenThousand = await imports.post('?resource=assets', `external_key,${Array.from({ length: 10_000 }, (_, i) => `c${i}`).join(',')}\n`);
    expect(tenThousand.status).toBe(400);
    expect(tenThousand.body.error!.fields!.length).toBeLessThanOrEqual(20);
    const list = await call<{ data: unknown[] }>('GET', '/imports?limit=200');
    expect(list.status).toBe(200);
  });

  it('415 for another media type, 413 past 50 MiB (after a bounded read)', async () => {
    const json = await imports.post('?resource=assets', '{}', 'application/json');
    expect(json.status).toBe(415);
    expect(json.body.error!.detail).toBe(`Content-Type must be ${CSV} or ${XLSX}`);
    const big = await imports.post('?resource=assets', Buffer.alloc(50 * 1024 * 1024 + 1, 0x41));
    expect(big.status).toBe(413);
    expect(big.body.error!.detail).toBe('Request body must not exceed 50 MiB');
  });
});

describe('hostile files', () => {
  it('a byte-order mark, mixed CRLF and LF, quoted newlines, and a cell of a megabyte (that row’s error)', async () => {
    const [a, b, c] = [unique('H-A'), unique('H-B'), unique('H-C')];
    const file = `\uFEFFexternal_key,name,description\r\n${a},A,"line one\r\nline two"\n${b},B,"say ""hi"""\r\n${c},C,${'x'.repeat(1024 * 1024)}\n`;
    const job = await imports.run('?resource=assets', file);
    expect(job).toMatchObject({ status: 'succeeded', rows: 3, created: 2, rejected: 1 });
    expect(job.errors).toEqual([{ row: 3, field: 'description', code: 'too_long', message: expect.any(String) }]);
    expect((await assetByKey(a)).description).toBe('line one\r\nline two');
    expect((await assetByKey(b)).description).toBe('say "hi"');
  });

  it('an XLSX imports its first sheet; a zip bomb is refused by its declared size and by what it actually inflates', async () => {
    const [a, b] = [unique('X-A'), unique('X-B')];
    const workbook = await xlsxOf([
      ['external_key', 'name', 'is_active', 'metadata'],
      [a, 'From Excel', true, '{"n":2}'],
      [b, "'+formula", false, ''],
    ]);
    const job = await imports.run('?resource=assets', workbook, XLSX);
    expect(job).toMatchObject({ status: 'succeeded', created: 2, rejected: 0 });
    expect(await assetByKey(a)).toMatchObject({ name: 'From Excel', is_active: true, metadata: { n: 2 } });
    expect((await assetByKey(b)).name).toBe('+formula');

    const zeros = Buffer.alloc(300 * 1024 * 1024);
    const declared = zipOf([{ name: 'xl/worksheets/sheet1.xml', data: zeros }]);
    expect(declared.length).toBeLessThan(1024 * 1024);
    const started = Date.now();
    const refused = await imports.post('?resource=assets', declared, XLSX);
    expect(refused.status).toBe(400);
    expect(refused.body.error!.fields![0]!.message).toMatch(/expands past/);
    // Lying about the size: declared small, inflates to 300 MiB.
    const lying = zipOf([{ name: 'xl/worksheets/sheet1.xml', data: zeros, declared: 1000 }]);
    const refusedToo = await imports.post('?resource=assets', lying, XLSX);
    expect(refusedToo.status).toBe(400);
    expect(Date.now() - started).toBeLessThan(20_000);
  });
});

describe('scopes and member roles', () => {
  it('a key needs the write scope of the resource; the list holds only the imports of readable resources; a viewer’s session token gets 403', async () => {
    const ctx = svc.service.ctx;
    const assetsOnly = (await mintApiKey(ctx, { orgId, scopes: ['assets:read', 'assets:write'] })).token;
    const asAssets = importClient(svc.apiUrl, assetsOnly);
    const refused = await asAssets.post('?resource=locations', 'external_key,name\nK,N\n');
    expect(refused.status).toBe(403);
    expect(refused.body.error!.detail).toBe('Missing required scope: locations:write');
    const none = (await mintApiKey(ctx, { orgId, scopes: ['tracking:read'] })).token;
    const noScope = await importClient(svc.apiUrl, none).post('?resource=assets', 'external_key,name\nK,N\n');
    expect(noScope.status).toBe(403);
    expect(noScope.body.error!.detail).toBe('Missing required scope: assets:write or locations:write');

    const list = await fetch(`${svc.apiUrl}/imports?limit=200`, { headers: { authorization: `Bearer ${assetsOnly}` } });
    const listed = (await list.json()) as { data: Array<{ resource: string }> };
    expect(listed.data.length).toBeGreaterThan(0);
    expect(new Set(listed.data.map((i) => i.resource))).toEqual(new Set(['assets']));

    const viewer = await personWithToken(ctx, orgId, 'viewer');
    const asViewer = await importClient(svc.apiUrl, viewer.token).post('?resource=assets', 'external_key,name\nK,N\n');
    expect(asViewer.status).toBe(403);
    const operator = await personWithToken(ctx, orgId, 'operator');
    const key = unique('OP');
    const byOperator = await importClient(svc.apiUrl, operator.token).run('?resource=assets', `external_key,name\n${key},N\n`);
    expect(byOperator.created).toBe(1);
    const viewerReads = await fetch(`${svc.apiUrl}/imports/${byOperator.id}`, { headers: { authorization: `Bearer ${viewer.token}` } });
    expect(viewerReads.status).toBe(200);
  });
});

describe('responsiveness', () => {
  it('a GET answers within a bound while a large import runs', async () => {
    const rows = Array.from({ length: 3000 }, (_, i) => `BIG-${Date.now().toString(36)}-${i},Big ${i}`);
    const posted = await imports.post('?resource=assets', `external_key,name\n${rows.join('\n')}\n`);
    expect(posted.status).toBe(202);
    const timings: number[] = [];
    for (;;) {
      const started = performance.now();
      const reply = await call('GET', '/assets?limit=10');
      timings.push(performance.now() - started);
      expect(reply.status).toBe(200);
      const job = await imports.get(posted.body.data!.id);
      if (job.status === 'succeeded') {
        expect(job.created).toBe(3000);
        break;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(timings.length).toBeGreaterThan(2);
    // Nine in ten GETs answer within the bound while the import runs: a single sample on a shared
    // machine may wait on a pause that is not the import's (a collection, another test's process).
    const sorted = [...timings].sort((a, b) => a - b);
    const p90 = sorted[Math.ceil(sorted.length * 0.9) - 1]!;
    console.info(`imports: ${timings.length} GETs during a 3,000-row import, median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(0)} ms, 90th percentile ${p90.toFixed(0)} ms, worst ${sorted.at(-1)!.toFixed(0)} ms`);
    expect(p90).toBeLessThan(1000);
  }, 120_000);
});
