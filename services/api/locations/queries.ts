import type pg from 'pg';
import { formatTimestamp } from '../master-data/fields.js';
import { loadEmbeddedTags } from '../tags/store.js';
import type { TagView } from '../tags/schema.js';
import { SqlParams, containsPattern, effectiveSql, orderBy, scopeSql, type SortKey } from '../master-data/lists.js';

/**
 * Read-model queries of the location slice. Every one is scoped to the caller's org, so another
 * org's id behaves exactly like a missing one, and every one is backed by an index of
 * migrations/read-model/200_locations.sql.
 */

export interface LocationView {
  id: number;
  external_key: string;
  name: string;
  description: string | null;
  parent_id: number | null;
  parent_external_key: string | null;
  is_active: boolean;
  valid_from: string | null;
  valid_to: string | null;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
  tags: TagView[];
}

interface LocationRow {
  id: number;
  external_key: string;
  name: string;
  description: string | null;
  parent_id: number | null;
  parent_external_key: string | null;
  is_active: boolean;
  valid_from: Date | null;
  valid_to: Date | null;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

// The parent's key is joined on read (so a parent rename shows at once), whatever the parent's
// lifecycle state: it is projected even when the parent is soft-deleted.
const VIEW_SELECT = `
  SELECT l.id, l.external_key, l.name, l.description, l.parent_id, p.external_key AS parent_external_key,
         l.is_active, l.valid_from, l.valid_to, l.created_at, l.updated_at, l.deleted_at
    FROM locations l
    LEFT JOIN locations p ON p.id = l.parent_id AND p.org_id = l.org_id`;

type Queryable = pg.Pool | pg.PoolClient;

async function toViews(db: Queryable, orgId: number, rows: LocationRow[]): Promise<LocationView[]> {
  const tags = await loadEmbeddedTags(db, orgId, 'location', rows.map((r) => r.id));
  return rows.map((r) => ({
    id: r.id,
    external_key: r.external_key,
    name: r.name,
    description: r.description,
    parent_id: r.parent_id,
    parent_external_key: r.parent_id === null ? null : r.parent_external_key,
    is_active: r.is_active,
    valid_from: formatTimestamp(r.valid_from),
    valid_to: formatTimestamp(r.valid_to),
    created_at: formatTimestamp(r.created_at)!,
    updated_at: formatTimestamp(r.updated_at)!,
    deleted_at: formatTimestamp(r.deleted_at),
    tags: tags.get(r.id) ?? [],
  }));
}

/** Read by id: skips effectiveness, hides soft-deleted rows. */
export async function findLocationView(db: Queryable, orgId: number, id: number): Promise<LocationView | null> {
  const result = await db.query<LocationRow>(`${VIEW_SELECT} WHERE l.org_id = $1 AND l.id = $2 AND l.deleted_at IS NULL`, [orgId, id]);
  const [view] = await toViews(db, orgId, result.rows);
  return view ?? null;
}

/** A live location of the org as a tree node (its ancestor ids, root first). */
export interface LiveNode {
  id: number;
  externalKey: string;
  ancestors: number[];
}

export async function findLiveNode(db: Queryable, orgId: number, by: { id: number } | { externalKey: string }): Promise<LiveNode | null> {
  const result =
    'id' in by
      ? await db.query<{ id: number; external_key: string; ancestors: number[] }>(
          'SELECT id, external_key, ancestors FROM locations WHERE org_id = $1 AND id = $2 AND deleted_at IS NULL',
          [orgId, by.id],
        )
      : await db.query<{ id: number; external_key: string; ancestors: number[] }>(
          'SELECT id, external_key, ancestors FROM locations WHERE org_id = $1 AND external_key = $2 AND deleted_at IS NULL ORDER BY id LIMIT 1',
          [orgId, by.externalKey],
        );
  const row = result.rows[0];
  return row ? { id: row.id, externalKey: row.external_key, ancestors: row.ancestors } : null;
}

/** Live descendants (any depth), whatever their effectiveness: what blocks a delete and what a rename reports. */
export async function countLiveDescendants(db: Queryable, orgId: number, id: number): Promise<number> {
  const result = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM locations WHERE ancestors @> ARRAY[$2]::integer[] AND org_id = $1 AND deleted_at IS NULL',
    [orgId, id],
  );
  return result.rows[0]!.n;
}

/** Live assets whose current (scan-derived) location is this one. */
export async function countLiveAssetsAt(db: Queryable, orgId: number, id: number): Promise<number> {
  const result = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM assets WHERE org_id = $1 AND location_id = $2 AND deleted_at IS NULL',
    [orgId, id],
  );
  return result.rows[0]!.n;
}

export interface Page<T> {
  rows: T[];
  total: number;
}

export interface LocationFilters {
  externalKeys?: string[];
  id?: number;
  parentId?: number;
  parentExternalKey?: string;
  isActive?: boolean;
  includeDeleted?: boolean;
  q?: string;
  sort?: SortKey;
  limit: number;
  offset: number;
}

