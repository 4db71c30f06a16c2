import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { getAssetView } from '../../projections/assets/queries.js';
import { findLocationView } from '../../projections/locations/queries.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from './http.js';

/**
 * Reads by id that arrive in the same turn of the event loop share one statement
 * (shared/db/views-by-id.ts). Each must still get exactly its own answer: its own
 * org's view, and a miss for another org's id (docs/api.md "Errors": not_found), as a read on its own would.
 */

interface Item {
  id: number;
}

let svc: TestService;
let orgA: number;
let orgB: number;
let callA: ReturnType<typeof client>;
let callB: ReturnType<typeof client>;

beforeAll(async () => {
  svc = await startTestService('views_by_id');
  const ctx = svc.service.ctx;
  orgA = (await createOrg(ctx, 'Batch A')).id;
  orgB = (await createOrg(ctx, 'Batch B')).id;
  const scopes = ['assets:read', 'assets:write', 'locations:read', 'locations:write'];
  callA = client(svc.apiUrl, (await mintApiKey(ctx, { orgId: orgA, scopes })).token);
  callB = client(svc.apiUrl, (await mintApiKey(ctx, { orgId: orgB, scopes })).token);
});

afterAll(async () => {
  await svc?.stop();
});

const created = async (call: ReturnType<typeof client>, path: string, body: object) => {
  const reply = await call<{ data: Item }>('POST', path, { body });
  expect(reply.status).toBe(201);
  return reply.text;
};

describe('reads by id batched per event-loop turn', () => {
  it('one statement for reads of one turn; each gets its own org’s view or a miss', async () => {
    const a1 = JSON.parse(await created(callA, '/assets', { name: 'a1' })).data;
    const a2 = JSON.parse(await created(callA, '/assets', { name: 'a2', tags: [{ tag_type: 'barcode', value: `B-${Date.now()}` }] })).data;
    const b1 = JSON.parse(await created(callB, '/assets', { name: 'b1' })).data;
    const { pool } = svc.service.ctx;
    const query = vi.spyOn(pool, 'query');
    try {
      const views = await Promise.all([
        getAssetView(pool, orgA, a1.id),
        getAssetView(pool, orgB, a1.id),
        getAssetView(pool, orgA, b1.id),
        getAssetView(pool, orgB, b1.id),
        getAssetView(pool, orgA, 2_000_000_000),
        getAssetView(pool, orgA, a2.id),
        getAssetView(pool, orgA, a1.id),
      ]);
      // (The pool also serves the service's background work: count only the reads by id.)
      const reads = query.mock.calls.filter(([config]) => String((config as { text?: string }).text).includes('FROM (VALUES'));
      expect(reads).toHaveLength(1);
      expect(views.map((v) => (v === null ? null : JSON.parse(v.text)))).toEqual([a1, null, null, b1, null, a2, a1]);
    } finally {
      query.mockRestore();
    }
  });

  it('locations too', async () => {
    const la = JSON.parse(await created(callA, '/locations', { name: 'la' })).data;
    const lb = JSON.parse(await created(callB, '/locations', { name: 'lb', parent_id: null })).data;
    const { pool } = svc.service.ctx;
    const views = await Promise.all([
      findLocationView(pool, orgA, la.id),
      findLocationView(pool, orgB, la.id),
      findLocationView(pool, orgB, lb.id),
      findLocationView(pool, orgA, lb.id),
    ]);
    expect(views.map((v) => (v === null ? null : JSON.parse(v.text)))).toEqual([la, null, lb, null]);
  });

  it('over HTTP, parallel GETs of both orgs for each other’s ids each get their own answer', async () => {
    const mine = await Promise.all(Array.from({ length: 10 }, (_, i) => created(callA, '/assets', { name: `A${i}` })));
    const theirs = await Promise.all(Array.from({ length: 10 }, (_, i) => created(callB, '/assets', { name: `B${i}` })));
    const aIds = mine.map((text) => JSON.parse(text).data.id as number);
    const bIds = theirs.map((text) => JSON.parse(text).data.id as number);
    const requests = [
      ...aIds.map((id, i) => ({ call: callA, id, expect: mine[i]! })),
      ...bIds.map((id, i) => ({ call: callB, id, expect: theirs[i]! })),
      ...aIds.map((id) => ({ call: callB, id, expect: null })),
      ...bIds.map((id) => ({ call: callA, id, expect: null })),
    ];
    const replies = await Promise.all(requests.map((r) => r.call('GET', `/assets/${r.id}`)));
    replies.forEach((reply, i) => {
      const wanted = requests[i]!.expect;
      if (wanted === null) expect(reply.status, `request ${i}`).toBe(404);
      else expect({ status: reply.status, body: reply.text }, `request ${i}`).toEqual({ status: 200, body: wanted });
    });
  });
});
