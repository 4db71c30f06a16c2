import type pg from 'pg';
import type { ExistingNode } from '../../shared/domain/read-model-queries.js';
import { planned, prepared } from '../../shared/db/prepared.js';
import { JsonText } from '../../shared/json/text.js';
import { objectJsonSql, pageSql, primaryKeyLookupSql, readPage, rfc3339Sql, viewColumnsSql, type Page } from '../../shared/db/json-sql.js';
import { viewsById, type ViewsById } from '../../shared/db/views-by-id.js';
import { SqlParams, containsPattern, pageBoundsSql, effectiveSql, orderBy, scopeSql, type SortKey } from '../../shared/db/list-sql.js';
import { locationViewSchema } from '../../shared/domain/locations/schema.js';
import { embeddedTagsSql } from '../tags/queries.js';

/**
 * Read-model queries of the location slice. Every one is scoped to the caller's org, so another
 * org's id behaves exactly like a missing one, and every one is backed by an index of
 * migrations/read-model/200_locations.sql. Views are built as JSON by Postgres: a view or a page
 * with its total is one prepared statement.
 */

// The location view's columns (locationViewSchema). The parent's key is joined on read (so a
// parent rename shows at once), whatever the parent's lifecycle state.
const VIEW_COLUMNS = viewColumnsSql(locationViewSchema, {
  id: 'l.id',
  external_key: 'l.external_key',
  name: 'l.name',
  description: 'l.description',
  parent_id: 'l.parent_id',
  parent_external_key: 'CASE WHEN l.parent_id IS NULL THEN NULL ELSE p.external_key END',
  is_active: 'l.is_active',
  valid_from: rfc3339Sql('l.valid_from'),
  valid_to: rfc3339Sql('l.valid_to'),
  created_at: rfc3339Sql('l.created_at'),
  updated_at: rfc3339Sql('l.updated_at'),
  deleted_at: rfc3339Sql('l.deleted_at'),
  tags: embeddedTagsSql('location', 'l'),
});
// Each row's parent, one primary-key lookup per row of `l` whatever the planner's statistics
// (primaryKeyLookupSql), never a scan of the org's locations per row.
const PARENT_OF_ROW = primaryKeyLookupSql('LEFT JOIN', 'locations', 'p', 'l.parent_id', 'l.org_id', 'p.org_id, p.external_key');
const FROM = `FROM locations l ${PARENT_OF_ROW}`;

type Queryable = pg.Pool | pg.PoolClient;

/** Read by id: skips effectiveness, hides soft-deleted rows. */
const byId = new WeakMap<pg.Pool, ViewsById>();
const viewOf = (id: string, orgId: string) => `SELECT ${VIEW_COLUMNS} ${FROM} WHERE l.id = ${id} AND l.org_id = ${orgId} AND l.deleted_at IS NULL`;
const viewOfPair = (pair: string) => viewOf(`${pair}.id`, `${pair}.org_id`);

const VIEW_BY_ID = objectJsonSql(viewOf('$1', '$2'));

/** That read on its own, one statement per read (the commands bench's baseline answers with it). */
export function locationViewQuery(orgId: number, id: number): pg.QueryConfig {
  return prepared(VIEW_BY_ID, [id, orgId]);
}

/** Batched with the other reads by id of this turn of the event loop (ViewsById). */
export function findLocationView(pool: pg.Pool, orgId: number, id: number): Promise<JsonText | null> {
  return viewsById(byId, pool, viewOfPair).read(orgId, id);
}

export async function findExistingNode(db: Queryable, orgId: number, by: { id: number } | { externalKey: string }): Promise<ExistingNode | null> {
  const query =
    'id' in by
      ? prepared('SELECT id, external_key, ancestors FROM locations WHERE org_id = $1 AND id = $2 AND deleted_at IS NULL', [orgId, by.id])
      : prepared(
          'SELECT id, external_key, ancestors FROM locations WHERE org_id = $1 AND external_key = $2 AND deleted_at IS NULL ORDER BY id LIMIT 1',
          [orgId, by.externalKey],
        );
  const result = await db.query<{ id: number; external_key: string; ancestors: number[] }>(query);
  const row = result.rows[0];
  return row ? { id: row.id, externalKey: row.external_key, ancestors: row.ancestors } : null;
}

/** Existing descendants (any depth), whatever their effectiveness: what blocks a delete and what a rename reports. */
export async function countExistingDescendants(db: Queryable, orgId: number, id: number): Promise<number> {
  const result = await db.query<{ n: number }>(
    prepared(
      'SELECT count(*)::int AS n FROM locations WHERE ancestors @> ARRAY[$2]::integer[] AND org_id = $1 AND deleted_at IS NULL',
      [orgId, id],
    ),
  );
  return result.rows[0]!.n;
}

/** Existing assets whose current (scan-derived) location is this one. */
export async function countExistingAssetsAt(db: Queryable, orgId: number, id: number): Promise<number> {
  const result = await db.query<{ n: number }>(
    prepared(
      `SELECT count(*)::int AS n FROM asset_locations al JOIN assets a ON a.id = al.asset_id AND a.org_id = al.org_id
        WHERE al.org_id = $1 AND al.location_id = $2 AND a.deleted_at IS NULL`,
      [orgId, id],
    ),
  );
  return result.rows[0]!.n;
}

