import { z } from 'zod';
import { ApiError } from '../../../shared/errors.js';
import type { ServiceContext } from '../../../shared/service-context.js';
import { viewFields } from '../../../shared/domain/fields.js';
import { dataEnvelopeSchema, jsonSchemaOf } from '../../../shared/http/openapi.js';
import { defineRoute, type RouteDefinition } from '../../../shared/http/routes.js';
import { findOrg } from '../../../projections/orgs-and-keys/queries.js';

/** docs/api.md "Your key: GET /orgs/me": the organization of the key, its scopes and its id. */
const orgMeView = z.object({
  id: viewFields.id,
  name: z.string(),
  scopes: z.array(z.string()).describe('The scopes of the key; clients tolerate unknown scope strings.'),
  api_key_id: z.string(),
});
const orgMeSchema = dataEnvelopeSchema(jsonSchemaOf(orgMeView));

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
