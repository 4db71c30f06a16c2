import type { ServiceContext } from '../context.js';
import { authRoutes } from './auth/routes.js';
import type { RouteDefinition } from './http/routes.js';

/** Every /api/v1 route, from each slice. */
export function apiRoutes(ctx: ServiceContext): RouteDefinition[] {
  return [
    ...authRoutes(ctx),
  ];
}
