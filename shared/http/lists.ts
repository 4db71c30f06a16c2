import { ValidationFailed, fieldErrors } from '../errors.js';
import { JsonText, jsonObject } from '../json/text.js';
import { queryParams, type QueryParam } from './validation.js';

/**
 * Building blocks of the master-data list endpoints (`GET /assets`, `GET /locations`): paging and
 * sorting query parameters as DECISIONS.md fixes them, the `q` substring pattern, the
 * currently-effective predicate, and the list envelope. SQL fragments use `$n` placeholders
 * collected in a SqlParams so every value stays a bind parameter.
 */

export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 200;

export type SortKey = Array<{ field: string; descending: boolean }>;

/** Query parameters every list shares: `limit` (1..200), `offset` (≥ 0), `sort` over `fields`. */
export function pagingQuery(sortFields: readonly string[]): {
  limit: QueryParam<number>;
  offset: QueryParam<number>;
  sort: QueryParam<SortKey>;
} {
  return {
    limit: { ...queryParams.int({ min: 1, max: MAX_LIMIT }), description: `page size, default ${DEFAULT_LIMIT}` },
    offset: { ...queryParams.int({ min: 0, max: 2_147_483_647 }), description: 'rows to skip, default 0' },
    sort: queryParams.sort(sortFields),
  };
}

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

/** Default list scope: live and currently effective; `include_deleted=true` lifts both. */
export function scopeSql(alias: string, includeDeleted: boolean | undefined): string {
  return includeDeleted ? 'TRUE' : `(${alias}.deleted_at IS NULL AND ${effectiveSql(alias)})`;
}

/** Refuses a query that names both forms of a surrogate/natural-key pair (one entry per parameter). */
export function refuseAmbiguous(query: Record<string, unknown>, a: string, b: string): void {
  if (query[a] !== undefined && query[b] !== undefined) throw new ValidationFailed(fieldErrors.ambiguous([a, b]));
}

/** The list envelope around a page (a JSON array built by Postgres). */
export function listEnvelope(data: JsonText, limit: number, offset: number, totalCount: number): JsonText {
  return jsonObject({ data, limit, offset, total_count: totalCount });
}

/** JSON Schema of a list envelope around `item`, for route `responses` docs: closed, like the views. */
export function listEnvelopeSchema(item: Record<string, unknown>): Record<string, unknown> {
  return {
    type: 'object',
    required: ['data', 'limit', 'offset', 'total_count'],
    properties: {
      data: { type: 'array', items: item, maxItems: MAX_LIMIT },
      limit: { type: 'integer', minimum: 1, maximum: MAX_LIMIT, description: 'the page size asked for (default 50)' },
      offset: { type: 'integer', minimum: 0 },
      total_count: { type: 'integer', minimum: 0, description: 'rows in the whole selection, not only this page' },
    },
    additionalProperties: false,
  };
}

/** Marks a query parameter repeatable (any-of), keeping the literal type the parsed query needs. */
export function repeatable<T>(param: QueryParam<T>, description?: string): QueryParam<T> & { repeatable: true } {
  return { ...param, repeatable: true, ...(description ? { description } : {}) };
}
