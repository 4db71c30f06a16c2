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

/** The 403 detail for a person whose role does not allow a request (docs/api.md, "Session tokens"). */
export function roleRefusal(role: Role): string {
  return `Your role (${role}) does not allow this`;
}
