import type pg from 'pg';
import type { AssetLocationRef } from '../../shared/domain/read-model-queries.js';
import { planned, prepared } from '../../shared/db/prepared.js';
import { JsonText } from '../../shared/json/text.js';
import { objectJsonSql, pageSql, primaryKeyLookupSql, readPage, rfc3339Sql, viewColumnsSql, type Page } from '../../shared/db/json-sql.js';
import { assetViewSchema } from '../../shared/domain/assets/schema.js';
import { viewsById, type ViewsById } from '../../shared/db/views-by-id.js';
import { SqlParams, containsPattern, pageBoundsSql, effectiveSql, orderBy, scopeSql, type SortKey } from '../../shared/db/list-sql.js';
import { embeddedTagsSql } from '../tags/queries.js';

/**
 * Reads of the asset views from the read model, built as JSON by Postgres. A view or a whole
 * page (rows, location keys, embedded tags and total_count) is one prepared statement.
 */

// The asset view's columns (assetViewSchema). The current location is the tracking projection's
// (asset_locations); its key is joined on read, so a location rename shows at once, and it shows
// for a soft-deleted location too (like parent_external_key).
const VIEW_COLUMNS = viewColumnsSql(assetViewSchema, {
  id: 'a.id',
  external_key: 'a.external_key',
  name: 'a.name',
  description: 'a.description',
  location_id: 'CASE WHEN l.id IS NULL THEN NULL ELSE al.location_id END',
  location_external_key: 'l.external_key',
  is_active: 'a.is_active',
  valid_from: rfc3339Sql('a.valid_from'),
  valid_to: rfc3339Sql('a.valid_to'),
  metadata: 'a.metadata',
  created_at: rfc3339Sql('a.created_at'),
  updated_at: rfc3339Sql('a.updated_at'),
  deleted_at: rfc3339Sql('a.deleted_at'),
  tags: embeddedTagsSql('asset', 'a'),
});
// Each row's current location and that location, one primary-key lookup each per row of `a`
// whatever the planner's statistics (primaryKeyLookupSql): as plain joins, stale statistics on a
// small table made the planner scan all the org's rows of it for every asset of the org.
const CURRENT_LOCATION_OF_ROW = `LEFT JOIN LATERAL (SELECT al.location_id FROM asset_locations al WHERE al.org_id = a.org_id AND al.asset_id = a.id OFFSET 0) al ON TRUE`;
const LOCATION_OF_ROW = primaryKeyLookupSql('LEFT JOIN', 'locations', 'l', 'al.location_id', 'a.org_id', 'l.id, l.org_id, l.external_key');
const FROM = `FROM assets a ${CURRENT_LOCATION_OF_ROW} ${LOCATION_OF_ROW}`;

export const ASSET_SORT_FIELDS = ['external_key', 'name', 'created_at', 'updated_at'] as const;
export const ASSET_DEFAULT_SORT: SortKey = [{ field: 'external_key', descending: false }];
const SORT_COLUMNS: Record<string, string> = {
  external_key: 'a.external_key',
  name: 'a.name',
  created_at: 'a.created_at',
  updated_at: 'a.updated_at',
};

/** Read by id: skips effectiveness, hides soft-deleted rows; another org's id is a miss. */
const viewOf = (id: string, orgId: string) => `SELECT ${VIEW_COLUMNS} ${FROM} WHERE a.id = ${id} AND a.org_id = ${orgId} AND a.deleted_at IS NULL`;
const VIEW_BY_ID = objectJsonSql(viewOf('$1', '$2'));
const viewOfPair = (pair: string) => viewOf(`${pair}.id`, `${pair}.org_id`);
const byId = new WeakMap<pg.Pool, ViewsById>();

/** That read on its own, one statement per read (the bench's baseline for it). */
export function assetViewQuery(orgId: number, assetId: number): pg.QueryConfig {
  return prepared(VIEW_BY_ID, [assetId, orgId]);
}

/** The same read, batched with the other reads by id of this turn of the event loop (ViewsById). */
export function getAssetView(pool: pg.Pool, orgId: number, assetId: number): Promise<JsonText | null> {
  return viewsById(byId, pool, viewOfPair).read(orgId, assetId);
}

/** The scan-data pair as the view shows it (for PATCH accept-if-matches). */
export async function currentAssetLocation(pool: pg.Pool, orgId: number, assetId: number): Promise<AssetLocationRef> {
  const result = await pool.query<{ id: number; external_key: string }>(
    prepared('SELECT l.id, l.external_key FROM asset_locations al JOIN locations l ON l.id = al.location_id AND l.org_id = al.org_id WHERE al.asset_id = $1 AND al.org_id = $2', [
      assetId,
      orgId,
    ]),
  );
  const row = result.rows[0];
  return { id: row?.id ?? null, external_key: row?.external_key ?? null };
}

/** Those of `assetIds` that are existing (not soft-deleted) assets of the org (an alert rule's assets). */
export async function findExistingAssetIds(pool: pg.Pool, orgId: number, assetIds: readonly number[]): Promise<number[]> {
  if (assetIds.length === 0) return [];
  const result = await pool.query<{ id: number }>(
    prepared('SELECT id FROM assets WHERE org_id = $1 AND id = ANY($2::int[]) AND deleted_at IS NULL', [orgId, [...assetIds]]),
  );
  return result.rows.map((r) => r.id);
}

