/**
 * A person's role in an organization (docs/web-app.md, "People and roles"): a `viewer` reads; an
 * `operator` also keeps master data; an `admin` also keeps readers, webhooks, API keys and members.
 */
export const ROLES = ['admin', 'operator', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

/**
 * What each role of an organization may do (docs/web-app.md, "People and roles"), in the console
 * and with a person's session token on `/api/v1`: each role may do all that the one below it may.
 */
const RANK: Record<Role, number> = { viewer: 0, operator: 1, admin: 2 };

/** Whether `role` may do what needs at least `needed`. */
export function roleAllows(role: Role, needed: Role): boolean {
  return RANK[role] >= RANK[needed];
}

/** The 403 detail for a person whose role does not allow a request (docs/api.md, "Authentication", and docs/web-app.md, "People and roles"). */
export function roleRefusal(role: Role | null): string {
  return `Your role (${role ?? 'none'}) does not allow this`;
}

/**
 * The least role whose session token may use an operation that asks API keys for `scope`
 * (docs/web-app.md, "People and roles"): reads are every role's, writes of master data the
 * operators', and webhooks and the audit log the admins'. A scope not named here is the admins'
 * (an operation of another role says so itself, `RouteDefinition.sessionRole`).
 */
const SESSION_ROLE_FOR_SCOPE: Readonly<Record<string, Role>> = {
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

export function sessionRoleFor(scope: string | null): Role {
  if (scope === null) return 'viewer';
  return SESSION_ROLE_FOR_SCOPE[scope] ?? 'admin';
}

/**
 * A person's membership of one organization as a session token binds it (docs/web-app.md,
 * "Session tokens"): the role, and the revision of the user's stream that set it.
 */
export interface Membership {
  role: Role;
  revision: string;
}
