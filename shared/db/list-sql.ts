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
