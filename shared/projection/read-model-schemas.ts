import pg from 'pg';
import { applyMigrationGroup } from '../db/migrate.js';

/**
 * Read-model schemas beside the current one: built by the same migrations (they never name a
 * schema), filled by the same projections (unqualified names under a search_path), and, for a
 * rebuild, moved into the current schema table by table.
 */

const id = pg.escapeIdentifier;

/** Creates `schema` with every read-model table, empty. */
export async function createReadModelSchema(pool: pg.Pool, schema: string): Promise<void> {
  await applyMigrationGroup(pool, 'read-model', schema);
}

export async function schemaExists(db: pg.Pool | pg.ClientBase, schema: string): Promise<boolean> {
  const result = await db.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
  return (result.rowCount ?? 0) > 0;
}

/**
 * Generated columns call functions of their own schema (`rfc3339`): a table moved into the
 * current schema would keep calling the shadow schema's copy, which dies with it. Before the
 * shadow tables hold any row, their generated columns are pointed at the same-named functions of
 * the current schema (each expression as printed under the shadow's search_path, parsed again
 * under the current one). Postgres 17 or later (SET EXPRESSION).
 */
export async function pointGeneratedColumnsAt(pool: pg.Pool, shadow: string, current: string, tables: readonly string[]): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query(`SET LOCAL search_path TO ${id(shadow)}`);
    const columns = await client.query<{ table: string; column: string; expression: string }>(
      `SELECT c.relname AS table, a.attname AS column, pg_get_expr(d.adbin, d.adrelid) AS expression
         FROM pg_class c
         JOIN pg_attribute a ON a.attrelid = c.oid AND a.attgenerated = 's' AND NOT a.attisdropped
         JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1) AND c.relname = ANY($2::text[])
        ORDER BY c.relname, a.attnum`,
      [shadow, tables],
    );
    await client.query(`SET LOCAL search_path TO ${id(current)}`);
    const byTable = new Map<string, string[]>();
    for (const { table, column, expression } of columns.rows) {
      byTable.set(table, [...(byTable.get(table) ?? []), `ALTER COLUMN ${id(column)} SET EXPRESSION AS (${expression})`]);
    }
    for (const [table, changes] of byTable) await client.query(`ALTER TABLE ${id(shadow)}.${id(table)} ${changes.join(', ')}`);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

export interface Dependency {
  dependent: string;
  referenced: string;
}

/**
 * Objects outside `schemas` that depend on objects inside them (a view, a default, a generated
 * column, a function body...). Dropping those schemas with CASCADE would drop or break such an
 * object, so a swap refuses to commit while there is one, and leftovers with one are kept.
 * Objects of a kind it cannot place count as outside.
 */
export async function externalDependents(db: pg.Pool | pg.ClientBase, schemas: readonly string[]): Promise<Dependency[]> {
  const result = await db.query<Dependency>(
    `WITH inside AS (SELECT oid FROM pg_namespace WHERE nspname = ANY($1::text[])),
     refs AS (
       SELECT d.classid, d.objid, d.objsubid, d.refclassid, d.refobjid, d.refobjsubid FROM pg_depend d
        WHERE d.deptype IN ('n', 'a', 'i')
          AND ((d.refclassid = 'pg_class'::regclass AND d.refobjid IN (SELECT oid FROM pg_class WHERE relnamespace IN (SELECT oid FROM inside)))
            OR (d.refclassid = 'pg_proc'::regclass AND d.refobjid IN (SELECT oid FROM pg_proc WHERE pronamespace IN (SELECT oid FROM inside)))
            OR (d.refclassid = 'pg_type'::regclass AND d.refobjid IN (SELECT oid FROM pg_type WHERE typnamespace IN (SELECT oid FROM inside))))),
     placed AS (
       SELECT r.*, CASE r.classid
           -- A TOAST table is in pg_toast; it belongs where its table is.
           WHEN 'pg_class'::regclass THEN (SELECT CASE WHEN c.relkind = 't' THEN (SELECT o.relnamespace FROM pg_class o WHERE o.reltoastrelid = c.oid) ELSE c.relnamespace END
                                             FROM pg_class c WHERE c.oid = r.objid)
           WHEN 'pg_proc'::regclass THEN (SELECT pronamespace FROM pg_proc WHERE oid = r.objid)
           WHEN 'pg_type'::regclass THEN (SELECT typnamespace FROM pg_type WHERE oid = r.objid)
           WHEN 'pg_constraint'::regclass THEN (SELECT connamespace FROM pg_constraint WHERE oid = r.objid)
           WHEN 'pg_attrdef'::regclass THEN (SELECT c.relnamespace FROM pg_attrdef a JOIN pg_class c ON c.oid = a.adrelid WHERE a.oid = r.objid)
           WHEN 'pg_rewrite'::regclass THEN (SELECT c.relnamespace FROM pg_rewrite w JOIN pg_class c ON c.oid = w.ev_class WHERE w.oid = r.objid)
           WHEN 'pg_trigger'::regclass THEN (SELECT c.relnamespace FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE t.oid = r.objid)
           WHEN 'pg_policy'::regclass THEN (SELECT c.relnamespace FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid WHERE p.oid = r.objid)
           WHEN 'pg_statistic_ext'::regclass THEN (SELECT stxnamespace FROM pg_statistic_ext WHERE oid = r.objid)
         END AS namespace
         FROM refs r)
     SELECT pg_describe_object(classid, objid, objsubid) AS dependent, pg_describe_object(refclassid, refobjid, refobjsubid) AS referenced
       FROM placed WHERE namespace IS NULL OR namespace NOT IN (SELECT oid FROM inside)
      ORDER BY 1, 2`,
    [schemas],
  );
  return result.rows;
}

