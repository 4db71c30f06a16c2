import type pg from 'pg';
import { z } from 'zod';
import { pageSql, readPage, type Page } from '../../shared/db/json-sql.js';
import { planned, prepared } from '../../shared/db/prepared.js';
import { JsonText } from '../../shared/json/text.js';
import { SqlParams, pageBoundsSql, effectiveSql, orderBy, type SortKey } from '../../shared/db/list-sql.js';
import { viewFields } from '../../shared/domain/fields.js';
import { instantTimestamp, type Instant } from '../../shared/time.js';
import { decodeChunk } from './read-chunks.js';

/**
 * Reads of the tracking views (docs/api.md "Tracking: where assets are and have been"), each page one statement that
 * Postgres answers in JSON, like the master-data views.
 */

const { id, externalKey, timestamp } = viewFields;

/** SQL: a timestamptz from a parameter of microseconds since the epoch. */
const AT = (param: string) => `(timestamptz 'epoch' + ${param}::bigint * interval '1 microsecond')`;

/** A page's rows: how many, from where. */
interface Paging {
  limit: number;
  offset: number;
}

/** A row of `GET /reports/asset-locations` (docs/api.md "`GET /reports/asset-locations`"): the contract's fields, then `dwell_started_at`. */
export const reportRowSchema = z.object({
  asset_id: id,
  asset_external_key: externalKey,
  location_id: id.nullable(),
  location_external_key: externalKey.nullable().describe('null when the location is soft-deleted'),
  asset_deleted_at: timestamp.nullable(),
  asset_last_seen: timestamp.describe('observed time of the newest read of the asset'),
  dwell_started_at: timestamp.describe('first read of the current visit'),
});

/** A row of `GET /assets/{asset_id}/history`: one visit. */
export const visitRowSchema = z.object({
  location_id: id,
  location_external_key: externalKey.nullable().describe('null unless the location is live and currently effective'),
  event_observed_at: timestamp.describe('first read of the visit'),
  last_observed_at: timestamp.describe('last read of the visit'),
  duration_seconds: z.number().min(0).nullable().describe('seconds until the next visit began; null for the current visit'),
});

export const REPORT_SORT_FIELDS = ['asset_last_seen', 'asset_external_key', 'location_external_key'] as const;
const REPORT_DEFAULT_SORT: SortKey = [{ field: 'asset_last_seen', descending: true }];
const REPORT_SORT_COLUMNS: Record<string, string> = {
  asset_last_seen: 'al.last_seen',
  asset_external_key: 'a.external_key',
  location_external_key: 'location_external_key',
};

export interface ReportFilter {
  location_id?: number;
  location_external_key?: string;
  asset_id?: number;
  asset_external_key?: string;
  include_deleted?: boolean;
  /** The report as it stood at this instant (observed time); absent or in the future: now. */
  at?: Instant;
  limit: number;
  offset: number;
  sort?: SortKey;
}

/**
 * The conditions of the report's filters ($1 the org): the asset on `al.asset_id`, the location on
 * `locationColumn`, the asset's key by `byAssetKey` (given the key's parameter); whether any filter
 * narrows the rows.
 */
function reportFilterConditions(
  params: SqlParams,
  filter: Omit<ReportFilter, 'limit' | 'offset'>,
  locationColumn: string,
  byAssetKey: (key: string) => string,
): { where: string[]; filtered: boolean } {
  const where: string[] = [];
  if (filter.location_id !== undefined) where.push(`${locationColumn} = ${params.add(filter.location_id)}`);
  if (filter.location_external_key !== undefined) {
    where.push(`${locationColumn} = (SELECT id FROM locations WHERE org_id = $1 AND external_key = ${params.add(filter.location_external_key)} AND deleted_at IS NULL)`);
  }
  if (filter.asset_id !== undefined) where.push(`al.asset_id = ${params.add(filter.asset_id)}`);
  if (filter.asset_external_key !== undefined) where.push(byAssetKey(params.add(filter.asset_external_key)));
  return { where, filtered: where.length > 0 };
}

/**
 * The asset-location report: one row per scanned asset, currently effective assets only (and
 * existing ones unless include_deleted), with its current location; or, given an `at` not in the
 * future, with its location at that instant (reportAtQuery).
 */
export function reportQuery(orgId: number, filter: ReportFilter, now: number = Date.now()): pg.QueryConfig {
  return reportStatement(orgId, filter, filter, now);
}

