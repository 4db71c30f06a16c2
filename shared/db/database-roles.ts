import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { registerSecret } from '../redaction.js';

/**
 * Least-privilege database roles. Each database gets three, named after it (roles are
 * cluster-wide, so two installations or two test databases on one server never share one):
 *
 * - `<database>_migrator` owns the database, its schemas and everything in them: migrations and
 *   any other DDL run as it;
 * - `<database>_runtime` is what the service connects as: DML on the tables of `event_store`,
 *   `service` and every read-model schema, their sequences and functions; no DDL (no CREATE on the
 *   database or any schema, and DROP or ALTER needs ownership);
 * - `<database>_analyst` reads the read models, current (`read_model`) and replayed (every schema the
 *   read-model migrations build), in read-only transactions; no access to `service` or
 *   `event_store`.
 *
 * The embedded default creates them at start (`setUpEmbeddedDatabaseRoles`, as the superuser), with
 * passwords generated into 0600 files in DATA_DIR. With DATABASE_URL they are created by hand
 * (docs/operations.md, "Database roles"). Either way, whenever migrations run, `grantSchemaPrivileges` gives
 * the runtime and analyst roles of that database, when they exist, their rights on the schema just
 * migrated, existing objects and future ones.
 */

export interface DatabaseRoles {
  migrator: string;
  runtime: string;
  analyst: string;
}

/** Postgres truncates identifiers at 63 bytes; a long database name is shortened with a hash to stay unique. */
const MAX_IDENTIFIER = 63;

export function databaseRoleNames(database: string): DatabaseRoles {
  let base = database;
  if (Buffer.byteLength(base) + '_migrator'.length > MAX_IDENTIFIER) {
    const hash = createHash('sha256').update(database).digest('hex').slice(0, 8);
    base = `${database.replace(/[^\x20-\x7e]/g, '').slice(0, 40)}_${hash}`;
  }
  return { migrator: `${base}_migrator`, runtime: `${base}_runtime`, analyst: `${base}_analyst` };
}

/**
 * A SCRAM-SHA-256 verifier for `password` (RFC 5802, as Postgres stores it): the database role's password
 * is set without its clear text ever reaching the server, so no server log can show it.
 */
