import type { ServiceContext } from '../context.js';
import { assetRoutes } from './assets/routes.js';
import { authRoutes } from './auth/routes.js';
import type { RouteDefinition } from './http/routes.js';
import { locationRoutes } from './locations/routes.js';
import { tagRoutes } from './tags/routes.js';

/** Every /api/v1 route, from each slice. */
export function apiRoutes(ctx: ServiceContext): RouteDefinition[] {
  return [
    ...authRoutes(ctx),
    ...locationRoutes(ctx),
    ...assetRoutes(ctx),
    ...tagRoutes(ctx),
  ];
}