/** The whole report (docs/api.md "Export"): its filters and sort, every row, no count. */
export function reportExportQuery(orgId: number, filter: Omit<ReportFilter, 'limit' | 'offset'>, now: number = Date.now()): pg.QueryConfig {
  return reportStatement(orgId, filter, null, now);
}

/** A page of the report with its count, or (page null) every row of it alone. */
function reportStatement(orgId: number, filter: Omit<ReportFilter, 'limit' | 'offset'>, page: Paging | null, now: number): pg.QueryConfig {
  if (filter.at && filter.at.ms <= now) return reportAtQuery(orgId, filter, instantTimestamp(filter.at), page);
  const params = new SqlParams();
  params.add(orgId);
  const filters = reportFilterConditions(params, filter, 'al.location_id', (key) => `a.external_key = ${key}`);
  const where = ['al.org_id = $1', effectiveSql('a'), ...(filter.include_deleted ? [] : ['a.deleted_at IS NULL']), ...filters.where];
  const { filtered } = filters;
  const from = `FROM asset_locations al JOIN assets a ON a.id = al.asset_id AND a.org_id = al.org_id`;
  const whereSql = where.join(' AND ');
  const rows = `SELECT al.asset_id, a.external_key AS asset_external_key, al.location_id,
         CASE WHEN l.deleted_at IS NULL THEN l.external_key END AS location_external_key,
         a.deleted_at_rfc3339 AS asset_deleted_at, al.last_seen_rfc3339 AS asset_last_seen, al.dwell_started_at_rfc3339 AS dwell_started_at
    ${from} LEFT JOIN locations l ON l.id = al.location_id AND l.org_id = al.org_id
    WHERE ${whereSql}
    ORDER BY ${orderBy(filter.sort, REPORT_DEFAULT_SORT, REPORT_SORT_COLUMNS, 'al.asset_id')}`;
  if (!page) return planned(rows, params.values);
  const paged = `${rows} ${pageBoundsSql(params, page)}`;
  // A filter narrows to few rows: planned for its values, like the list filters.
  if (filtered) return planned(pageSql(paged, `SELECT count(*)::int ${from} WHERE ${whereSql}`), params.values);
  return prepared(pageSql(paged, unfilteredReportCountSql(filter.include_deleted ?? false)), params.values);
}

const REPORT_AT_SORT_COLUMNS: Record<string, string> = {
  asset_last_seen: 'r.last_seen',
  asset_external_key: 'a.external_key',
  location_external_key: 'location_external_key',
};

/**
 * The report as it stood at `at` (a timestamptz literal), in observed time: built from every read
 * observed at or before `at` that the projection holds now, late ones included, through the same
 * visits history shows, not by replaying reads. The reads up to `at` are a prefix of an asset's
 * reads in (observed time, log order), so their visits are the asset's visits begun by `at`, the
 * newest one cut at `at`: the asset's location then is that visit's, its dwell began with it, and
 * it was last seen at the visit's last read, or, when the visit runs on past `at`, at its last
 * read by then (lastReadAtOrBeforeSql). Which visit that is, without looking through every asset's
 * visits (migration read-model/540): an asset whose current visit (asset_locations) began by `at`
 * was in it then, since it is its newest; an asset first seen after `at` (first_seen_at) is not in
 * the report; only the others, moved since `at`, are looked up in asset_visits. Master data
 * (keys, deletion, effectiveness) is as it is now.
 *
 * The rows are computed once for both the page and the count, and carry only what the sort by
 * `asset_last_seen` needs: the assets the report does not show are left out through the few
 * that are deleted or out of their validity window (hiddenAssetConditions), not by joining every
 * asset; keys and wire timestamps are read for the page's rows alone (all rows when the sort
 * is by a key).
 */