export interface AssetListFilter {
  external_key?: string[];
  location_id?: number[];
  location_external_key?: string[];
  is_active?: boolean;
  include_deleted?: boolean;
  q?: string;
  limit: number;
  offset: number;
  sort?: SortKey;
}

export function listAssetViews(pool: pg.Pool, orgId: number, filter: AssetListFilter): Promise<Page> {
  return readPage(pool, assetListQuery(orgId, filter));
}

/** A page of views and its total_count, in one statement. */
export function assetListQuery(orgId: number, filter: AssetListFilter): pg.QueryConfig {
  const { params, whereSql, order, statement } = assetSelection(orgId, filter);
  const bounds = pageBoundsSql(params, filter);
  // The page's rows are chosen first, from assets alone; only they are joined to their
  // locations (and tags), so a page costs the same however many locations the org has.
  return statement(
    pageSql(
      `SELECT ${VIEW_COLUMNS}
         FROM (SELECT a.* FROM assets a WHERE ${whereSql} ORDER BY ${order} ${bounds}) a ${CURRENT_LOCATION_OF_ROW} ${LOCATION_OF_ROW}
        ORDER BY ${order}`,
      countSql(filter, whereSql),
    ),
    params.values,
  );
}

/** The whole list's views, one row each (docs/api.md "Export"): the list's filters and sort, no page. */
export function assetExportQuery(orgId: number, filter: Omit<AssetListFilter, 'limit' | 'offset'>): pg.QueryConfig {
  const { params, whereSql, order } = assetSelection(orgId, filter);
  return planned(`SELECT ${VIEW_COLUMNS} ${FROM} WHERE ${whereSql} ORDER BY ${order}`, params.values);
}

/** The WHERE and ORDER BY of the list for its filters (bind values in `params`), and how to send it. */
function assetSelection(orgId: number, filter: Omit<AssetListFilter, 'limit' | 'offset'>) {
  const params = new SqlParams();
  const where = [`a.org_id = ${params.add(orgId)}`, scopeSql('a', filter.include_deleted)];
  if (filter.external_key) where.push(`a.external_key = ANY(${params.add(filter.external_key)}::text[])`);
  if (filter.location_id) {
    where.push(`a.id IN (SELECT x.asset_id FROM asset_locations x WHERE x.org_id = ${params.add(orgId)} AND x.location_id = ANY(${params.add(filter.location_id)}::int[]))`);
  }
  if (filter.location_external_key) {
    // The location's key as the view shows it: whatever the location's lifecycle state.
    const org = params.add(orgId);
    where.push(`a.id IN (SELECT x.asset_id FROM asset_locations x WHERE x.org_id = ${org} AND x.location_id IN
                 (SELECT f.id FROM locations f WHERE f.org_id = ${org} AND f.external_key = ANY(${params.add(filter.location_external_key)}::text[])))`);
  }
  if (filter.is_active !== undefined) where.push(`a.is_active = ${params.add(filter.is_active)}`);
  if (filter.q !== undefined && filter.q !== '') {
    // One branch per searched column, so each can use its trigram index (212_asset_search.sql).
    const p = params.add(containsPattern(filter.q));
    const org = params.add(orgId);
    where.push(`a.id IN (
        SELECT s.id FROM assets s WHERE s.org_id = ${org} AND s.name ILIKE ${p} ESCAPE '\\'
        UNION SELECT s.id FROM assets s WHERE s.org_id = ${org} AND s.external_key ILIKE ${p} ESCAPE '\\'
        UNION SELECT s.id FROM assets s WHERE s.org_id = ${org} AND s.description ILIKE ${p} ESCAPE '\\'
        UNION SELECT t.owner_id FROM tags t
               WHERE t.org_id = ${org} AND t.owner_type = 'asset' AND t.deleted_at IS NULL AND t.is_active
                 AND ${effectiveSql('t')} AND t.value ILIKE ${p} ESCAPE '\\')`);
  }
  const whereSql = where.join(' AND ');
  const order = orderBy(filter.sort, ASSET_DEFAULT_SORT, SORT_COLUMNS, 'a.id');
  // A search or a location filter is planned for its values: how many rows match decides between
  // walking the sort index and collecting the matches first.
  const statement = filter.q || filter.location_id || filter.location_external_key ? planned : prepared;
  return { params, whereSql, order, statement };
}

/**
 * total_count. The default scope without filters (is_active aside) is the projected count of
 * existing rows without a validity window plus a count of the existing windowed rows that are effective
 * now (partial index assets_org_windowed), instead of a visit to every row of the org.
 */
function countSql(filter: Omit<AssetListFilter, 'limit' | 'offset'>, whereSql: string): string {
  const unfiltered = !filter.include_deleted && !filter.external_key && !filter.location_id && !filter.location_external_key && !filter.q;
  if (unfiltered) {
    const counter =
      filter.is_active === undefined ? 'live_unbounded' : filter.is_active ? 'live_unbounded_active' : 'live_unbounded - live_unbounded_active';
    const activeSql = filter.is_active === undefined ? '' : `AND a.is_active = ${filter.is_active ? 'TRUE' : 'FALSE'}`;
    return `SELECT COALESCE((SELECT ${counter} FROM asset_counts WHERE org_id = $1), 0)
                 + (SELECT count(*)::int FROM assets a
                     WHERE a.org_id = $1 AND a.deleted_at IS NULL AND (a.valid_from IS NOT NULL OR a.valid_to IS NOT NULL)
                       AND ${effectiveSql('a')} ${activeSql})`;
  }
  return `SELECT count(*)::int FROM assets a WHERE ${whereSql}`;
}
