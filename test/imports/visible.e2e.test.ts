import { describe, expect, it } from 'vitest';
import { AssetCreated, assetStream } from '../../shared/domain/assets/events.js';
import { UniqueValueClaimed, reservationStream } from '../../shared/domain/reservations.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { processWorld } from '../support/processes.js';
import { importClient } from './support.js';

/**
 * "A succeeded job's changes are visible to every following read" (docs/api.md, "Import";
 * docs/design.md, "Imports"), with the service as child processes: a job does not say succeeded
 * while its rows are not in `GET /assets`, whether the projector is held back by a transaction
 * left open elsewhere on the server (the log's head then lies below the job's committed appends)
 * or not running at all; and a job whose rows a projection set aside ends `failed`, saying which
 * row, instead of succeeded.
 */

const SLOW = 300_000;

const world = processWorld('imports_visible', SLOW);

async function setUp(name: string, rows: number) {
  const org = await createOrg(world.ctx, name);
  const { token } = await mintApiKey(world.ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write'] });
  const stamp = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const keys = Array.from({ length: rows }, (_, i) => `V-${stamp}-${i}`);
  const file = `external_key,name,tags\n${keys.map((k, i) => `${k},Asset ${i},barcode:${k}`).join('\n')}\n`;
  return { org, token, keys, file };
}

/** The org's AssetCreated events in the log's table (committed, whatever a reader may see yet). */
async function createdInLog(orgId: number): Promise<number> {
  const { rows } = await world.ctx.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM event_store.events WHERE type = 'AssetCreated' AND (data->>'org_id')::int = $1`, [orgId]);
  return rows[0]!.n;
}

async function listed(apiUrl: string, token: string): Promise<number> {
  const response = await fetch(`${apiUrl}/assets?limit=1`, { headers: { authorization: `Bearer ${token}` } });
  expect(response.status).toBe(200);
  return ((await response.json()) as { total_count: number }).total_count;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`${what}: not in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Watches the job for `ms`: it must never say succeeded while the list shows fewer rows than it has. */
async function neverSucceededEarly(imports: ReturnType<typeof importClient>, id: number, apiUrl: string, token: string, rows: number, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const job = await imports.get(id);
    if (job.status === 'succeeded') expect(await listed(apiUrl, token)).toBe(rows);
    expect(job.status).toBe('running');
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('an import says succeeded only once its rows are visible', () => {
  it('while a transaction left open elsewhere holds the projector back, the job stays running; once it ends, the job succeeds with every row listed', async () => {
    const service = await world.processes.start('api,projector');
    const rows = 300;
    const { org, token, file } = await setUp('Held back', rows);
    // A transaction with an id, open on the server: readers of the log (the projector, and
    // headPosition) stop before it, though the import's appends after it commit.
    const blocker = await world.ctx.pool.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query('SELECT pg_current_xact_id()');
      const imports = importClient(service.urls.api!, token);
      const posted = await imports.post('?resource=assets', file);
      expect(posted.status).toBe(202);
      const id = posted.body.data!.id;
      await until('every row appended', async () => (await createdInLog(org.id)) === rows);
      await neverSucceededEarly(imports, id, service.urls.api!, token, rows, 2_000);
      expect(await listed(service.urls.api!, token)).toBe(0);
      await blocker.query('ROLLBACK');
      const job = await imports.finished(id, 120_000);
      expect(job).toMatchObject({ status: 'succeeded', rows, created: rows, rejected: 0, errors: [] });
      expect(await listed(service.urls.api!, token)).toBe(rows);
    } finally {
      await blocker.query('ROLLBACK').catch(() => undefined);
      blocker.release();
      await world.processes.stopAll();
    }
  }, SLOW);

  it('with the projector process stopped, the job stays running after its last row; a projector started again makes it succeed with every row listed', async () => {
    const api = await world.processes.start('api');
    const projector = await world.processes.start('projector');
    const rows = 200;
    const { org, token, file } = await setUp('No projector', rows);
    await world.processes.stop(projector);
    const imports = importClient(api.urls.api!, token);
    const posted = await imports.post('?resource=assets', file);
    expect(posted.status).toBe(202);
    const id = posted.body.data!.id;
    await until('every row appended', async () => (await createdInLog(org.id)) === rows);
    await neverSucceededEarly(imports, id, api.urls.api!, token, rows, 2_000);
    await world.processes.start('projector');
    const job = await imports.finished(id, 120_000);
    expect(job).toMatchObject({ status: 'succeeded', rows, created: rows, rejected: 0 });
    expect(await listed(api.urls.api!, token)).toBe(rows);
    await world.processes.stopAll();
  }, SLOW);

  it('a row whose events a projection set aside makes the job end failed, with that row named, never succeeded', async () => {
    const service = await world.processes.start('api,projector');
    const { org, token, keys, file } = await setUp('Set aside', 20);
    // An asset the assets projection cannot apply (a year-0 date Postgres refuses), holding the key of row 5.
    const assetId = 1_800_000 + Math.floor(Math.random() * 1000);
    const key = keys[4]!;
    const at = new Date().toISOString();
    await world.ctx.store.appendToStreams([
      {
        streamId: assetStream(org.id, assetId),
        expectedRevision: 'no_stream',
        events: [{ type: AssetCreated.type, data: { org_id: org.id, asset_id: assetId, at, external_key: key, minted: false, name: 'poison', description: null, is_active: true, valid_from: '0000-06-01T00:00:00Z', valid_to: null, metadata: {} } }],
      },
      {
        streamId: reservationStream('asset-key', org.id, key),
        expectedRevision: 'no_stream',
        events: [{ type: UniqueValueClaimed.type, data: { org_id: org.id, kind: 'asset-key', value: key, owner_type: 'asset', owner_id: assetId, at } }],
      },
    ]);
    const imports = importClient(service.urls.api!, token);
    const posted = await imports.post('?resource=assets', file);
    expect(posted.status).toBe(202);
    const job = await imports.finished(posted.body.data!.id, 120_000);
    expect(job).toMatchObject({ status: 'failed', rows: 20, created: 19, updated: 1, rejected: 0 });
    expect(job.errors).toEqual([expect.objectContaining({ row: 5, field: 'row', code: 'internal_error' })]);
    expect(job.errors[0]!.message).toContain('projections retry');
    await world.processes.stopAll();
  }, SLOW);
});
