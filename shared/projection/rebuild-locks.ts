import type pg from 'pg';

/**
 * A rebuild holds a session advisory lock per projection it rebuilds, on the connection that
 * swaps its tables in, so that a second rebuild of the same projection is refused while the first
 * runs (and the lock dies with a killed rebuild). Status reads who holds them from `pg_locks`.
 * Keys are `hashtext` of the text, as the projector's own locks (`projection:<schema>:<name>`).
 */
export function rebuildLockKey(schema: string, projection: string): string {
  return `projection-rebuild:${schema}:${projection}`;
}

/** The lock of one shadow schema's rebuild: held while it runs, free once it is a leftover. */
export function shadowLockKey(schema: string, id: string): string {
  return `projection-rebuild-schema:${schema}:${id}`;
}

/** Who holds an advisory lock taken as `pg_advisory_lock(hashtext(key))` in this database. */
const HOLDERS = `SELECT k.key, a.pid, a.application_name, a.client_addr::text AS client_addr, a.backend_start
  FROM unnest($1::text[]) AS k(key)
  JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtext(k.key)::bigint
  JOIN pg_stat_activity a ON a.pid = l.pid`;

export interface LockHolder {
  pid: number;
  application_name: string;
  client_addr: string | null;
  backend_start: Date;
}

export async function advisoryLockHolders(db: pg.Pool | pg.ClientBase, keys: readonly string[]): Promise<Map<string, LockHolder>> {
  const result = await db.query<LockHolder & { key: string }>(HOLDERS, [keys]);
  return new Map(result.rows.map(({ key, ...holder }) => [key, holder]));
}

/** The projections of `names` that a rebuild of the given current schema is running for. */
export async function rebuildsRunning(db: pg.Pool | pg.ClientBase, schema: string, names: readonly string[]): Promise<Set<string>> {
  const holders = await advisoryLockHolders(db, names.map((name) => rebuildLockKey(schema, name)));
  return new Set(names.filter((name) => holders.has(rebuildLockKey(schema, name))));
}
