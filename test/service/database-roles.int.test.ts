import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../shared/config.js';
import { analystDatabaseUrl, type DatabaseTarget } from '../../shared/db/connections.js';
import { applyAllMigrations, applyMigrationGroup } from '../../shared/db/migrate.js';
import { createPool } from '../../shared/db/pool.js';
import { databaseRoleNames, setUpEmbeddedDatabaseRoles, type DatabaseRoleUrls } from '../../shared/db/database-roles.js';
import { createLogger } from '../../shared/logger.js';
import { startService, type RunningService } from '../../services/service.js';
import { guardResponses, unguardResponses } from '../support/openapi-guard.js';
import { bearer, createOrg, mintApiKey } from '../support/auth.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY } from '../support/service.js';

// Issue 16: least-privilege roles. The service runs as a role without DDL, migrations as the role
// that owns the schemas, and analysts read the read models and nothing else (docs/operations.md, "Database roles").
// The database is a clone of the run's template, whose objects the superuser owns: as in an
// installation from before these roles, the set-up hands them to the migrator.

let db: TestDatabase;
let dataDir: string;
let urls: DatabaseRoleUrls;
let service: RunningService;

beforeAll(async () => {
  db = await createTestDatabase('roles');
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tracking-roles-'));
  // Several processes setting up at once (an `npm start` and a CLI run) agree, and nothing fails.
  // Each generates a password and races the others to its file: all must read the one that won, never a half-written file.
  const runs = await Promise.all(Array.from({ length: 8 }, () => setUpEmbeddedDatabaseRoles(db.url, dataDir)));
  urls = runs[0]!;
  for (const url of Object.values(urls)) expect(new URL(url).password.length).toBeGreaterThanOrEqual(20);
  expect(runs.map((run) => JSON.stringify(run))).toEqual(runs.map(() => JSON.stringify(urls)));
  const target: DatabaseTarget = { url: urls.runtime, migrationUrl: urls.migration, analystUrl: urls.analyst, embedded: false };
  const config = loadConfig({ PORT: '0', OPS_PORT: '0', INGEST_PORT: '0', LOG_LEVEL: 'silent', SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY });
  service = await startService(config, target, createLogger('silent'));
  // Its answers are checked against its document like a test service's (openapi-guard.ts).
  await guardResponses(service.urls.api!, new URL('/openapi/v1.json', service.urls.api!).href);
});

afterAll(async () => {
  if (service) unguardResponses(service.urls.api!);
  await service?.stop();
  await db?.drop();
  await fs.rm(dataDir, { recursive: true, force: true });
});

/** Runs `sql` as the role of `url`; the Postgres error code when refused. */
async function attempt(url: string, sql: string): Promise<{ ok: true; rows: unknown[] } | { ok: false; code: string }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return { ok: true, rows: (await client.query(sql)).rows };
  } catch (error) {
    return { ok: false, code: (error as { code: string }).code };
  } finally {
    await client.end();
  }
}

