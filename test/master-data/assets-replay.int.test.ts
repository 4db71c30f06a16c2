import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assetsProjection } from '../../projections/assets/projection.js';
import { tagsProjection } from '../../projections/tags/projection.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import { applyMigrationGroup } from '../../shared/db/migrate.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from './http.js';

/** docs/design.md "The event log is the only source of truth": replaying the log into fresh tables rebuilds identical asset and tag rows. */

let svc: TestService;
let call: ReturnType<typeof client>;
let orgId: number;

beforeAll(async () => {
  svc = await startTestService('assets_replay');
  const org = await createOrg(svc.service.ctx, 'Replay');
  orgId = org.id;
  call = client(svc.apiUrl, (await mintApiKey(svc.service.ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write'] })).token);
});
afterAll(async () => {
  await svc?.stop();
});

describe('assets and tags projections', () => {
  it('a replay into another schema equals the current read model, row for row', async () => {
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) {
      const reply = await call<{ data: { id: number } }>('POST', '/assets', {
        body: { name: `asset ${i}`, metadata: { i }, valid_from: i % 2 ? '2020-01-01T00:00:00.123Z' : null, is_active: i !== 4, tags: [{ tag_type: 'rfid', value: `EPC-R-${i}` }] },
      });
      ids.push(reply.body.data.id);
    }
    await call('PATCH', `/assets/${ids[0]}`, { body: { name: 'patched', description: 'd', metadata: { x: [1] } } });
    await call('POST', `/assets/${ids[1]}/rename`, { body: { external_key: 'REPLAY-RENAMED' } });
    await call('DELETE', `/assets/${ids[2]}`);
    const tag = await call<{ data: { id: number } }>('POST', `/assets/${ids[3]}/tags`, { body: { tag_type: 'ble', value: 'B-1' } });
    await call('DELETE', `/assets/${ids[3]}/tags/${tag.body.data.id}`);

    const { ctx } = svc.service;
    await applyMigrationGroup(ctx.pool, 'read-model', 'assets_replay');
    const runtime = new ProjectorRuntime({ store: ctx.store, pool: ctx.pool, projections: [assetsProjection, tagsProjection], log: ctx.log, schema: 'assets_replay' });
    await runtime.catchUp();
    for (const table of ['assets', 'tags']) {
      const current = await ctx.pool.query(`SELECT * FROM read_model.${table} ORDER BY id`);
      const replayed = await ctx.pool.query(`SELECT * FROM assets_replay.${table} ORDER BY id`);
      expect(current.rows.length).toBeGreaterThan(4);
      expect(replayed.rows).toEqual(current.rows);
    }
    // The projected per-org counts agree with the rows, current and replayed.
    for (const schema of ['read_model', 'assets_replay']) {
      const counts = await ctx.pool.query(`SELECT live_unbounded, live_unbounded_active FROM ${schema}.asset_counts`);
      const actual = await ctx.pool.query(
        `SELECT count(*)::int AS live_unbounded, count(*) FILTER (WHERE is_active)::int AS live_unbounded_active
           FROM ${schema}.assets WHERE deleted_at IS NULL AND valid_from IS NULL AND valid_to IS NULL`,
      );
      expect(counts.rows).toEqual(actual.rows);
    }
  });

  it('an update of a name, description or metadata leaves asset_counts alone (two statements fewer); one of is_active moves the counts', async () => {
    const { ctx } = svc.service;
    const created = await call<{ data: { id: number } }>('POST', '/assets', { body: { name: 'counted' } });
    const id = created.body.data.id;
    // The org's counts row: a new version (xmin) for every write to it.
    const row = async () => (await ctx.pool.query<{ version: string; active: number }>(`SELECT xmin::text AS version, live_unbounded_active AS active FROM read_model.asset_counts WHERE org_id = $1`, [orgId])).rows[0]!;
    const before = await row();
    await call('PATCH', `/assets/${id}`, { body: { name: 'renamed', description: 'd', metadata: { k: 1 } } });
    expect(await row(), 'not written').toEqual(before);
    await call('PATCH', `/assets/${id}`, { body: { is_active: false } });
    const after = await row();
    expect(after.version).not.toBe(before.version);
    expect(after.active).toBe(before.active - 1);
  });
});
