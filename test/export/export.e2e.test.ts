import { randomUUID } from 'node:crypto';
import http from 'node:http';
import fc from 'fast-check';
import { stringify } from 'csv-stringify/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { restoreFormula } from '../../shared/export/columns.js';
import { createOrg, mintApiKey, personWithToken } from '../support/auth.js';
import { handheld } from '../support/scans.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';
import { XLSX, allPages, csvRows, download, expectedCell, seedReport, valueAt, xlsxRows } from './support.js';

/**
 * Every list of /api/v1 as a file (docs/api.md "Export"), over real HTTP against a real
 * database: the CSV and the XLSX hold the same rows as the list's JSON pages, in its columns and
 * order, whatever `limit` and `offset` say; errors stay the list's own JSON; HEAD answers the
 * headers; a client that hangs up gives the connection back.
 */

let svc: TestService;
let orgId: number;
let token: string;
let api: ReturnType<typeof client>;
const ids: Record<string, number> = {};
let n = 0;
const unique = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${++n}`;
const AT = '2026-05-25T10:00:30.000Z';

const COLUMNS = {
  asset: ['id', 'external_key', 'name', 'description', 'location_id', 'location_external_key', 'is_active', 'valid_from', 'valid_to', 'metadata', 'created_at', 'updated_at', 'deleted_at', 'tags'],
  location: ['id', 'external_key', 'name', 'description', 'parent_id', 'parent_external_key', 'is_active', 'valid_from', 'valid_to', 'created_at', 'updated_at', 'deleted_at', 'tags'],
  tag: ['id', 'tag_type', 'value', 'is_active', 'valid_from', 'valid_to', 'created_at'],
  report: ['asset_id', 'asset_external_key', 'location_id', 'location_external_key', 'asset_deleted_at', 'asset_last_seen', 'dwell_started_at'],
  visit: ['location_id', 'location_external_key', 'event_observed_at', 'last_observed_at', 'duration_seconds'],
  audit: ['id', 'occurred_at', 'action', 'resource_type', 'resource_id', 'resource_external_key', 'actor.type', 'actor.id', 'actor.name', 'request_id', 'changes'],
  endpoint: ['id', 'url', 'description', 'event_types', 'is_active', 'disabled_reason', 'not_seen_after_seconds', 'created_at', 'updated_at'],
  delivery: ['id', 'webhook_id', 'event_type', 'attempt', 'status', 'response_status', 'duration_ms', 'error', 'next_attempt_at', 'created_at'],
};

async function create(path: string, body: Record<string, unknown>): Promise<number> {
  const reply = await api<{ data: { id: number } }>('POST', path, { body });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data.id;
}

beforeAll(async () => {
  svc = await startTestService('export', { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
  const ctx = svc.service.ctx;
  orgId = (await createOrg(ctx, 'export')).id;
  token = (
    await mintApiKey(ctx, {
      orgId,
      scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read', 'audit:read', 'webhooks:read', 'webhooks:write'],
    })
  ).token;
  api = client(svc.apiUrl, token);
  ids.root = await create('/locations', { external_key: 'ROOT', name: 'Root', tags: [{ tag_type: 'barcode', value: 'root|1\\x' }, { tag_type: 'rfid', value: 'E2ROOT' }] });
  ids.dock = await create('/locations', { external_key: 'DOCK', name: '=Dock', parent_id: ids.root, description: '-the dock, "quoted", with\nnewline' });
  ids.yard = await create('/locations', { external_key: 'YARD', name: '@Yard', parent_id: ids.root });
  ids.bay = await create('/locations', { external_key: 'BAY', name: 'Bay', parent_id: ids.dock });
  // More assets than the largest page (200).
  const names = ['=1+2', '+x', '-y', '@z', "'q", '\tt', 'plain, with comma', 'ünïcødé ✓'];
  for (let start = 0; start < 230; start += 10) {
    await Promise.all(
      Array.from({ length: 10 }, (_, k) => {
        const i = start + k;
        return create('/assets', {
          external_key: `AST-${String(i).padStart(3, '0')}`,
          name: names[i % names.length]!,
          description: i % 3 === 0 ? null : `desc ${i}`,
          is_active: i % 7 !== 0,
          metadata: i % 5 === 0 ? { owner: '=cmd', n: i, nested: { ok: true } } : {},
          tags: i % 4 === 0 ? [{ tag_type: 'rfid', value: `E2${String(i).padStart(6, '0')}` }, { tag_type: 'barcode', value: `a|b:${i}` }] : [],
        });
      }),
    );
  }
  const scanned = await create('/assets', { external_key: 'SCANNED', name: 'Scanned', tags: [{ tag_type: 'rfid', value: 'E2SCANNED' }] });
  ids.scanned = scanned;
  const submit = handheld(svc, (await mintApiKey(ctx, { orgId, scopes: ['scans:write'] })).token);
  for (const [location, minute] of [
    [ids.dock, 0],
    [ids.yard, 1],
    [ids.dock, 2],
  ] as const) {
    const reply = await submit({
      submission_id: randomUUID(),
      device_id: 'h',
      location: { id: location },
      reads: [{ tag_type: 'rfid', value: 'E2SCANNED', observed_at: `2026-05-25T10:0${minute}:00.000Z` }],
    });
    expect(reply.status).toBe(202);
  }
  for (let tries = 0; ; tries++) {
    const history = await allPages(`${svc.apiUrl}/assets/${scanned}/history`, token);
    if (history.length === 3) break;
    if (tries > 100) throw new Error('the scans were not projected');
    await new Promise((r) => setTimeout(r, 100));
  }
  ids.endpoint = await create('/webhook-endpoints', { url: 'http://127.0.0.1:9/hook', event_types: ['asset.moved'], description: "'quoted" });
}, 180_000);

afterAll(async () => {
  await svc?.stop();
});

const lists = (): Array<[string, string, keyof typeof COLUMNS]> => [
  ['/assets', 'assets', 'asset'],
  ['/assets?sort=-name,external_key&is_active=true', 'assets', 'asset'],
  ['/assets?location_id=' + ids.dock, 'assets', 'asset'],
  ['/locations', 'locations', 'location'],
  ['/locations?parent_id=' + ids.root + '&sort=-external_key', 'locations', 'location'],
  [`/locations/${ids.root}/children`, 'children', 'location'],
  [`/locations/${ids.bay}/ancestors`, 'ancestors', 'location'],
  [`/locations/${ids.root}/descendants`, 'descendants', 'location'],
  [`/assets/${ids.scanned}/tags`, 'tags', 'tag'],
  [`/locations/${ids.root}/tags`, 'tags', 'tag'],
  ['/reports/asset-locations', 'asset-locations', 'report'],
  [`/reports/asset-locations?at=${AT}`, 'asset-locations', 'report'],
  [`/assets/${ids.scanned}/history`, 'history', 'visit'],
  [`/assets/${ids.scanned}/history?sort=event_observed_at`, 'history', 'visit'],
  ['/audit-events', 'audit-events', 'audit'],
  ['/audit-events?resource_type=location', 'audit-events', 'audit'],
  ['/webhook-endpoints', 'webhook-endpoints', 'endpoint'],
  [`/webhook-endpoints/${ids.endpoint}/deliveries`, 'deliveries', 'delivery'],
];

const withQuery = (path: string, extra: string) => `${path}${path.includes('?') ? '&' : '?'}${extra}`;
const FILE_NAME = (resource: string, ext: string) => new RegExp(`^attachment; filename="${resource}-\\d{8}T\\d{6}Z\\.${ext}"$`);

/** An XLSX cell as the CSV writes it. */
const asCsvCell = (value: string | number | boolean | null) => (value === null ? '' : String(value));

describe('every list as CSV and XLSX', () => {
  it('holds the list\'s JSON pages, every one, in its columns and order, whatever limit and offset say', async () => {
    let multiPage = false;
    for (const [path, resource, kind] of lists()) {
      const items = await allPages(svc.apiUrl + path, token);
      multiPage ||= items.length > 200;
      const expected = [COLUMNS[kind], ...items.map((item) => COLUMNS[kind].map((column) => expectedCell(valueAt(item, column), column)))];
      for (const extra of ['', 'limit=1&offset=3', 'limit=abc&offset=-1']) {
        const url = svc.apiUrl + (extra ? withQuery(path, extra) : path);
        const csv = await download(url, token, 'text/csv');
        expect(csv.status, `${path}: ${csv.text.slice(0, 300)}`).toBe(200);
        expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
        expect(csv.headers.get('content-disposition')).toMatch(FILE_NAME(resource, 'csv'));
        expect(csv.bytes.subarray(0, 3).equals(Buffer.from([0xef, 0xbb, 0xbf])), 'no byte-order mark').toBe(false);
        expect(csv.text.endsWith('\r\n'), 'CRLF line ends').toBe(true);
        expect(csvRows(csv.text), `${path} ${extra}`).toEqual(expected);
        // Byte for byte: each cell quoted only when it holds `,`, `"` or a line end (docs/api.md "Export").
        expect(csv.text, `${path} ${extra}`).toBe(stringify(expected, { record_delimiter: '\r\n', quote_record_delimiter: true }));
      }
      const xlsx = await download(svc.apiUrl + path, token, XLSX);
      expect(xlsx.status, path).toBe(200);
      expect(xlsx.headers.get('content-type')).toBe(XLSX);
      expect(xlsx.headers.get('content-disposition')).toMatch(FILE_NAME(resource, 'xlsx'));
      expect((await xlsxRows(xlsx.bytes)).map((row) => row.map(asCsvCell)), path).toEqual(expected);
    }
    expect(multiPage, 'a list longer than the largest page').toBe(true);
  }, 120_000);

  it('keeps numbers and booleans typed in the XLSX, text neutralised', async () => {
    const rows = await xlsxRows((await download(`${svc.apiUrl}/assets?external_key=AST-000&external_key=AST-001`, token, XLSX)).bytes);
    expect(rows[1]!.slice(0, 3)).toEqual([expect.any(Number), 'AST-000', "'=1+2"]);
    expect(rows[1]![6]).toBe(false);
    expect(rows[2]![6]).toBe(true);
  });

  it('prefers JSON for */*, no Accept or JSON first; a file only when asked for', async () => {
    for (const accept of ['*/*', 'application/json', 'application/json, text/csv;q=0.5', '']) {
      const reply = await fetch(`${svc.apiUrl}/assets?limit=1`, { headers: { authorization: `Bearer ${token}`, ...(accept ? { accept } : {}) } });
      expect(reply.headers.get('content-type'), accept).toMatch(/^application\/json/);
      expect(((await reply.json()) as { limit: number }).limit).toBe(1);
    }
    const csv = await download(`${svc.apiUrl}/assets`, token, 'application/json;q=0.1, text/csv');
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
  });

  it('restores every text it neutralised: random names, exported and read back', async () => {
    const texts = fc.sample(
      fc.oneof(
        fc.string({ minLength: 1, maxLength: 30 }).filter((s) => s.trim() !== ''),
        fc.tuple(fc.constantFrom('=', '+', '-', '@', "'", '\t', '\r'), fc.string({ minLength: 1, maxLength: 20 })).map(([a, b]) => a + b),
      ),
      { numRuns: 30, seed: 33 },
    ).filter((s) => !/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(s) && s.trim() !== '');
    const keys: string[] = [];
    for (const [i, name] of texts.entries()) {
      const key = unique(`FX${i}`);
      keys.push(key);
      await create('/assets', { external_key: key, name, description: name });
    }
    const query = keys.map((k) => `external_key=${k}`).join('&');
    const rows = csvRows((await download(`${svc.apiUrl}/assets?${query}&sort=created_at`, token, 'text/csv')).text);
    const [header, ...body] = rows;
    const name = header!.indexOf('name');
    const description = header!.indexOf('description');
    expect(body.map((row) => restoreFormula(row[name]!))).toEqual(texts);
    expect(body.map((row) => restoreFormula(row[description]!))).toEqual(texts);
    for (const row of body) expect(row[name]).not.toMatch(/^[=+\-@\t\r]/);
  }, 60_000);
});

