import type { ServiceContext } from '../../../shared/service-context.js';
import { JsonText, jsonObject } from '../../../shared/json/text.js';
import { orgOf } from '../../../shared/auth/org.js';
import { defineRoute, type RouteDefinition } from '../../../shared/http/routes.js';
import { dataEnvelopeSchema, jsonSchemaOf } from '../../../shared/http/openapi.js';
import { queryParams, type ParsedQuery } from '../../../shared/http/validation.js';
import type { Page } from '../../../shared/db/json-sql.js';
import { listEnvelope, listEnvelopeSchema, pageOf, pagingQuery, refuseAmbiguous } from '../../../shared/http/lists.js';
import {
  LOCATION_FIELD_ORDER,
  createLocationSchema,
  locationViewSchema,
  patchLocationSchema,
  renameLocationSchema,
} from '../../../shared/domain/locations/schema.js';
import { createInputOf, createLocation, deleteLocation, locationPatchStateErrorsOf, renameLocation, restoreLocation, updateLocation } from '../../../shared/domain/locations/commands.js';
import { locationNotFound } from '../../../shared/domain/locations/decider.js';
import {
  LOCATION_SORT_FIELDS,
  findLocationView,
  listAncestors,
  listChildren,
  isExistingNode,
  listDescendants,
  listLocations,
  locationExportQuery,
  treeExportQuery,
  type LocationFilters,
} from '../../../projections/locations/queries.js';
import type { ExistingNode } from '../../../shared/domain/read-model-queries.js';

/** The /locations routes: CRUD, rename, and the tree reads. */

const listQuery = {
  external_key: { ...queryParams.externalKey(), repeatable: true as const },
  id: queryParams.id(),
  parent_id: queryParams.id(),
  parent_external_key: queryParams.externalKey(),
  is_active: queryParams.bool(),
  include_deleted: queryParams.bool(),
  q: queryParams.text({ maxLength: 255 }),
  ...pagingQuery(LOCATION_SORT_FIELDS),
};

const { limit: limitParam, offset: offsetParam } = pagingQuery(LOCATION_SORT_FIELDS);
const treeQuery = { limit: limitParam, offset: offsetParam };

const locationJsonSchema = jsonSchemaOf(locationViewSchema);
const singleSchema = dataEnvelopeSchema(locationJsonSchema);
const listSchema = listEnvelopeSchema(locationJsonSchema);
const notFound = { description: 'No such live location in this organization' };
const ambiguousParent = { description: 'ambiguous_fields: both parent_id and parent_external_key.' };
const keyTaken = { description: 'The external_key is in use by another live location' };

/** The list's filters from its query (both forms of the parent: ambiguous_fields). */
function listFilters(query: ParsedQuery<typeof listQuery>): Omit<LocationFilters, 'limit' | 'offset'> {
  refuseAmbiguous(query, 'parent_id', 'parent_external_key');
  return {
    externalKeys: query.external_key,
    id: query.id,
    parentId: query.parent_id,
    parentExternalKey: query.parent_external_key,
    isActive: query.is_active,
    includeDeleted: query.include_deleted,
    q: query.q,
    sort: query.sort,
  };
}

function envelope(page: Page, limit: number, offset: number) {
  return listEnvelope(page.data, limit, offset, page.total);
}

async function viewOr404(ctx: ServiceContext, orgId: number, id: number): Promise<JsonText> {
  const view = await findLocationView(ctx.pool, orgId, id);
  if (!view) throw locationNotFound();
  return view;
}

async function existingNodeOr404(ctx: ServiceContext, orgId: number, id: number): Promise<ExistingNode> {
  const node = await ctx.readModels.findExistingLocation(orgId, { id });
  if (!node) throw locationNotFound();
  return node;
}

