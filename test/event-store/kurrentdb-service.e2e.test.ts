import { randomInt } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { comparePositions } from '../../shared/event-store/port.js';
import { projectionStatuses } from '../../shared/projection/status.js';
import { allProjections } from '../../projections/index.js';
import { client } from '../master-data/http.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { scanner } from '../support/scans.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from './conformance.js';

/**
 * The whole service with its log in KurrentDB (EVENT_STORE=kurrentdb) and its read models in a
 * fresh Postgres database, over real HTTP, when KURRENTDB_URL names a KurrentDB 25.1 or later
 * (see kurrentdb.int.test.ts). Skipped, and saying so, without it.
 *
 * The server may hold the events of earlier runs: the projector replays them into the fresh read
 * models first, and this run's ids start far past any earlier run's (ids come from Postgres
 * sequences, which a fresh database starts at 1).
 */
const url = process.env.KURRENTDB_URL;
const SKIPPED = 'KURRENTDB_URL is not set: the service was not run on KurrentDB (see kurrentdb.int.test.ts for how to run it)';

if (!url) {
  console.warn(`test/event-store/kurrentdb-service.e2e.test.ts: ${SKIPPED}`);
  describe('the service on KurrentDB', () => {
    it.skip(SKIPPED, () => undefined);
  });
} else {
  describe('the service on KurrentDB', () => {
    let svc: TestService;
    let api: ReturnType<typeof client>;
    let orgId: number;

    beforeAll(async () => {
      svc = await startTestService('kurrentdb_service', { EVENT_STORE: 'kurrentdb', KURRENTDB_URL: url });
      expect(svc.service.ctx.store.name).toBe('kurrentdb');
      const admin = new pg.Client({ connectionString: svc.db.url });
      await admin.connect();
      try {
        const base = 1_000_000 + randomInt(1_000_000_000);
        for (const sequence of ['org_ids', 'asset_ids', 'location_ids', 'tag_ids']) {
          await admin.query(`SELECT setval($1, $2)`, [`service.${sequence}`, base]);
        }
      } finally {
        await admin.end();
      }
      // The fresh read models first replay whatever the server holds.
      const { ctx } = svc.service;
      await ctx.checkpoints.waitForCheckpoint(await ctx.store.headPosition(), { timeoutMs: 240_000 });
      // Waits for every projection, those that ignore organizations included: their positions move
      // past the org's events without receiving them.
      orgId = (await createOrg(svc.service.ctx, 'kurrentdb-org')).id;
      const key = await mintApiKey(svc.service.ctx, {
        orgId,
        scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read'],
      });
      api = client(svc.apiUrl, key.token);
    }, 300_000);

    afterAll(async () => {
      await svc?.stop();
    });

    it('writes answer with what a following read returns, and a scan places the asset', async () => {
      const dock = await api<{ data: { id: number; external_key: string } }>('POST', '/locations', { body: { name: 'Dock', external_key: 'DOCK-1' } });
      expect(dock.status, dock.text).toBe(201);
      const created = await api<{ data: { id: number; name: string; tags: Array<{ value: string }> } }>('POST', '/assets', {
        body: { name: 'Pump', external_key: 'PUMP-1', tags: [{ tag_type: 'rfid', value: 'E2801160600002084D9F34A9' }] },
      });
      expect(created.status, created.text).toBe(201);
      const id = created.body.data.id;
      const renamed = await api<{ data: { name: string } }>('PATCH', `/assets/${id}`, { body: { name: 'Pump 2' } });
      expect(renamed.status, renamed.text).toBe(200);
      expect(renamed.body.data.name).toBe('Pump 2');
      expect((await api<{ data: { name: string } }>('GET', `/assets/${id}`)).body.data.name).toBe('Pump 2');

      const { scan } = await scanner(svc, orgId);
      expect(await scan({ id: dock.body.data.id }, [{ tag_type: 'rfid', value: 'E2801160600002084D9F34A9' }])).toMatchObject({ accepted: 1, unknown: 0 });
      await eventually(async () => {
        const asset = await api<{ data: { location_id: number | null } }>('GET', `/assets/${id}`);
        expect(asset.body.data.location_id).toBe(dock.body.data.id);
      }, 20_000);
    });

    it('of concurrent creates with one external key, exactly one succeeds (atomic multi-stream appends)', async () => {
      const replies = await Promise.all(Array.from({ length: 20 }, () => api('POST', '/assets', { body: { name: 'Same', external_key: 'SAME-KEY' } })));
      const statuses = replies.map((r) => r.status).sort();
      expect(statuses.filter((s) => s === 201)).toHaveLength(1);
      expect(statuses.filter((s) => s === 409)).toHaveLength(19);
    });

    it('every projection catches up with the head of the log', async () => {
      const { ctx } = svc.service;
      await eventually(async () => {
        const head = await ctx.store.headPosition();
        const statuses = await projectionStatuses(ctx.store, ctx.pool, allProjections().map((p) => p.name));
        for (const status of statuses) {
          expect(status.lag_events, status.name).toBe(0);
          expect(status.head).toBe(`${head.commit}/${head.prepare}`);
        }
        expect(comparePositions(await ctx.store.headPosition(), head)).toBe(0);
      }, 20_000);
    });
  });
}
