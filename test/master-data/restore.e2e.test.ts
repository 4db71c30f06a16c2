import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assetsProjection } from '../../projections/assets/projection.js';
import { auditProjection } from '../../projections/audit/projection.js';
import { locationsProjection } from '../../projections/locations/projection.js';
import { tagsProjection } from '../../projections/tags/projection.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import { applyMigrationGroup } from '../../shared/db/migrate.js';
import { createOrg, mintApiKey, personWithToken } from '../support/auth.js';
import { scanner } from '../support/scans.js';
import { startTestService, type TestService } from '../support/service.js';
import { auditEvents } from '../audit/support.js';
import { client, errorOf, type Reply } from './http.js';

/**
 * `POST /assets/{asset_id}/restore` and `POST /locations/{location_id}/restore` over real HTTP,
 * rule by rule as docs/api.md "Restoring" states them, the audit entries, who may restore, random
 * orders of create, delete and restore of one key (at most one existing record holds it at any
 * time), racing restores, and a rebuild of the read models giving the same rows.
 *
 * Reproduce the property: PROPERTY_SEED=<seed> PROPERTY_RUNS=<n> npx vitest run test/master-data/restore.e2e.test.ts
 */

const SEED = Number(process.env.PROPERTY_SEED ?? 20261129);
const RUNS = Number(process.env.PROPERTY_RUNS ?? 12);
const SLOW = 180_000;

interface View {
  id: number;
  external_key: string;
  name: string;
  parent_id?: number | null;
  parent_external_key?: string | null;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
  tags: Array<{ tag_type: string; value: string }>;
  location_id?: number | null;
}
interface One {
  data: View;
}
interface Many {
  data: View[];
  total_count: number;
}

let svc: TestService;
let orgId: number;
let call: ReturnType<typeof client>;
let other: ReturnType<typeof client>;
let auditor: string;

beforeAll(async () => {
  svc = await startTestService('restore', { RATE_LIMIT_PER_MINUTE: '1000000', RATE_LIMIT_BURST: '1000000' });
  const { ctx } = svc.service;
  orgId = (await createOrg(ctx, 'Restorers')).id;
  const scopes = ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read'];
  call = client(svc.apiUrl, (await mintApiKey(ctx, { orgId, scopes })).token);
  other = client(svc.apiUrl, (await mintApiKey(ctx, { orgId: (await createOrg(ctx, 'Others')).id, scopes })).token);
  auditor = (await mintApiKey(ctx, { orgId, scopes: ['audit:read'] })).token;
}, SLOW);

afterAll(async () => {
  await svc?.stop();
});

function ok<T>(reply: Reply<T>, status: number): T {
  expect(reply.status, reply.text).toBe(status);
  return reply.body;
}

async function newAsset(key: string, extra: Record<string, unknown> = {}): Promise<View> {
  return ok(await call<One>('POST', '/assets', { body: { external_key: key, name: `Asset ${key}`, ...extra } }), 201).data;
}

async function newLocation(key: string, parentId: number | null = null): Promise<View> {
  return ok(await call<One>('POST', '/locations', { body: { external_key: key, name: `Place ${key}`, ...(parentId === null ? {} : { parent_id: parentId }) } }), 201).data;
}

