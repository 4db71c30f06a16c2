import { NotFoundError } from '../../../shared/errors.js';
import type { ServiceContext } from '../../../shared/service-context.js';
import { defineRoute, type RouteDefinition } from '../../../shared/http/routes.js';
import { dataEnvelopeSchema, jsonSchemaOf } from '../../../shared/http/openapi.js';
import { API_PREFIX } from '../prefix.js';
import { jsonObject } from '../../../shared/json/text.js';
import { queryParams } from '../../../shared/http/validation.js';
import { listEnvelope, listEnvelopeSchema, pageOf, pagingQuery, refuseAmbiguous, repeatable } from '../../../shared/http/lists.js';
import { orgOf } from '../../../shared/auth/org.js';
import { assetPatchStateErrors, createAsset, deleteAsset, renameAsset, restoreAsset, updateAsset } from '../../../shared/domain/assets/commands.js';
import { ASSET_FIELD_ORDER, type AssetPatch } from '../../../shared/domain/assets/decider.js';
import { assetViewSchema, createAssetSchema, patchAssetSchema, renameSchema } from '../../../shared/domain/assets/schema.js';
import { ASSET_SORT_FIELDS, assetExportQuery, getAssetView, listAssetViews } from '../../../projections/assets/queries.js';

/** The /assets routes (docs/api.md "Assets", "Lists: paging, sorting, filters, search" and "Changing a record: PATCH"). */

const assetJson = jsonSchemaOf(assetViewSchema);
const single = dataEnvelopeSchema(assetJson);
const renamed = dataEnvelopeSchema(assetJson, { descendant_count_affected: { type: 'integer', const: 0, description: 'always 0: assets have no descendants' } });

const listQuery = {
  external_key: repeatable(queryParams.externalKey(), 'any-of; repeatable'),
  location_id: repeatable(queryParams.id(), 'current location, any-of; repeatable'),
  location_external_key: repeatable(queryParams.externalKey(), 'current location by key, any-of; repeatable'),
  is_active: queryParams.bool(),
  include_deleted: { ...queryParams.bool(), description: 'include soft-deleted rows (default false)' },
  q: { ...queryParams.text({ maxLength: 255 }), description: 'case-insensitive substring of name, external_key, description or an active, effective tag value' },
  ...pagingQuery(ASSET_SORT_FIELDS),
};

const CREATE_ORDER = ['external_key', 'name', 'description', 'location_id', 'location_external_key', 'is_active', 'valid_from', 'valid_to', 'metadata', 'tags'];

async function viewOrNotFound(ctx: ServiceContext, orgId: number, assetId: number) {
  const view = await getAssetView(ctx.pool, orgId, assetId);
  if (!view) throw new NotFoundError(`Asset ${assetId} not found`);
  return view;
}