function reportAtQuery(orgId: number, filter: Omit<ReportFilter, 'limit' | 'offset'>, at: string, page: Paging | null): pg.QueryConfig {
  const params = new SqlParams();
  params.add(orgId);
  const atSql = `${params.add(at)}::timestamptz`;
  const hidden = hiddenAssetConditions(filter.include_deleted ?? false)
    .map((condition) => `SELECT a.id FROM assets a WHERE a.org_id = $1 AND ${condition}`)
    .join(' UNION ALL ');
  const filters = reportFilterConditions(params, filter, 'v.location_id', (key) => `al.asset_id IN (SELECT id FROM assets WHERE org_id = $1 AND external_key = ${key})`);
  const where = ['al.org_id = $1', 'al.asset_id NOT IN (SELECT id FROM hidden)', ...filters.where];
  const { filtered } = filters;
  const inVisit = (visit: string, condition: string) => `SELECT al.asset_id, v.location_id, v.first_at,
         CASE WHEN v.last_at <= ${atSql} THEN v.last_at ELSE ${lastReadAtOrBeforeSql('al.org_id', 'al.asset_id', atSql, 'v.first_at')} END AS last_seen
    FROM asset_locations al CROSS JOIN LATERAL (${visit}) v
    WHERE ${[...where, condition].join(' AND ')}`;
  const located = `${inVisit('SELECT al.location_id, al.dwell_started_at AS first_at, al.last_seen AS last_at', `al.dwell_started_at <= ${atSql}`)}
    UNION ALL
    ${inVisit(
      `SELECT v.location_id, v.first_at, v.last_at FROM asset_visits v
        WHERE v.org_id = al.org_id AND v.asset_id = al.asset_id AND v.first_at <= ${atSql}
        ORDER BY v.first_at DESC, v.first_seq DESC LIMIT 1`,
      `al.dwell_started_at > ${atSql} AND al.first_seen_at <= ${atSql}`,
    )}`;
  const ctes = (materialized: boolean) => `WITH hidden AS (${hidden}), report_at AS ${materialized ? 'MATERIALIZED ' : ''}(${located})`;
  const order = orderBy(filter.sort, REPORT_DEFAULT_SORT, REPORT_AT_SORT_COLUMNS, 'r.asset_id');
  const columns = `r.asset_id, a.external_key AS asset_external_key, r.location_id,
         CASE WHEN l.deleted_at IS NULL THEN l.external_key END AS location_external_key,
         a.deleted_at_rfc3339 AS asset_deleted_at, rfc3339(r.last_seen) AS asset_last_seen, rfc3339(r.first_at) AS dwell_started_at`;
  const joins = `JOIN assets a ON a.id = r.asset_id AND a.org_id = $1 LEFT JOIN locations l ON l.id = r.location_id AND l.org_id = $1`;
  if (!page) return planned(`${ctes(false)} SELECT ${columns} FROM report_at r ${joins} ORDER BY ${order}`, params.values);
  const bounds = pageBoundsSql(params, page);
  const byLastSeen = (filter.sort && filter.sort.length > 0 ? filter.sort : REPORT_DEFAULT_SORT).every((key) => key.field === 'asset_last_seen');
  // The page's rows by last read, then their asset and location each by its key (OFFSET 0: not
  // joined as a whole table, whatever the plan's estimate of the page).
  const pageJoins = `CROSS JOIN LATERAL (SELECT a.external_key, a.deleted_at_rfc3339 FROM assets a WHERE a.id = r.asset_id AND a.org_id = $1 OFFSET 0) a
    LEFT JOIN LATERAL (SELECT l.external_key, l.deleted_at FROM locations l WHERE l.id = r.location_id AND l.org_id = $1 OFFSET 0) l ON TRUE`;
  const paged = byLastSeen
    ? `SELECT ${columns} FROM (SELECT * FROM report_at r ORDER BY ${order} ${bounds}) r ${pageJoins} ORDER BY ${order}`
    : `SELECT ${columns} FROM report_at r ${joins} ORDER BY ${order} ${bounds}`;
  const text = `${ctes(true)} ${pageSql(paged, 'SELECT count(*)::int FROM report_at')}`;
  return filtered ? planned(text, params.values) : prepared(text, params.values);
}

/**
 * SQL: the observed time of an asset's last read at or before `at`, exactly. A visit that runs on
 * past `at` keeps only its first and last reads; the reads between are in the asset's chunks
 * (docs/design.md "Tracking storage"): the last read by then is in the newest chunk that begins
 * by then, its last one when the chunk ends by then (no decoding), else found by decoding it
 * as far as `at` (tracking_chunk_last_read_at, migration 321). Once per-read detail has aged out (SCAN_RETENTION_DAYS) there is no
 * chunk, and the visit's first read is the last one known. The report at an instant's only use
 * of per-read data: a change to how reads are kept changes this function alone.
 */
function lastReadAtOrBeforeSql(orgId: string, assetId: string, at: string, visitFirstAt: string): string {
  return `coalesce((SELECT CASE WHEN c.last_at <= ${at} THEN c.last_at
                         ELSE tracking_chunk_last_read_at(c.first_at, c.data, ${at}) END
                      FROM scan_read_chunks c WHERE c.org_id = ${orgId} AND c.asset_id = ${assetId} AND c.first_at <= ${at}
                     ORDER BY c.first_at DESC, c.first_seq DESC LIMIT 1), ${visitFirstAt})`;
}

