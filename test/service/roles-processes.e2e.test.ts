import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext, openContext } from '../../services/open-context.js';
import { loadConfig } from '../../shared/config.js';
import type { ServiceContext } from '../../shared/service-context.js';
import { assignScanPoint, registerReader } from '../../shared/domain/readers/commands.js';
import { createLogger } from '../../shared/logger.js';
import { allProjections } from '../../projections/index.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { eventually, gateway, kafkaEnv } from '../support/kafka.js';
import { ServiceProcesses, type ServiceProcess } from '../support/processes.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY } from '../support/service.js';

/**
 * Roles in separate processes (issue 13), as a deployment runs them: `ROLES=api` (twice),
 * `ROLES=ingest` and `ROLES=projector` (twice) as child processes on one Postgres, the event log
 * in it, and the run's Kafka-protocol broker. A create, a handheld scan and a Kafka read go
 * through to the API; read-your-writes holds on both api processes; the projector that leads is
 * killed outright and the other takes over, with nothing lost or doubled.
 */

const SLOW = 240_000;

let db: TestDatabase;
let ctx: ServiceContext;
const kafka = await kafkaEnv('roles');
const processes = new ServiceProcesses(() => db.url, kafka);
const start = (roles: string) => processes.start(roles);
const stop = (started: ServiceProcess, signal?: NodeJS.Signals) => processes.stop(started, signal);

beforeAll(async () => {
  db = await createTestDatabase('roles_processes');
  // This process only writes commands and reads: no role of its own.
  ctx = await openContext(loadConfig({ DATABASE_URL: db.url, LOG_LEVEL: 'silent', ROLES: 'api', SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY }), db.url, createLogger('silent'));
}, SLOW);

afterAll(async () => {
  await processes.stopAll();
  await closeContext(ctx);
  await db?.drop();
}, SLOW);

