import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { applyAllMigrations, migrationsCurrent } from '../../shared/db/migrate.js';
import { createPool } from '../../shared/db/pool.js';
import { createTestDatabase } from '../support/database.js';

// Every process (and every CLI command) opens the database through applyAllMigrations: on a
// current schema that is one statement without the advisory locks.

const cleanups: Array<() => Promise<void>> = [];

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function emptyDatabase(): Promise<string> {
  const admin = new pg.Client({ connectionString: inject('postgresAdminUrl') });
  await admin.connect();
  const name = `migrations_${randomBytes(4).toString('hex')}`;
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  cleanups.push(async () => {
    const client = new pg.Client({ connectionString: inject('postgresAdminUrl') });
    await client.connect();
    await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await client.end();
  });
  const url = new URL(inject('postgresAdminUrl'));
  url.pathname = `/${name}`;
  return url.toString();
}

describe('migrationsCurrent', () => {
  it('is false on a database never migrated, true once migrated, false again when a migration is missing', async () => {
    const pool = createPool(await emptyDatabase(), { max: 2 });
    cleanups.push(() => pool.end());
    expect(await migrationsCurrent(pool)).toBe(false);
    await applyAllMigrations(pool);
    expect(await migrationsCurrent(pool)).toBe(true);

    const { rows } = await pool.query<{ name: string }>('SELECT name FROM read_model.schema_migrations ORDER BY name DESC LIMIT 1');
    await pool.query('DELETE FROM read_model.schema_migrations WHERE name = $1', [rows[0]!.name]);
    expect(await migrationsCurrent(pool)).toBe(false);
  });

  it('a current schema is checked without taking the migration locks', async () => {
    const db = await createTestDatabase('migrations_current');
    cleanups.push(() => db.drop());
    const pool = createPool(db.url, { max: 2 });
    cleanups.push(() => pool.end());
    // Another process holds a migration lock (as while it migrates): a current schema does not wait for it.
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    cleanups.push(() => holder.end());
    await holder.query('SELECT pg_advisory_lock(hashtext($1))', ['migrations:event_store']);
    await expect(Promise.race([applyAllMigrations(pool).then(() => 'done'), new Promise((r) => setTimeout(() => r('waited'), 3000))])).resolves.toBe('done');
  });
});
