/**
 * SQL fragments of the list queries the read models run: bind parameters, `ORDER BY` for a parsed
 * sort, the `q` substring pattern and the currently-effective predicate. Fragments use `$n`
 * placeholders collected in a SqlParams so every value stays a bind parameter.
 */

/** A parsed `sort` (http/lists.ts reads it from the query): fields in order, each ascending or not. */
export type SortKey = Array<{ field: string; descending: boolean }>;

/** Collects bind values; `add` returns the placeholder (`$3`). */
export class SqlParams {
  readonly values: unknown[] = [];
  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}

/** A list's page size when the request names none (50, as docs/api.md says). */
export const DEFAULT_LIMIT = 50;

/**
 * `LIMIT … OFFSET …` of a page of a `prepared` (named) statement: the first page at the default
 * size (what the console and most clients ask for) as literals, any other as parameters. Postgres
 * cannot estimate a parameter's LIMIT, so it costs a generic plan as if it fetched a tenth of the
 * rows and plans the statement again for its values on every execution: for the report of now,
 * 1.2 ms of planning against 0.7 ms of execution (docs/benchmarks.md). With literals the generic
 * plan costs what the custom one does and is kept. Only the default first page, so that paging
 * through offsets does not spend the process's statement names (`MAX_NAMED`, prepared.ts).
 */
export function pageBoundsSql(params: SqlParams, page: { limit: number; offset: number }): string {
  if (page.limit === DEFAULT_LIMIT && page.offset === 0) return `LIMIT ${DEFAULT_LIMIT} OFFSET 0`;
  return `LIMIT ${params.add(page.limit)} OFFSET ${params.add(page.offset)}`;
}

/**
 * `ORDER BY` for a parsed sort (or the endpoint's default), always ending with `id` ascending so
 * paging is stable. `columns` maps each wire sort field to its SQL expression.
 */
export function orderBy(sort: SortKey | undefined, defaultSort: SortKey, columns: Record<string, string>, idColumn: string): string {
  const parts = (sort && sort.length > 0 ? sort : defaultSort).map((s) => {
    const column = Object.hasOwn(columns, s.field) ? columns[s.field] : undefined;
    if (!column) throw new Error(`no column for sort field ${s.field}`);
    return `${column} ${s.descending ? 'DESC' : 'ASC'}`;
  });
  parts.push(`${idColumn} ASC`);
  return parts.join(', ');
}

/** `%`, `_` and `\` in `q` match themselves: escape them for `ILIKE ... ESCAPE '\'`. */
export function containsPattern(q: string): string {
  return `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** SQL: the row (alias) is currently effective at statement time. */
export function effectiveSql(alias: string): string {
  return `((${alias}.valid_from IS NULL OR ${alias}.valid_from <= statement_timestamp()) AND (${alias}.valid_to IS NULL OR ${alias}.valid_to > statement_timestamp()))`;
}

/** Default list scope: existing (not deleted) and currently effective; `include_deleted=true` lifts both. */
export function scopeSql(alias: string, includeDeleted: boolean | undefined): string {
  return includeDeleted ? 'TRUE' : `(${alias}.deleted_at IS NULL AND ${effectiveSql(alias)})`;
}
