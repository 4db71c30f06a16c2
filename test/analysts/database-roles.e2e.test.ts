import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../shared/config.js';
import type { DatabaseTarget } from '../../shared/db/connections.js';
import { databaseRoleNames, setUpEmbeddedDatabaseRoles, type DatabaseRoleUrls } from '../../shared/db/database-roles.js';
import { createLogger } from '../../shared/logger.js';
import { startService, type RunningService } from '../../services/service.js';
import { bearer, createOrg, mintApiKey } from '../support/auth.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY } from '../support/service.js';

/**
 * `projections rebuild` and `projections replay` on an installation with its database roles (the
 * embedded default always has them): they create, move and drop schemas, which the runtime role
 * the service and the CLI connect as may not, so they run on the migration role's connection.
 * After a rebuild the service, as the runtime role, reads and projects into the swapped tables;
 * the replay is read by the analyst role through the URL the command prints.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');
const SLOW = 300_000;

let db: TestDatabase;
let dataDir: string;
let urls: DatabaseRoleUrls;
let service: RunningService;

beforeAll(async () => {
  db = await createTestDatabase('roles_rebuild');
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tracking-roles-rebuild-'));
  urls = await setUpEmbeddedDatabaseRoles(db.url, dataDir);
  const target: DatabaseTarget = { url: urls.runtime, migrationUrl: urls.migration, analystUrl: urls.analyst, embedded: false };
  const config = loadConfig({ PORT: '0', OPS_PORT: '0', INGEST_PORT: '0', LOG_LEVEL: 'silent', SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY });
  service = await startService(config, target, createLogger('silent'));
});

afterAll(async () => {
  await service?.stop();
  await db?.drop();
  await fs.rm(dataDir, { recursive: true, force: true });
});

function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = {
    ...process.env,
    DATABASE_URL: urls.runtime,
    MIGRATION_DATABASE_URL: urls.migration,
    ANALYST_DATABASE_URL: urls.analyst,
    SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY,
    LOG_LEVEL: 'warn',
    NODE_NO_WARNINGS: '1',
  };
  return new Promise((resolve) => {
    execFile(TSX, ['services/cli/main.ts', ...args], { cwd: ROOT, env, timeout: SLOW }, (error, stdout, stderr) =>
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

async function post(url: string, token: string, body: unknown): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { ...bearer(token), 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

async function scan(token: string, submission: string, tag: string): Promise<void> {
  const response = await post(`${service.urls.ingest}/scans`, token, {
    submission_id: submission,
    device_id: 'handheld-1',
    location: { external_key: 'DOCK-1' },
    reads: [{ tag_type: 'rfid', value: tag }],
  });
  expect(await response.json()).toMatchObject({ data: { accepted: 1 } });
}

describe('rebuild and replay with the database roles', () => {
  it('run as the migration role; the runtime role serves and projects into the rebuilt tables; the analyst reads the replay', { timeout: SLOW }, async () => {
    const org = await createOrg(service.ctx, 'Roles rebuild');
    const key = await mintApiKey(service.ctx, { orgId: org.id, scopes: ['assets:write', 'locations:write', 'tracking:read'] });
    const scans = await mintApiKey(service.ctx, { orgId: org.id, scopes: ['scans:write'] });
    expect((await post(`${service.urls.api}/locations`, key.token, { external_key: 'DOCK-1', name: 'Dock 1' })).status).toBe(201);
    for (const [asset, tag] of [['CART-1', 'E201'], ['CART-2', 'E202']]) {
      expect((await post(`${service.urls.api}/assets`, key.token, { external_key: asset, name: asset, tags: [{ tag_type: 'rfid', value: tag }] })).status).toBe(201);
    }
    await scan(scans.token, 'before-rebuild', 'E201');
    const report = async () =>
      ((await (await fetch(`${service.urls.api}/reports/asset-locations?sort=asset_external_key`, { headers: bearer(key.token) })).json()) as { data: Array<{ asset_external_key: string }> }).data.map(
        (row) => row.asset_external_key,
      );
    expect(await report()).toEqual(['CART-1']);

    const rebuild = await cli('projections', 'rebuild', '--json');
    expect(rebuild.code, rebuild.stderr).toBe(0);
    expect((JSON.parse(rebuild.stdout) as { rebuilt: string[] }).rebuilt).toContain('tracking');
    expect(await report()).toEqual(['CART-1']);
    // The projector's followers, as the runtime role, write the swapped-in tables and their sequence.
    await scan(scans.token, 'after-rebuild', 'E202');
    expect(await report()).toEqual(['CART-1', 'CART-2']);

    const replay = await cli('projections', 'replay', '--until', new Date().toISOString(), '--into', 'roles_replay', '--json');
    expect(replay.code, replay.stderr).toBe(0);
    const { database_url: url } = JSON.parse(replay.stdout) as { database_url: string };
    expect(new URL(url).username).toBe(databaseRoleNames(db.name).analyst);
    const analyst = new pg.Client({ connectionString: url });
    await analyst.connect();
    try {
      const { rows } = await analyst.query<{ n: number }>('SELECT count(*)::int AS n FROM asset_locations WHERE org_id = $1', [org.id]);
      expect(rows).toEqual([{ n: 2 }]);
    } finally {
      await analyst.end();
    }
  });
});
