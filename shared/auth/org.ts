import { ApiError } from '../errors.js';
import type { Principal } from '../http/principal.js';

/**
 * The organization every master-data query and command is scoped to. A session minted without
 * an organization has none: it is refused like on GET /orgs/me rather than seeing an empty org.
 */
export function orgOf(principal: Principal): number {
  if (principal.orgId === null) throw new ApiError('missing_org_context', 'The principal has no organization context');
  return principal.orgId;
}
