import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { FileRefused, MAX_ENTRIES, readImportFile } from '../../services/imports/file.js';
import { CSV, XLSX, importClient, xlsxOf, zipOf, type Posted, type ZipPart } from './support.js';

/**
 * Hostile files (docs/api.md, "Import": the file refused at once): zip bombs of every kind the
 * issue names, each refused at the POST with `400` `invalid_value` on `file`, within a time and a
 * memory bound, while the API keeps answering; the read's deadline inside one huge row; and the
 * cases of the list that test/imports/imports.e2e.test.ts does not hold (CR line ends,
 * an XLSX of ten thousand columns, an XLSX sent as CSV, an empty body), none of them ever 5xx.
 */

let svc: TestService;
let imports: ReturnType<typeof importClient>;
let token: string;

beforeAll(async () => {
  svc = await startTestService('imports_hostile');
  const { ctx } = svc.service;
  const org = await createOrg(ctx, 'Hostile Org');
  token = (await mintApiKey(ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write'] })).token;
  imports = importClient(svc.apiUrl, token);
}, 60_000);
afterAll(async () => {
  await svc?.stop();
});



/** The parts of a real workbook (exceljs' own), to which a test adds or swaps one. */
async function workbookParts(): Promise<ZipPart[]> {
  const { default: yauzl } = await import('yauzl');
  const bytes = await xlsxOf([['external_key', 'name'], ['K-1', 'One']]);
  return new Promise((resolve, reject) => {
    const parts: ZipPart[] = [];
    yauzl.fromBuffer(bytes, { lazyEntries: true }, (error, zip) => {
      if (error || !zip) return reject(error);
      zip.on('entry', (entry: { fileName: string }) => {
        zip.openReadStream(entry as never, (e, stream) => {
          if (e || !stream) return reject(e);
          const data: Buffer[] = [];
          stream.on('data', (c: Buffer) => data.push(c));
          stream.on('end', () => {
            parts.push({ name: entry.fileName, data: Buffer.concat(data) });
            zip.readEntry();
          });
        });
      });
      zip.on('end', () => resolve(parts));
      zip.readEntry();
    });
  });
}

/**
 * Posts `body` while a GET of the asset list runs again and again beside it, sampling the
 * process's RSS (the service runs in this process): the answer, how long it took, the slowest GET
 * and how far the RSS rose above where it stood before.
 */
async function postWatched(body: Buffer, contentType: string): Promise<{ posted: Posted; ms: number; slowestGet: number; rssRise: number }> {
  // Building a body blocks this process (the service's too) for seconds: let the server close the
  // connections it found idle meanwhile before the client reuses one (else a read ECONNRESET that
  // says nothing of the service), then measure.
  await new Promise((r) => setTimeout(r, 250));
  await fetch(`${svc.apiUrl}/assets?limit=1`, { headers: { authorization: `Bearer ${token}` } })
    .catch(() => fetch(`${svc.apiUrl}/assets?limit=1`, { headers: { authorization: `Bearer ${token}` } }))
    .then((r) => r.text());
  global.gc?.();
  const base = process.memoryUsage().rss;
  let peak = base;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 10);
  let done = false;
  let slowestGet = 0;
  const gets = (async () => {
    while (!done) {
      const started = performance.now();
      const reply = await fetch(`${svc.apiUrl}/assets?limit=1`, { headers: { authorization: `Bearer ${token}` } });
      await reply.text();
      expect(reply.status).toBe(200);
      slowestGet = Math.max(slowestGet, performance.now() - started);
      await new Promise((r) => setTimeout(r, 25));
    }
  })();
  const started = performance.now();
  try {
    const posted = await imports.post('?resource=assets', body, contentType);
    return { posted, ms: performance.now() - started, slowestGet, rssRise: peak - base };
  } finally {
    done = true;
    clearInterval(sampler);
    await gets;
    peak = Math.max(peak, process.memoryUsage().rss);
  }
}

function expectRefusedFile(posted: Posted, message: RegExp): void {
  expect(posted.status, JSON.stringify(posted.body)).toBe(400);
  expect(posted.body.error!.type).toBe('validation_error');
  expect(posted.body.error!.fields).toEqual([{ field: 'file', code: 'invalid_value', message: expect.stringMatching(message) }]);
}

const MiB = 1024 * 1024;
/** Bounds every refusal below must keep (generous: the machine is shared). */
const BOUND = { ms: 20_000, slowestGet: 2_000, rssRise: 300 * MiB };

describe('zip bombs, refused at the POST within a time and a memory bound, the API answering meanwhile', () => {
  it('sizes that lie: small declared with a huge actual; a local header that disagrees with the central directory; an entry the central directory hides', async () => {
    const parts = await workbookParts();
    const sheet = parts.find((p) => p.name === 'xl/worksheets/sheet1.xml')!;
    const zeros = Buffer.alloc(200 * MiB, 0x20);
    const swap = (replacement: ZipPart) => parts.map((p) => (p.name === sheet.name ? replacement : p));
    const cases: Array<[string, Buffer, RegExp]> = [
      ['declared 1 KiB, inflates to 200 MiB', zipOf(swap({ name: sheet.name, data: zeros, declared: 1024 })), /cannot be read|expands past/],
      ['central 1 KiB, local 200 MiB', zipOf(swap({ name: sheet.name, data: Buffer.concat([sheet.data]), localDeclared: 200 * MiB })), /local header .* disagrees/],
      ['a hidden local entry before the sheet', zipOf([{ name: 'xl/worksheets/sheet2.xml', data: zeros.subarray(0, 10 * MiB), hidden: true }, ...parts]), /bytes outside its entries/],
    ];
    for (const [label, body, message] of cases) {
      const watched = await postWatched(body, XLSX);
      console.info(`${label}: ${body.length} bytes refused in ${Math.round(watched.ms)} ms; slowest GET ${Math.round(watched.slowestGet)} ms; RSS rose ${Math.round(watched.rssRise / MiB)} MiB`);
      expectRefusedFile(watched.posted, message);
      expect({ label, ms: watched.ms < BOUND.ms, slowestGet: watched.slowestGet < BOUND.slowestGet, rss: watched.rssRise < BOUND.rssRise }).toEqual({ label, ms: true, slowestGet: true, rss: true });
    }
    // The honest workbook these were made from is read.
    const fine = await imports.run('?resource=assets&dry_run=true', zipOf(parts), XLSX);
    expect(fine).toMatchObject({ status: 'succeeded', rows: 1, created: 1, rejected: 0 });
  }, 180_000);

  it('more entries than allowed; one huge shared-strings part; a deeply compressed sheet', async () => {
    const parts = await workbookParts();
    const many = zipOf([...parts, ...Array.from({ length: MAX_ENTRIES }, (_, i) => ({ name: `xl/media/x${i}.bin`, data: Buffer.from('x') }))]);
    // Shared strings that compress as text does (about 5 to 1), 70 MiB of them.
    const strings: string[] = ['<?xml version="1.0" encoding="UTF-8"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'];
    for (let i = 0, size = 0; size < 70 * MiB; i++) {
      const item = `<si><t>${(i * 2654435761 % 4294967296).toString(36)}-${i}</t></si>`;
      strings.push(item);
      size += item.length;
    }
    strings.push('</sst>');
    const shared = zipOf([...parts, { name: 'xl/sharedStrings.xml', data: Buffer.from(strings.join('')) }]);
    expect(shared.length).toBeLessThan(50 * MiB);
    const dense = zipOf(parts.map((p) => (p.name === 'xl/worksheets/sheet1.xml' ? { name: p.name, data: Buffer.concat([p.data.subarray(0, p.data.length - 12), Buffer.alloc(150 * MiB, 0x20), Buffer.from('</worksheet>')]) } : p)));
    const cases: Array<[string, Buffer, RegExp]> = [
      ['entries', many, new RegExp(`more than ${MAX_ENTRIES} entries`)],
      ['shared strings', shared, /shared strings expand past 64 MiB/],
      ['dense', dense, /compressed more than \d+ to 1/],
    ];
    for (const [label, body, message] of cases) {
      const watched = await postWatched(body, XLSX);
      console.info(`${label}: ${body.length} bytes refused in ${Math.round(watched.ms)} ms; slowest GET ${Math.round(watched.slowestGet)} ms; RSS rose ${Math.round(watched.rssRise / MiB)} MiB`);
      expectRefusedFile(watched.posted, message);
      expect({ label, ms: watched.ms < BOUND.ms, slowestGet: watched.slowestGet < BOUND.slowestGet, rss: watched.rssRise < BOUND.rssRise }).toEqual({ label, ms: true, slowestGet: true, rss: true });
    }
  }, 240_000);
});

describe('the read’s deadline', () => {
  it('holds inside one huge row: the read ends soon after it, not when the row does', async () => {
    // One row of 16,000 cells (a sheet's most is 16,384) of 1,000 characters each: about 16 MiB of
    // sheet XML, compressed a few times over.
    const column = (i: number): string => (i < 26 ? String.fromCharCode(65 + i) : column(Math.floor(i / 26) - 1) + String.fromCharCode(65 + (i % 26)));
    const cells: string[] = [];
    for (let i = 0; i < 16_000; i++) {
      let text = '';
      for (let j = 0; text.length < 1000; j++) text += ((i * 7919 + j * 104729) % 2147483647).toString(36);
      cells.push(`<c r="${column(i)}1" t="inlineStr"><is><t>${text.slice(0, 1000)}</t></is></c>`);
    }
    const parts = await workbookParts();
    const sheet = parts.find((p) => p.name === 'xl/worksheets/sheet1.xml')!;
    const xml = sheet.data.toString('utf8').replace(/<sheetData>[\s\S]*<\/sheetData>|<sheetData\/>/, `<sheetData><row r="1">${cells.join('')}</row></sheetData>`);
    const body = zipOf(parts.map((p) => (p === sheet ? { name: p.name, data: Buffer.from(xml) } : p)));

    const whole = performance.now();
    const read = await readImportFile('xlsx', body, { headerOnly: true });
    const wholeMs = performance.now() - whole;
    expect(read.header).toHaveLength(16_000);

    const timeoutMs = Math.max(50, Math.floor(wholeMs / 10));
    const started = performance.now();
    const refused = await readImportFile('xlsx', body, { headerOnly: true, timeoutMs }).catch((error: unknown) => error);
    const ms = performance.now() - started;
    expect(refused).toBeInstanceOf(FileRefused);
    expect((refused as Error).message).toMatch(/took longer than/);
    // Well before the row's end (the whole read took wholeMs).
    expect(ms, `whole read ${Math.round(wholeMs)} ms, deadline ${timeoutMs} ms`).toBeLessThan(timeoutMs + wholeMs / 2);
  }, 120_000);
});

describe('the rest of the issue’s hostile list', () => {
  it('CR, LF and CRLF line ends mixed; an XLSX of ten thousand columns; an XLSX sent as CSV; an empty body: never 5xx', async () => {
    const key = `CR-${Date.now().toString(36)}`;
    const job = await imports.run('?resource=assets&dry_run=true', `external_key,name\r${key}-1,One\n${key}-2,"Two\rlines"\r\n${key}-3,Three\r`);
    expect(job).toMatchObject({ status: 'succeeded', rows: 3, created: 3, rejected: 0 });

    const wide = await xlsxOf([['external_key', ...Array.from({ length: 10_000 }, (_, i) => `c${i}`)], ['K', ...Array.from({ length: 10_000 }, () => 'x')]]);
    const refusedWide = await imports.post('?resource=assets', wide, XLSX);
    expect(refusedWide.status).toBe(400);
    expect(refusedWide.body.error!.fields!.length).toBe(20);
    expect(refusedWide.body.error!.fields!.every((f) => f.code === 'unknown_field')).toBe(true);

    const asCsv = await imports.post('?resource=assets', await xlsxOf([['external_key'], ['K']]), CSV);
    expectRefusedFile(asCsv, /neither CSV/);
    const empty = await imports.post('?resource=assets', Buffer.alloc(0), CSV);
    expectRefusedFile(empty, /no header row/);
    const emptyXlsx = await imports.post('?resource=assets', Buffer.alloc(0), XLSX);
    expectRefusedFile(emptyXlsx, /not a zip/);
  }, 120_000);
});