export interface Relations {
  tables: readonly string[];
  sequences: readonly string[];
}

/**
 * The relations with the partitions of their partitioned tables (as they are in `schema` now):
 * a partition is a table of its own, moved with its parent.
 */
export async function withPartitions(db: pg.Pool | pg.ClientBase, schema: string, relations: Relations): Promise<Relations> {
  const { rows } = await db.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
      WHERE p.relnamespace = to_regnamespace($1) AND p.relname = ANY($2::text[]) AND c.relkind IN ('r', 'p') ORDER BY c.relname`,
    [schema, relations.tables],
  );
  return { tables: [...relations.tables, ...rows.map((r) => r.name)], sequences: relations.sequences };
}

/** Of these tables, those that hold rows: the plain ones, and the partitions of the partitioned ones. */
async function storedTables(db: pg.Pool | pg.ClientBase, schema: string, tables: readonly string[]): Promise<string[]> {
  const all = await withPartitions(db, schema, { tables, sequences: [] });
  const { rows } = await db.query<{ name: string }>(
    `SELECT relname AS name FROM pg_class WHERE relnamespace = to_regnamespace($1) AND relname = ANY($2::text[]) AND relkind = 'p'`,
    [schema, all.tables],
  );
  const partitioned = new Set(rows.map((r) => r.name));
  return all.tables.filter((t) => !partitioned.has(t));
}

/** Moves the relations from one schema to another (catalog changes only: no row is copied). */
export function moveRelationsSql(relations: Relations, from: string, to: string): string[] {
  return [
    ...relations.tables.map((t) => `ALTER TABLE ${id(from)}.${id(t)} SET SCHEMA ${id(to)}`),
    ...relations.sequences.map((s) => `ALTER SEQUENCE ${id(from)}.${id(s)} SET SCHEMA ${id(to)}`),
  ];
}

/**
 * Checks, before any row is written, that the shadow's tables can be moved out of it alone: in a
 * transaction rolled back at the end, moves them into a probe schema and lists what there still
 * depends on the shadow (a default on one of its functions, say). Empty when swappable.
 */
export async function probeSwap(pool: pg.Pool, shadow: string, relations: Relations): Promise<Dependency[]> {
  const client = await pool.connect();
  const probe = `${shadow}_probe`;
  try {
    await client.query('BEGIN');
    await client.query(`CREATE SCHEMA ${id(probe)}`);
    for (const statement of moveRelationsSql(await withPartitions(client, shadow, relations), shadow, probe)) await client.query(statement);
    return await externalDependents(client, [shadow]);
  } finally {
    await client.query('ROLLBACK').catch(() => undefined);
    client.release();
  }
}

/**
 * GRANT statements giving the relations of `to` the privileges their namesakes in `from` have
 * (a database role granted SELECT on the current tables keeps it on the rebuilt ones).
 */
export async function copyGrantsSql(db: pg.ClientBase, relations: Relations, from: string, to: string): Promise<string[]> {
  const result = await db.query<{ name: string; kind: string; grantee: string | null; privilege: string; grantable: boolean }>(
    `SELECT c.relname AS name, c.relkind AS kind,
            CASE WHEN a.grantee = 0 THEN NULL ELSE a.grantee::regrole::text END AS grantee,
            a.privilege_type AS privilege, a.is_grantable AS grantable
       FROM pg_class c, aclexplode(c.relacl) a
      WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1) AND c.relname = ANY($2::text[])
        AND a.grantee <> c.relowner`,
    [from, [...relations.tables, ...relations.sequences]],
  );
  return result.rows.map(
    (g) =>
      `GRANT ${g.privilege} ON ${g.kind === 'S' ? 'SEQUENCE' : 'TABLE'} ${id(to)}.${id(g.name)} TO ${g.grantee ?? 'PUBLIC'}${g.grantable ? ' WITH GRANT OPTION' : ''}`,
  );
}

/**
 * Drops a schema built here (a shadow, the retired tables of a swap, a replaced replay) with
 * everything in it; refuses when an object elsewhere depends on it.
 */
export async function dropSchema(db: pg.Pool | pg.ClientBase, schema: string): Promise<void> {
  if (!(await schemaExists(db, schema))) return;
  const outside = await externalDependents(db, [schema]);
  if (outside.length > 0) throw new Error(`schema ${schema} is kept: ${outside[0]!.dependent} depends on ${outside[0]!.referenced}`);
  await db.query(`DROP SCHEMA IF EXISTS ${id(schema)} CASCADE`);
}

/**
 * While a schema is being filled from the log its tables take no WAL (UNLOGGED): a crash meanwhile
 * loses nothing worth keeping, since a half-built schema is dropped anyway, and each row then
 * costs its write alone instead of WAL records with full-page images of every index page it
 * touches. `finishBuild` makes them ordinary tables again.
 */
export async function unlogTables(pool: pg.Pool, schema: string, tables: readonly string[]): Promise<void> {
  for (const table of await storedTables(pool, schema, tables)) await pool.query(`ALTER TABLE ${id(schema)}.${id(table)} SET UNLOGGED`);
}

/** An index left out while a schema is filled, made again by `finishBuild`: its table and its definition. */
export interface LaterIndex {
  table: string;
  definition: string;
}

/**
 * Drops the indexes `names` of a fresh schema before it is filled from the log, and gives their
 * definitions back for `finishBuild`: each is then made once, from the whole table (one sort),
 * instead of taking an entry per row written. Only indexes no statement of the filling needs
 * (`Projection.indexesAfterReplay`); a name the schema does not have is an error.
 */
export async function dropIndexesForBuild(pool: pg.Pool, schema: string, names: readonly string[]): Promise<LaterIndex[]> {
  if (names.length === 0) return [];
  const { rows } = await pool.query<{ name: string; table: string; definition: string; is_unique: boolean }>(
    `SELECT i.relname AS name, t.relname AS table, pg_get_indexdef(i.oid) AS definition, x.indisunique AS is_unique
       FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
      WHERE i.relnamespace = to_regnamespace($1) AND i.relname = ANY ($2::text[])`,
    [schema, names],
  );
  const missing = names.filter((name) => !rows.some((r) => r.name === name));
  if (missing.length > 0) throw new Error(`no index ${missing.join(', ')} in ${schema}`);
  const unique = rows.filter((r) => r.is_unique);
  if (unique.length > 0) throw new Error(`index ${unique[0]!.name} is unique: it checks the rows as they are written and cannot wait`);
  for (const r of rows) await pool.query(`DROP INDEX ${id(schema)}.${id(r.name)}`);
  return rows.map((r) => ({ table: r.table, definition: r.definition }));
}

/**
 * Makes freshly filled tables ready to serve: logged again (each written once to the WAL, as a
 * whole), the indexes left out while filling (`later`, from `dropIndexesForBuild`) made, then
 * VACUUM (ANALYZE): planner statistics, and a visibility map so that index-only scans need not
 * visit the heap. On a session without the pool's statement timeout (a large table takes longer).
 * Stops between tables when the signal is aborted.
 */
export async function finishBuild(pool: pg.Pool, schema: string, tables: readonly string[], signal?: AbortSignal, later: readonly LaterIndex[] = []): Promise<void> {
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query('SET statement_timeout TO 0');
    const stored = new Set(await storedTables(client, schema, tables));
    for (const table of tables) {
      if (signal?.aborted) break;
      // A partitioned table: its partitions are logged again, and VACUUM goes through them.
      for (const part of stored.has(table) ? [table] : (await withPartitions(client, schema, { tables: [table], sequences: [] })).tables.slice(1)) {
        if (stored.has(part)) await client.query(`ALTER TABLE ${id(schema)}.${id(part)} SET LOGGED`);
      }
      // After SET LOGGED, which rewrites the table and every index it has.
      for (const index of later.filter((i) => i.table === table)) await client.query(index.definition);
      await client.query(`VACUUM (ANALYZE) ${id(schema)}.${id(table)}`);
    }
    await client.query('RESET statement_timeout');
  } catch (error) {
    broken = true;
    throw error;
  } finally {
    client.release(broken);
  }
}
