import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocationDeleted, LocationUpdated, locationStream } from '../../shared/domain/locations/events.js';
import { startTestService, type TestService } from '../support/service.js';
import { newClient, uniqueKey, type Client } from './locations.support.js';

/**
 * Tree and key invariants under real parallel requests (docs/design.md "Invariants across streams": invariants
 * that span streams must hold under concurrency; docs/api.md "Requests and responses" and "Deleting").
 */

let svc: TestService;

beforeAll(async () => {
  svc = await startTestService('locations_concurrency');
});
afterAll(async () => {
  await svc?.stop();
});

/** Read-model check: no row is its own ancestor, and every path ends with the row's parent. */
async function treeIsConsistent(orgId: number): Promise<void> {
  const pool = svc.service.ctx.pool;
  const cycles = await pool.query('SELECT id FROM locations WHERE org_id = $1 AND id = ANY(ancestors)', [orgId]);
  expect(cycles.rows).toEqual([]);
  const broken = await pool.query(
    `SELECT id FROM locations
      WHERE org_id = $1 AND (parent_id IS DISTINCT FROM ancestors[cardinality(ancestors)])`,
    [orgId],
  );
  expect(broken.rows).toEqual([]);
  const orphans = await pool.query(
    `SELECT c.id FROM locations c JOIN locations p ON p.id = c.parent_id
      WHERE c.org_id = $1 AND c.deleted_at IS NULL AND p.deleted_at IS NOT NULL`,
    [orgId],
  );
  expect(orphans.rows).toEqual([]);
}