describe('errors, access and HEAD are the list\'s own', () => {
  const asJson = async (path: string, accept: string, auth: string | null = token, method = 'GET') => {
    const reply = await fetch(svc.apiUrl + path, { method, headers: { accept, ...(auth ? { authorization: `Bearer ${auth}` } : {}) } });
    return { status: reply.status, type: reply.headers.get('content-type'), body: method === 'HEAD' ? '' : await reply.text() };
  };

  it('answers a bad filter, an unknown parameter, both forms of a pair and a missing parent in JSON, as the list does', async () => {
    for (const path of [
      '/assets?location_id=0',
      '/assets?colour=red',
      '/assets?location_id=1&location_external_key=DOCK',
      '/reports/asset-locations?at=yesterday',
      '/audit-events?since=nope',
      '/assets/999999/history',
      '/locations/999999/children',
      '/assets/999999/tags',
      '/webhook-endpoints/999999/deliveries',
    ]) {
      const json = await asJson(path, 'application/json');
      for (const accept of ['text/csv', XLSX]) {
        const file = await asJson(path, accept);
        expect(file.status, `${path} ${accept}`).toBe(json.status);
        expect(file.status).toBeGreaterThanOrEqual(400);
        expect(file.type).toMatch(/^application\/json/);
        const strip = (text: string) => {
          const body = JSON.parse(text) as { error: Record<string, unknown> };
          delete body.error.request_id;
          return body;
        };
        expect(strip(file.body)).toEqual(strip(json.body));
      }
    }
  });

  it('refuses a missing key (401), a key without the scope and a member role the list refuses (403)', async () => {
    expect((await asJson('/assets', 'text/csv', null)).status).toBe(401);
    const reportsOnly = (await mintApiKey(svc.service.ctx, { orgId, scopes: ['tracking:read'] })).token;
    const refused = await asJson('/assets', 'text/csv', reportsOnly);
    expect(refused.status).toBe(403);
    expect(refused.body).toContain('assets:read');
    const operator = await personWithToken(svc.service.ctx, orgId, 'operator');
    expect((await asJson('/audit-events', 'text/csv', operator.token)).status).toBe(403);
    expect((await asJson('/assets', 'text/csv', operator.token)).status).toBe(200);
  });

  it('answers HEAD with the GET\'s status and headers and no body', async () => {
    for (const [path, resource] of lists()) {
      for (const [accept, ext] of [
        ['text/csv', 'csv'],
        [XLSX, 'xlsx'],
      ] as const) {
        const head = await fetch(svc.apiUrl + path, { method: 'HEAD', headers: { authorization: `Bearer ${token}`, accept } });
        expect(head.status, path).toBe(200);
        expect(head.headers.get('content-disposition')).toMatch(FILE_NAME(resource, ext));
        expect(head.headers.get('content-type')).toBe(ext === 'csv' ? 'text/csv; charset=utf-8' : XLSX);
        expect(await head.text()).toBe('');
      }
    }
    expect((await asJson('/assets/999999/history', 'text/csv', token, 'HEAD')).status).toBe(404);
  });
});

