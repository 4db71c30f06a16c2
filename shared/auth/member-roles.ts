/**
 * A person's role in an organization, their member role (docs/web-app.md, "People and roles"): a
 * `viewer` reads; an `operator` also keeps master data; an `admin` also keeps readers, webhooks,
 * API keys and members. ("Role" alone is a process role of the service, services/role.ts.)
 */
export const MEMBER_ROLES = ['admin', 'operator', 'viewer'] as const;
export type MemberRole = (typeof MEMBER_ROLES)[number];

/**
 * What each member role may do (docs/web-app.md, "People and roles"), in the console
 * and with a person's session token on `/api/v1`: each role may do all that the one below it may.
 */
const RANK: Record<MemberRole, number> = { viewer: 0, operator: 1, admin: 2 };

/** Whether the member role `role` may do what needs at least `needed`. */
export function memberRoleAllows(role: MemberRole, needed: MemberRole): boolean {
  return RANK[role] >= RANK[needed];
}

/** The 403 detail for a person whose member role does not allow a request (docs/api.md, "Authentication", and docs/web-app.md, "People and roles"). */
export function memberRoleRefusal(role: MemberRole | null): string {
  return `Your role (${role ?? 'none'}) does not allow this`;
}

/**
 * The least member role whose session token may use an operation that asks API keys for `scope`
 * (docs/web-app.md, "People and roles"): reads are every role's, writes of master data the
 * operators', and webhooks and the audit log the admins'. A scope not named here is the admins'
 * (an operation of another member role says so itself, `RouteDefinition.sessionMemberRole`).
 */
const SESSION_MEMBER_ROLE_FOR_SCOPE: Readonly<Record<string, MemberRole>> = {
  'assets:read': 'viewer',
  'locations:read': 'viewer',
  'tracking:read': 'viewer',
  'alerts:read': 'viewer',
  'counts:read': 'viewer',
  'assets:write': 'operator',
  'locations:write': 'operator',
  'counts:write': 'operator',
  'webhooks:read': 'admin',
  'webhooks:write': 'admin',
  'audit:read': 'admin',
  'alerts:write': 'admin',
};

export function sessionMemberRoleFor(scope: string | null): MemberRole {
  if (scope === null) return 'viewer';
  return SESSION_MEMBER_ROLE_FOR_SCOPE[scope] ?? 'admin';
}

/**
 * A person's membership of one organization as a session token binds it (docs/web-app.md,
 * "Session tokens"): the member role, and the revision of the user's stream that set it.
 */
export interface Membership {
  role: MemberRole;
  revision: string;
}
