import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKey } from '../../shared/domain/orgs-and-keys/commands.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import { authProjection } from '../../projections/orgs-and-keys/projection.js';
import { applyMigrationGroup } from '../../shared/db/migrate.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';

/** Replaying the log into fresh tables rebuilds the same organizations and keys, row for row. */

let svc: TestService;

beforeAll(async () => {
  svc = await startTestService('auth_projection');
});

afterAll(async () => {
  await svc?.stop();
});

describe('auth projection', () => {
  it('a replay into another schema equals the current read model', async () => {
    const { ctx } = svc.service;
    const first = await createOrg(ctx, 'First');
    const second = await createOrg(ctx, 'Second');
    const kept = await mintApiKey(ctx, { orgId: first.id, name: 'kept', scopes: ['assets:read', 'tracking:read'], expiresAt: new Date('2030-05-01T12:00:00Z') });
    const gone = await mintApiKey(ctx, { orgId: second.id, name: 'gone', scopes: ['scans:write'] });
    await revokeApiKey(ctx, gone.id);

    await applyMigrationGroup(ctx.pool, 'read-model', 'auth_replay');
    const runtime = new ProjectorRuntime({ store: ctx.store, pool: ctx.pool, projections: [authProjection], log: ctx.log, schema: 'auth_replay' });
    await runtime.catchUp();

    for (const table of ['orgs', 'api_keys']) {
      const current = await ctx.pool.query(`SELECT * FROM read_model.${table} ORDER BY 1`);
      const replayed = await ctx.pool.query(`SELECT * FROM auth_replay.${table} ORDER BY 1`);
      expect(replayed.rows).toEqual(current.rows);
    }
    const keys = await ctx.pool.query<{ id: string; revoked_at: Date | null; expires_at: Date | null }>(
      'SELECT id, revoked_at, expires_at FROM auth_replay.api_keys ORDER BY id',
    );
    expect(keys.rows).toEqual([
      { id: kept.id, revoked_at: null, expires_at: new Date('2030-05-01T12:00:00Z') },
      { id: gone.id, revoked_at: expect.any(Date), expires_at: null },
    ]);
    // The token is never stored: neither in the log nor in the read model.
    const leaked = await ctx.pool.query(`SELECT 1 FROM event_store.events WHERE data::text LIKE '%' || $1 || '%'`, [kept.token.split('.')[1]!]);
    expect(leaked.rows).toEqual([]);
  });
});