describe('POST /assets/{asset_id}/restore', () => {
  it('brings a deleted asset back as GET answers it: same id, fields and created_at, deleted_at null, a new updated_at, no tags', async () => {
    const asset = await newAsset('RST-A1', { description: 'kept', metadata: { colour: 'red' }, tags: [{ tag_type: 'rfid', value: 'EPC-RST-A1' }] });
    expect(asset.tags).toHaveLength(1);
    ok(await call('DELETE', `/assets/${asset.id}`), 204);
    const deleted = ok(await call<Many>('GET', '/assets?external_key=RST-A1&include_deleted=true'), 200).data[0]!;

    const restored = ok(await call<One>('POST', `/assets/${asset.id}/restore`), 200).data;
    expect(restored).toEqual(ok(await call<One>('GET', `/assets/${asset.id}`), 200).data);
    expect(restored).toMatchObject({ id: asset.id, external_key: 'RST-A1', name: 'Asset RST-A1', description: 'kept', created_at: asset.created_at, deleted_at: null, tags: [] });
    expect(Date.parse(restored.updated_at)).toBeGreaterThanOrEqual(Date.parse(deleted.deleted_at!));
    // Back in the default list and in a search; the tag stays detached, its value free for anyone, this asset included.
    expect(ok(await call<Many>('GET', '/assets?external_key=RST-A1'), 200).data.map((a) => a.id)).toEqual([asset.id]);
    expect(ok(await call<Many>('GET', '/assets?q=RST-A1'), 200).data.map((a) => a.id)).toEqual([asset.id]);
    expect(ok(await call<Many>('GET', `/assets/${asset.id}/tags`), 200).data).toEqual([]);
    ok(await call('POST', `/assets/${asset.id}/tags`, { body: { tag_type: 'rfid', value: 'EPC-RST-A1' } }), 201);
    // Every other write accepts it again.
    ok(await call('PATCH', `/assets/${asset.id}`, { body: { name: 'Renamed after restore' } }), 200);
  });

  it('an existing asset: 200, unchanged (idempotent, so a retry after a lost answer is the same 200)', async () => {
    const asset = await newAsset('RST-A2');
    const first = ok(await call<One>('POST', `/assets/${asset.id}/restore`), 200).data;
    expect(first).toEqual(asset);
    ok(await call('DELETE', `/assets/${asset.id}`), 204);
    const restored = ok(await call<One>('POST', `/assets/${asset.id}/restore`), 200).data;
    const again = ok(await call<One>('POST', `/assets/${asset.id}/restore`), 200).data;
    expect(again).toEqual(restored);
  });

  it('404 not_found for an id that never named an asset of the organization (another organization\'s included)', async () => {
    const mine = await newAsset('RST-A3');
    for (const reply of [await call('POST', '/assets/2147483647/restore'), await other('POST', `/assets/${mine.id}/restore`)]) {
      expect(reply.status, reply.text).toBe(404);
      expect(errorOf(reply).type).toBe('not_found');
    }
    expect(errorOf(await call('POST', '/assets/2147483647/restore')).detail).toBe('Asset 2147483647 not found');
  });

  it('409 conflict naming the key when another existing asset took it since; restorable once it is free again', async () => {
    const first = await newAsset('RST-A4');
    ok(await call('DELETE', `/assets/${first.id}`), 204);
    const second = await newAsset('RST-A4');
    const refused = await call('POST', `/assets/${first.id}/restore`);
    expect(refused.status, refused.text).toBe(409);
    expect(errorOf(refused)).toMatchObject({ type: 'conflict', detail: 'external_key "RST-A4" is already in use by another asset' });
    // Still deleted: nothing changed.
    expect((await call('GET', `/assets/${first.id}`)).status).toBe(404);
    ok(await call('POST', `/assets/${second.id}/rename`, { body: { external_key: 'RST-A4-NEW' } }), 200);
    expect(ok(await call<One>('POST', `/assets/${first.id}/restore`), 200).data.external_key).toBe('RST-A4');
    // And now the key is held again: a create with it is 409.
    expect((await call('POST', '/assets', { body: { external_key: 'RST-A4', name: 'x' } })).status).toBe(409);
  });

  it('a restored asset is in the report again, at the location its scans last placed it', async () => {
    const dock = await newLocation('RST-DOCK');
    const asset = await newAsset('RST-A5', { tags: [{ tag_type: 'rfid', value: 'EPC-RST-A5' }] });
    await (await scanner(svc, orgId)).scan({ id: dock.id }, [{ tag_type: 'rfid', value: 'EPC-RST-A5', observed_at: new Date().toISOString() }]);
    const row = async (query: string) => ok(await call<Many>('GET', `/reports/asset-locations?asset_external_key=RST-A5${query}`), 200).data as unknown as Array<{ location_id: number; asset_deleted_at: string | null }>;
    expect((await row('')).map((r) => r.location_id)).toEqual([dock.id]);
    ok(await call('DELETE', `/assets/${asset.id}`), 204);
    expect(await row('')).toEqual([]);
    ok(await call('POST', `/assets/${asset.id}/restore`), 200);
    expect((await row('')).map((r) => [r.location_id, r.asset_deleted_at])).toEqual([[dock.id, null]]);
  });
});

