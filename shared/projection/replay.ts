import pg from 'pg';
import { ArchivedLog } from '../archive/archived-log.js';
import { READ_MODEL_SCHEMA } from '../db/migrate.js';
import { START, formatPosition, type EventStore } from '../event-store/port.js';
import type { Logger } from '../logger.js';
import type { Projection } from './projection.js';
import { ProjectorRuntime } from './runtime.js';
import { appliedProjections, replayProcessesOf, type ReplayProcesses } from './rebuild.js';
import type { ProjectionSegments } from './segments.js';
import { createReadModelSchema, dropIndexesForBuild, dropSchema, finishBuild, schemaExists, unlogTables } from './read-model-schemas.js';

/**
 * `projections replay --until T --into S`: the read models as they stood at T, built from the
 * events recorded at or before T into a schema of their own, for analysts' plain SQL. Nothing
 * else uses that schema: the service never reads it, a rebuild never touches it.
 *
 * "Recorded at or before T" is exact, not a prefix of the log: the log is ordered by transaction,
 * and an append that took its place in the log just before T can record its events a moment
 * after another append recorded its own after T. The replay therefore reads on past the first
 * event recorded after T, applying only those recorded by T, until it meets one recorded more than
 * APPEND_LOOKAHEAD_MS (catch-up-processes.ts: `replayWindow`) after T: an append is one statement, which a statement timeout (60 s in this
 * service's pools) ends long before that, so no event recorded by T can come later in the log.
 * Recorded times are compared to the millisecond. Like a rebuild, it reads the scan archive's
 * segments merged with the store's log (shared/archive/archived-log.ts).
 */
/** The table, in each replay schema, that says what it is; --replace replaces only such schemas. */
export const REPLAY_INFO_TABLE = 'replay_info';

export interface ReplayOptions {
  store: EventStore;
  pool: pg.Pool;
  log: Logger;
  projections: readonly Projection[];
  until: Date;
  into: string;
  /** ARCHIVE_DIR: required once the log has moved events into the archive (refused without it). */
  archiveDir?: string;
  replace?: boolean;
  batchSize?: number;
  /** PROJECTION_SEGMENTS: each split projection is replayed as that many segments (docs/design.md "Rebuild and replay"). */
  segments?: ProjectionSegments;
  /** `--parallel`: how many processes replay the log (with `processes`), or segments apply each batch side by side in this one. */
  parallel?: number;
  /** With it, the log is replayed in `parallel` processes (rebuild.ts, `RebuildOptions.processes`). */
  processes?: ReplayProcesses;
  signal?: AbortSignal;
  /** After each batch: events of the log read so far, of `total` in the whole log. */
  onProgress?: (progress: { events: number; total: number }) => void;
}

export interface ReplayResult {
  schema: string;
  until: string;
  events: number;
  seconds: number;
}

/** A replay that cannot start: a bad name or instant, an existing schema, another replay into it. */
export class ReplayRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReplayRefusedError';
  }
}

export class ReplayInterruptedError extends Error {
  constructor(schema: string) {
    super(`replay interrupted: schema ${schema} was dropped`);
    this.name = 'ReplayInterruptedError';
  }
}

const RESERVED = new Set([READ_MODEL_SCHEMA, 'event_store', 'service', 'public', 'information_schema']);

/**
 * Why `name` cannot be a replay schema, or null. Lower-case identifiers only, so that an analyst
 * writes it in SQL without quotes; never one of the service's own schemas or a rebuild's.
 */
export function replaySchemaProblem(name: string): string | null {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) {
    return `--into must be a schema name: lower-case letters, digits and "_", starting with a letter or "_", at most 63 characters (got ${JSON.stringify(name)})`;
  }
  if (RESERVED.has(name) || name.startsWith('pg_') || /^read_model_(rebuild|retired)_/.test(name)) {
    return `--into ${name}: that schema belongs to the service; choose another name`;
  }
  return null;
}

/**
 * A connection string for psql (or any libpq client) that lands in the replay schema: the given
 * one with `options=-c search_path=<schema>,public`, so its tables need no schema prefix.
 */
