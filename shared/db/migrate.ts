import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { Pool } from './pool.js';
import { databaseRoleNames, grantSchemaPrivileges } from './database-roles.js';

const MIGRATIONS_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../migrations');

/**
 * The three groups of plain-SQL migrations, applied in file-name order:
 * - `event-store` into schema `event_store`: the log itself;
 * - `service` into schema `service`: state that is not a projection (signing keys, id sequences);
 * - `read-model` into a read-model schema (`read_model`, or a rebuild/replay schema): every
 *   table a projection writes. These files must not name a schema, so they can build a copy.
 */
export type MigrationGroup = 'event-store' | 'service' | 'read-model';

const GROUP_SCHEMA: Record<Exclude<MigrationGroup, 'read-model'>, string> = {
  'event-store': 'event_store',
  service: 'service',
};

export const READ_MODEL_SCHEMA = 'read_model';

async function migrationFiles(group: MigrationGroup): Promise<string[]> {
  const dir = path.join(MIGRATIONS_ROOT, group);
  const names = await fs.readdir(dir).catch(() => [] as string[]);
  return names.filter((n) => n.endsWith('.sql')).sort();
}

/**
 * Whether every file of the group is recorded as applied in `schema`, read without a lock: a
 * process connected as the runtime role (no DDL) then starts without taking the migration path,
 * once a process with the migration role has applied them. Files are only ever added.
 */
async function allApplied(pool: Pool, schema: string, files: string[]): Promise<boolean> {
  try {
    const applied = await pool.query<{ name: string }>(`SELECT name FROM ${pg.escapeIdentifier(schema)}.schema_migrations`);
    const done = new Set(applied.rows.map((r) => r.name));
    return files.every((file) => done.has(file));
  } catch (error) {
    // No schema or table yet, or no right to read it: the locked path finds out.
    if (['3F000', '42P01', '42501'].includes((error as { code?: string }).code ?? '')) return false;
    throw error;
  }
}

/**
 * Applies a group's pending migrations into `schema` under an advisory lock (safe with several
 * processes), then has the schema's owner grant the database's runtime and analyst roles, if any,
 * their rights on it (`database-roles.ts`): a read-model schema built for a rebuild or a replay is readable
 * by analysts. A connection without DDL rights (the runtime role) gets through when nothing is
 * pending.
 */
export async function applyMigrationGroup(pool: Pool, group: MigrationGroup, schema?: string): Promise<string[]> {
  const target = schema ?? (group === 'read-model' ? READ_MODEL_SCHEMA : GROUP_SCHEMA[group]);
  const access = group === 'read-model' ? 'read-model' : 'internal';
  const files = await migrationFiles(group);
  const pending = !(await allApplied(pool, target, files));
  const client = await pool.connect();
  const applied: string[] = [];
  try {
    await client.query('SELECT pg_advisory_lock(hashtext($1))', [`migrations:${target}`]);
    if (!pending) {
      await grantSchemaPrivileges(client, target, access);
      return applied;
    }
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${pg.escapeIdentifier(target)}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${pg.escapeIdentifier(target)}.schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const done = new Set(
      (await client.query<{ name: string }>(`SELECT name FROM ${pg.escapeIdentifier(target)}.schema_migrations`)).rows.map((r) => r.name),
    );
    for (const file of files) {
      if (done.has(file)) continue;
      const text = await fs.readFile(path.join(MIGRATIONS_ROOT, group, file), 'utf8');
      await client.query('BEGIN');
      try {
        await client.query(`SET LOCAL search_path TO ${pg.escapeIdentifier(target)}, public`);
        await client.query(text);
        await client.query(`INSERT INTO ${pg.escapeIdentifier(target)}.schema_migrations (name) VALUES ($1)`, [file]);
        await client.query('COMMIT');
        applied.push(file);
      } catch (error) {
        await client.query('ROLLBACK');
        throw new Error(`migration ${group}/${file} failed: ${(error as Error).message}`);
      }
    }
    await grantSchemaPrivileges(client, target, access);
  } finally {
    await client.query('SELECT pg_advisory_unlock(hashtext($1))', [`migrations:${target}`]).catch(() => undefined);
    client.release();
  }
  return applied;
}

/**
 * True when every migration file of the three groups is recorded as applied in the current schemas:
 * one statement and no lock, so a process that starts on a current schema (every CLI command)
 * does not queue behind the advisory locks. False on a database never migrated.
 */
export async function migrationsCurrent(pool: Pool): Promise<boolean> {
  const groups: MigrationGroup[] = ['event-store', 'service', 'read-model'];
  const expected = await Promise.all(groups.map(migrationFiles));
  let rows: Array<{ grp: MigrationGroup; name: string }>;
  try {
    ({ rows } = await pool.query<{ grp: MigrationGroup; name: string }>(
      `SELECT 'event-store' AS grp, name FROM event_store.schema_migrations
       UNION ALL SELECT 'service', name FROM service.schema_migrations
       UNION ALL SELECT 'read-model', name FROM read_model.schema_migrations`,
    ));
  } catch (error) {
    // undefined_table, invalid_schema_name: not migrated yet.
    if (['42P01', '3F000'].includes((error as { code?: string }).code ?? '')) return false;
    throw error;
  }
  const applied = new Set(rows.map((r) => `${r.grp}/${r.name}`));
  return groups.every((group, i) => expected[i]!.every((file) => applied.has(`${group}/${file}`)));
}

/**
 * Whether the database's runtime and analyst roles, where they exist, have what they are granted
 * (`database-roles.ts`): the schemas, and the runtime role's UPDATE on sequences (granted later than the
 * rest). False on a database migrated before the roles were set up (a template, an installation
 * that predates them) or before that grant: the locked path then grants.
 */
async function grantsCurrent(pool: Pool): Promise<boolean> {
  const database = (await pool.query<{ name: string }>('SELECT current_database() AS name')).rows[0]!.name;
  const { runtime, analyst } = databaseRoleNames(database);
  const { rows } = await pool.query<{ missing: boolean }>(
    `SELECT EXISTS (
       SELECT 1 FROM (VALUES ($1, 'event_store'), ($1, 'service'), ($1, 'read_model'), ($2, 'read_model')) AS wanted (role, schema)
         JOIN pg_roles r ON r.rolname = wanted.role
        WHERE NOT has_schema_privilege(r.oid, wanted.schema, 'USAGE'))
       OR EXISTS (
       SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_roles r ON r.rolname = $1
        WHERE c.relkind = 'S' AND n.nspname IN ('event_store', 'service', 'read_model')
          AND NOT has_sequence_privilege(r.oid, c.oid, 'UPDATE')) AS missing`,
    [runtime, analyst],
  );
  return !rows[0]!.missing;
}

export async function applyAllMigrations(pool: Pool): Promise<void> {
  if ((await migrationsCurrent(pool)) && (await grantsCurrent(pool))) return;
  await applyMigrationGroup(pool, 'event-store');
  await applyMigrationGroup(pool, 'service');
  await applyMigrationGroup(pool, 'read-model');
}