describe('POST /locations/{location_id}/restore', () => {
  it('brings a deleted location back under its parent, as GET answers it, with no tags', async () => {
    const site = await newLocation('RST-SITE');
    const room = ok(await call<One>('POST', '/locations', { body: { external_key: 'RST-ROOM', name: 'Room', parent_id: site.id, tags: [{ tag_type: 'barcode', value: 'BC-RST-ROOM' }] } }), 201).data;
    ok(await call('DELETE', `/locations/${room.id}`), 204);
    const restored = ok(await call<One>('POST', `/locations/${room.id}/restore`), 200).data;
    expect(restored).toEqual(ok(await call<One>('GET', `/locations/${room.id}`), 200).data);
    expect(restored).toMatchObject({ id: room.id, external_key: 'RST-ROOM', parent_id: site.id, parent_external_key: 'RST-SITE', created_at: room.created_at, deleted_at: null, tags: [] });
    expect(ok(await call<Many>('GET', `/locations/${site.id}/children`), 200).data.map((l) => l.id)).toEqual([room.id]);
    // Idempotent on an existing location.
    expect(ok(await call<One>('POST', `/locations/${room.id}/restore`), 200).data).toEqual(restored);
  });

  it('409 while its parent is deleted (restore the parent first, the detail says so); then parent, then child', async () => {
    const site = await newLocation('RST-P');
    const aisle = await newLocation('RST-P-AISLE', site.id);
    ok(await call('DELETE', `/locations/${aisle.id}`), 204);
    ok(await call('DELETE', `/locations/${site.id}`), 204);
    const refused = await call('POST', `/locations/${aisle.id}/restore`);
    expect(refused.status, refused.text).toBe(409);
    expect(errorOf(refused)).toMatchObject({ type: 'conflict', detail: `parent location "RST-P" (id ${site.id}) is deleted; restore the parent first` });
    ok(await call('POST', `/locations/${site.id}/restore`), 200);
    expect(ok(await call<One>('POST', `/locations/${aisle.id}/restore`), 200).data).toMatchObject({ parent_id: site.id, parent_external_key: 'RST-P', deleted_at: null });
    // The parent has an existing child again: deleting it is refused as before.
    expect((await call('DELETE', `/locations/${site.id}`)).status).toBe(409);
  });

  it('409 naming the key when another existing location took it; 404 for an unknown id or another organization\'s', async () => {
    const first = await newLocation('RST-L1');
    ok(await call('DELETE', `/locations/${first.id}`), 204);
    const second = await newLocation('RST-L1');
    const refused = await call('POST', `/locations/${first.id}/restore`);
    expect(refused.status, refused.text).toBe(409);
    expect(errorOf(refused).detail).toBe('external_key "RST-L1" is already used by another location');
    ok(await call('DELETE', `/locations/${second.id}`), 204);
    ok(await call('POST', `/locations/${first.id}/restore`), 200);
    for (const reply of [await call('POST', '/locations/2147483647/restore'), await other('POST', `/locations/${first.id}/restore`)]) {
      expect(reply.status, reply.text).toBe(404);
      expect(errorOf(reply)).toMatchObject({ type: 'not_found', detail: 'Location not found' });
    }
  });

  it('a restored location places scans again (its scans were closed with the delete)', async () => {
    const bay = await newLocation('RST-BAY');
    await newAsset('RST-A6', { tags: [{ tag_type: 'rfid', value: 'EPC-RST-A6' }] });
    ok(await call('DELETE', `/locations/${bay.id}`), 204);
    ok(await call('POST', `/locations/${bay.id}/restore`), 200);
    const result = await (await scanner(svc, orgId)).scan({ id: bay.id }, [{ tag_type: 'rfid', value: 'EPC-RST-A6', observed_at: new Date().toISOString() }]);
    expect(result).toMatchObject({ accepted: 1 });
    const rows = ok(await call<Many>('GET', '/reports/asset-locations?asset_external_key=RST-A6'), 200).data as unknown as Array<{ location_id: number }>;
    expect(rows.map((r) => r.location_id)).toEqual([bay.id]);
  });
});

