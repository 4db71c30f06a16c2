import type pg from 'pg';
import type { z } from 'zod';
import { JsonText } from '../json/text.js';

/**
 * SQL fragments that build the wire views inside Postgres (see json/text.ts). A view is a
 * subquery whose columns are exactly the view's fields, in the contract's order; `row_to_json`
 * and `array_to_json(array_agg(...))` turn it into the response text, with nulls kept and keys in
 * column order.
 */

/**
 * A timestamp column as the contract writes it (RFC 3339 in UTC with milliseconds and `Z`, as
 * Date#toISOString): its generated `<column>_rfc3339` twin (230_wire_timestamps.sql), formatted
 * once when the row is written.
 */
export function rfc3339Sql(column: string): string {
  return `${column}_rfc3339`;
}

/**
 * The select list of a view: one SQL expression per field of the view's zod schema, named after
 * the field, in the schema's order (the contract's). The schema types the view and documents it;
 * this makes the SQL follow it too, so a field cannot be missing or out of place.
 */
export function viewColumnsSql<S extends z.ZodObject>(view: S, columns: { readonly [K in keyof z.output<S>]-?: string }): string {
  return Object.keys(view.shape)
    .map((field) => `${columns[field as keyof z.output<S>]} AS ${field}`)
    .join(', ');
}

/** One view as JSON text: `subquery` returns at most one row. */
export function objectJsonSql(subquery: string): string {
  return `SELECT row_to_json(v)::text AS json FROM (${subquery}) v`;
}

/**
 * The rows of `subquery` as a JSON array, in the subquery's order (an aggregate over an ordered
 * subquery keeps that order: nothing above it joins or sorts), `[]` when there are none.
 */
export function arrayJsonSql(subquery: string): string {
  return `COALESCE((SELECT array_to_json(array_agg(v)) FROM (${subquery}) v), '[]'::json)`;
}

/** Runs an objectJsonSql statement: the view, or null when there is no row. */
export async function readView(db: pg.Pool | pg.PoolClient, query: pg.QueryConfig): Promise<JsonText | null> {
  const result = await db.query<{ json: string }>(query);
  return result.rows[0] ? new JsonText(result.rows[0].json) : null;
}

/** A page of views as a JSON array, with the total_count. */
export interface Page {
  data: JsonText;
  total: number;
}

/** The statement of a page: an arrayJsonSql of the page's rows as `data`, the count as `total`. */
export function pageSql(rowsSql: string, countSql: string): string {
  return `SELECT ${arrayJsonSql(rowsSql)}::text AS data, (${countSql}) AS total`;
}

export async function readPage(db: pg.Pool | pg.PoolClient, query: pg.QueryConfig): Promise<Page> {
  const result = await db.query<{ data: string; total: number }>(query);
  const row = result.rows[0]!;
  return { data: new JsonText(row.data), total: row.total };
}

/**
 * A join (`LEFT JOIN`, or `JOIN` for a row that must exist) of the row of `table` whose primary
 * key `id` is `key` and whose org is `org`, as `alias` with `columns` (which must include
 * `org_id`). It is one primary-key lookup per row of the left side, whatever the planner's
 * statistics: the lateral subquery with OFFSET 0 is never merged into a join (so no plan reads
 * all of `table` for it), and the org check is applied to the row found rather than inside, so the
 * primary key is the only index that can answer it (an index led by org_id would read all of the
 * org's rows for every lookup).
 */
export function primaryKeyLookupSql(join: 'LEFT JOIN' | 'JOIN', table: string, alias: string, key: string, org: string, columns: string): string {
  return `${join} LATERAL (SELECT ${columns} FROM ${table} ${alias} WHERE ${alias}.id = ${key} OFFSET 0) ${alias} ON ${alias}.org_id = ${org}`;
}
