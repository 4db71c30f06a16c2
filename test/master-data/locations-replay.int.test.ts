import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { locationsProjection } from '../../projections/locations/projection.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import { applyMigrationGroup } from '../../shared/db/migrate.js';
import { startTestService, type TestService } from '../support/service.js';
import { newClient, type Client } from './locations.support.js';

/** docs/design.md "The event log is the only source of truth" and "Rebuild and replay": replaying the log rebuilds identical location rows, tree paths included. */

let svc: TestService;
let api: Client;

beforeAll(async () => {
  svc = await startTestService('locations_replay');
  api = await newClient(svc, 'replay');
});
afterAll(async () => {
  await svc?.stop();
});

describe('locations projection', () => {
  it('a replay into another schema equals the current read model, row for row', async () => {
    const root = await api.create({ name: 'root', valid_from: '2020-01-01T00:00:00.123Z' });
    const a = await api.create({ name: 'a', parent_id: root.id, description: 'd' });
    const b = await api.create({ name: 'b', parent_id: a.id });
    const c = await api.create({ name: 'c', parent_id: b.id });
    const other = await api.create({ name: 'other' });
    expect((await api.patch(`/locations/${b.id}`, { parent_id: other.id, name: 'b moved', is_active: false })).status).toBe(200);
    expect((await api.patch(`/locations/${a.id}`, { valid_to: '2999-01-01T00:00:00Z', description: null })).status).toBe(200);
    expect((await api.post(`/locations/${root.id}/rename`, { external_key: 'REPLAY-ROOT' })).status).toBe(200);
    expect((await api.del(`/locations/${c.id}`)).status).toBe(204);
    expect((await api.patch(`/locations/${other.id}`, { parent_id: root.id })).status).toBe(200);

    const { ctx } = svc.service;
    await applyMigrationGroup(ctx.pool, 'read-model', 'locations_replay');
    const runtime = new ProjectorRuntime({ store: ctx.store, pool: ctx.pool, projections: [locationsProjection], log: ctx.log, schema: 'locations_replay' });
    await runtime.catchUp();
    const current = await ctx.pool.query('SELECT * FROM read_model.locations ORDER BY id');
    const replayed = await ctx.pool.query('SELECT * FROM locations_replay.locations ORDER BY id');
    expect(current.rows).toHaveLength(5);
    expect(replayed.rows).toEqual(current.rows);
    const moved = current.rows.find((r: { id: number }) => r.id === c.id) as { ancestors: number[] };
    expect(moved.ancestors).toEqual([root.id, other.id, b.id]);
  });
});