export function locationRoutes(ctx: ServiceContext): RouteDefinition[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/locations',
      operationId: 'listLocations',
      summary: 'List locations',
      tag: 'Locations',
      scope: 'locations:read',
      query: listQuery,
      responses: { 200: { description: 'a page of locations', schema: listSchema }, 400: ambiguousParent },
      async handler({ principal, query }) {
        const { limit, offset } = pageOf(query);
        const page = await listLocations(ctx.pool, orgOf(principal, 'forbidden'), { ...listFilters(query), limit, offset });
        return { status: 200, body: envelope(page, limit, offset) };
      },
      export: {
        pool: ctx.pool,
        source: async ({ principal, query }) => ({ query: locationExportQuery(orgOf(principal, 'forbidden'), listFilters(query)) }),
      },
    }),

    defineRoute({
      method: 'POST',
      path: '/locations',
      operationId: 'createLocation',
      summary: 'Create a location',
      tag: 'Locations',
      scope: 'locations:write',
      body: createLocationSchema,
      bodyFieldOrder: LOCATION_FIELD_ORDER,
      responses: {
        201: { description: 'Created; Location names the new location', schema: singleSchema },
        400: { description: 'ambiguous_fields: both parent_id and parent_external_key; fk_not_found: a parent that is missing or soft-deleted.' },
        409: { description: 'The external_key, or a tag (tag_type, value), is already in use' },
      },
      async handler({ principal, body }) {
        const orgId = orgOf(principal, 'forbidden');
        const id = await createLocation(ctx, orgId, createInputOf(body));
        const view = await viewOr404(ctx, orgId, id);
        return { status: 201, body: jsonObject({ data: view }), headers: { Location: `/api/v1/locations/${id}` } };
      },
    }),

    defineRoute({
      method: 'GET',
      path: '/locations/{location_id}',
      operationId: 'getLocation',
      summary: 'Read a location',
      tag: 'Locations',
      scope: 'locations:read',
      responses: { 200: { description: 'the location', schema: singleSchema }, 404: notFound },
      async handler({ principal, params }) {
        return { status: 200, body: jsonObject({ data: await viewOr404(ctx, orgOf(principal, 'forbidden'), params.location_id!) }) };
      },
    }),

    defineRoute({
      method: 'PATCH',
      path: '/locations/{location_id}',
      operationId: 'updateLocation',
      summary: 'Update a location (JSON merge patch)',
      tag: 'Locations',
      scope: 'locations:write',
      body: patchLocationSchema,
      bodyFieldOrder: LOCATION_FIELD_ORDER,
      responses: {
        200: { description: 'the updated location', schema: singleSchema },
        400: { description: 'read_only: a read-only field whose value differs; ambiguous_fields: parent_id and parent_external_key that disagree; fk_not_found: a parent that is missing or soft-deleted.' },
        404: notFound,
        409: { description: 'The re-parent would make the location its own ancestor' },
      },
      stateBodyErrors({ principal, params, body }) {
        return locationPatchStateErrorsOf(ctx, orgOf(principal, 'forbidden'), params.location_id!, body);
      },
      async handler({ principal, params, body }) {
        const orgId = orgOf(principal, 'forbidden');
        const id = params.location_id!;
        await updateLocation(ctx, orgId, id, {
          changes: { name: body.name, description: body.description, isActive: body.is_active, validFrom: body.valid_from, validTo: body.valid_to },
          parent: body.parent,
          sent: body,
        });
        return { status: 200, body: jsonObject({ data: await viewOr404(ctx, orgId, id) }) };
      },
    }),

    defineRoute({
      method: 'DELETE',
      path: '/locations/{location_id}',
      operationId: 'deleteLocation',
      summary: 'Soft-delete a leaf location',
      tag: 'Locations',
      scope: 'locations:write',
      responses: { 204: { description: 'deleted' }, 404: notFound, 409: { description: 'The location has live descendant locations, or live assets placed at it (no cascade)' } },
      async handler({ principal, params }) {
        await deleteLocation(ctx, orgOf(principal, 'forbidden'), params.location_id!);
        return { status: 204 };
      },
    }),

    defineRoute({
      method: 'POST',
      path: '/locations/{location_id}/rename',
      operationId: 'renameLocation',
      summary: "Change a location's external_key",
      tag: 'Locations',
      scope: 'locations:write',
      body: renameLocationSchema,
      responses: {
        200: {
          description: 'the renamed location and how many live descendants see the new parent key',
          schema: dataEnvelopeSchema(locationJsonSchema, {
            descendant_count_affected: { type: 'integer', minimum: 0, description: 'live descendants reachable through the parent chain; 0 for a same-value rename' },
          }),
        },
        404: notFound,
        409: keyTaken,
      },
      async handler({ principal, params, body }) {
        const orgId = orgOf(principal, 'forbidden');
        const id = params.location_id!;
        const before = await existingNodeOr404(ctx, orgId, id);
        await renameLocation(ctx, orgId, id, body.external_key);
        const view = await viewOr404(ctx, orgId, id);
        // A same-value rename changes nothing and affects no one.
        const affected = before.externalKey === body.external_key ? 0 : await ctx.readModels.countExistingDescendants(orgId, id);
        return { status: 200, body: jsonObject({ data: view, descendant_count_affected: affected }) };
      },
    }),

    defineRoute({
      method: 'POST',
      path: '/locations/{location_id}/restore',
      operationId: 'restoreLocation',
      summary: 'Restore a soft-deleted location under its parent (a no-op for an existing one)',
      tag: 'Locations',
      scope: 'locations:write',
      responses: {
        200: { description: 'the location, existing again (as GET by id answers it); its tags stay detached', schema: singleSchema },
        404: { description: 'No such location, existing or deleted, in this organization' },
        409: { description: 'Its external_key is now used by another existing location, or its parent is deleted (restore the parent first)' },
      },
      async handler({ principal, params }) {
        const orgId = orgOf(principal, 'forbidden');
        const id = params.location_id!;
        await restoreLocation(ctx, orgId, id);
        return { status: 200, body: jsonObject({ data: await viewOr404(ctx, orgId, id) }) };
      },
    }),

    ...(
      [
        ['ancestors', 'listLocationAncestors', 'Ancestors, nearest parent first up to the root', listAncestors],
        ['children', 'listLocationChildren', 'Immediate children, by external_key then id', listChildren],
        ['descendants', 'listLocationDescendants', 'The whole subtree without the node, by external_key then id', listDescendants],
      ] as const
    ).map(([segment, operationId, summary, list]) =>
      defineRoute({
        method: 'GET',
        path: `/locations/{location_id}/${segment}`,
        operationId,
        summary,
        tag: 'Locations',
        scope: 'locations:read',
        query: treeQuery,
        responses: { 200: { description: summary, schema: listSchema }, 404: notFound },
        async handler({ principal, params, query }) {
          const orgId = orgOf(principal, 'forbidden');
          const id = params.location_id!;
          const { limit, offset } = pageOf(query);
          const page = await list(ctx.pool, orgId, id, limit, offset);
          if (!page) throw locationNotFound();
          return { status: 200, body: envelope(page, limit, offset) };
        },
        export: {
          pool: ctx.pool,
          async source({ principal, params }, db) {
            const orgId = orgOf(principal, 'forbidden');
            if (!(await isExistingNode(db, orgId, params.location_id!))) throw locationNotFound();
            return { query: treeExportQuery(segment, orgId, params.location_id!) };
          },
        },
      }),
    ),
  ];
}
