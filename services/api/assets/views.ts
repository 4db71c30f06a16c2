import type pg from 'pg';
import { formatTimestamp } from '../master-data/fields.js';
import { SqlParams, containsPattern, effectiveSql, orderBy, scopeSql, type SortKey } from '../master-data/lists.js';
import { loadEmbeddedTags } from '../tags/store.js';
import type { AssetView } from './schema.js';

/**
 * Reads of the asset views from the read model. A page of assets is two indexed queries: the
 * rows (with the location key joined, recomputed on read) and the embedded tags of all of them.
 */

interface AssetRow {
  id: number;
  external_key: string;
  name: string;
  description: string | null;
  location_id: number | null;
  location_external_key: string | null;
  is_active: boolean;
  valid_from: Date | null;
  valid_to: Date | null;
  metadata: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

const VIEW_SELECT = `SELECT a.id, a.external_key, a.name, a.description,
       CASE WHEN l.id IS NULL THEN NULL ELSE a.location_id END AS location_id,
       l.external_key AS location_external_key,
       a.is_active, a.valid_from, a.valid_to, a.metadata, a.created_at, a.updated_at, a.deleted_at
  FROM assets a
  LEFT JOIN locations l ON l.id = a.location_id AND l.org_id = a.org_id`;

export const ASSET_SORT_FIELDS = ['external_key', 'name', 'created_at', 'updated_at'] as const;
export const ASSET_DEFAULT_SORT: SortKey = [{ field: 'external_key', descending: false }];
const SORT_COLUMNS: Record<string, string> = {
  external_key: 'a.external_key',
  name: 'a.name',
  created_at: 'a.created_at',
  updated_at: 'a.updated_at',
};

async function toViews(pool: pg.Pool, orgId: number, rows: AssetRow[]): Promise<AssetView[]> {
  const tags = await loadEmbeddedTags(pool, orgId, 'asset', rows.map((r) => r.id));
  return rows.map((r) => ({
    id: r.id,
    external_key: r.external_key,
    name: r.name,
    description: r.description,
    location_id: r.location_id,
    location_external_key: r.location_external_key,
    is_active: r.is_active,
    valid_from: formatTimestamp(r.valid_from),
    valid_to: formatTimestamp(r.valid_to),
    metadata: r.metadata,
    created_at: formatTimestamp(r.created_at)!,
    updated_at: formatTimestamp(r.updated_at)!,
    deleted_at: formatTimestamp(r.deleted_at),
    tags: tags.get(r.id) ?? [],
  }));
}

/** Read by id: skips effectiveness, hides soft-deleted rows; another org's id is a miss. */
export async function getAssetView(pool: pg.Pool, orgId: number, assetId: number): Promise<AssetView | null> {
  const result = await pool.query<AssetRow>(`${VIEW_SELECT} WHERE a.id = $1 AND a.org_id = $2 AND a.deleted_at IS NULL`, [assetId, orgId]);
  if (result.rows.length === 0) return null;
  return (await toViews(pool, orgId, result.rows))[0]!;
}

/** The scan-data pair as the view shows it (for PATCH accept-if-matches). */
export async function currentAssetLocation(pool: pg.Pool, orgId: number, assetId: number): Promise<{ id: number | null; external_key: string | null }> {
  const result = await pool.query<AssetRow>(`${VIEW_SELECT} WHERE a.id = $1 AND a.org_id = $2`, [assetId, orgId]);
  const row = result.rows[0];
  return { id: row?.location_id ?? null, external_key: row?.location_external_key ?? null };
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

export async function listAssetViews(pool: pg.Pool, orgId: number, filter: AssetListFilter): Promise<{ data: AssetView[]; total: number }> {
  const params = new SqlParams();
  const where = [`a.org_id = ${params.add(orgId)}`, scopeSql('a', filter.include_deleted)];
  if (filter.external_key) where.push(`a.external_key = ANY(${params.add(filter.external_key)}::text[])`);
  if (filter.location_id) where.push(`a.location_id = ANY(${params.add(filter.location_id)}::int[])`);
  if (filter.location_external_key) where.push(`l.external_key = ANY(${params.add(filter.location_external_key)}::text[])`);
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
  const limit = params.add(filter.limit);
  const offset = params.add(filter.offset);
  // The count and the page run side by side: the page stops early on the sort index, the
  // count is the only part that may touch every matching row.
  const [page, total] = await Promise.all([
    pool.query<AssetRow>(`${VIEW_SELECT} WHERE ${whereSql} ORDER BY ${order} LIMIT ${limit} OFFSET ${offset}`, params.values),
    countAssets(pool, orgId, filter, whereSql, params.values.slice(0, params.values.length - 2)),
  ]);
  return { data: await toViews(pool, orgId, page.rows), total };
}

/**
 * total_count. The default scope without filters (is_active aside) is the projected count of
 * live rows without a validity window plus a count of the live windowed rows that are effective
 * now (partial index assets_org_windowed), instead of a visit to every row of the org.
 */
async function countAssets(pool: pg.Pool, orgId: number, filter: AssetListFilter, whereSql: string, values: unknown[]): Promise<number> {
  const unfiltered = !filter.include_deleted && !filter.external_key && !filter.location_id && !filter.location_external_key && !filter.q;
  if (unfiltered) {
    const counter =
      filter.is_active === undefined ? 'live_unbounded' : filter.is_active ? 'live_unbounded_active' : 'live_unbounded - live_unbounded_active';
    const activeSql = filter.is_active === undefined ? '' : `AND a.is_active = ${filter.is_active ? 'TRUE' : 'FALSE'}`;
    const result = await pool.query<{ total: number }>(
      `SELECT COALESCE((SELECT ${counter} FROM asset_counts WHERE org_id = $1), 0)
            + (SELECT count(*)::int FROM assets a
                WHERE a.org_id = $1 AND a.deleted_at IS NULL AND (a.valid_from IS NOT NULL OR a.valid_to IS NOT NULL)
                  AND ${effectiveSql('a')} ${activeSql}) AS total`,
      [orgId],
    );
    return Number(result.rows[0]!.total);
  }
  const join = filter.location_external_key ? 'LEFT JOIN locations l ON l.id = a.location_id AND l.org_id = a.org_id' : '';
  const result = await pool.query<{ total: number }>(`SELECT count(*)::int AS total FROM assets a ${join} WHERE ${whereSql}`, values);
  return result.rows[0]!.total;
}