export const LOCATION_SORT_FIELDS = ['external_key', 'name', 'created_at', 'updated_at'] as const;
const SORT_COLUMNS: Record<string, string> = {
  external_key: 'l.external_key',
  name: 'l.name',
  created_at: 'l.created_at',
  updated_at: 'l.updated_at',
};
const DEFAULT_SORT: SortKey = [{ field: 'external_key', descending: false }];

export async function listLocations(db: Queryable, orgId: number, f: LocationFilters): Promise<Page<LocationView>> {
  const p = new SqlParams();
  const where = [`l.org_id = ${p.add(orgId)}`, scopeSql('l', f.includeDeleted)];
  if (f.externalKeys) where.push(`l.external_key = ANY(${p.add(f.externalKeys)}::text[])`);
  if (f.id !== undefined) where.push(`l.id = ${p.add(f.id)}`);
  if (f.parentId !== undefined) where.push(`l.parent_id = ${p.add(f.parentId)}`);
  if (f.parentExternalKey !== undefined) where.push(`p.external_key = ${p.add(f.parentExternalKey)}`);
  if (f.isActive !== undefined) where.push(`l.is_active = ${p.add(f.isActive)}`);
  if (f.q !== undefined && f.q !== '') {
    const pattern = p.add(containsPattern(f.q));
    where.push(`(l.name ILIKE ${pattern} ESCAPE '\\' OR l.external_key ILIKE ${pattern} ESCAPE '\\'
      OR l.description ILIKE ${pattern} ESCAPE '\\'
      OR EXISTS (SELECT 1 FROM tags t WHERE t.org_id = l.org_id AND t.owner_type = 'location' AND t.owner_id = l.id
                   AND t.deleted_at IS NULL AND t.is_active AND ${effectiveSql('t')} AND t.value ILIKE ${pattern} ESCAPE '\\'))`);
  }
  const whereSql = where.join(' AND ');
  const count = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM locations l LEFT JOIN locations p ON p.id = l.parent_id AND p.org_id = l.org_id WHERE ${whereSql}`,
    p.values,
  );
  const order = orderBy(f.sort, DEFAULT_SORT, SORT_COLUMNS, 'l.id');
  const rows = await db.query<LocationRow>(
    `${VIEW_SELECT} WHERE ${whereSql} ORDER BY ${order} LIMIT ${p.add(f.limit)} OFFSET ${p.add(f.offset)}`,
    p.values,
  );
  return { rows: await toViews(db, orgId, rows.rows), total: count.rows[0]!.n };
}

/**
 * Nearest parent first, up to the root: the node's own path joined on the primary key. Every
 * ancestor of a live row is live (delete takes leaves only); the effectiveness predicate is not
 * applied, because dropping a link would misstate the path to the root.
 */
export async function listAncestors(db: Queryable, orgId: number, id: number, limit: number, offset: number): Promise<Page<LocationView>> {
  const result = await db.query<LocationRow & { total: number }>(
    `SELECT l.id, l.external_key, l.name, l.description, l.parent_id, p.external_key AS parent_external_key,
            l.is_active, l.valid_from, l.valid_to, l.created_at, l.updated_at, l.deleted_at,
            cardinality(n.ancestors) AS total
       FROM locations n
      CROSS JOIN LATERAL unnest(n.ancestors) WITH ORDINALITY AS a(id, depth)
       JOIN locations l ON l.id = a.id AND l.org_id = n.org_id
       LEFT JOIN locations p ON p.id = l.parent_id AND p.org_id = l.org_id
      WHERE n.org_id = $1 AND n.id = $2
      ORDER BY a.depth DESC
      LIMIT $3 OFFSET $4`,
    [orgId, id, limit, offset],
  );
  let total = result.rows[0]?.total;
  if (total === undefined) {
    const n = await db.query<{ total: number }>('SELECT cardinality(ancestors) AS total FROM locations WHERE org_id = $1 AND id = $2', [orgId, id]);
    total = n.rows[0]?.total ?? 0;
  }
  return { rows: await toViews(db, orgId, result.rows), total };
}

async function pageOf(db: Queryable, orgId: number, condition: string, values: unknown[], limit: number, offset: number): Promise<Page<LocationView>> {
  const where = `l.org_id = $1 AND ${condition} AND ${scopeSql('l', false)}`;
  const count = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM locations l WHERE ${where}`, [orgId, ...values]);
  const rows = await db.query<LocationRow>(
    `${VIEW_SELECT} WHERE ${where} ORDER BY l.external_key, l.id LIMIT $${values.length + 2} OFFSET $${values.length + 3}`,
    [orgId, ...values, limit, offset],
  );
  return { rows: await toViews(db, orgId, rows.rows), total: count.rows[0]!.n };
}

/** Immediate children in the default list scope, by external_key then id. */
export function listChildren(db: Queryable, orgId: number, id: number, limit: number, offset: number): Promise<Page<LocationView>> {
  return pageOf(db, orgId, 'l.parent_id = $2', [id], limit, offset);
}

/** The whole subtree without the node, in the default list scope, by external_key then id. */
export function listDescendants(db: Queryable, orgId: number, id: number, limit: number, offset: number): Promise<Page<LocationView>> {
  return pageOf(db, orgId, 'l.ancestors @> ARRAY[$2]::integer[]', [id], limit, offset);
}