/**
 * The conditions on `a` (assets) of the located assets the report does not show, each reached
 * through a partial index of the few assets that are deleted or have a validity window: deleted
 * ones (unless include_deleted), and those out of their validity window now.
 */
function hiddenAssetConditions(includeDeleted: boolean): string[] {
  const windowed = '(a.valid_from IS NOT NULL OR a.valid_to IS NOT NULL)';
  return includeDeleted
    ? [`a.deleted_at IS NOT NULL AND NOT ${effectiveSql('a')}`, `a.deleted_at IS NULL AND ${windowed} AND NOT ${effectiveSql('a')}`]
    : ['a.deleted_at IS NOT NULL', `a.deleted_at IS NULL AND ${windowed} AND NOT ${effectiveSql('a')}`];
}

/**
 * total_count of the whole report ($1 the org): the located assets the tracking projection counted
 * (asset_location_counts), less those the report does not show (hiddenAssetConditions).
 */
function unfilteredReportCountSql(includeDeleted: boolean): string {
  const hidden = hiddenAssetConditions(includeDeleted).map(
    (condition) => `(SELECT count(*) FROM assets a JOIN asset_locations al ON al.org_id = a.org_id AND al.asset_id = a.id WHERE a.org_id = $1 AND ${condition})`,
  );
  return `SELECT (COALESCE((SELECT located FROM asset_location_counts WHERE org_id = $1), 0) - ${hidden.join(' - ')})::int`;
}

export function readReport(pool: pg.Pool, orgId: number, filter: ReportFilter): Promise<Page> {
  return readPage(pool, reportQuery(orgId, filter));
}

export interface HistoryFilter {
  /** To the microsecond, as observed times are. */
  from?: Instant;
  to?: Instant;
  limit: number;
  offset: number;
  sort?: SortKey;
}

export const HISTORY_SORT_FIELDS = ['event_observed_at'] as const;
const HISTORY_DEFAULT_SORT: SortKey = [{ field: 'event_observed_at', descending: true }];

/**
 * A page of an asset's visits overlapping [from, to], with whether the asset exists (its 404):
 * one statement. A visit's duration runs to the next visit's first read (one index probe each).
 */
export function historyQuery(orgId: number, assetId: number, filter: HistoryFilter): pg.QueryConfig {
  return historyStatement(orgId, assetId, filter, filter);
}

/**
 * An asset's whole history (docs/api.md "Export"): its filters and order, every visit, no count;
 * whether the asset exists (the 404) is isExistingAsset's, in the same transaction.
 */
export function historyExportQuery(orgId: number, assetId: number, filter: Omit<HistoryFilter, 'limit' | 'offset'>): pg.QueryConfig {
  return historyStatement(orgId, assetId, filter, null);
}

/** Whether asset $2 of org $1 exists (not deleted). */
export async function isExistingAsset(db: pg.Pool | pg.ClientBase, orgId: number, assetId: number): Promise<boolean> {
  const result = await db.query<{ asset_exists: boolean }>(prepared('SELECT EXISTS (SELECT 1 FROM assets WHERE org_id = $1 AND id = $2 AND deleted_at IS NULL) AS asset_exists', [orgId, assetId]));
  return result.rows[0]!.asset_exists;
}

