import pg from 'pg';
import { recognizeAsTransient } from '../errors.js';

// int8 columns (positions, counts) arrive as strings by default; ours fit in a JS number except
// event positions, which the event store reads as text on purpose.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

// A lost or refused connection says nothing about the statement: the edge answers 503 and a
// consumer tries again (errors.ts, isTransient).
recognizeAsTransient(isConnectionError);

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

export interface PoolOptions {
  max?: number;
  /** search_path for read-model queries. */
  searchPath?: string;
  applicationName?: string;
}

export function createPool(url: string, options: PoolOptions = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: options.max ?? 20,
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
    application_name: options.applicationName ?? 'tracking',
    // A lost or stuck connection must surface as an error, never a hang.
    statement_timeout: 60_000,
    query_timeout: 65_000,
    options: options.searchPath ? `-c search_path=${options.searchPath}` : undefined,
  });
  // An idle client that loses its connection emits here; the pool discards it.
  pool.on('error', () => undefined);
  // A checked-out client whose connection dies emits 'error' on itself; without a listener that
  // crashes the process. The query in flight still rejects, which is where callers handle it.
  pool.on('connect', (client) => {
    client.on('error', () => undefined);
  });
  keepConnectionsAfterRefusals(pool);
  retryDeadlockVictims(pool);
  return pool;
}

/**
 * pg's `Pool.query` discards its connection after any error, a statement the server refused
 * included: every conflict (an append to a stream another writer just moved, a key taken, a
 * checkpoint moved) then costs a new connection (the handshake, statements prepared again, the
 * append function compiled again), and under contention most of the server's time goes there
 * (docs/design.md "Event store (Postgres adapter)"). Here a refused statement keeps its
 * connection: back to the pool after a ROLLBACK, so that no transaction is left open on it (a
 * multi-statement query with its own BEGIN leaves one open and aborted when a statement fails). A
 * connection error, or any
 * failure that is not the server's answer (a client-side timeout, a broken protocol), still
 * discards it. The callback forms keep pg's own behaviour.
 */
function keepConnectionsAfterRefusals(pool: pg.Pool): void {
  const original = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
  const onOneClient = async (...args: unknown[]): Promise<unknown> => {
    const client = await pool.connect();
    let discard = false;
    try {
      return await (client.query as (...queryArgs: unknown[]) => Promise<unknown>).apply(client, args);
    } catch (error) {
      discard = !(error instanceof pg.DatabaseError) || isConnectionError(error);
      // Always: the query may reject before the server's ReadyForQuery says whether a transaction
      // was left open (getTransactionStatus can still read the state before it). A ROLLBACK with
      // none open is a warning, not an error: one round trip, against a new connection.
      if (!discard) await client.query('ROLLBACK').catch(() => (discard = true));
      throw error;
    } finally {
      client.release(discard);
    }
  };
  pool.query = ((...args: unknown[]) => (typeof args.at(-1) === 'function' ? original(...args) : onOneClient(...args))) as typeof pool.query;
}

const DEADLOCK_DETECTED = '40P01';
/** SQLSTATE of a row, or an index being built, that would repeat a unique key. */
export const UNIQUE_VIOLATION = '23505';
const DEADLOCK_ATTEMPTS = 3;

/**
 * A statement run on the pool (not in a transaction of the caller's) that Postgres chose as a
 * deadlock's victim runs again: it was rolled back whole. Readers meet this when a rebuild swaps
 * tables in (ACCESS EXCLUSIVE, one table after another) while a query holds one of them and
 * waits for another; the rebuild then goes through and the read answers from the new tables.
 */
function retryDeadlockVictims(pool: pg.Pool): void {
  const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
  const retrying = async (...args: unknown[]): Promise<unknown> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await query(...args);
      } catch (error) {
        if ((error as { code?: string }).code !== DEADLOCK_DETECTED || attempt >= DEADLOCK_ATTEMPTS) throw error;
      }
    }
  };
  pool.query = ((...args: unknown[]) => (typeof args.at(-1) === 'function' ? query(...args) : retrying(...args))) as typeof pool.query;
}

/** Runs `work` in a transaction on one client; rolls back on any error. */
export async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {
      broken = true;
    });
    throw error;
  } finally {
    client.release(broken);
  }
}

/** Errors that mean the database is unreachable or the connection died, as opposed to a refused statement. */
export function isConnectionError(error: unknown): boolean {
  const e = error as { code?: string; message?: string };
  if (typeof e?.code === 'string') {
    if (/^(08|57P0[1-3]|53300)/.test(e.code)) return true;
    if (['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND'].includes(e.code)) return true;
  }
  return /Connection terminated|connection timeout|Query read timeout|Client has encountered a connection error|timeout exceeded when trying to connect|Cannot use a pool after calling end|not currently accepting connections/i.test(
    e?.message ?? '',
  );
}

/**
 * Failures that say nothing about the statement that met them, so the same statement may succeed
 * later: the connection (class 08 and the errors above), serialization failures and deadlocks
 * (40), insufficient resources (53), operator intervention such as a cancel or a shutdown (57),
 * system and internal errors (58, XX), a lock not obtained in time (55P03). Everything else
 * Postgres refuses (a value out of range, a violated constraint...) it refuses again for the same
 * input: a projection sets such an event's stream aside instead of retrying it forever.
 */
export function isTransientDatabaseError(error: unknown): boolean {
  if (isConnectionError(error)) return true;
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return /Client was closed and is not queryable/i.test((error as { message?: string } | null)?.message ?? '');
  return /^(08|40|53|57|58|XX)/.test(code) || code === '55P03' || ['EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ECONNABORTED'].includes(code);
}

/** The SQLSTATE of a refused statement, or null for any other error. */
export function sqlstateOf(error: unknown): string | null {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : null;
}
