import { describe, expect, it } from 'vitest';
import { createUser, setPasswordWithSetupLink } from '../../shared/domain/people/commands.js';
import { createOrg } from '../support/auth.js';
import { processWorld } from '../support/processes.js';
import { AppClient, tokenOf } from '../people/app-client.js';

/**
 * A demoted or removed admin keeps no power through a session token (docs/web-app.md, "Session
 * tokens"), across processes: `ROLES=api` twice and `ROLES=projector` as child processes on one
 * Postgres. Admin P's console holds a session token from the first api process; admin A demotes,
 * then removes P through the second. Within a second of each answer, P's token is refused by both
 * processes, and P's attempt to create a webhook endpoint (which would outlive any token) never
 * creates one.
 */

const SLOW = 240_000;
const PASSWORD = 'correct horse battery';

const world = processWorld('auth_revocation_processes', SLOW);

/** An admin of `orgId`, set up and signed in to the console served by `apiUrl`. */
async function adminSignedIn(apiUrl: string, orgId: number, email: string): Promise<{ client: AppClient; userId: string }> {
  const created = await createUser(world.ctx, { email, orgId, role: 'admin', by: { kind: 'cli' }, publicUrl: new URL(apiUrl).origin });
  await setPasswordWithSetupLink(world.ctx, { token: tokenOf(created.setup_url), password: PASSWORD });
  const client = new AppClient(apiUrl);
  expect((await client.signIn(email, PASSWORD, orgId)).status).toBe(200);
  return { client, userId: created.id };
}

async function createEndpoint(apiUrl: string, token: string, url: string): Promise<{ status: number; detail: string | undefined }> {
  const response = await fetch(`${apiUrl}/webhook-endpoints`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url, event_types: ['asset.moved'] }),
  });
  const body = (await response.json()) as { error?: { detail: string } };
  return { status: response.status, detail: body.error?.detail };
}

/** Milliseconds from now until a probe of `token` on every api process answers `status`; fails past a second. */
async function refusedEverywhereWithin(apis: string[], token: string, status: number): Promise<number> {
  const started = Date.now();
  for (const api of apis) {
    for (;;) {
      const answer = await fetch(`${api}/assets`, { headers: { authorization: `Bearer ${token}` } });
      await answer.arrayBuffer();
      if (answer.status === status) break;
      expect(Date.now() - started, `${api} still answers ${answer.status}`).toBeLessThan(1000);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
  return Date.now() - started;
}

describe('a demoted or removed admin, with api processes apart', () => {
  it("ends P's session tokens on both processes within a second of the demotion and of the removal; no endpoint is ever created", async () => {
    await world.processes.start('projector');
    const [one, two] = await Promise.all([world.processes.start('api'), world.processes.start('api')]);
    const apiOne = one.urls.api!;
    const apiTwo = two.urls.api!;
    const orgId = (await createOrg(world.ctx, 'two admins')).id;
    const a = await adminSignedIn(apiTwo, orgId, 'a@example.com');
    const p = await adminSignedIn(apiOne, orgId, 'p@example.com');

    // 1. P's console fetches its session token; it works on both processes (and is cached there).
    const t = (await p.client.request('POST', '/session-token')).body.data.token as string;
    for (const api of [apiOne, apiTwo]) expect((await fetch(`${api}/webhook-endpoints`, { headers: { authorization: `Bearer ${t}` } })).status).toBe(200);

    // 2. A demotes P through the other process; 3. P's token is ended everywhere within a second.
    expect((await a.client.request('PATCH', `/members/${p.userId}`, { role: 'operator' })).status).toBe(200);
    await refusedEverywhereWithin([apiOne, apiTwo], t, 401);
    for (const api of [apiOne, apiTwo]) expect(await createEndpoint(api, t, 'https://elsewhere.example/h')).toEqual({ status: 401, detail: 'Invalid or expired token' });
    // P's console goes on with a new token, of an operator now: writing master data, not webhooks.
    const asOperator = (await p.client.request('POST', '/session-token')).body.data.token as string;
    for (const api of [apiOne, apiTwo]) {
      expect(await createEndpoint(api, asOperator, 'https://elsewhere.example/h')).toEqual({ status: 403, detail: 'Your role (operator) does not allow this' });
    }

    // A removes P: the newer token ends as well, everywhere, within a second.
    expect((await a.client.request('DELETE', `/members/${p.userId}`)).status).toBe(204);
    await refusedEverywhereWithin([apiOne, apiTwo], asOperator, 401);
    for (const api of [apiOne, apiTwo]) expect((await createEndpoint(api, asOperator, 'https://elsewhere.example/h')).status).toBe(401);

    // Not one endpoint came into being.
    const tokenOfA = (await a.client.request('POST', '/session-token')).body.data.token as string;
    const listed = await fetch(`${apiTwo}/webhook-endpoints`, { headers: { authorization: `Bearer ${tokenOfA}` } });
    expect(((await listed.json()) as { data: unknown[] }).data).toEqual([]);
  }, SLOW);
});
