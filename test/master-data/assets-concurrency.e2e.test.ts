import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AssetDeleted, AssetUpdated, assetStream } from '../../shared/domain/assets/events.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from './http.js';

/**
 * Invariants that span streams must hold under real parallel requests (docs/design.md "Invariants across streams",
 * "Commands and read-your-writes"): unique external_key and (tag_type, value), read-your-writes.
 */

interface Asset {
  id: number;
  external_key: string;
  updated_at: string;
}

let svc: TestService;
let call: ReturnType<typeof client>;
let orgId: number;
let n = 0;
const unique = (p: string) => `${p}-${Date.now().toString(36)}-${++n}`;
const statuses = (replies: Array<{ status: number }>) => replies.map((r) => r.status).sort((a, b) => a - b);

beforeAll(async () => {
  svc = await startTestService('assets_concurrency');
  const ctx = svc.service.ctx;
  const org = await createOrg(ctx, 'Concurrency');
  orgId = org.id;
  call = client(svc.apiUrl, (await mintApiKey(ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write'] })).token);
});

afterAll(async () => {
  await svc?.stop();
});

describe('concurrent writes', () => {
  it('docs/design.md "Invariants across streams": fifty concurrent creates with one external_key → exactly one 201 and forty-nine 409', async () => {
    const key = unique('RACE');
    const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => call('POST', '/assets', { body: { name: `racer ${i}`, external_key: key } })));
    expect(statuses(replies)).toEqual([201, ...Array<number>(49).fill(409)]);
    const list = await call<{ data: Asset[] }>('GET', `/assets?external_key=${key}`);
    expect(list.body.data).toHaveLength(1);
  });

  it('docs/api.md "Renaming: a new external_key": a rename and a create of the same key racing → exactly one wins', async () => {
    for (let round = 0; round < 8; round++) {
      const target = unique('SWAP');
      const existing = (await call<{ data: Asset }>('POST', '/assets', { body: { name: 'to rename' } })).body.data;
      const [rename, create] = await Promise.all([
        call('POST', `/assets/${existing.id}/rename`, { body: { external_key: target } }),
        call('POST', '/assets', { body: { name: 'creator', external_key: target } }),
      ]);
      const outcome = [rename.status, create.status];
      expect([[200, 409], [409, 201]], `round ${round}`).toContainEqual(outcome);
      const holders = await call<{ data: Asset[] }>('GET', `/assets?external_key=${target}`);
      expect(holders.body.data).toHaveLength(1);
    }
  });

  it('docs/api.md "Tags": twenty concurrent attaches of one (tag_type, value) to different assets → one 201', async () => {
    const owners = await Promise.all(Array.from({ length: 20 }, () => call<{ data: Asset }>('POST', '/assets', { body: { name: 'owner' } })));
    const value = unique('EPC');
    const replies = await Promise.all(
      owners.map((o, i) => call('POST', `/assets/${o.body.data.id}/tags`, { body: { tag_type: 'rfid', value: i % 2 ? value : value.toLowerCase() } })),
    );
    expect(statuses(replies)).toEqual([201, ...Array<number>(19).fill(409)]);
  });

  it('docs/api.md "Retries and idempotency": concurrent DELETEs of one asset → one 204, the rest 404', async () => {
    const a = (await call<{ data: Asset }>('POST', '/assets', { body: { name: 'delete race' } })).body.data;
    const replies = await Promise.all(Array.from({ length: 10 }, () => call('DELETE', `/assets/${a.id}`)));
    expect(statuses(replies)).toEqual([204, ...Array<number>(9).fill(404)]);
  });

  it('docs/api.md "Requests and responses": concurrent creates without a key get distinct minted keys', async () => {
    const replies = await Promise.all(Array.from({ length: 30 }, () => call<{ data: Asset }>('POST', '/assets', { body: { name: 'minted' } })));
    expect(replies.every((r) => r.status === 201)).toBe(true);
    const keys = new Set(replies.map((r) => r.body.data.external_key));
    expect(keys.size).toBe(30);
    for (const key of keys) expect(key).toMatch(/^ASSET-\d{4,}$/);
  });

  it('docs/design.md "Commands and read-your-writes": every write response equals an immediately following GET, under parallel load', async () => {
    const created = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const reply = await call<{ data: Asset }>('POST', '/assets', { body: { name: `ryw ${i}`, tags: [{ tag_type: 'ble', value: unique('RYW') }] } });
        const follow = await call<{ data: Asset }>('GET', `/assets/${reply.body.data.id}`);
        expect(follow.body).toEqual(reply.body);
        return reply.body.data;
      }),
    );
    await Promise.all(
      created.map(async (a, i) => {
        const patch = await call<{ data: Asset }>('PATCH', `/assets/${a.id}`, { body: { name: `ryw patched ${i}`, metadata: { i } } });
        expect(patch.status).toBe(200);
        expect((await call('GET', `/assets/${a.id}`)).body).toEqual(patch.body);
        const renamed = await call<{ data: Asset }>('POST', `/assets/${a.id}/rename`, { body: { external_key: unique('RYWK') } });
        expect(renamed.status).toBe(200);
        expect((await call('GET', `/assets/${a.id}`)).body).toEqual({ data: renamed.body.data });
      }),
    );
  });

  it('concurrent PATCHes of one asset all succeed and the final state is one of them', async () => {
    const a = (await call<{ data: Asset }>('POST', '/assets', { body: { name: 'contended' } })).body.data;
    const names = Array.from({ length: 15 }, (_, i) => `contended ${i}`);
    const replies = await Promise.all(names.map((name) => call<{ data: { name: string } }>('PATCH', `/assets/${a.id}`, { body: { name } })));
    expect(replies.every((r) => r.status === 200)).toBe(true);
    const final = await call<{ data: { name: string } }>('GET', `/assets/${a.id}`);
    expect(names).toContain(final.body.data.name);
  });

  it('two PATCHes racing on the validity window (valid_from 2030, valid_to 2029), 20 rounds: never both 200, never an inverted window stored', async () => {
    for (let round = 0; round < 20; round++) {
      const a = (await call<{ data: Asset }>('POST', '/assets', { body: { name: `window ${round}` } })).body.data;
      const [from, to] = await Promise.all([
        call('PATCH', `/assets/${a.id}`, { body: { valid_from: '2030-01-01T00:00:00Z' } }),
        call('PATCH', `/assets/${a.id}`, { body: { valid_to: '2029-01-01T00:00:00Z' } }),
      ]);
      // Each alone is valid; together they invert the window, so whichever comes second must see the first.
      expect(statuses([from, to]), `round ${round}: ${from.text} ${to.text}`).toEqual([200, 400]);
      const stored = await svc.service.ctx.pool.query<{ valid_from: Date | null; valid_to: Date | null }>(
        'SELECT valid_from, valid_to FROM assets WHERE org_id = $1 AND id = $2',
        [orgId, a.id],
      );
      const row = stored.rows[0]!;
      expect(row.valid_from !== null && row.valid_to !== null && row.valid_to <= row.valid_from, `round ${round}: stored ${JSON.stringify(row)}`).toBe(false);
      const view = (await call<{ data: { valid_from: string | null; valid_to: string | null } }>('GET', `/assets/${a.id}`)).body.data;
      const instant = (t: string | null) => (t === null ? null : new Date(t).toISOString());
      expect([instant(view.valid_from), instant(view.valid_to)], `round ${round}`).toEqual(
        from.status === 200 ? ['2030-01-01T00:00:00.000Z', null] : [null, '2029-01-01T00:00:00.000Z'],
      );
    }
  });

  it('a PATCH racing a DELETE, 20 rounds: never an update after the delete (in the stream or the read model)', async () => {
    for (let round = 0; round < 20; round++) {
      const a = (await call<{ data: Asset }>('POST', '/assets', { body: { name: 'before' } })).body.data;
      const [patch, del] = await Promise.all([
        call('PATCH', `/assets/${a.id}`, { body: { name: 'after' } }),
        call('DELETE', `/assets/${a.id}`),
      ]);
      const context = `round ${round}: PATCH ${patch.status} ${patch.text} DELETE ${del.status}`;
      expect(del.status, context).toBe(204);
      expect([200, 404], context).toContain(patch.status);
      expect((await call('GET', `/assets/${a.id}`)).status, context).toBe(404);
      // The delete is the stream's last event. A PATCH that committed just before the delete may
      // still answer 404 (its answer is read after the delete); one answered 200 must be in the stream.
      const types = (await svc.service.ctx.store.readStream(assetStream(orgId, a.id))).map((e) => e.type);
      const history = `${context}: ${types.join(', ')}`;
      expect(types.at(-1), history).toBe(AssetDeleted.type);
      const updates = types.filter((t) => t === AssetUpdated.type).length;
      expect(updates, history).toBeLessThanOrEqual(1);
      if (patch.status === 200) expect(updates, history).toBe(1);
      const row = (await svc.service.ctx.pool.query<{ name: string; deleted_at: Date | null }>('SELECT name, deleted_at FROM assets WHERE org_id = $1 AND id = $2', [orgId, a.id])).rows[0]!;
      expect(row.deleted_at, history).not.toBeNull();
      expect(row.name, history).toBe(updates === 1 ? 'after' : 'before');
    }
  });
});
