import { ApiError } from '../../../shared/errors.js';
import type { ServiceContext } from '../../../shared/context.js';
import { defineRoute, type RouteDefinition } from '../../../shared/http/routes.js';
import { findOrg } from '../../../projections/orgs-and-keys/queries.js';

const orgMeSchema = {
  type: 'object',
  required: ['data'],
  properties: {
    data: {
      type: 'object',
      required: ['id', 'name', 'scopes', 'api_key_id'],
      properties: {
        id: { type: 'integer' },
        name: { type: 'string' },
        scopes: { type: 'array', items: { type: 'string' } },
        api_key_id: { type: 'string' },
      },
    },
  },
};

/** `GET /orgs/me`: the liveness check of a key. */
export function authRoutes(ctx: ServiceContext): RouteDefinition[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/orgs/me',
      operationId: 'getCurrentOrg',
      summary: "The calling API key's organization and scopes",
      tag: 'Organizations',
      scope: null,
      apiKeysOnly: true,
      responses: {
        200: { description: 'The organization of the key', schema: orgMeSchema },
        422: { description: 'The principal has no organization' },
      },
      async handler({ principal }) {
        const org = principal.orgId === null ? null : await findOrg(ctx.pool, principal.orgId);
        if (!org) throw new ApiError('missing_org_context', 'This API key is not bound to an organization');
        return { status: 200, body: { data: { id: org.id, name: org.name, scopes: principal.scopes, api_key_id: principal.keyId } } };
      },
    }),
  ];
}
