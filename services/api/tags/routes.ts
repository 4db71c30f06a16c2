import { NotFoundError } from '../../../shared/errors.js';
import type { ServiceContext } from '../../../shared/service-context.js';
import { defineRoute, type RouteDefinition } from '../../../shared/http/routes.js';
import { dataEnvelopeSchema, jsonSchemaOf } from '../../../shared/http/openapi.js';
import { API_PREFIX } from '../prefix.js';
import { jsonObject } from '../../../shared/json/text.js';
import { DEFAULT_LIMIT, MAX_LIMIT, listEnvelope, listEnvelopeSchema, pageOf } from '../../../shared/http/lists.js';
import { orgOf } from '../../../shared/auth/org.js';
import { queryParams } from '../../../shared/http/validation.js';
import type { TagOwnerRef } from '../../../shared/domain/tags/decider.js';
import type { OwnerType } from '../../../shared/domain/tags/events.js';
import { tagBodySchema, tagViewSchema } from '../../../shared/domain/tags/schema.js';
import { attachTag, detachTag, requireExistingTagOwner } from '../../../shared/domain/tags/commands.js';
import { findOwnerTag, listOwnerTags, ownerTagsExportQuery } from '../../../projections/tags/queries.js';

/**
 * The tag sub-resource of assets and locations (docs/api.md "Tags"): list (read scope),
 * attach and detach (write scope). A missing, soft-deleted or other-org owner is a 404, and so
 * is a tag that is not attached to that owner.
 */

const tagJson = jsonSchemaOf(tagViewSchema);
const single = dataEnvelopeSchema(tagJson);

interface OwnerSpec {
  ownerType: OwnerType;
  collection: 'assets' | 'locations';
  param: 'asset_id' | 'location_id';
  label: string;
  tag: string;
}

const OWNERS: OwnerSpec[] = [
  { ownerType: 'asset', collection: 'assets', param: 'asset_id', label: 'Asset', tag: 'Assets' },
  { ownerType: 'location', collection: 'locations', param: 'location_id', label: 'Location', tag: 'Locations' },
];

function routesFor(ctx: ServiceContext, spec: OwnerSpec): RouteDefinition[] {
  const base = `/${spec.collection}/{${spec.param}}/tags`;
  const ownerOf = (orgId: number, params: Record<string, number>): TagOwnerRef => ({ orgId, ownerType: spec.ownerType, ownerId: params[spec.param]! });
  return [
    defineRoute({
      method: 'GET',
      path: base,
      operationId: `list${spec.label}Tags`,
      summary: `List the tags of a ${spec.ownerType}, newest last`,
      tag: spec.tag,
      scope: `${spec.collection}:read`,
      query: {
        limit: { ...queryParams.int({ min: 1, max: MAX_LIMIT }), description: `page size, default ${DEFAULT_LIMIT}` },
        offset: queryParams.int({ min: 0, max: 2_147_483_647 }),
      },
      responses: { 200: { description: 'The live tags of the owner', schema: listEnvelopeSchema(tagJson) }, 404: { description: `No such live ${spec.ownerType}` } },
      async handler({ principal, params, query }) {
        const owner = ownerOf(orgOf(principal), params);
        await requireExistingTagOwner(ctx, owner);
        const { limit, offset } = pageOf(query);
        const page = await listOwnerTags(ctx.pool, owner, limit, offset);
        return { status: 200, body: listEnvelope(page.data, limit, offset, page.total) };
      },
      export: {
        pool: ctx.pool,
        async source({ principal, params }) {
          const owner = ownerOf(orgOf(principal), params);
          await requireExistingTagOwner(ctx, owner);
          return { query: ownerTagsExportQuery(owner) };
        },
      },
    }),
    defineRoute({
      method: 'POST',
      path: base,
      operationId: `attach${spec.label}Tag`,
      summary: `Attach a tag to a ${spec.ownerType}`,
      tag: spec.tag,
      scope: `${spec.collection}:write`,
      body: tagBodySchema,
      responses: {
        201: { description: 'Attached; Location names the tag', schema: single },
        404: { description: `No such live ${spec.ownerType}` },
        409: { description: '(tag_type, value) is attached elsewhere in the organization; detail names where' },
      },
      async handler({ principal, params, body }) {
        const owner = ownerOf(orgOf(principal), params);
        const tagId = await attachTag(ctx, owner, body);
        const view = await findOwnerTag(ctx.pool, owner, tagId);
        if (!view) throw new NotFoundError(`Tag ${tagId} not found`);
        return {
          status: 201,
          body: jsonObject({ data: view }),
          headers: { Location: `${API_PREFIX}/${spec.collection}/${owner.ownerId}/tags/${tagId}` },
        };
      },
    }),
    defineRoute({
      method: 'GET',
      path: `${base}/{tag_id}`,
      operationId: `get${spec.label}Tag`,
      summary: `Read one tag of a ${spec.ownerType}`,
      tag: spec.tag,
      scope: `${spec.collection}:read`,
      responses: { 200: { description: 'The tag', schema: single }, 404: { description: 'No such tag on this owner' } },
      async handler({ principal, params }) {
        const owner = ownerOf(orgOf(principal), params);
        await requireExistingTagOwner(ctx, owner);
        const view = await findOwnerTag(ctx.pool, owner, params.tag_id!);
        if (!view) throw new NotFoundError(`Tag ${params.tag_id} is not attached to ${spec.ownerType} ${owner.ownerId}`);
        return { status: 200, body: jsonObject({ data: view }) };
      },
    }),
    defineRoute({
      method: 'DELETE',
      path: `${base}/{tag_id}`,
      operationId: `detach${spec.label}Tag`,
      summary: `Detach a tag from a ${spec.ownerType} (frees its value)`,
      tag: spec.tag,
      scope: `${spec.collection}:write`,
      responses: { 204: { description: 'Detached' }, 404: { description: 'No such live owner, or the tag is not attached to it' } },
      async handler({ principal, params }) {
        const owner = ownerOf(orgOf(principal), params);
        await detachTag(ctx, owner, params.tag_id!);
        return { status: 204 };
      },
    }),
  ];
}

export function tagRoutes(ctx: ServiceContext): RouteDefinition[] {
  return OWNERS.flatMap((spec) => routesFor(ctx, spec));
}
