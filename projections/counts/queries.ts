import type pg from 'pg';
import { prepared } from '../../shared/db/prepared.js';
import type { CountItemView, CountStatus, CountView, ItemStatus } from '../../shared/domain/counts/schema.js';

/**
 * Reads of the counts and their items (tables `counts`, `count_items`, written by the `counts`
 * subscriber) for the API (docs/api.md "Counts"). The five numbers are counted from the items (an
 * index by count and status); external keys are the current ones: a deleted asset's or
 * location's is null.
 */

const COUNT_COLUMNS = `c.count_id AS id, c.name, c.location_id, l.external_key AS location_external_key,
  CASE WHEN c.closed_at IS NULL THEN 'open' ELSE 'closed' END AS status, c.started_at_rfc3339 AS started_at, c.closed_at_rfc3339 AS closed_at,
  n.expected, n.found, n.missing, n.misplaced, n.unexpected`;
const COUNT_FROM = `counts c
  LEFT JOIN locations l ON l.org_id = c.org_id AND l.id = c.location_id AND l.deleted_at IS NULL
  CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE i.status <> 'unexpected')::int AS expected, count(*) FILTER (WHERE i.status = 'found')::int AS found,
           count(*) FILTER (WHERE i.status = 'missing')::int AS missing, count(*) FILTER (WHERE i.status = 'misplaced')::int AS misplaced,
           count(*) FILTER (WHERE i.status = 'unexpected')::int AS unexpected
      FROM count_items i WHERE i.org_id = c.org_id AND i.count_id = c.count_id) n`;

export interface CountFilter {
  status?: CountStatus;
  location_id?: number;
}

function countWhere(orgId: number, filter: CountFilter): { sql: string; values: unknown[] } {
  const values: unknown[] = [orgId];
  const conditions = ['c.org_id = $1'];
  if (filter.status !== undefined) conditions.push(filter.status === 'open' ? 'c.closed_at IS NULL' : 'c.closed_at IS NOT NULL');
  if (filter.location_id !== undefined) {
    values.push(filter.location_id);
    conditions.push(`c.location_id = $${values.length}`);
  }
  return { sql: conditions.join(' AND '), values };
}

export async function findCount(db: pg.Pool | pg.PoolClient, orgId: number, countId: number): Promise<CountView | null> {
  const { rows } = await db.query<CountView>(prepared(`SELECT ${COUNT_COLUMNS} FROM ${COUNT_FROM} WHERE c.org_id = $1 AND c.count_id = $2`, [orgId, countId]));
  return rows[0] ?? null;
}

/** Whether the organization has this count (without its numbers: the items list's check). */
export async function countExists(db: pg.Pool | pg.PoolClient, orgId: number, countId: number): Promise<boolean> {
  const { rows } = await db.query(prepared('SELECT 1 FROM counts WHERE org_id = $1 AND count_id = $2', [orgId, countId]));
  return rows.length > 0;
}

/** The organization's counts, newest first. */
export async function listCounts(db: pg.Pool, orgId: number, filter: CountFilter, limit: number, offset: number): Promise<{ data: CountView[]; total: number }> {
  const where = countWhere(orgId, filter);
  const n = where.values.length;
  const [page, count] = await Promise.all([
    db.query<CountView>({ text: `SELECT ${COUNT_COLUMNS} FROM ${COUNT_FROM} WHERE ${where.sql} ORDER BY c.count_id DESC LIMIT $${n + 1} OFFSET $${n + 2}`, values: [...where.values, limit, offset] }),
    db.query<{ n: number }>({ text: `SELECT count(*)::int AS n FROM counts c WHERE ${where.sql}`, values: where.values }),
  ]);
  return { data: page.rows, total: count.rows[0]!.n };
}

/** Every count the filters keep, newest first (docs/api.md "Export"). */
export function countsExport(orgId: number, filter: CountFilter): { query: pg.QueryConfig } {
  const where = countWhere(orgId, filter);
  return { query: { text: `SELECT ${COUNT_COLUMNS} FROM ${COUNT_FROM} WHERE ${where.sql} ORDER BY c.count_id DESC`, values: where.values } };
}

const ITEM_COLUMNS = `i.asset_id, a.external_key AS asset_external_key, i.status, i.seen_location_id, l.external_key AS seen_location_external_key,
  i.last_seen_at_rfc3339 AS last_seen_at`;
const ITEM_FROM = `count_items i
  LEFT JOIN assets a ON a.org_id = i.org_id AND a.id = i.asset_id AND a.deleted_at IS NULL
  LEFT JOIN locations l ON l.org_id = i.org_id AND l.id = i.seen_location_id AND l.deleted_at IS NULL`;

export interface ItemFilter {
  status?: ItemStatus;
}

/**
 * The page's statement: by count (and status), in asset order; the benchmark times it as raw SQL
 * too. The page is cut from the items alone (the index by count, status and asset), and only its
 * rows are joined to their asset and location: the rows an offset skips are never joined.
 */
export function itemsPageQuery(orgId: number, countId: number, filter: ItemFilter, limit: number, offset: number): pg.QueryConfig {
  const values: unknown[] = [orgId, countId];
  let where = 'org_id = $1 AND count_id = $2';
  if (filter.status !== undefined) {
    values.push(filter.status);
    where += ` AND status = $${values.length}`;
  }
  // The offset is skipped over the index alone (asset ids only); the page's rows are read after.
  const page = `(SELECT asset_id FROM count_items WHERE ${where} ORDER BY asset_id LIMIT $${values.length + 1} OFFSET $${values.length + 2}) k
  JOIN count_items i ON i.org_id = $1 AND i.count_id = $2 AND i.asset_id = k.asset_id`;
  return { text: `SELECT ${ITEM_COLUMNS} FROM ${ITEM_FROM.replace('count_items i', page)} ORDER BY i.asset_id`, values: [...values, limit, offset] };
}

export async function listItems(db: pg.Pool, orgId: number, countId: number, filter: ItemFilter, limit: number, offset: number): Promise<{ data: CountItemView[]; total: number }> {
  const page = itemsPageQuery(orgId, countId, filter, limit, offset);
  const where = filter.status === undefined ? '' : ' AND status = $3';
  const [rows, count] = await Promise.all([
    db.query<CountItemView>(page),
    db.query<{ n: number }>({ text: `SELECT count(*)::int AS n FROM count_items WHERE org_id = $1 AND count_id = $2${where}`, values: page.values!.slice(0, filter.status === undefined ? 2 : 3) }),
  ]);
  return { data: rows.rows, total: count.rows[0]!.n };
}

/** Every item of a count the filter keeps, in asset order (docs/api.md "Export"). */
export function itemsExport(orgId: number, countId: number, filter: ItemFilter): { query: pg.QueryConfig } {
  const values: unknown[] = [orgId, countId];
  let where = 'i.org_id = $1 AND i.count_id = $2';
  if (filter.status !== undefined) {
    values.push(filter.status);
    where += ` AND i.status = $${values.length}`;
  }
  return { query: { text: `SELECT ${ITEM_COLUMNS} FROM ${ITEM_FROM} WHERE ${where} ORDER BY i.asset_id`, values } };
}
