import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { databaseRoleNames } from '../../shared/db/database-roles.js';

// `npx tracking migrate`, as the Kubernetes init containers run it (deploy/k8s): the roles made by
// hand as the README says ("Database roles"); the migration role migrates an empty database, and
// the runtime role alone then finds it current, but cannot migrate one itself.

const ROOT = path.resolve(import.meta.dirname, '../..');
const admin = () => new pg.Client({ connectionString: inject('postgresAdminUrl') });
const password = randomBytes(12).toString('hex');
const databases: string[] = [];

/** An empty database with its migrator (owner) and runtime roles; their URLs. */
async function emptyDatabaseWithDatabaseRoles(): Promise<{ migration: string; runtime: string }> {
  const name = `cli_migrate_${randomBytes(4).toString('hex')}`;
  const { migrator, runtime } = databaseRoleNames(name);
  const client = admin();
  await client.connect();
  try {
    await client.query(`CREATE ROLE ${migrator} LOGIN PASSWORD '${password}'`);
    await client.query(`CREATE ROLE ${runtime} LOGIN PASSWORD '${password}'`);
    await client.query(`CREATE DATABASE ${name} OWNER ${migrator}`);
    await client.query(`REVOKE ALL ON DATABASE ${name} FROM PUBLIC`);
    await client.query(`GRANT CONNECT ON DATABASE ${name} TO ${runtime}`);
  } finally {
    await client.end();
  }
  databases.push(name);
  const url = (role: string) => {
    const u = new URL(inject('postgresAdminUrl'));
    u.username = role;
    u.password = password;
    u.pathname = `/${name}`;
    return u.toString();
  };
  // Postgres 15 and later: no role but the owner creates in public.
  const owner = new pg.Client({ connectionString: url(migrator) });
  await owner.connect();
  await owner.query('REVOKE CREATE ON SCHEMA public FROM PUBLIC');
  await owner.end();
  return { migration: url(migrator), runtime: url(runtime) };
}

function tracking(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const clean = { ...process.env };
    delete clean.MIGRATION_DATABASE_URL;
    execFile(process.execPath, ['bin/tracking.js', ...args], { cwd: ROOT, env: { ...clean, LOG_LEVEL: 'warn', ...env }, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

const migrationFiles = (group: string) => fs.readdirSync(path.join(ROOT, 'migrations', group)).filter((f) => f.endsWith('.sql')).length;

let urls: { migration: string; runtime: string };

beforeAll(async () => {
  urls = await emptyDatabaseWithDatabaseRoles();
});

afterAll(async () => {
  const client = admin();
  await client.connect();
  try {
    for (const name of databases) {
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      for (const role of Object.values(databaseRoleNames(name))) await client.query(`DROP ROLE IF EXISTS ${role}`);
    }
  } finally {
    await client.end();
  }
});

describe('npx tracking migrate', () => {
  it('refuses to migrate with the runtime role alone (no DDL), naming no secret', async () => {
    const result = await tracking(['migrate', '--json'], { DATABASE_URL: urls.runtime });
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^error: permission denied [^\n]*\n$/);
    expect(result.stderr).not.toContain(password);
  }, 120_000);

  it('migrates through MIGRATION_DATABASE_URL and prints the migrations of each schema; the runtime role then starts on it', async () => {
    const migrated = await tracking(['migrate', '--json'], { DATABASE_URL: urls.runtime, MIGRATION_DATABASE_URL: urls.migration });
    expect(migrated.code, migrated.stderr).toBe(0);
    expect(JSON.parse(migrated.stdout)).toEqual([
      { schema: 'event_store', migrations: migrationFiles('event-store') },
      { schema: 'service', migrations: migrationFiles('service') },
      { schema: 'read_model', migrations: migrationFiles('read-model') },
    ]);
    // Nothing pending: the runtime role alone gets through, twice at once as well.
    const again = await Promise.all([1, 2].map(() => tracking(['migrate', '--json'], { DATABASE_URL: urls.runtime })));
    for (const run of again) expect(run.code, run.stderr).toBe(0);
    const listed = await tracking(['orgs', 'list', '--json'], { DATABASE_URL: urls.runtime });
    expect(listed.code, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual([]);
  }, 120_000);
});