describe('concurrency', () => {
  let api: Client;
  beforeAll(async () => {
    api = await newClient(svc, 'concurrency');
  });

  it('fifty concurrent creates with one external_key: one 201, forty-nine 409 (docs/design.md "Invariants across streams")', async () => {
    const key = uniqueKey('Race');
    const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => api.post('/locations', { name: `racer ${i}`, external_key: key })));
    const statuses = replies.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(49);
    const listed = await api.get(`/locations?external_key=${key}`);
    expect(listed.body.total_count).toBe(1);
  });

  it('concurrent opposite re-parents (A under B, B under A) never form a cycle', async () => {
    for (let round = 0; round < 12; round++) {
      const A = await api.create({ name: 'A' });
      const B = await api.create({ name: 'B' });
      const [ab, ba] = await Promise.all([api.patch(`/locations/${A.id}`, { parent_id: B.id }), api.patch(`/locations/${B.id}`, { parent_id: A.id })]);
      const statuses = [ab.status, ba.status].sort();
      expect(statuses, JSON.stringify([ab.body, ba.body])).toEqual([200, 409]);
      const aAnc = (await api.get(`/locations/${A.id}/ancestors`)).body.data.map((l: { id: number }) => l.id);
      const bAnc = (await api.get(`/locations/${B.id}/ancestors`)).body.data.map((l: { id: number }) => l.id);
      expect(aAnc).not.toContain(A.id);
      expect(bAnc).not.toContain(B.id);
      expect(aAnc.length + bAnc.length).toBe(1);
    }
    await treeIsConsistent(api.orgId);
  });

  it('a three-way rotation (A→B, B→C, C→A at once) leaves a tree', async () => {
    for (let round = 0; round < 6; round++) {
      const [A, B, C] = [await api.create({ name: 'A' }), await api.create({ name: 'B' }), await api.create({ name: 'C' })];
      const replies = await Promise.all([
        api.patch(`/locations/${A.id}`, { parent_id: B.id }),
        api.patch(`/locations/${B.id}`, { parent_id: C.id }),
        api.patch(`/locations/${C.id}`, { parent_id: A.id }),
      ]);
      const statuses = replies.map((r) => r.status).sort();
      expect(statuses).toEqual([200, 200, 409]);
      for (const node of [A, B, C]) {
        const anc = (await api.get(`/locations/${node.id}/ancestors`)).body.data.map((l: { id: number }) => l.id);
        expect(anc).not.toContain(node.id);
      }
    }
    await treeIsConsistent(api.orgId);
  });

  it('a delete racing a child create under it never leaves an existing child under a deleted parent', async () => {
    let deletedFirst = 0;
    let createdFirst = 0;
    for (let round = 0; round < 12; round++) {
      const P = await api.create({ name: 'P', external_key: uniqueKey('P') });
      const [del, child] = await Promise.all([
        api.del(`/locations/${P.id}`),
        api.post('/locations', round % 2 === 0 ? { name: 'child', parent_id: P.id } : { name: 'child', parent_external_key: P.external_key }),
      ]);
      if (del.status === 204) {
        deletedFirst++;
        expect(child.status).toBe(400);
        expect(child.body.error.fields[0].code).toBe('fk_not_found');
      } else {
        createdFirst++;
        expect(del.status).toBe(409);
        expect(child.status).toBe(201);
        expect((await api.get(`/locations/${P.id}/children`)).body.total_count).toBe(1);
      }
    }
    expect(deletedFirst + createdFirst).toBe(12);
    await treeIsConsistent(api.orgId);
  });

  it('a re-parent racing a delete of the new parent: never an existing child under a deleted parent', async () => {
    for (let round = 0; round < 8; round++) {
      const P = await api.create({ name: 'P' });
      const X = await api.create({ name: 'X' });
      const [move, del] = await Promise.all([api.patch(`/locations/${X.id}`, { parent_id: P.id }), api.del(`/locations/${P.id}`)]);
      expect([move.status, del.status].sort()).toEqual(move.status === 200 ? [200, 409] : [204, 400]);
    }
    await treeIsConsistent(api.orgId);
  });

  it('concurrent creates under one parent all succeed (the tree lock retries, it does not refuse)', async () => {
    const P = await api.create({ name: 'P' });
    const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => api.post('/locations', { name: `c${i}`, parent_id: P.id })));
    expect(replies.map((r) => r.status)).toEqual(Array(20).fill(201));
    expect((await api.get(`/locations/${P.id}/children`)).body.total_count).toBe(20);
    await treeIsConsistent(api.orgId);
  });

  it('two PATCHes racing on the validity window (valid_from 2030, valid_to 2029), 20 rounds: never both 200, never an inverted window stored', async () => {
    const instant = (t: string | null) => (t === null ? null : new Date(t).toISOString());
    for (let round = 0; round < 20; round++) {
      const L = await api.create({ name: `window ${round}` });
      const [from, to] = await Promise.all([
        api.patch(`/locations/${L.id}`, { valid_from: '2030-01-01T00:00:00Z' }),
        api.patch(`/locations/${L.id}`, { valid_to: '2029-01-01T00:00:00Z' }),
      ]);
      // Each alone is valid; together they invert the window, so whichever comes second must see the first.
      const context = `round ${round}: ${JSON.stringify([from.body, to.body])}`;
      expect([from.status, to.status].sort(), context).toEqual([200, 400]);
      const stored = await svc.service.ctx.pool.query<{ valid_from: Date | null; valid_to: Date | null }>(
        'SELECT valid_from, valid_to FROM locations WHERE org_id = $1 AND id = $2',
        [api.orgId, L.id],
      );
      const row = stored.rows[0]!;
      expect(row.valid_from !== null && row.valid_to !== null && row.valid_to <= row.valid_from, `round ${round}: stored ${JSON.stringify(row)}`).toBe(false);
      const view = (await api.get(`/locations/${L.id}`)).body.data as { valid_from: string | null; valid_to: string | null };
      expect([instant(view.valid_from), instant(view.valid_to)], context).toEqual(
        from.status === 200 ? ['2030-01-01T00:00:00.000Z', null] : [null, '2029-01-01T00:00:00.000Z'],
      );
    }
  });

  it('a PATCH racing a DELETE, 20 rounds: never an update after the delete (in the stream or the read model)', async () => {
    for (let round = 0; round < 20; round++) {
      const L = await api.create({ name: 'before' });
      const [patch, del] = await Promise.all([api.patch(`/locations/${L.id}`, { name: 'after' }), api.del(`/locations/${L.id}`)]);
      const context = `round ${round}: PATCH ${patch.status} ${JSON.stringify(patch.body)} DELETE ${del.status}`;
      expect(del.status, context).toBe(204);
      expect([200, 404], context).toContain(patch.status);
      expect((await api.get(`/locations/${L.id}`)).status, context).toBe(404);
      // The delete is the stream's last event. A PATCH that committed just before the delete may
      // still answer 404 (its answer is read after the delete); one answered 200 must be in the stream.
      const types = (await svc.service.ctx.store.readStream(locationStream(api.orgId, L.id))).map((e) => e.type);
      const history = `${context}: ${types.join(', ')}`;
      expect(types.at(-1), history).toBe(LocationDeleted.type);
      const updates = types.filter((t) => t === LocationUpdated.type).length;
      expect(updates, history).toBeLessThanOrEqual(1);
      if (patch.status === 200) expect(updates, history).toBe(1);
      const row = (await svc.service.ctx.pool.query<{ name: string; deleted_at: Date | null }>('SELECT name, deleted_at FROM locations WHERE org_id = $1 AND id = $2', [api.orgId, L.id])).rows[0]!;
      expect(row.deleted_at, history).not.toBeNull();
      expect(row.name, history).toBe(updates === 1 ? 'after' : 'before');
    }
  });
});