/**
 * A page of the tree around node $2 of org $1 (ancestors, children, descendants), with whether
 * that node exists: one statement answers both the 404 and the page.
 */
function treePageSql(rowsSql: string, countSql: string): string {
  return `${pageSql(rowsSql, countSql)},
          EXISTS (SELECT 1 FROM locations WHERE org_id = $1 AND id = $2 AND deleted_at IS NULL) AS node_exists`;
}

/** The page, or null when the node is missing, deleted or another org's. */
async function readTreePage(db: Queryable, query: pg.QueryConfig): Promise<Page | null> {
  const result = await db.query<{ data: string; total: number; node_exists: boolean }>(query);
  const row = result.rows[0]!;
  return row.node_exists ? { data: new JsonText(row.data), total: row.total } : null;
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

export function listLocations(db: Queryable, orgId: number, f: LocationFilters): Promise<Page> {
  return readPage(db, locationListQuery(orgId, f));
}

/**
 * A page of views and its total_count, in one statement. The page's rows are chosen first, from
 * their own rows alone; only they are joined to their parents (and tags), so a page costs the
 * same however many locations the org has.
 */
export function locationListQuery(orgId: number, f: LocationFilters): pg.QueryConfig {
  const { p, whereSql, order, statement } = locationSelection(orgId, f);
  const rowsSql = `SELECT ${VIEW_COLUMNS}
                     FROM (SELECT l.* FROM locations l WHERE ${whereSql} ORDER BY ${order} ${pageBoundsSql(p, f)}) l ${PARENT_OF_ROW}
                    ORDER BY ${order}`;
  return statement(pageSql(rowsSql, `SELECT count(*)::int FROM locations l WHERE ${whereSql}`), p.values);
}

/** The whole list's views, one row each (docs/api.md "Export"): the list's filters and sort, no page. */
export function locationExportQuery(orgId: number, f: Omit<LocationFilters, 'limit' | 'offset'>): pg.QueryConfig {
  const { p, whereSql, order } = locationSelection(orgId, f);
  return planned(`SELECT ${VIEW_COLUMNS} ${FROM} WHERE ${whereSql} ORDER BY ${order}`, p.values);
}

/** The WHERE and ORDER BY of the list for its filters (bind values in `p`), and how to send it. */
function locationSelection(orgId: number, f: Omit<LocationFilters, 'limit' | 'offset'>) {
  const p = new SqlParams();
  const where = [`l.org_id = ${p.add(orgId)}`, scopeSql('l', f.includeDeleted)];
  if (f.externalKeys) where.push(`l.external_key = ANY(${p.add(f.externalKeys)}::text[])`);
  if (f.id !== undefined) where.push(`l.id = ${p.add(f.id)}`);
  if (f.parentId !== undefined) where.push(`l.parent_id = ${p.add(f.parentId)}`);
  if (f.parentExternalKey !== undefined) {
    // The parent's key as the view shows it: whatever the parent's lifecycle state.
    where.push(`l.parent_id IN (SELECT f.id FROM locations f WHERE f.org_id = ${p.add(orgId)} AND f.external_key = ${p.add(f.parentExternalKey)})`);
  }
  if (f.isActive !== undefined) where.push(`l.is_active = ${p.add(f.isActive)}`);
  if (f.q !== undefined && f.q !== '') {
    const pattern = p.add(containsPattern(f.q));
    where.push(`(l.name ILIKE ${pattern} ESCAPE '\\' OR l.external_key ILIKE ${pattern} ESCAPE '\\'
      OR l.description ILIKE ${pattern} ESCAPE '\\'
      OR EXISTS (SELECT 1 FROM tags t WHERE t.org_id = l.org_id AND t.owner_type = 'location' AND t.owner_id = l.id
                   AND t.deleted_at IS NULL AND t.is_active AND ${effectiveSql('t')} AND t.value ILIKE ${pattern} ESCAPE '\\'))`);
  }
  const whereSql = where.join(' AND ');
  const order = orderBy(f.sort, DEFAULT_SORT, SORT_COLUMNS, 'l.id');
  // A search or a parent named by key is planned for its values (see `planned`).
  const statement = (f.q !== undefined && f.q !== '') || f.parentExternalKey !== undefined ? planned : prepared;
  return { p, whereSql, order, statement };
}

/**
 * Nearest parent first, up to the root: the node's own path joined on the primary key. Every
 * ancestor of an existing row exists (delete takes leaves only); the effectiveness predicate is not
 * applied, because dropping a link would misstate the path to the root.
 */
export function listAncestors(db: Queryable, orgId: number, id: number, limit: number, offset: number): Promise<Page | null> {
  return readTreePage(db, ancestorsQuery(orgId, id, limit, offset));
}

// The page of the node's path first, then each of its rows by primary key (primaryKeyLookupSql).
const ANCESTORS_ROWS = `SELECT ${VIEW_COLUMNS}
     FROM (SELECT a.id, a.depth FROM locations n
            CROSS JOIN LATERAL unnest(n.ancestors) WITH ORDINALITY AS a(id, depth)
            WHERE n.org_id = $1 AND n.id = $2
            ORDER BY a.depth DESC LIMIT $3 OFFSET $4) page
     ${primaryKeyLookupSql('JOIN', 'locations', 'l', 'page.id', '$1', 'l.*')} ${PARENT_OF_ROW}
    ORDER BY page.depth DESC`;
const ANCESTORS = treePageSql(ANCESTORS_ROWS, 'SELECT COALESCE((SELECT cardinality(ancestors) FROM locations WHERE org_id = $1 AND id = $2), 0)');

export function ancestorsQuery(orgId: number, id: number, limit: number, offset: number): pg.QueryConfig {
  return prepared(ANCESTORS, [orgId, id, limit, offset]);
}

// A LIMIT or OFFSET of NULL takes every row: the tree's exports run the pages' own statements with both null.
const ALL_ROWS = { limit: null, offset: null };

/** Immediate children in the default list scope, by external_key then id. */
export function listChildren(db: Queryable, orgId: number, id: number, limit: number, offset: number): Promise<Page | null> {
  return readTreePage(db, childrenQuery(orgId, id, limit, offset));
}

const CHILDREN_WHERE = `l.org_id = $1 AND l.parent_id = $2 AND ${scopeSql('l', false)}`;
// The page's rows first (children_key index order), then their parent by primary key.
const CHILDREN_ROWS = `SELECT ${VIEW_COLUMNS}
     FROM (SELECT l.* FROM locations l WHERE ${CHILDREN_WHERE} ORDER BY l.external_key, l.id LIMIT $3 OFFSET $4) l ${PARENT_OF_ROW}
    ORDER BY l.external_key, l.id`;
const CHILDREN = treePageSql(CHILDREN_ROWS, `SELECT count(*)::int FROM locations l WHERE ${CHILDREN_WHERE}`);

export function childrenQuery(orgId: number, id: number, limit: number, offset: number): pg.QueryConfig {
  return prepared(CHILDREN, [orgId, id, limit, offset]);
}

/**
 * The whole subtree without the node, in the default list scope, by external_key then id. The
 * count is an index-only range scan over the existing unwindowed paths (201_location_subtree_counts.sql)
 * plus the windowed rows effective now.
 */
export function listDescendants(db: Queryable, orgId: number, id: number, limit: number, offset: number): Promise<Page | null> {
  return readTreePage(db, descendantsQuery(orgId, id, limit, offset));
}

// The page's ids come from location_descendant_ids (202_location_descendant_ids.sql), which plans
// only that selection for its values; the views are built around them in the page's order.
const DESCENDANTS_ROWS = `SELECT ${VIEW_COLUMNS}
     FROM unnest(location_descendant_ids($1, $2, $3, $4)) WITH ORDINALITY AS page(id, n)
     ${primaryKeyLookupSql('JOIN', 'locations', 'l', 'page.id', '$1', 'l.*')} ${PARENT_OF_ROW}
    ORDER BY page.n`;
const DESCENDANTS = treePageSql(
  DESCENDANTS_ROWS,
  `SELECT COALESCE((SELECT count(*)::int FROM locations n JOIN locations d ON d.org_id = n.org_id
                      AND d.ancestors >= n.ancestors || n.id AND d.ancestors < n.ancestors || (n.id + 1)
                    WHERE n.org_id = $1 AND n.id = $2
                      AND d.deleted_at IS NULL AND d.valid_from IS NULL AND d.valid_to IS NULL), 0)
         + (SELECT count(*)::int FROM locations d
             WHERE d.org_id = $1 AND d.ancestors @> ARRAY[$2]::integer[] AND d.deleted_at IS NULL
               AND (d.valid_from IS NOT NULL OR d.valid_to IS NOT NULL) AND ${effectiveSql('d')})`,
);

export function descendantsQuery(orgId: number, id: number, limit: number, offset: number): pg.QueryConfig {
  return prepared(DESCENDANTS, [orgId, id, limit, offset]);
}

/** Whether node $2 of org $1 exists (not deleted): the tree's 404, asked in the export's transaction. */
export async function isExistingNode(db: Queryable, orgId: number, id: number): Promise<boolean> {
  const result = await db.query<{ node_exists: boolean }>(prepared('SELECT EXISTS (SELECT 1 FROM locations WHERE org_id = $1 AND id = $2 AND deleted_at IS NULL) AS node_exists', [orgId, id]));
  return result.rows[0]!.node_exists;
}

/**
 * The whole of a tree list (docs/api.md "Export"): the page's own statement, every row. The node's
 * existence (the 404) is isExistingNode's, in the same transaction.
 */
export function treeExportQuery(segment: 'ancestors' | 'children' | 'descendants', orgId: number, id: number): pg.QueryConfig {
  const rows = { ancestors: ANCESTORS_ROWS, children: CHILDREN_ROWS, descendants: DESCENDANTS_ROWS }[segment];
  return prepared(rows, [orgId, id, ALL_ROWS.limit, ALL_ROWS.offset]);
}
