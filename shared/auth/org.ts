import { ApiError } from '../errors.js';
import type { Principal } from './principal.js';

/**
 * The organization every master-data query and command is scoped to. The route pipeline already
 * refuses sessions without one, and every API key has one, so this refusal guards a principal
 * the pipeline let through without an org (a custom authenticator). Assets and tags answer it as
 * on GET /orgs/me (`422 missing_org_context`); locations have always answered `403 forbidden`,
 * and keep doing so.
 */
const REFUSALS = {
  missing_org_context: () => new ApiError('missing_org_context', 'The principal has no organization context'),
  forbidden: () => new ApiError('forbidden', 'This principal has no organization'),
} as const;

export function orgOf(principal: Principal, refusal: keyof typeof REFUSALS = 'missing_org_context'): number {
  if (principal.orgId === null) throw REFUSALS[refusal]();
  return principal.orgId;
}