async function call<T>(base: string, token: string, method: string, route: string, body?: unknown): Promise<{ status: number; body: T }> {
  const response = await fetch(`${base}${route}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as T };
}

/** Which projector connection holds each projection's lease (docs/design.md "Segmented processors"), of the leases not run out. */
async function leaders(pool: pg.Pool): Promise<number[]> {
  const { rows } = await pool.query<{ pid: number }>(
    `SELECT a.pid FROM read_model.projection_leases l JOIN pg_stat_activity a ON a.pid = l.backend_pid
      WHERE l.expires_at > now() AND a.datname = current_database()`,
  );
  return rows.map((r) => r.pid);
}

describe('roles as separate processes', () => {
  it('api, ingest and projector each alone: a create, a handheld scan and a Kafka read reach the API; a killed leader hands over', async () => {
    const projectors = [await start('projector')];
    const [apiA, apiB, ingest] = await Promise.all([start('api'), start('api'), start('ingest')]);
    projectors.push(await start('projector'));

    const orgId = (await createOrg(ctx, 'roles')).id;
    const token = (await mintApiKey(ctx, { orgId, scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read', 'scans:write'] })).token;
    const a = apiA!.urls.api!;
    const b = apiB!.urls.api!;

    // Read-your-writes on both api processes: each answer equals the next GET on the other.
    const dock = await call<{ data: { id: number; external_key: string } }>(a, token, 'POST', '/locations', { name: 'Dock', external_key: 'DOCK' });
    expect(dock.status).toBe(201);
    expect((await call(b, token, 'GET', `/locations/${dock.body.data.id}`)).status).toBe(200);
    const assets: Array<{ id: number; tag: string }> = [];
    for (let i = 0; i < 6; i++) {
      const tag = `E2801160600002084D9F${String(i).padStart(4, '0')}`;
      const created = await call<{ data: { id: number } }>(i % 2 ? a : b, token, 'POST', '/assets', { name: `A${i}`, tags: [{ tag_type: 'rfid', value: tag }] });
      expect(created.status).toBe(201);
      expect((await call(i % 2 ? b : a, token, 'GET', `/assets/${created.body.data.id}`)).status).toBe(200);
      assets.push({ id: created.body.data.id, tag });
    }

    // A handheld scan on the ingest process answers once projected; the api shows it at once.
    const scan = await call<{ data: { accepted: number } }>(ingest!.urls.ingest!, token, 'POST', '/scans', {
      submission_id: randomUUID(),
      device_id: 'h1',
      location: { external_key: 'DOCK' },
      reads: [{ tag_type: 'rfid', value: assets[0]!.tag, observed_at: '2026-05-25T10:00:00.000Z' }],
    });
    expect(scan).toMatchObject({ status: 202, body: { data: { accepted: 1 } } });
    const history = await call<{ data: Array<{ location_id: number }> }>(b, token, 'GET', `/assets/${assets[0]!.id}/history`);
    expect(history.body.data.map((v) => v.location_id)).toEqual([dock.body.data.id]);

    // A fixed reader's report through Kafka reaches the report.
    await registerReader(ctx, orgId, 'dock-door');
    await assignScanPoint(ctx, { orgId, readerId: 'dock-door', capturePoint: 'ant1', locationExternalKey: 'DOCK' });
    const gw = await gateway();
    const publish = (i: number, second: number) =>
      gw.publish(kafka.KAFKA_SCAN_TOPIC, 'dock-door', {
        reader_id: 'dock-door',
        reads: [{ capture_point: 'ant1', tag_type: 'rfid', value: assets[i]!.tag, observed_at: `2026-05-25T10:00:${String(second).padStart(2, '0')}.000Z` }],
      });
    try {
      await publish(1, 1);
      await eventually(async () => {
        const report = await call<{ data: Array<{ asset_id: number }> }>(a, token, 'GET', '/reports/asset-locations');
        expect(report.body.data.map((r) => r.asset_id).sort()).toEqual([assets[0]!.id, assets[1]!.id].sort());
      }, 60_000);

      // One leader per projection: a lease per projection, all held by the first projector.
      const pool = ctx.pool;
      const projections = allProjections().length;
      const before = await leaders(pool);
      expect(before).toHaveLength(projections);

      // Kill the leader outright, then write more: the other takes over within a few seconds.
      await stop(projectors[0]!, 'SIGKILL');
      const killedAt = Date.now();
      const created = await call<{ data: { id: number } }>(a, token, 'POST', '/assets', { name: 'after the kill', tags: [{ tag_type: 'rfid', value: 'E2801160600002084D9FFFFF' }] });
      expect(created.status).toBe(201);
      expect(Date.now() - killedAt).toBeLessThan(15_000);
      await eventually(async () => {
        const after = await leaders(pool);
        expect(after).toHaveLength(projections);
        expect(after.filter((pid) => before.includes(pid))).toEqual([]);
      }, 15_000);
      await publish(2, 2);
      await publish(1, 1); // delivered again: counts once
      await eventually(async () => {
        const report = await call<{ data: Array<{ asset_id: number }> }>(b, token, 'GET', '/reports/asset-locations');
        expect(report.body.data.map((r) => r.asset_id).sort()).toEqual([assets[0]!.id, assets[1]!.id, assets[2]!.id].sort());
      }, 60_000);

      // Nothing lost or doubled: every read once, every asset once.
      const reads = await pool.query<{ n: number }>('SELECT ((SELECT coalesce(sum(reads), 0) FROM scan_read_chunks WHERE org_id = $1) + (SELECT coalesce(sum(count), 0) FROM unknown_reads WHERE org_id = $1))::int AS n', [orgId]);
      expect(reads.rows[0]!.n).toBe(3);
      const listed = await call<{ total_count: number }>(b, token, 'GET', '/assets?limit=1');
      expect(listed.body.total_count).toBe(7);
    } finally {
      await gw.close();
    }
  }, SLOW);
});
