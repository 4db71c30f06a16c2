import type { ServiceContext } from '../../../shared/service-context.js';
import { orgOf } from '../../../shared/auth/org.js';
import { NotFoundError } from '../../../shared/errors.js';
import { listEnvelope, listEnvelopeSchema, pageOf, pagingQuery, refuseAmbiguous } from '../../../shared/http/lists.js';
import { defineRoute, type RouteDefinition } from '../../../shared/http/routes.js';
import { jsonSchemaOf } from '../../../shared/http/openapi.js';
import { queryParams } from '../../../shared/http/validation.js';
import {
  HISTORY_SORT_FIELDS,
  REPORT_SORT_FIELDS,
  historyExportQuery,
  isExistingAsset,
  readHistory,
  readReport,
  reportExportQuery,
  reportRowSchema,
  visitRowSchema,
} from '../../../projections/tracking/queries.js';

const reportQuery = {
  location_id: { ...queryParams.id(), description: "the asset's current location (at `at`, when given)" },
  location_external_key: { ...queryParams.externalKey(), description: "the asset's current location (at `at`, when given), by key" },
  asset_id: queryParams.id(),
  asset_external_key: queryParams.externalKey(),
  include_deleted: { ...queryParams.bool(), description: 'include soft-deleted assets, default false' },
  at: {
    ...queryParams.instant(),
    description:
      'RFC 3339; the report as it stood at that instant in observed time: from every read observed at or before it, late ones included. In the future, or absent: now',
  },
  ...pagingQuery(REPORT_SORT_FIELDS),
};

const historyQuery = {
  from: { ...queryParams.instant(), description: 'RFC 3339; visits that end at or after it (inclusive)' },
  to: { ...queryParams.instant(), description: 'RFC 3339; visits that begin at or before it (inclusive)' },
  ...pagingQuery(HISTORY_SORT_FIELDS),
};


/** The tracking views: where assets are (the report) and where one has been (its history). */
export function trackingRoutes(ctx: ServiceContext): RouteDefinition[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/reports/asset-locations',
      operationId: 'getAssetLocationReport',
      summary: 'Where every scanned, currently effective asset is now, or was at an instant',
      tag: 'Tracking',
      scope: 'tracking:read',
      query: reportQuery,
      responses: {
        200: { description: 'A page of report rows', schema: listEnvelopeSchema(jsonSchemaOf(reportRowSchema)) },
        400: { description: 'ambiguous_fields: both forms of the location or of the asset.' },
      },
      async handler({ principal, query }) {
        refuseAmbiguous(query, 'location_id', 'location_external_key');
        refuseAmbiguous(query, 'asset_id', 'asset_external_key');
        const { limit, offset } = pageOf(query);
        const page = await readReport(ctx.pool, orgOf(principal), { ...query, limit, offset });
        return { status: 200, body: listEnvelope(page.data, limit, offset, page.total) };
      },
      export: {
        pool: ctx.pool,
        async source({ principal, query }) {
          refuseAmbiguous(query, 'location_id', 'location_external_key');
          refuseAmbiguous(query, 'asset_id', 'asset_external_key');
          return { query: reportExportQuery(orgOf(principal), query) };
        },
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/assets/{asset_id}/history',
      operationId: 'getAssetHistory',
      summary: "An asset's visits: maximal runs of its scans at one location",
      tag: 'Tracking',
      scope: 'tracking:read',
      query: historyQuery,
      responses: {
        200: { description: 'A page of visits', schema: listEnvelopeSchema(jsonSchemaOf(visitRowSchema)) },
        404: { description: 'No such live asset in this organization' },
      },
      async handler({ principal, params, query }) {
        const { limit, offset } = pageOf(query);
        const page = await readHistory(ctx.pool, orgOf(principal), params.asset_id!, { ...query, limit, offset });
        if (!page) throw new NotFoundError(`Asset ${params.asset_id} not found`);
        return { status: 200, body: listEnvelope(page.data, limit, offset, page.total) };
      },
      export: {
        pool: ctx.pool,
        async source({ principal, params, query }, db) {
          const orgId = orgOf(principal);
          if (!(await isExistingAsset(db, orgId, params.asset_id!))) throw new NotFoundError(`Asset ${params.asset_id} not found`);
          return { query: historyExportQuery(orgId, params.asset_id!, query) };
        },
      },
    }),
  ];
}