export function scramVerifier(password: string, salt: Buffer = randomBytes(16), iterations = 4096): string {
  const salted = pbkdf2Sync(password.normalize('NFKC'), salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

/** A database role's password from its file in DATA_DIR, generated (mode 0600) on first use. */
export async function databaseRolePassword(dataDir: string, dbRole: string): Promise<string> {
  const file = path.join(dataDir, `${dbRole}.password`);
  const fresh = randomBytes(18).toString('base64url');
  // Of two processes starting at once, one creates the file and both read it. The password is
  // written to a file of this process's own first and linked into place whole: a plain 'wx' write
  // creates the file empty before writing, and a reader in between would take '' for the password.
  const draft = `${file}.${process.pid}.${randomBytes(6).toString('hex')}`;
  await fs.writeFile(draft, `${fresh}\n`, { mode: 0o600, flag: 'wx' });
  try {
    await fs.link(draft, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    await fs.rm(draft, { force: true });
  }
  const password = (await fs.readFile(file, 'utf8')).trim();
  if (!password) throw new Error(`${file} is empty: remove it to have a new password generated`);
  registerSecret(password);
  return password;
}

function withCredentials(url: string, user: string, password: string): string {
  const parsed = new URL(url);
  parsed.username = encodeURIComponent(user);
  parsed.password = encodeURIComponent(password);
  return parsed.toString();
}

export interface DatabaseRoleUrls {
  migration: string;
  runtime: string;
  analyst: string;
}

const DATABASE_ROLE_ATTRIBUTES = 'LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT';

/**
 * Run as the superuser on the embedded default's database (`adminUrl`): creates or updates the
 * three database roles with their passwords from DATA_DIR, makes the migrator own the database and the
 * schemas and objects the superuser owned (installations from before these roles), and lets only
 * the service's database roles connect. Idempotent; concurrent starts take turns on an advisory lock.
 * Returns each database role's connection URL.
 */
export async function setUpEmbeddedDatabaseRoles(adminUrl: string, dataDir: string): Promise<DatabaseRoleUrls> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { database } = (await client.query<{ database: string }>('SELECT current_database() AS database')).rows[0]!;
    const dbRoles = databaseRoleNames(database);
    const passwords = {
      migrator: await databaseRolePassword(dataDir, dbRoles.migrator),
      runtime: await databaseRolePassword(dataDir, dbRoles.runtime),
      analyst: await databaseRolePassword(dataDir, dbRoles.analyst),
    };
    const id = pg.escapeIdentifier;
    await client.query('BEGIN');
    try {
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', ['tracking database roles']);
      for (const purpose of ['migrator', 'runtime', 'analyst'] as const) {
        const dbRole = dbRoles[purpose];
        const exists = await client.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [dbRole]);
        const verifier = pg.escapeLiteral(scramVerifier(passwords[purpose]));
        await client.query(`${exists.rowCount ? 'ALTER' : 'CREATE'} ROLE ${id(dbRole)} WITH ${DATABASE_ROLE_ATTRIBUTES} PASSWORD ${verifier}`);
      }
      // Analysts' transactions take no transaction id: however long they run, they never hold
      // back the global log's horizon (docs/design.md, "Trade-offs to know when operating it"), and they cannot write by mistake.
      await client.query(`ALTER ROLE ${id(dbRoles.analyst)} SET default_transaction_read_only = on`);
      await client.query(`ALTER DATABASE ${id(database)} OWNER TO ${id(dbRoles.migrator)}`);
      await client.query(`REVOKE ALL ON DATABASE ${id(database)} FROM PUBLIC`);
      await client.query(`GRANT CONNECT ON DATABASE ${id(database)} TO ${id(dbRoles.runtime)}, ${id(dbRoles.analyst)}`);
      await transferOwnership(client, dbRoles.migrator);
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
    return {
      migration: withCredentials(adminUrl, dbRoles.migrator, passwords.migrator),
      runtime: withCredentials(adminUrl, dbRoles.runtime, passwords.runtime),
      analyst: withCredentials(adminUrl, dbRoles.analyst, passwords.analyst),
    };
  } finally {
    await client.end();
  }
}

/** Schemas that belong to the installation: all but the system's and `public` (extensions live there). */
const OWN_SCHEMAS = `n.nspname NOT LIKE 'pg\\_%' AND n.nspname NOT IN ('information_schema', 'public')`;

/**
 * Gives `migrator` what the connected (super)user owns in the installation's schemas: the
 * schemas, their tables, views and free-standing sequences (a table's own sequences and indexes
 * follow it), and their functions. Extension members are left alone.
 */
async function transferOwnership(client: pg.Client, migrator: string): Promise<void> {
  const to = pg.escapeIdentifier(migrator);
  const notExtensionMember = (catalog: string, oid: string) =>
    `NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = '${catalog}'::regclass AND d.objid = ${oid} AND d.deptype = 'e')`;
  const schemas = await client.query<{ name: string }>(
    `SELECT n.nspname AS name FROM pg_namespace n WHERE n.nspowner = (SELECT oid FROM pg_roles WHERE rolname = current_user) AND ${OWN_SCHEMAS}`,
  );
  for (const { name } of schemas.rows) await client.query(`ALTER SCHEMA ${pg.escapeIdentifier(name)} OWNER TO ${to}`);
  const relations = await client.query<{ name: string; kind: string }>(
    `SELECT c.oid::regclass::text AS name, c.relkind AS kind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user) AND ${OWN_SCHEMAS}
       AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND ${notExtensionMember('pg_class', 'c.oid')}`,
  );
  const alter: Record<string, string> = { r: 'TABLE', p: 'TABLE', f: 'FOREIGN TABLE', v: 'VIEW', m: 'MATERIALIZED VIEW' };
  for (const { name, kind } of relations.rows) await client.query(`ALTER ${alter[kind]} ${name} OWNER TO ${to}`);
  const sequences = await client.query<{ name: string }>(
    `SELECT c.oid::regclass::text AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user) AND ${OWN_SCHEMAS} AND c.relkind = 'S'
       AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i', 'e'))`,
  );
  for (const { name } of sequences.rows) await client.query(`ALTER SEQUENCE ${name} OWNER TO ${to}`);
  const routines = await client.query<{ name: string }>(
    `SELECT p.oid::regprocedure::text AS name FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE p.proowner = (SELECT oid FROM pg_roles WHERE rolname = current_user) AND ${OWN_SCHEMAS} AND ${notExtensionMember('pg_proc', 'p.oid')}`,
  );
  for (const { name } of routines.rows) await client.query(`ALTER ROUTINE ${name} OWNER TO ${to}`);
}

export type SchemaAccess = 'internal' | 'read-model';

/**
 * Run by the migration connection after a migration group, when it owns the schema (or is a
 * superuser): the runtime role gets DML on the
 * schema's tables, its sequences and functions, now and for what is created there later; the
 * analyst role gets SELECT, only on read-model schemas (the current one, rebuilds and replays).
 * Database roles that do not exist are skipped, so a single-user installation is unaffected. Grants of one
 * schema must not run concurrently (Postgres refuses concurrent updates of one catalog row): the
 * caller holds that schema's migration lock.
 */
export async function grantSchemaPrivileges(client: pg.ClientBase, schema: string, access: SchemaAccess): Promise<void> {
  const { database, owns } = (
    await client.query<{ database: string; owns: boolean }>(
      `SELECT current_database() AS database,
              coalesce((SELECT pg_has_role(current_user, nspowner, 'USAGE') FROM pg_namespace WHERE nspname = $1), false) AS owns`,
      [schema],
    )
  ).rows[0]!;
  // Granting is the owner's business; the runtime role reaching here (nothing to migrate) has none to give.
  if (!owns) return;
  const dbRoles = databaseRoleNames(database);
  const existing = new Set(
    (await client.query<{ rolname: string }>('SELECT rolname FROM pg_roles WHERE rolname = ANY($1)', [[dbRoles.runtime, dbRoles.analyst]])).rows.map((r) => r.rolname),
  );
  const s = pg.escapeIdentifier(schema);
  const statements: string[] = [];
  if (existing.has(dbRoles.runtime)) {
    const runtime = pg.escapeIdentifier(dbRoles.runtime);
    statements.push(
      `GRANT USAGE ON SCHEMA ${s} TO ${runtime}`,
      `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${s} TO ${runtime}`,
      // UPDATE: setval, with which the tracking projection reserves a range of read sequence numbers.
      `GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA ${s} TO ${runtime}`,
      `GRANT EXECUTE ON ALL ROUTINES IN SCHEMA ${s} TO ${runtime}`,
      `ALTER DEFAULT PRIVILEGES IN SCHEMA ${s} GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ${runtime}`,
      `ALTER DEFAULT PRIVILEGES IN SCHEMA ${s} GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO ${runtime}`,
      `ALTER DEFAULT PRIVILEGES IN SCHEMA ${s} GRANT EXECUTE ON ROUTINES TO ${runtime}`,
      // The service reads which migrations ran; only migrations record them.
      `REVOKE INSERT, UPDATE, DELETE ON ${s}.schema_migrations FROM ${runtime}`,
    );
  }
  if (access === 'read-model' && existing.has(dbRoles.analyst)) {
    const analyst = pg.escapeIdentifier(dbRoles.analyst);
    statements.push(
      `GRANT USAGE ON SCHEMA ${s} TO ${analyst}`,
      `GRANT SELECT ON ALL TABLES IN SCHEMA ${s} TO ${analyst}`,
      `ALTER DEFAULT PRIVILEGES IN SCHEMA ${s} GRANT SELECT ON TABLES TO ${analyst}`,
    );
  }
  if (statements.length > 0) await client.query(statements.join(';\n'));
}