function historyStatement(orgId: number, assetId: number, filter: Omit<HistoryFilter, 'limit' | 'offset'>, page: Paging | null): pg.QueryConfig {
  const params = new SqlParams();
  params.add(orgId);
  params.add(assetId);
  const where = ['v.org_id = $1', 'v.asset_id = $2'];
  if (filter.from) where.push(`v.last_at >= ${params.add(instantTimestamp(filter.from))}::timestamptz`);
  if (filter.to) where.push(`v.first_at <= ${params.add(instantTimestamp(filter.to))}::timestamptz`);
  const descending = (filter.sort ?? HISTORY_DEFAULT_SORT)[0]!.descending;
  const order = descending ? 'v.first_at DESC, v.first_seq DESC' : 'v.first_at, v.first_seq';
  const whereSql = where.join(' AND ');
  const rows = `SELECT v.location_id,
         CASE WHEN l.deleted_at IS NULL AND ${effectiveSql('l')} THEN l.external_key END AS location_external_key,
         v.first_at_rfc3339 AS event_observed_at, v.last_at_rfc3339 AS last_observed_at,
         (SELECT (extract(epoch FROM date_trunc('milliseconds', n.first_at) - date_trunc('milliseconds', v.first_at)))::float8
            FROM asset_visits n WHERE n.org_id = v.org_id AND n.asset_id = v.asset_id AND (n.first_at, n.first_seq) > (v.first_at, v.first_seq)
             -- The next visit ends no earlier: skips the partitions of visits that ended before (asset_visits is partitioned by last_at).
             AND n.last_at >= v.last_at
           ORDER BY n.first_at, n.first_seq LIMIT 1) AS duration_seconds
    FROM asset_visits v LEFT JOIN locations l ON l.id = v.location_id AND l.org_id = v.org_id
    WHERE ${whereSql} ORDER BY ${order}`;
  if (!page) return prepared(rows, params.values);
  const paged = `${rows} LIMIT ${params.add(page.limit)} OFFSET ${params.add(page.offset)}`;
  return prepared(
    `${pageSql(paged, `SELECT count(*)::int FROM asset_visits v WHERE ${whereSql}`)},
     EXISTS (SELECT 1 FROM assets WHERE org_id = $1 AND id = $2 AND deleted_at IS NULL) AS asset_exists`,
    params.values,
  );
}

/** The page, or null when the asset is missing, deleted or another org's. */
export async function readHistory(pool: pg.Pool, orgId: number, assetId: number, filter: HistoryFilter): Promise<Page | null> {
  const result = await pool.query<{ data: string; total: number; asset_exists: boolean }>(historyQuery(orgId, assetId, filter));
  const row = result.rows[0]!;
  return row.asset_exists ? { data: new JsonText(row.data), total: row.total } : null;
}

export interface UnknownReadRow {
  cause: string;
  reader_id: string | null;
  capture_point: string | null;
  tag_type: string | null;
  value: string | null;
  count: number;
  first_seen: string;
  last_seen: string;
}

/** Reads that placed nothing, by cause, largest count first (`scans unknown`). */
export async function listUnknownReads(pool: pg.Pool, orgId: number): Promise<UnknownReadRow[]> {
  const result = await pool.query<UnknownReadRow>(
    prepared(
      `SELECT cause, reader_id, capture_point, tag_type, value, count::int AS count, rfc3339(first_seen) AS first_seen, rfc3339(last_seen) AS last_seen
         FROM unknown_reads WHERE org_id = $1 ORDER BY count DESC, cause, reader_id, capture_point, tag_type, value`,
      [orgId],
    ),
  );
  return result.rows;
}

/** A row of the web application's unknown reads: the CLI's, and the existing owner that holds the tag now, if one does. */
export interface UnknownReadWithOwnerRow extends UnknownReadRow {
  attached_to: { owner_type: 'asset' | 'location'; id: number; external_key: string } | null;
}

/**
 * `scans unknown` for the web application (docs/web-app.md "Operator endpoints"): the same rows in
 * the same order, each with the existing tag's owner now holding its value (an unknown tag attached
 * since, whose next read places its asset), so a page can tell what is done from what is left.
 */
