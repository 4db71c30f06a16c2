import { z } from 'zod';
import { ValidationFailed } from '../../../shared/errors.js';
import type { ServiceContext } from '../../../shared/service-context.js';
import { bodyId, externalKey } from '../../../shared/domain/fields.js';
import { assignScanPoint, registerReader, unassignScanPoint } from '../../../shared/domain/readers/commands.js';
import { listReaders, listScanPoints } from '../../../projections/readers/queries.js';
import { listUnknownReadsWithOwners } from '../../../projections/tracking/queries.js';
import { appRoute, type AppRoute, type SignedIn } from './pipeline.js';
import type { LiveReadsHub } from './live-reads.js';

/**
 * The web application's operator endpoints (docs/web-app.md "Operator endpoints"): an admin's
 * readers and scan points of the current organization, its reads that placed nothing, and the
 * live view of reads. They run the CLI's command handlers (`readers register`, `scan-points
 * assign|unassign`), so both write the same events with the same refusals; reader events name
 * no actor, so none is recorded.
 */

const name = (field: string) =>
  z
    .string()
    .min(1)
    .max(255)
    .regex(/^[^\x00-\x1F\x7F]*$/, `${field} must not contain control characters`);

const locationRef = z
  .strictObject({ external_key: externalKey('location.external_key').optional(), id: bodyId.optional() })
  .superRefine((location, ctx) => {
    const given = (['external_key', 'id'] as const).filter((k) => location[k] !== undefined);
    if (given.length > 1) {
      for (const key of given) ctx.addIssue({ code: 'custom', path: [key], message: 'Supply only one of location.external_key or location.id', params: { code: 'ambiguous_fields' } });
    } else if (given.length === 0) {
      ctx.addIssue({ code: 'custom', message: 'location must have one of external_key or id', params: { code: 'required' } });
    }
  });

/** The current organization of a member or admin route (the pipeline has checked there is one). */
const orgOf = (caller: SignedIn | null): number => caller!.org!.id;

/** An optional query parameter given at most once, of 1 to 255 characters. */
function queryText(query: unknown, key: string): string | null {
  const value = (query as Record<string, unknown> | undefined)?.[key];
  if (value === undefined) return null;
  if (typeof value !== 'string' || value.length === 0 || value.length > 255) {
    throw new ValidationFailed([{ field: key, code: 'invalid_value', message: `${key} must be given once, 1 to 255 characters` }]);
  }
  return value;
}

/** A whole number query parameter in [min, max], or its default when absent. */
function queryInteger(query: unknown, key: string, min: number, max: number, fallback: number): number {
  const value = (query as Record<string, unknown> | undefined)?.[key];
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !/^\d{1,10}$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new ValidationFailed([{ field: key, code: 'invalid_value', message: `${key} must be a whole number from ${min} to ${max}` }]);
  }
  return Number(value);
}

export function operatorRoutes(ctx: ServiceContext, live: LiveReadsHub): AppRoute[] {
  return [
    // ---- readers and scan points of the current organization (admins) ------------------------
    appRoute({
      method: 'GET',
      path: '/readers',
      access: 'admin',
      async handler({ caller }) {
        return { status: 200, body: { data: await listReaders(ctx.pool, orgOf(caller)) } };
      },
    }),
    appRoute({
      method: 'POST',
      path: '/readers',
      access: 'admin',
      body: z.strictObject({ reader_id: name('reader_id') }),
      async handler({ caller, body }) {
        return { status: 200, body: { data: await registerReader(ctx, orgOf(caller), body.reader_id) } };
      },
    }),
    appRoute({
      method: 'GET',
      path: '/scan-points',
      access: 'admin',
      async handler({ request, caller }) {
        const reader = queryText(request.query, 'reader');
        return { status: 200, body: { data: await listScanPoints(ctx.pool, orgOf(caller), reader ?? undefined) } };
      },
    }),
    appRoute({
      method: 'POST',
      path: '/scan-points',
      access: 'admin',
      body: z.strictObject({ reader_id: name('reader_id'), capture_point: name('capture_point'), location: locationRef }),
      async handler({ caller, body }) {
        const point = { orgId: orgOf(caller), readerId: body.reader_id, capturePoint: body.capture_point };
        const assigned = await assignScanPoint(
          ctx,
          body.location.id !== undefined ? { ...point, locationId: body.location.id } : { ...point, locationExternalKey: body.location.external_key! },
        );
        return { status: 200, body: { data: assigned } };
      },
    }),
    appRoute({
      method: 'DELETE',
      path: '/scan-points/:reader_id/:capture_point',
      access: 'admin',
      async handler({ caller, params }) {
        return { status: 200, body: { data: await unassignScanPoint(ctx, { orgId: orgOf(caller), readerId: params.reader_id!, capturePoint: params.capture_point! }) } };
      },
    }),

    // ---- reads that placed nothing, and the live view (every role) ---------------------------
    appRoute({
      method: 'GET',
      path: '/scans/unknown',
      access: 'viewer',
      async handler({ request, caller }) {
        const limit = queryInteger(request.query, 'limit', 1, 1000, 500);
        const offset = queryInteger(request.query, 'offset', 0, 2_000_000_000, 0);
        const page = await listUnknownReadsWithOwners(ctx.pool, orgOf(caller), { limit, offset });
        return { status: 200, body: { data: page.rows, limit, offset, total_count: page.total } };
      },
    }),
    appRoute({
      method: 'GET',
      path: '/live/reads',
      access: 'viewer',
      async handler({ request, reply, caller }) {
        const filters = { reader: queryText(request.query, 'reader'), capturePoint: queryText(request.query, 'capture_point') };
        // A HEAD learns that a stream would open, without opening one.
        if (request.method === 'HEAD') return { status: 200 };
        await live.open(reply, { orgId: orgOf(caller), sessionId: caller!.session.idSha256, filters, requestId: String(request.id) });
        return { streamed: true };
      },
    }),
    appRoute({
      method: 'GET',
      path: '/live/alerts',
      access: 'viewer',
      async handler({ request, reply, caller }) {
        // The Alerts inbox's notices that alerts changed (docs/web-app.md "Live alerts"); it takes no filter.
        if (request.method === 'HEAD') return { status: 200 };
        await live.open(reply, { orgId: orgOf(caller), sessionId: caller!.session.idSha256, filters: { reader: null, capturePoint: null }, requestId: String(request.id), topic: 'alerts' });
        return { streamed: true };
      },
    }),
  ];
}