describe('database roles', () => {
  it('are named after the database, with generated passwords in 0600 files', async () => {
    const roles = databaseRoleNames(db.name);
    expect(roles).toEqual({ migrator: `${db.name}_migrator`, runtime: `${db.name}_runtime`, analyst: `${db.name}_analyst` });
    for (const role of Object.values(roles)) {
      const file = path.join(dataDir, `${role}.password`);
      expect((await fs.stat(file)).mode & 0o777).toBe(0o600);
      expect((await fs.readFile(file, 'utf8')).trim()).toMatch(/^[A-Za-z0-9_-]{24}$/);
    }
    expect(new URL(urls.runtime).username).toBe(roles.runtime);
    expect(analystDatabaseUrl(service.ctx)).toBe(urls.analyst);
    // A long database name still gives distinct names within Postgres's 63 bytes.
    const long = databaseRoleNames('x'.repeat(70));
    expect(Object.values(long).every((name) => name.length <= 63)).toBe(true);
    expect(databaseRoleNames(`${'x'.repeat(69)}y`).runtime).not.toBe(long.runtime);
  });

  it('the service runs as the runtime role, and that is enough for commands, projections and requests', async () => {
    const ctx = service.ctx;
    expect((await ctx.pool.query<{ user: string }>('SELECT current_user AS user')).rows[0]!.user).toBe(databaseRoleNames(db.name).runtime);
    const org = await createOrg(ctx, 'Least privilege');
    const key = await mintApiKey(ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write'] });
    const created = await fetch(`${service.urls.api}/assets`, {
      method: 'POST',
      headers: { ...bearer(key.token), 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Pallet jack' }),
    });
    expect(created.status).toBe(201);
    expect((await fetch(`${service.urls.api}/orgs/me`, { headers: bearer(key.token) })).status).toBe(200);
  });

  it('the runtime role is enough for scans: the tracking projection places the scanned asset', async () => {
    const ctx = service.ctx;
    const org = await createOrg(ctx, 'Least privilege scans');
    const key = await mintApiKey(ctx, { orgId: org.id, scopes: ['assets:write', 'locations:write', 'tracking:read'] });
    const scans = await mintApiKey(ctx, { orgId: org.id, scopes: ['scans:write'] });
    const post = (url: string, token: string, body: unknown) =>
      fetch(url, { method: 'POST', headers: { ...bearer(token), 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect((await post(`${service.urls.api}/locations`, key.token, { external_key: 'DOCK-1', name: 'Dock 1' })).status).toBe(201);
    const asset = await post(`${service.urls.api}/assets`, key.token, { external_key: 'CART-1', name: 'Cart', tags: [{ tag_type: 'rfid', value: 'E200001' }] });
    expect(asset.status).toBe(201);
    const submitted = await post(`${service.urls.ingest}/scans`, scans.token, {
      submission_id: 'roles-1',
      device_id: 'handheld-1',
      location: { external_key: 'DOCK-1' },
      reads: [{ tag_type: 'rfid', value: 'E200001', observed_at: '2026-05-25T14:38:11.440Z' }],
    });
    expect(await submitted.json()).toEqual({ data: { accepted: 1, unknown: 0, duplicate: false } });
    const report = await fetch(`${service.urls.api}/reports/asset-locations`, { headers: bearer(key.token) });
    const rows = ((await report.json()) as { data: Array<{ asset_external_key: string; location_external_key: string }> }).data;
    expect(rows.map((r) => [r.asset_external_key, r.location_external_key])).toEqual([['CART-1', 'DOCK-1']]);
  });

  it('an installation granted before the runtime role could setval gets that grant at its next start', async () => {
    const runtime = databaseRoleNames(db.name).runtime;
    const canSetval = async () =>
      attempt(
        urls.migration,
        `SELECT has_sequence_privilege('${runtime}', 'read_model.scan_read_seq', 'UPDATE') AND has_sequence_privilege('${runtime}', 'service.asset_ids', 'UPDATE') AS ok`,
      );
    const migrator = createPool(urls.migration, { max: 2 });
    try {
      await migrator.query(`REVOKE UPDATE ON ALL SEQUENCES IN SCHEMA read_model, service FROM ${runtime}`);
      expect(await canSetval()).toEqual({ ok: true, rows: [{ ok: false }] });
      expect(await attempt(urls.runtime, "SELECT setval('read_model.scan_read_seq', nextval('read_model.scan_read_seq'))")).toEqual({ ok: false, code: '42501' });
      await applyAllMigrations(migrator);
      expect(await canSetval()).toEqual({ ok: true, rows: [{ ok: true }] });
      expect(await attempt(urls.runtime, "SELECT setval('read_model.scan_read_seq', nextval('read_model.scan_read_seq'))")).toMatchObject({ ok: true });
    } finally {
      await migrator.end();
    }
  });

  it('the runtime role cannot create, drop, alter or truncate anything, nor record migrations', async () => {
    for (const sql of [
      'CREATE TABLE read_model.intruder (a int)',
      'CREATE TABLE service.intruder (a int)',
      'CREATE TABLE event_store.intruder (a int)',
      'CREATE TABLE public.intruder (a int)',
      'CREATE SCHEMA intruder',
      'DROP TABLE read_model.orgs',
      'DROP TABLE event_store.events',
      'DROP SCHEMA read_model CASCADE',
      'ALTER TABLE service.signing_keys ADD COLUMN x int',
      'TRUNCATE event_store.events',
      "INSERT INTO service.schema_migrations (name) VALUES ('999_fake.sql')",
    ]) {
      expect(await attempt(urls.runtime, sql), sql).toEqual({ ok: false, code: '42501' });
    }
  });

  it('the analyst role reads the read models and nothing of service or event_store, and cannot write', async () => {
    const orgs = await attempt(urls.analyst, "SELECT name FROM read_model.orgs WHERE name = 'Least privilege'");
    expect(orgs).toEqual({ ok: true, rows: [{ name: 'Least privilege' }] });
    expect(await attempt(urls.analyst, 'SELECT count(*) FROM read_model.assets')).toMatchObject({ ok: true });
    for (const sql of ['SELECT * FROM service.signing_keys', 'SELECT * FROM event_store.events', 'SELECT * FROM service.api_key_usage']) {
      expect(await attempt(urls.analyst, sql), sql).toEqual({ ok: false, code: '42501' });
    }
    // Read-only transactions by default (25006); and no write right underneath either (42501).
    expect(await attempt(urls.analyst, "INSERT INTO read_model.orgs (id, name) VALUES (999, 'x')")).toEqual({ ok: false, code: '25006' });
    expect(await attempt(urls.analyst, "BEGIN READ WRITE; DELETE FROM read_model.orgs")).toEqual({ ok: false, code: '42501' });
    expect(await attempt(urls.analyst, 'CREATE TABLE read_model.mine (a int)')).toMatchObject({ ok: false });
  });

  it('a replay schema built by the read-model migrations is readable by the analyst role, tables added later included', async () => {
    const migrator = createPool(urls.migration, { max: 2 });
    try {
      await applyMigrationGroup(migrator, 'read-model', 'replay_roles');
      await migrator.query('CREATE TABLE replay_roles.added_later (a int)');
      await migrator.query('CREATE TABLE service.added_later (a int)');
    } finally {
      await migrator.end();
    }
    expect(await attempt(urls.analyst, 'SELECT count(*)::int AS n FROM replay_roles.orgs')).toEqual({ ok: true, rows: [{ n: 0 }] });
    expect(await attempt(urls.analyst, 'SELECT * FROM replay_roles.added_later')).toEqual({ ok: true, rows: [] });
    // The service's own schemas stay closed to analysts, for tables added later too; the runtime role gets DML on those.
    expect(await attempt(urls.analyst, 'SELECT * FROM service.added_later')).toEqual({ ok: false, code: '42501' });
    expect(await attempt(urls.runtime, 'INSERT INTO service.added_later VALUES (1) RETURNING a')).toEqual({ ok: true, rows: [{ a: 1 }] });
    expect(await attempt(urls.runtime, 'DROP TABLE service.added_later')).toEqual({ ok: false, code: '42501' });
  });

  it('the migration role owns the database, its schemas and their objects; only the service database roles may connect', async () => {
    const roles = databaseRoleNames(db.name);
    const owners = await attempt(
      urls.migration,
      `SELECT DISTINCT pg_get_userbyid(c.relowner) AS owner FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname IN ('event_store', 'service', 'read_model')
       UNION SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname IN ('event_store', 'service', 'read_model')
       UNION SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()`,
    );
    expect(owners).toEqual({ ok: true, rows: [{ owner: roles.migrator }] });
    const acl = await attempt(urls.migration, 'SELECT datacl::text AS acl FROM pg_database WHERE datname = current_database()');
    expect(acl.ok && (acl.rows[0] as { acl: string }).acl).not.toMatch(/(^|[{,])=/);
  });
});