describe('a large list, streamed', () => {
  const SEEDED = 60_000;
  let bigOrg: number;
  let bigToken: string;

  beforeAll(async () => {
    bigOrg = (await createOrg(svc.service.ctx, 'export big')).id;
    bigToken = (await mintApiKey(svc.service.ctx, { orgId: bigOrg, scopes: ['tracking:read', 'assets:read'] })).token;
    await seedReport(svc.service.ctx.pool, bigOrg, SEEDED, { locations: 50 });
  }, 120_000);

  /** Starts a CSV download and hands back its response once the first chunk has come. */
  function startDownload(path: string): Promise<{ response: http.IncomingMessage; first: Buffer; request: http.ClientRequest }> {
    return new Promise((resolve, reject) => {
      const request = http.get(svc.apiUrl + path, { headers: { authorization: `Bearer ${bigToken}`, accept: 'text/csv' } }, (response) => {
        response.once('data', (first: Buffer) => {
          response.pause();
          resolve({ response, first, request });
        });
        response.once('error', reject);
      });
      request.once('error', reject);
    });
  }

  // The asset export's statement as pg_stat_activity shows it (its first 1 KiB): an open cursor is a session inside a transaction.
  const OPEN_EXPORTS =
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state IN ('idle in transaction', 'active') AND query LIKE 'SELECT a.id AS id, a.external_key AS external_key%' AND pid <> pg_backend_pid()";
  const poolBusy = () => svc.service.ctx.pool.totalCount - svc.service.ctx.pool.idleCount;

  it('holds every row, in the report\'s order, from one snapshot: a row written meanwhile is not in it', async () => {
    const { response, first } = await startDownload('/reports/asset-locations');
    // Mid-download: a new asset, located, that the report would list last.
    await svc.service.ctx.pool.query(
      `INSERT INTO read_model.assets (id, org_id, external_key, name, is_active, metadata, created_at, updated_at) VALUES (199999999, $1, 'LATE', 'Late', true, '{}', now(), now());
       INSERT INTO read_model.asset_locations (org_id, asset_id, location_id, last_seen, dwell_started_at, first_seq, last_seq, first_seen_at, last_seen_rfc3339, dwell_started_at_rfc3339)
       VALUES ($1, 199999999, 100000001, timestamptz '2000-01-01', timestamptz '2000-01-01', 0, 0, timestamptz '2000-01-01', '2000-01-01T00:00:00.000Z', '2000-01-01T00:00:00.000Z')`.replace(/\$1/g, String(bigOrg)),
    );
    const chunks = [first];
    response.on('data', (chunk: Buffer) => chunks.push(chunk));
    response.resume();
    await new Promise((resolve) => response.once('end', resolve));
    const rows = csvRows(Buffer.concat(chunks).toString('utf8'));
    expect(rows.length).toBe(SEEDED + 1);
    const seen = rows.slice(1).map((r) => r[5]!);
    expect([...seen].sort().reverse()).toEqual(seen);
    expect(rows.some((r) => r[1] === 'LATE')).toBe(false);
    const json = await allPages(`${svc.apiUrl}/reports/asset-locations?asset_external_key=LATE`, bigToken);
    expect(json).toHaveLength(1);
  }, 120_000);

  // The report's CSV comes from Postgres (COPY, shared/export/copy.ts): its statement as pg_stat_activity shows it.
  const OPEN_COPIES = `SELECT count(*)::int AS n, string_agg(wait_event, ',') AS waits, max(pid) AS pid FROM pg_stat_activity
    WHERE datname = current_database() AND query LIKE 'COPY (SELECT %' AND pid <> pg_backend_pid()`;
  const openCopies = async () => (await svc.service.ctx.pool.query<{ n: number; waits: string | null; pid: number | null }>(OPEN_COPIES)).rows[0]!;

  it('a client that hangs up mid-COPY ends the statement and the pool lends a working connection again', async () => {
    const { response, first, request } = await startDownload('/reports/asset-locations?sort=asset_external_key');
    expect(first.length).toBeGreaterThan(0);
    await expect.poll(async () => (await openCopies()).n, { timeout: 10_000 }).toBe(1);
    request.destroy();
    response.destroy();
    await expect.poll(async () => (await openCopies()).n, { timeout: 10_000 }).toBe(0);
    for (let i = 0; i < 12; i++) expect((await download(`${svc.apiUrl}/reports/asset-locations?limit=1`, bigToken, 'application/json')).status).toBe(200);
    expect((await download(`${svc.apiUrl}/reports/asset-locations?location_external_key=SEED-LOC-00001`, bigToken, 'text/csv')).status).toBe(200);
  }, 60_000);

  it.each([
    ['the COPY', '/reports/asset-locations', 'COPY (SELECT %'],
    ['the cursor', '/assets?sort=-name', 'SELECT a.id AS id, a.external_key AS external_key%'],
  ])('a read that fails mid-download (%s) ends the response without its last chunk, never as a shorter file that looks whole', async (_name, path, statement) => {
    const { response, first, request } = await startDownload(path);
    try {
      const chunks = [first];
      const outcome = new Promise<string>((resolve) => {
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.once('end', () => resolve('complete'));
        response.once('aborted', () => resolve('aborted'));
        response.once('error', () => resolve('aborted'));
      });
      // The export's backend ends (an administrator, a failover) while the client still reads.
      const { rows } = await svc.service.ctx.pool.query<{ ended: boolean }>(
        `SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE datname = current_database() AND query LIKE $1 AND pid <> pg_backend_pid()`,
        [statement],
      );
      expect(rows.map((r) => r.ended)).toEqual([true]);
      response.resume();
      expect(await outcome).toBe('aborted');
      expect(response.complete).toBe(false);
      expect(csvRows(Buffer.concat(chunks).toString('utf8').replace(/[^\n]*$/, '')).length).toBeLessThan(SEEDED + 1);
    } finally {
      request.destroy();
    }
    // The service goes on answering.
    expect((await download(`${svc.apiUrl}/reports/asset-locations?limit=1`, bigToken, 'application/json')).status).toBe(200);
  }, 60_000);

  it('a client that hangs up mid-download closes the cursor and gives the connection back to the pool', async () => {
    const busyBefore = poolBusy();
    const { response, first, request } = await startDownload('/assets?sort=-name');
    try {
      expect(first.length).toBeGreaterThan(0);
      // The export is under way: its transaction holds a connection and its cursor is open.
      const { rows: open } = await svc.service.ctx.pool.query<{ n: number }>(OPEN_EXPORTS);
      expect(open[0]!.n).toBe(1);
    } finally {
      request.destroy();
      response.destroy();
    }
    // The cursor closed and the transaction ended on the server, and the pool has the connection back.
    await expect.poll(async () => (await svc.service.ctx.pool.query<{ n: number }>(OPEN_EXPORTS)).rows[0]!.n, { timeout: 10_000 }).toBe(0);
    await expect.poll(() => poolBusy() <= busyBefore, { timeout: 10_000 }).toBe(true);
    // The service goes on answering, the connection reused.
    expect((await download(`${svc.apiUrl}/assets?limit=1`, bigToken, 'application/json')).status).toBe(200);
  }, 60_000);
});