describe('who may restore, and the audit log', () => {
  it('session tokens: an operator and an admin restore, a viewer gets 403 on both routes', async () => {
    const { ctx } = svc.service;
    const asset = await newAsset('RST-W1');
    const place = await newLocation('RST-W2');
    ok(await call('DELETE', `/assets/${asset.id}`), 204);
    ok(await call('DELETE', `/locations/${place.id}`), 204);
    const viewer = (await personWithToken(ctx, orgId, 'viewer')).token;
    for (const path of [`/assets/${asset.id}/restore`, `/locations/${place.id}/restore`]) {
      const refused = await call('POST', path, { token: viewer });
      expect(refused.status, refused.text).toBe(403);
    }
    const operator = (await personWithToken(ctx, orgId, 'operator')).token;
    const admin = (await personWithToken(ctx, orgId, 'admin')).token;
    ok(await call('POST', `/assets/${asset.id}/restore`, { token: operator }), 200);
    ok(await call('POST', `/locations/${place.id}/restore`, { token: admin }), 200);
    // A key without the write scope: 403 too.
    const reader = (await mintApiKey(ctx, { orgId, scopes: ['assets:read'] })).token;
    expect((await call('POST', `/assets/${asset.id}/restore`, { token: reader })).status).toBe(403);
  });

  it('a restore is one entry, asset.restored or location.restored, with the key at the time; a no-op restore is none', async () => {
    const asset = await newAsset('RST-AUD');
    const place = await newLocation('RST-AUD-L');
    ok(await call('DELETE', `/assets/${asset.id}`), 204);
    ok(await call('DELETE', `/locations/${place.id}`), 204);
    ok(await call('POST', `/assets/${asset.id}/restore`), 200);
    ok(await call('POST', `/assets/${asset.id}/restore`), 200);
    ok(await call('POST', `/locations/${place.id}/restore`), 200);
    const entries = async (type: string, id: number) =>
      ((await auditEvents(svc, auditor, { resource_type: type, resource_id: String(id) })).body.data as Array<{ action: string; resource_external_key: string; changes: unknown; actor: { type: string } }>).map(
        (e) => [e.action, e.resource_external_key, e.changes, e.actor.type],
      );
    expect(await entries('asset', asset.id)).toEqual([
      ['asset.restored', 'RST-AUD', null, 'api_key'],
      ['asset.deleted', 'RST-AUD', null, 'api_key'],
      ['asset.created', 'RST-AUD', null, 'api_key'],
    ]);
    expect(await entries('location', place.id)).toEqual([
      ['location.restored', 'RST-AUD-L', null, 'api_key'],
      ['location.deleted', 'RST-AUD-L', null, 'api_key'],
      ['location.created', 'RST-AUD-L', null, 'api_key'],
    ]);
    expect((await auditEvents(svc, auditor, { action: 'asset.restored', resource_id: String(asset.id) })).body.data).toHaveLength(1);
  });
});

