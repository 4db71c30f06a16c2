import type { ServiceContext } from '../../shared/service-context.js';
import { assetRoutes } from './assets/routes.js';
import { authRoutes } from './orgs/routes.js';
import type { RouteDefinition } from '../../shared/http/routes.js';
import { locationRoutes } from './locations/routes.js';
import { tagRoutes } from './tags/routes.js';
import { trackingRoutes } from './tracking/routes.js';
import { webhookRoutes } from './webhooks/routes.js';
import { auditRoutes } from './audit/routes.js';
import { importRoutes } from './imports/routes.js';
import { alertRoutes } from './alerts/routes.js';
import { countRoutes } from './counts/routes.js';

/** Every /api/v1 route, from each slice. */
export function apiRoutes(ctx: ServiceContext): RouteDefinition[] {
  return [
    ...authRoutes(ctx),
    ...locationRoutes(ctx),
    ...assetRoutes(ctx),
    ...tagRoutes(ctx),
    ...trackingRoutes(ctx),
    ...webhookRoutes(ctx),
    ...auditRoutes(ctx),
    ...importRoutes(ctx),
    ...alertRoutes(ctx),
    ...countRoutes(ctx),
  ];
}
