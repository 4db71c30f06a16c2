import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg } from '../../shared/domain/orgs-and-keys/commands.js';
import type { MemberRole } from '../../shared/auth/member-roles.js';
import { apiRoutes } from '../../services/api/routes.js';
import { allAppRoutes } from '../../services/api/role.js';
import type { LiveReadsHub } from '../../services/api/app/live-reads.js';
import { startTestService, type TestService } from '../support/service.js';
import { signedInUser } from '../operator/sse-client.js';
import type { AppClient } from '../people/app-client.js';

// What each member role may do, in the console and with a person's session token on /api/v1
// (docs/web-app.md, "People and roles"), for every route of both route tables: a route added
// without a line in the tables below fails here, so none is forgotten. The tables are written
// from the docs, not from the code under test.

const RANK: Record<MemberRole, number> = { viewer: 0, operator: 1, admin: 2 };
const MEMBER_ROLES: MemberRole[] = ['viewer', 'operator', 'admin'];

/** The least member role for an /api/v1 operation, as docs/web-app.md's table says. */
function publicMemberRoleFor(method: string, path: string): MemberRole | 'api keys only' {
  if (path === '/orgs/me') return 'api keys only';
  // Webhooks and the audit log are the admins', to read as well.
  if (path.startsWith('/webhook-endpoints') || path.startsWith('/audit-events')) return 'admin';
  if (method === 'GET') return 'viewer';
  if (path.startsWith('/alert-rules')) return 'admin';
  // Master data, imports, counts, acknowledging alerts: the operators'.
  if (/^\/(assets|locations|imports|counts|alerts)(\/|$)/.test(path)) return 'operator';
  throw new Error(`no role known for ${method} ${path}: add it to this table from docs/web-app.md`);
}

/** The least member role for each of the console's own endpoints (docs/web-app.md, "App endpoints"). */
const APP_MEMBER_ROLES: Record<string, 'anyone' | 'signed in' | MemberRole> = {
  'POST /sign-in': 'anyone',
  'GET /sign-in/options': 'anyone',
  'POST /links/check': 'anyone',
  'POST /sign-out': 'signed in',
  'GET /me': 'signed in',
  'POST /session/org': 'signed in',
  'POST /password': 'signed in',
  'POST /session-token': 'signed in',
  'POST /password-setup': 'anyone',
  'POST /invitations/accept': 'anyone',
  'GET /keys': 'admin',
  'POST /keys': 'admin',
  'DELETE /keys/:key_id': 'admin',
  'GET /members': 'admin',
  'POST /members/invitations': 'admin',
  'GET /members/invitations': 'admin',
  'DELETE /members/invitations/:invitation_id': 'admin',
  'PATCH /members/:user_id': 'admin',
  'DELETE /members/:user_id': 'admin',
  'POST /members/:user_id/unlock': 'admin',
  'POST /members/:user_id/setup-link': 'admin',
  'GET /readers': 'admin',
  'POST /readers': 'admin',
  'GET /scan-points': 'admin',
  'POST /scan-points': 'admin',
  'DELETE /scan-points/:reader_id/:capture_point': 'admin',
  'GET /scans/unknown': 'viewer',
  'GET /live/reads': 'viewer',
  'GET /live/alerts': 'viewer',
  'POST /scans': 'operator',
};

let svc: TestService;
let orgId: number;
const people = {} as Record<MemberRole, AppClient & { email: string }>;
const tokens = {} as Record<MemberRole, string>;

beforeAll(async () => {
  svc = await startTestService('auth_role_matrix');
  const ctx = svc.service.ctx;
  orgId = (await createOrg(ctx, 'Acme')).id;
  for (const role of MEMBER_ROLES) {
    people[role] = await signedInUser(ctx, svc.apiUrl, orgId, role);
    const minted = await people[role].request('POST', '/session-token');
    expect(minted.status).toBe(200);
    tokens[role] = minted.body.data.token;
  }
});

afterAll(async () => {
  await svc?.stop();
});

const filled = (path: string) => path.replace(/\{[a-z_]+\}|:[a-z_]+/g, '1');

describe('member roles × /api/v1 with the person’s session token', () => {
  it('every operation answers each role as the table says: 403 "Your role (<role>) does not allow this" below its least role, never that above', async () => {
    const routes = apiRoutes(svc.service.ctx);
    expect(routes.length).toBeGreaterThan(20);
    for (const route of routes) {
      const needed = publicMemberRoleFor(route.method, route.path);
      for (const role of MEMBER_ROLES) {
        const method = route.method === 'GET' ? 'HEAD' : route.method;
        const headers: Record<string, string> = { authorization: `Bearer ${tokens[role]}` };
        if (route.method === 'POST') headers['content-type'] = 'application/json';
        if (route.method === 'PATCH') headers['content-type'] = 'application/merge-patch+json';
        const response = await fetch(`${svc.apiUrl}${filled(route.path)}`, { method, headers, body: route.method === 'POST' || route.method === 'PATCH' ? '{}' : undefined });
        const text = await response.text();
        const answer = { status: response.status, json: () => JSON.parse(text) };
        const what = `${role} ${route.method} ${route.path}`;
        if (needed === 'api keys only') {
          expect(answer.status, what).toBe(401);
        } else if (RANK[role] < RANK[needed]) {
          expect(answer.status, what).toBe(403);
          if (method !== 'HEAD') expect(answer.json().error.detail, what).toBe(`Your role (${role}) does not allow this`);
        } else {
          expect(answer.status, what).not.toBe(403);
          expect(answer.status, what).not.toBe(401);
        }
      }
    }
  });
});

describe('member roles × the console’s own endpoints', () => {
  it('every app endpoint is in the table, and answers each role as it says', async () => {
    const routes = allAppRoutes(svc.service.ctx, () => svc.apiUrl, null as unknown as LiveReadsHub);
    for (const route of routes) {
      const key = `${route.method} ${route.path}`;
      const needed = APP_MEMBER_ROLES[key];
      expect(needed, `${key} is in the table`).toBeDefined();
      if (needed === 'anyone' || needed === 'signed in' || needed === undefined) continue;
      for (const role of MEMBER_ROLES) {
        // A GET is asked as HEAD: the check is the same, and the live stream does not open.
        const method = route.method === 'GET' ? 'HEAD' : route.method;
        const answer = await people[role].request(method, filled(route.path), route.method === 'GET' || route.method === 'DELETE' ? undefined : {});
        const what = `${role} ${key}`;
        if (RANK[role] < RANK[needed]) {
          expect(answer.status, what).toBe(403);
          if (method !== 'HEAD') expect(answer.body.error.detail, what).toBe(`Your role (${role}) does not allow this`);
        } else {
          expect(answer.status, what).not.toBe(403);
          expect(answer.status, what).not.toBe(401);
        }
      }
    }
  });
});
