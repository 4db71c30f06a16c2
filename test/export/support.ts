import { parse } from 'csv-parse/sync';
import ExcelJS from 'exceljs';
import type pg from 'pg';
import { neutraliseFormula } from '../../shared/export/columns.js';

/** What the export tests share: a file asked for and read back, the rows a list's JSON pages say it should hold, and a large seeded report. */

export const XLSX = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';

export interface ExportReply {
  status: number;
  headers: Headers;
  /** The body as text (CSV; an error's JSON). */
  text: string;
  bytes: Buffer;
}

export async function download(url: string, token: string, accept: string, method = 'GET'): Promise<ExportReply> {
  const response = await fetch(url, { method, headers: { authorization: `Bearer ${token}`, accept } });
  const bytes = Buffer.from(await response.arrayBuffer());
  return { status: response.status, headers: response.headers, text: bytes.toString('utf8'), bytes };
}

/** A CSV export's rows, header first, as csv-parse reads RFC 4180 with CRLF. */
export function csvRows(text: string): string[][] {
  return parse(text, { record_delimiter: '\r\n', bom: false }) as string[][];
}

/** An XLSX export's first sheet, read back with exceljs: each row's cells as the JSON would show them (empty cells null). */
export async function xlsxRows(bytes: Buffer): Promise<Array<Array<string | number | boolean | null>>> {
  const workbook = new ExcelJS.Workbook();
  await workbook.xlsx.load(bytes as unknown as ArrayBuffer);
  const sheet = workbook.worksheets[0]!;
  const width = sheet.getRow(1).cellCount;
  const rows: Array<Array<string | number | boolean | null>> = [];
  sheet.eachRow({ includeEmpty: true }, (row) => {
    const cells: Array<string | number | boolean | null> = [];
    for (let i = 1; i <= width; i++) {
      const value = row.getCell(i).value;
      cells.push(value === null || value === undefined ? null : (value as string | number | boolean));
    }
    rows.push(cells);
  });
  return rows;
}

/** A JSON value as the export's CSV cell, written out here independently of the service's code (docs/api.md "Export"). */
export function expectedCell(value: unknown, column: string): string {
  if (value === null || value === undefined) return '';
  if (column === 'tags' && Array.isArray(value)) {
    return neutraliseFormula(value.map((t: { tag_type: string; value: string }) => `${t.tag_type}:${t.value.replace(/[\\|]/g, (c) => `\\${c}`)}`).join('|'));
  }
  if (typeof value === 'string') return neutraliseFormula(value);
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return neutraliseFormula(JSON.stringify(value));
}

/** The item's value under a dotted column name. */
export function valueAt(item: Record<string, unknown>, column: string): unknown {
  return column.split('.').reduce<unknown>((v, key) => (v === null || v === undefined ? null : (v as Record<string, unknown>)[key]), item);
}

/** Every item of a list, page after page of 200, through its JSON. */
export async function allPages(url: string, token: string): Promise<Array<Record<string, unknown>>> {
  const items: Array<Record<string, unknown>> = [];
  for (let offset = 0; ; offset += 200) {
    const sep = url.includes('?') ? '&' : '?';
    const response = await fetch(`${url}${sep}limit=200&offset=${offset}`, { headers: { authorization: `Bearer ${token}` } });
    if (response.status !== 200) throw new Error(`${url}: ${response.status} ${await response.text()}`);
    const page = (await response.json()) as { data: Array<Record<string, unknown>>; total_count: number };
    items.push(...page.data);
    if (page.data.length < 200) return items;
  }
}

/**
 * `count` assets of `orgId` placed at `locations` new locations, written straight into the read
 * model (assets, locations, asset_locations) for speed: what the report, the asset list and their
 * exports read, without the events that would have made them. Ids from `firstId` up, clear of the
 * service's own.
 */
export async function seedReport(db: pg.Pool | pg.Client, orgId: number, count: number, options: { locations?: number; firstId?: number } = {}): Promise<void> {
  const locations = options.locations ?? 100;
  const first = options.firstId ?? 100_000_000;
  await db.query(
    `INSERT INTO read_model.locations (id, org_id, external_key, name, is_active, created_at, updated_at)
     SELECT $2::int + i, $1, 'SEED-LOC-' || lpad(i::text, 5, '0'), 'Seeded location ' || i, true, now(), now() FROM generate_series(1, $3::int) i`,
    [orgId, first, locations],
  );
  const batch = 50_000;
  for (let start = 1; start <= count; start += batch) {
    const end = Math.min(count, start + batch - 1);
    await db.query(
      `INSERT INTO read_model.assets (id, org_id, external_key, name, description, is_active, metadata, created_at, updated_at)
       SELECT $2::int + i, $1, 'SEED-' || lpad(i::text, 8, '0'), 'Seeded asset ' || i, CASE WHEN i % 10 = 0 THEN '=formula ' || i END, true, '{}', now(), now()
         FROM generate_series($3::int, $4::int) i`,
      [orgId, first, start, end],
    );
    await db.query(
      `INSERT INTO read_model.asset_locations (org_id, asset_id, location_id, last_seen, dwell_started_at, first_seq, last_seq, first_seen_at,
                                               last_seen_rfc3339, dwell_started_at_rfc3339)
       SELECT $1, $2::int + i, $2::int + 1 + (i % $5::int), t, t, i, i, t, read_model.rfc3339(t), read_model.rfc3339(t)
         FROM generate_series($3::int, $4::int) i, LATERAL (SELECT timestamptz '2026-01-01' + i * interval '1 second') AS at (t)`,
      [orgId, first, start, end, locations],
    );
  }
  await db.query(
    `INSERT INTO read_model.asset_location_counts (org_id, located) VALUES ($1, $2)
     ON CONFLICT (org_id) DO UPDATE SET located = read_model.asset_location_counts.located + EXCLUDED.located`,
    [orgId, count],
  );
  await db.query(
    `INSERT INTO read_model.asset_counts (org_id, live_unbounded, live_unbounded_active) VALUES ($1, $2, $2)
     ON CONFLICT (org_id) DO UPDATE SET live_unbounded = read_model.asset_counts.live_unbounded + EXCLUDED.live_unbounded,
                                        live_unbounded_active = read_model.asset_counts.live_unbounded_active + EXCLUDED.live_unbounded_active`,
    [orgId, count],
  );
  await db.query('ANALYZE read_model.assets; ANALYZE read_model.asset_locations; ANALYZE read_model.locations');
}