type Op = { kind: 'create' } | { kind: 'delete'; pick: number } | { kind: 'restore'; pick: number } | { kind: 'rename-away'; pick: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.constant({ kind: 'create' as const }),
  fc.record({ kind: fc.constant('delete' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('restore' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('rename-away' as const), pick: fc.nat() }),
);

describe('one key, random orders of create, delete, restore and rename', () => {
  for (const kind of ['assets', 'locations'] as const) {
    it(`${kind}: every answer is the model's, and at most one existing record holds the key at any time`, async () => {
      let run = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(opArb, { minLength: 4, maxLength: 14 }), async (ops) => {
          run++;
          const key = `PROP-${kind.slice(0, 3).toUpperCase()}-${run}`;
          // The model: each record's key and whether it exists.
          const records: Array<{ id: number; key: string; existing: boolean }> = [];
          let renames = 0;
          for (const op of ops) {
            const holder = records.find((r) => r.existing && r.key === key);
            if (op.kind === 'create') {
              const reply = await call<One>('POST', `/${kind}`, { body: { external_key: key, name: 'p' } });
              expect(reply.status, reply.text).toBe(holder ? 409 : 201);
              if (reply.status === 201) records.push({ id: reply.body.data.id, key, existing: true });
            } else if (records.length > 0) {
              const record = records[op.pick % records.length]!;
              if (op.kind === 'delete') {
                const reply = await call('DELETE', `/${kind}/${record.id}`);
                expect(reply.status, reply.text).toBe(record.existing ? 204 : 404);
                record.existing = false;
              } else if (op.kind === 'restore') {
                const taken = records.some((r) => r !== record && r.existing && r.key === record.key);
                const reply = await call<One>('POST', `/${kind}/${record.id}/restore`);
                expect(reply.status, reply.text).toBe(!record.existing && taken ? 409 : 200);
                if (reply.status === 200) {
                  expect(reply.body.data).toMatchObject({ id: record.id, external_key: record.key, deleted_at: null });
                  record.existing = true;
                }
              } else {
                const to = `${key}-R${++renames}`;
                const reply = await call('POST', `/${kind}/${record.id}/rename`, { body: { external_key: to } });
                expect(reply.status, reply.text).toBe(record.existing ? 200 : 404);
                if (record.existing) record.key = to;
              }
            }
            const listed = ok(await call<Many>('GET', `/${kind}?external_key=${key}`), 200).data;
            expect(listed.length).toBeLessThanOrEqual(1);
            expect(listed.map((r) => r.id)).toEqual(records.filter((r) => r.existing && r.key === key).map((r) => r.id));
          }
        }),
        { numRuns: RUNS, seed: SEED, endOnFailure: true },
      );
    }, SLOW);
  }

  it('racing restores of two deleted assets with the same key: exactly one wins, the other is 409', async () => {
    for (let round = 0; round < 5; round++) {
      const key = `RACE-${round}`;
      const a = await newAsset(key);
      ok(await call('DELETE', `/assets/${a.id}`), 204);
      const b = await newAsset(key);
      ok(await call('DELETE', `/assets/${b.id}`), 204);
      const replies = await Promise.all([call('POST', `/assets/${a.id}/restore`), call('POST', `/assets/${b.id}/restore`), call('POST', '/assets', { body: { external_key: key, name: 'c' } })]);
      const won = replies.filter((r) => r.status === 200 || r.status === 201);
      expect(won, replies.map((r) => r.text).join('\n')).toHaveLength(1);
      expect(replies.filter((r) => r.status === 409)).toHaveLength(2);
      expect(ok(await call<Many>('GET', `/assets?external_key=${key}`), 200).data).toHaveLength(1);
    }
  }, SLOW);

  it('racing a parent\'s delete and its child\'s restore: never an existing child under a deleted parent', async () => {
    for (let round = 0; round < 5; round++) {
      const parent = await newLocation(`RACE-P-${round}`);
      const child = await newLocation(`RACE-C-${round}`, parent.id);
      ok(await call('DELETE', `/locations/${child.id}`), 204);
      const [restore, remove] = await Promise.all([call('POST', `/locations/${child.id}/restore`), call('DELETE', `/locations/${parent.id}`)]);
      // One of them decided from the other's tree: both can not have succeeded.
      expect([restore.status, remove.status].sort(), `${restore.text} ${remove.text}`).toEqual(restore.status === 200 ? [200, 409] : [204, 409]);
    }
  }, SLOW);
});

describe('a rebuild from the log', () => {
  it('replaying the log into fresh tables gives the same asset, location, tag and audit rows', async () => {
    const { ctx } = svc.service;
    await applyMigrationGroup(ctx.pool, 'read-model', 'restore_replay');
    const runtime = new ProjectorRuntime({ store: ctx.store, pool: ctx.pool, projections: [assetsProjection, locationsProjection, tagsProjection, auditProjection], log: ctx.log, schema: 'restore_replay' });
    await runtime.catchUp();
    for (const table of ['assets', 'asset_counts', 'locations', 'tags', 'audit_events']) {
      const order = table === 'asset_counts' ? 'org_id' : 'id';
      // An audit entry's seq comes from a sequence (its order among entries of one instant), not from the event.
      const columns = table === 'audit_events' ? 'org_id, id, occurred_at, action, resource_type, resource_id, resource_external_key, actor_type, actor_id, actor_name, request_id, changes' : '*';
      const current = await ctx.pool.query(`SELECT ${columns} FROM read_model.${table} ORDER BY ${order}`);
      const replayed = await ctx.pool.query(`SELECT ${columns} FROM restore_replay.${table} ORDER BY ${order}`);
      expect(current.rows.length, table).toBeGreaterThan(0);
      expect(replayed.rows, table).toEqual(current.rows);
    }
    // Restored rows are among them.
    const restored = await ctx.pool.query(`SELECT count(*)::int AS n FROM restore_replay.audit_events WHERE action IN ('asset.restored', 'location.restored')`);
    expect(restored.rows[0].n).toBeGreaterThan(2);
  }, SLOW);
});