export function replayDatabaseUrl(databaseUrl: string, schema: string): string {
  const url = new URL(databaseUrl);
  url.searchParams.delete('options');
  // libpq decodes %XX but not "+": the option's space is written %20.
  const options = `options=${encodeURIComponent(`-c search_path=${schema},public`)}`;
  url.search = url.search ? `${url.search}&${options}` : `?${options}`;
  return url.toString();
}

export async function replayProjections(options: ReplayOptions): Promise<ReplayResult> {
  const started = performance.now();
  const { pool, log, into, until, signal } = options;
  const problem = replaySchemaProblem(into);
  if (problem) throw new ReplayRefusedError(problem);
  if (until.getTime() > Date.now()) throw new ReplayRefusedError(`--until ${until.toISOString()} is in the future`);
  const control = await pool.connect();
  let broken = false;
  const key = `projection-replay:${into}`;
  try {
    const { rows } = await control.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [key]);
    if (!rows[0]!.ok) throw new ReplayRefusedError(`a replay into ${into} is already running`);
    let store: ArchivedLog | null = null;
    try {
      store = await ArchivedLog.open({ store: options.store, pool, dir: options.archiveDir });
      if (await schemaExists(control, into)) {
        if (!options.replace) throw new ReplayRefusedError(`schema ${into} exists; pass --replace to build it again`);
        const info = await control.query<{ found: string | null }>('SELECT to_regclass($1) AS found', [`${pg.escapeIdentifier(into)}.${REPLAY_INFO_TABLE}`]);
        if (!info.rows[0]!.found) throw new ReplayRefusedError(`schema ${into} exists and is not a replay schema: it is not replaced`);
        await dropSchema(pool, into);
      }
      try {
        await createReadModelSchema(pool, into);
        const tables = options.projections.flatMap((p) => p.tables);
        await unlogTables(pool, into, tables);
        const later = await dropIndexesForBuild(pool, into, options.projections.flatMap((p) => p.indexesAfterReplay ?? []));
        const runtime = new ProjectorRuntime({
          store,
          pool,
          projections: appliedProjections(options.projections, options.segments),
          log,
          schema: into,
          batchSize: options.batchSize ?? 5000,
          parallel: options.parallel,
        });
        const total = (await store.lagAfter(START)).events;
        const replayed = await runtime.catchUpInProcesses(
          {
            untilMs: until.getTime(),
            signal,
            deferred: true,
            onProgress: (progress) => options.onProgress?.({ events: progress.events, total: Math.max(total, progress.events) }),
          },
          replayProcessesOf(options),
        );
        const schema = pg.escapeIdentifier(into);
        await control.query(
          `CREATE TABLE ${schema}.${REPLAY_INFO_TABLE} (until timestamptz NOT NULL, events bigint NOT NULL, log_position text NOT NULL, built_at timestamptz NOT NULL DEFAULT now());
           COMMENT ON TABLE ${schema}.${REPLAY_INFO_TABLE} IS 'The read models of this schema as they stood at "until": the events recorded up to it, replayed up to log_position'`,
        );
        await control.query(`INSERT INTO ${schema}.${REPLAY_INFO_TABLE} (until, events, log_position) VALUES ($1, $2, $3)`, [
          until,
          replayed.applied,
          formatPosition(replayed.position),
        ]);
        await finishBuild(pool, into, tables, signal, later);
        if (signal?.aborted) throw new ReplayInterruptedError(into);
        return { schema: into, until: until.toISOString(), events: replayed.applied, seconds: Math.round(performance.now() - started) / 1000 };
      } catch (error) {
        // A half-built schema would pass for a replay: it goes.
        await dropSchema(pool, into).catch((dropError: unknown) => log.error({ err: dropError, schema: into }, 'could not drop a half-built replay schema'));
        if (signal?.aborted) throw new ReplayInterruptedError(into);
        throw error;
      }
    } finally {
      await store?.close();
      await control.query('SELECT pg_advisory_unlock(hashtext($1))', [key]).catch(() => {
        broken = true;
      });
    }
  } finally {
    control.release(broken);
  }
}