export function assetRoutes(ctx: ServiceContext): RouteDefinition[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/assets',
      operationId: 'listAssets',
      summary: 'List assets (default scope: live and currently effective)',
      tag: 'Assets',
      scope: 'assets:read',
      query: listQuery,
      responses: { 200: { description: 'A page of asset views', schema: listEnvelopeSchema(assetJson) }, 400: { description: 'ambiguous_fields: both location_id and location_external_key.' } },
      async handler({ principal, query }) {
        refuseAmbiguous(query, 'location_id', 'location_external_key');
        const { limit, offset } = pageOf(query);
        const page = await listAssetViews(ctx.pool, orgOf(principal), { ...query, limit, offset });
        return { status: 200, body: listEnvelope(page.data, limit, offset, page.total) };
      },
      export: {
        pool: ctx.pool,
        async source({ principal, query }) {
          refuseAmbiguous(query, 'location_id', 'location_external_key');
          return { query: assetExportQuery(orgOf(principal), query) };
        },
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/assets',
      operationId: 'createAsset',
      summary: 'Create an asset (with optional embedded tags, all-or-nothing)',
      tag: 'Assets',
      scope: 'assets:write',
      body: createAssetSchema,
      bodyFieldOrder: CREATE_ORDER,
      responses: {
        201: { description: 'Created; Location names the new asset', schema: single },
        400: { description: 'read_only: location_id or location_external_key, whatever their value (scan data).' },
        409: { description: 'external_key or a tag (tag_type, value) already in use' },
      },
      async handler({ principal, body }) {
        const orgId = orgOf(principal);
        const assetId = await createAsset(ctx, orgId, body);
        const view = await viewOrNotFound(ctx, orgId, assetId);
        return { status: 201, body: jsonObject({ data: view }), headers: { Location: `${API_PREFIX}/assets/${assetId}` } };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/assets/{asset_id}',
      operationId: 'getAsset',
      summary: 'Read an asset by id (ignores effectiveness; soft-deleted rows are 404)',
      tag: 'Assets',
      scope: 'assets:read',
      responses: { 200: { description: 'The asset', schema: single }, 404: { description: 'No such live asset in this organization' } },
      async handler({ principal, params }) {
        return { status: 200, body: jsonObject({ data: await viewOrNotFound(ctx, orgOf(principal), params.asset_id!) }) };
      },
    }),
    defineRoute({
      method: 'PATCH',
      path: '/assets/{asset_id}',
      operationId: 'updateAsset',
      summary: 'Merge-patch an asset (RFC 7396); read-only fields are accepted when they match',
      tag: 'Assets',
      scope: 'assets:write',
      body: patchAssetSchema,
      bodyFieldOrder: ASSET_FIELD_ORDER,
      responses: {
        200: { description: 'The asset after the patch', schema: single },
        400: { description: 'read_only: a read-only field whose value differs from the current one.' },
        404: { description: 'No such live asset' },
      },
      stateBodyErrors({ principal, params, body }) {
        return assetPatchStateErrors(ctx, orgOf(principal), params.asset_id!, body);
      },
      async handler({ principal, params, body }) {
        const orgId = orgOf(principal);
        await updateAsset(ctx, orgId, params.asset_id!, body as AssetPatch);
        return { status: 200, body: jsonObject({ data: await viewOrNotFound(ctx, orgId, params.asset_id!) }) };
      },
    }),
    defineRoute({
      method: 'DELETE',
      path: '/assets/{asset_id}',
      operationId: 'deleteAsset',
      summary: 'Soft-delete an asset (frees its external_key and retires its tags)',
      tag: 'Assets',
      scope: 'assets:write',
      responses: { 204: { description: 'Deleted' }, 404: { description: 'No such live asset' } },
      async handler({ principal, params }) {
        await deleteAsset(ctx, orgOf(principal), params.asset_id!);
        return { status: 204 };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/assets/{asset_id}/rename',
      operationId: 'renameAsset',
      summary: 'Change the external_key of an asset',
      tag: 'Assets',
      scope: 'assets:write',
      body: renameSchema,
      responses: {
        200: { description: 'The renamed asset', schema: renamed },
        404: { description: 'No such live asset' },
        409: { description: 'The key is in use by another live asset' },
      },
      async handler({ principal, params, body }) {
        const orgId = orgOf(principal);
        await renameAsset(ctx, orgId, params.asset_id!, body.external_key);
        return { status: 200, body: jsonObject({ data: await viewOrNotFound(ctx, orgId, params.asset_id!), descendant_count_affected: 0 }) };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/assets/{asset_id}/restore',
      operationId: 'restoreAsset',
      summary: 'Restore a soft-deleted asset (a no-op for an existing one)',
      tag: 'Assets',
      scope: 'assets:write',
      responses: {
        200: { description: 'The asset, existing again (as GET by id answers it); its tags stay detached', schema: single },
        404: { description: 'No such asset, existing or deleted, in this organization' },
        409: { description: 'Its external_key is now in use by another existing asset' },
      },
      async handler({ principal, params }) {
        const orgId = orgOf(principal);
        await restoreAsset(ctx, orgId, params.asset_id!);
        return { status: 200, body: jsonObject({ data: await viewOrNotFound(ctx, orgId, params.asset_id!) }) };
      },
    }),
  ];
}
