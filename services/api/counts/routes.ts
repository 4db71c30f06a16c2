import { NotFoundError } from '../../../shared/errors.js';
import type { ServiceContext } from '../../../shared/service-context.js';
import { orgOf } from '../../../shared/auth/org.js';
import { defineRoute, type RouteDefinition } from '../../../shared/http/routes.js';
import { dataEnvelopeSchema, jsonSchemaOf } from '../../../shared/http/openapi.js';
import { listEnvelopeSchema, pageOf, pagingQuery } from '../../../shared/http/lists.js';
import { queryParams } from '../../../shared/http/validation.js';
import { COUNT_FIELD_ORDER, COUNT_STATUSES, ITEM_STATUSES, countItemViewSchema, countViewSchema, startCountSchema, type CountView } from '../../../shared/domain/counts/schema.js';
import { closeCount, startCount } from '../../../shared/domain/counts/commands.js';
import { countExists, countsExport, findCount, itemsExport, listCounts, listItems } from '../../../projections/counts/queries.js';

/** The /counts routes (docs/api.md "Counts"). */

const { limit, offset } = pagingQuery([]);

const countQuery = {
  status: { ...queryParams.oneOf(COUNT_STATUSES), description: 'open or closed' },
  location_id: { ...queryParams.id(), description: "the counts of this zone (the count's own location)" },
  limit,
  offset,
};

const itemQuery = {
  status: { ...queryParams.oneOf(ITEM_STATUSES), description: 'the items of this status' },
  limit,
  offset,
};

const countJsonSchema = jsonSchemaOf(countViewSchema);
const itemJsonSchema = jsonSchemaOf(countItemViewSchema);
const singleCount = dataEnvelopeSchema(countJsonSchema);
const countNotFound = { description: 'No such count in this organization' };

function noSuchCount(): NotFoundError {
  return new NotFoundError('Count not found');
}

export function countRoutes(ctx: ServiceContext): RouteDefinition[] {
  async function countOr404(orgId: number, id: number): Promise<CountView> {
    const count = await findCount(ctx.pool, orgId, id);
    if (!count) throw noSuchCount();
    return count;
  }

  async function existingCount(orgId: number, id: number): Promise<number> {
    if (!(await countExists(ctx.pool, orgId, id))) throw noSuchCount();
    return id;
  }

  return [
    defineRoute({
      method: 'GET',
      path: '/counts',
      operationId: 'listCounts',
      summary: 'List counts, newest first',
      tag: 'Counts',
      scope: 'counts:read',
      query: countQuery,
      responses: { 200: { description: 'a page of counts, newest first', schema: listEnvelopeSchema(countJsonSchema) } },
      async handler({ principal, query }) {
        const page = pageOf(query);
        const { data, total } = await listCounts(ctx.pool, orgOf(principal, 'forbidden'), query, page.limit, page.offset);
        return { status: 200, body: { data, limit: page.limit, offset: page.offset, total_count: total } };
      },
      export: { pool: ctx.pool, source: async ({ principal, query }) => countsExport(orgOf(principal, 'forbidden'), query) },
    }),

    defineRoute({
      method: 'POST',
      path: '/counts',
      operationId: 'startCount',
      summary: 'Start a count of a zone (a location and its descendants) now',
      tag: 'Counts',
      scope: 'counts:write',
      body: startCountSchema,
      bodyFieldOrder: COUNT_FIELD_ORDER,
      responses: { 201: { description: 'Started; Location names the new count', schema: singleCount } },
      async handler({ principal, body }) {
        const orgId = orgOf(principal, 'forbidden');
        const id = await startCount(ctx, orgId, body);
        return { status: 201, body: { data: await countOr404(orgId, id) }, headers: { Location: `/api/v1/counts/${id}` } };
      },
    }),

    defineRoute({
      method: 'GET',
      path: '/counts/{count_id}',
      operationId: 'getCount',
      summary: 'Read a count and its five numbers',
      tag: 'Counts',
      scope: 'counts:read',
      responses: { 200: { description: 'the count', schema: singleCount }, 404: countNotFound },
      async handler({ principal, params }) {
        return { status: 200, body: { data: await countOr404(orgOf(principal, 'forbidden'), params.count_id!) } };
      },
    }),

    defineRoute({
      method: 'POST',
      path: '/counts/{count_id}/close',
      operationId: 'closeCount',
      summary: 'Close a count; again, the same count, unchanged',
      tag: 'Counts',
      scope: 'counts:write',
      responses: { 200: { description: 'the count as closed (or as it was, when closed before)', schema: singleCount }, 404: countNotFound },
      async handler({ principal, params }) {
        const orgId = orgOf(principal, 'forbidden');
        const count = await countOr404(orgId, params.count_id!);
        await closeCount(ctx, orgId, count.id);
        return { status: 200, body: { data: await countOr404(orgId, count.id) } };
      },
    }),

    defineRoute({
      method: 'GET',
      path: '/counts/{count_id}/items',
      operationId: 'listCountItems',
      summary: "List a count's items (found, missing, misplaced, unexpected), in asset order",
      tag: 'Counts',
      scope: 'counts:read',
      query: itemQuery,
      responses: { 200: { description: 'a page of items, by asset id', schema: listEnvelopeSchema(itemJsonSchema) }, 404: countNotFound },
      async handler({ principal, params, query }) {
        const orgId = orgOf(principal, 'forbidden');
        const countId = await existingCount(orgId, params.count_id!);
        const page = pageOf(query);
        const { data, total } = await listItems(ctx.pool, orgId, countId, query, page.limit, page.offset);
        return { status: 200, body: { data, limit: page.limit, offset: page.offset, total_count: total } };
      },
      export: {
        pool: ctx.pool,
        source: async ({ principal, params, query }) => {
          const orgId = orgOf(principal, 'forbidden');
          return itemsExport(orgId, await existingCount(orgId, params.count_id!), query);
        },
      },
    }),
  ];
}
