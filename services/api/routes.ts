import type { ServiceContext } from '../context.js';
import type { RouteDefinition } from './http/routes.js';

/** Every /api/v1 route, from each slice. */
export function apiRoutes(_ctx: ServiceContext): RouteDefinition[] {
  return [];
}
