import { ValidationFailed, fieldErrors } from '../errors.js';
import { DEFAULT_LIMIT, type SortKey } from '../db/list-sql.js';
import { JsonText, jsonObject } from '../json/text.js';
import { queryParams, type QueryParam } from './validation.js';

/**
 * The HTTP side of the master-data list endpoints (`GET /assets`, `GET /locations`): paging and
 * sorting query parameters as docs/api.md "Lists: paging, sorting, filters, search" states them, and the list envelope. The SQL they turn
 * into (bind parameters, ORDER BY, the `q` pattern, the currently-effective predicate) is
 * db/list-sql.ts.
 */

export { DEFAULT_LIMIT };
export const MAX_LIMIT = 200;

/** The page a list query asks for: `limit` (default 50) and `offset` (default 0). */
export function pageOf(query: { limit?: number; offset?: number }): { limit: number; offset: number } {
  return { limit: query.limit ?? DEFAULT_LIMIT, offset: query.offset ?? 0 };
}

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
