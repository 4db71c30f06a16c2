import type { ServiceContext } from '../../../shared/service-context.js';
import { orgOf } from '../../../shared/auth/org.js';
import { listEnvelope, listEnvelopeSchema, pageOf, pagingQuery } from '../../../shared/http/lists.js';
import { defineRoute, type RouteDefinition } from '../../../shared/http/routes.js';
import { jsonSchemaOf } from '../../../shared/http/openapi.js';
import { queryParams } from '../../../shared/http/validation.js';
import { ACTOR_TYPES } from '../../../shared/event-store/command-context.js';
import { ACTIONS, RESOURCE_TYPES } from '../../../projections/audit/actions.js';
import { auditEventSchema, auditExportQuery, listAuditEvents } from '../../../projections/audit/queries.js';

/** The audit log (docs/api.md "Audit log"): who changed what in the organization, newest first. */

const { limit, offset } = pagingQuery([]);

const auditQuery = {
  since: { ...queryParams.timestamp(), description: 'RFC 3339; entries that occurred at or after it' },
  until: { ...queryParams.timestamp(), description: 'RFC 3339; entries that occurred at or before it' },
  actor_type: queryParams.oneOf(ACTOR_TYPES),
  actor_id: { ...queryParams.text({ maxLength: 255 }), description: 'an API key id or a user id' },
  resource_type: queryParams.oneOf(RESOURCE_TYPES),
  resource_id: { ...queryParams.text({ maxLength: 1024 }), description: "the resource's id as text; combine with resource_type (an asset and a location may share an id)" },
  action: queryParams.oneOf(ACTIONS),
  limit,
  offset,
};

export function auditRoutes(ctx: ServiceContext): RouteDefinition[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/audit-events',
      operationId: 'listAuditEvents',
      summary: "Who changed what in the organization: one entry per change, newest first",
      tag: 'Audit',
      scope: 'audit:read',
      // A person's session token: an admin's only (audit:read is the admins', shared/auth/member-roles.ts).
      sessionMemberRole: 'admin',
      query: auditQuery,
      responses: { 200: { description: 'A page of audit entries, newest first', schema: listEnvelopeSchema(jsonSchemaOf(auditEventSchema)) } },
      async handler({ principal, query }) {
        const page = pageOf(query);
        const { data, total } = await listAuditEvents(ctx.pool, orgOf(principal, 'forbidden'), { ...query, ...page });
        return { status: 200, body: listEnvelope(data, page.limit, page.offset, total) };
      },
      export: {
        pool: ctx.pool,
        source: async ({ principal, query }) => ({ query: auditExportQuery(orgOf(principal, 'forbidden'), query) }),
      },
    }),
  ];
}
