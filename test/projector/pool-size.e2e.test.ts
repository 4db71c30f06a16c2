import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allProjections } from '../../projections/index.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';
import type { Json } from '../people/app-client.js';

/**
 * A process's pool next to the segments it follows (docs/operations.md "Configuration", `PG_POOL_SIZE`): a
 * follower keeps a connection while it holds a segment, and one process with every role holds
 * every segment of every projection until another joins. With PROJECTION_SEGMENTS=4 that is more
 * connections than a small PG_POOL_SIZE; the pool has them on top, so that commands (which wait
 * for every projection) and requests still get one. Without that, the first command times out
 * waiting for projections whose followers cannot connect.
 */

let svc: TestService;
let api: ReturnType<typeof client>;

beforeAll(async () => {
  svc = await startTestService('pool_size', { PG_POOL_SIZE: '3', PROJECTION_SEGMENTS: '4', PROJECTOR_LEASE_SECONDS: '5' });
  const orgId = (await createOrg(svc.service.ctx, 'Pool')).id;
  api = client(svc.apiUrl, (await mintApiKey(svc.service.ctx, { orgId, name: 'pool', scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write'] })).token);
}, 120_000);

afterAll(async () => {
  await svc?.stop();
});

describe('the pool of a process that follows many segments', () => {
  it('holds every segment of every projection and still serves commands and reads (PG_POOL_SIZE=3, PROJECTION_SEGMENTS=4)', async () => {
    const segments = allProjections().reduce((n, p) => n + (p.splittable ? 4 : 1), 0);
    expect(segments, 'more segments than PG_POOL_SIZE: the case this is about').toBeGreaterThan(3);
    // Every segment held by this one process (and the webhooks role's subscriber beside them).
    const held = async () => (await svc.service.ctx.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM read_model.projection_leases WHERE expires_at > now()`)).rows[0]!.n;
    await expect.poll(held, { timeout: 30_000 }).toBeGreaterThanOrEqual(segments);
    for (let i = 0; i < 5; i++) {
      const created = await api<Json>('POST', '/locations', { body: { name: `Room ${i}`, external_key: `ROOM-${i}` } });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      expect((await api<Json>('GET', `/locations/${created.body.data.id}`)).status).toBe(200);
    }
  }, 120_000);
});