export async function listUnknownReadsWithOwners(
  pool: pg.Pool,
  orgId: number,
  page: { limit: number; offset: number },
): Promise<{ rows: UnknownReadWithOwnerRow[]; total: number }> {
  // One statement: the page (its owners looked up for its rows only) and the count.
  const result = await pool.query<UnknownReadWithOwnerRow & { total: number }>(
    prepared(
      `WITH page AS (
         SELECT * FROM unknown_reads WHERE org_id = $1 ORDER BY count DESC, cause, reader_id, capture_point, tag_type, value LIMIT $2 OFFSET $3
       )
       SELECT u.cause, u.reader_id, u.capture_point, u.tag_type, u.value, u.count::int AS count,
              rfc3339(u.first_seen) AS first_seen, rfc3339(u.last_seen) AS last_seen,
              CASE WHEN o.owner_id IS NULL THEN NULL
                   ELSE json_build_object('owner_type', o.owner_type, 'id', o.owner_id, 'external_key', o.external_key) END AS attached_to,
              (SELECT count(*)::int FROM unknown_reads WHERE org_id = $1) AS total
         FROM page u
         LEFT JOIN LATERAL (
           SELECT t.owner_type, t.owner_id, coalesce(a.external_key, l.external_key) AS external_key
             FROM tags t
             LEFT JOIN assets a ON t.owner_type = 'asset' AND a.id = t.owner_id
             LEFT JOIN locations l ON t.owner_type = 'location' AND l.id = t.owner_id
            WHERE u.tag_type IS NOT NULL AND t.org_id = u.org_id AND t.tag_type = u.tag_type AND t.deleted_at IS NULL
              AND upper(t.value) = upper(u.value) AND (t.tag_type = 'rfid' OR t.value = u.value)
            ORDER BY t.id DESC LIMIT 1
         ) o ON true
        ORDER BY u.count DESC, u.cause, u.reader_id, u.capture_point, u.tag_type, u.value`,
      [orgId, page.limit, page.offset],
    ),
  );
  const total = result.rows[0]?.total ?? (page.offset === 0 ? 0 : (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM unknown_reads WHERE org_id = $1', [orgId])).rows[0]!.n);
  return { rows: result.rows.map(({ total: _total, ...row }) => row), total };
}

/** The external keys of assets and locations by id (deleted ones too), each with its org: the live read stream's labels. */
export async function externalKeysById(
  pool: pg.Pool,
  assetIds: readonly number[],
  locationIds: readonly number[],
): Promise<{ assets: Map<number, { orgId: number; externalKey: string }>; locations: Map<number, { orgId: number; externalKey: string }> }> {
  const result = await pool.query<{ kind: 'asset' | 'location'; id: number; org_id: number; external_key: string }>(
    prepared(
      `SELECT 'asset' AS kind, id, org_id, external_key FROM assets WHERE id = ANY($1::int[])
       UNION ALL
       SELECT 'location' AS kind, id, org_id, external_key FROM locations WHERE id = ANY($2::int[])`,
      [assetIds, locationIds],
    ),
  );
  const assets = new Map<number, { orgId: number; externalKey: string }>();
  const locations = new Map<number, { orgId: number; externalKey: string }>();
  for (const row of result.rows) (row.kind === 'asset' ? assets : locations).set(row.id, { orgId: row.org_id, externalKey: row.external_key });
  return { assets, locations };
}

/** One read of an asset as the tracking read model keeps it: observed time (µs since the epoch), log order, location. */
export interface AssetRead {
  us: number;
  seq: number;
  locationId: number;
}

/**
 * An asset's reads observed in [fromUs, toUs], in (observed time, log order): exact, from the
 * chunks (docs/design.md "Tracking storage"), as far back as per-read detail is kept.
 */
export async function assetReads(db: pg.Pool | pg.ClientBase, orgId: number, assetId: number, fromUs: number, toUs: number): Promise<AssetRead[]> {
  const { rows } = await db.query<{ first_us: string; first_seq: string; data: Buffer }>(
    prepared(
      `SELECT (extract(epoch FROM c.first_at) * 1000000)::bigint::text AS first_us, c.first_seq::text AS first_seq, c.data
         FROM scan_read_chunks c
        WHERE c.org_id = $1 AND c.asset_id = $2 AND c.last_at >= ${AT('$3')} AND c.first_at <= ${AT('$4')}
        ORDER BY c.first_at, c.first_seq`,
      [orgId, assetId, fromUs, toUs],
    ),
  );
  return rows.flatMap((r) => decodeChunk(Number(r.first_us), Number(r.first_seq), r.data)).filter((r) => r.us >= fromUs && r.us <= toUs);
}

/** The newest read of an asset observed at or before `atUs` (the last of the chunk that begins at or before it), or null. */
export async function lastReadAtOrBefore(db: pg.Pool | pg.ClientBase, orgId: number, assetId: number, atUs: number): Promise<AssetRead | null> {
  const { rows } = await db.query<{ first_us: string; first_seq: string; data: Buffer }>(
    prepared(
      `SELECT (extract(epoch FROM c.first_at) * 1000000)::bigint::text AS first_us, c.first_seq::text AS first_seq, c.data
         FROM scan_read_chunks c WHERE c.org_id = $1 AND c.asset_id = $2 AND c.first_at <= ${AT('$3')}
        ORDER BY c.first_at DESC, c.first_seq DESC LIMIT 1`,
      [orgId, assetId, atUs],
    ),
  );
  const row = rows[0];
  if (!row) return null;
  return decodeChunk(Number(row.first_us), Number(row.first_seq), row.data).filter((r) => r.us <= atUs).at(-1) ?? null;
}
