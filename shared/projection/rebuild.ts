import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { ArchivedLog } from '../archive/archived-log.js';
import { READ_MODEL_SCHEMA } from '../db/migrate.js';
import { START, comparePositions, formatPosition, parsePosition, type EventStore } from '../event-store/port.js';
import type { Logger } from '../logger.js';
import { CHECKPOINT_CHANNEL, notifyPayload } from './checkpoints.js';
import { SET_ASIDE_CHANNEL, setAsidePayload } from './set-aside.js';
import type { Projection } from './projection.js';
import { advisoryLockHolders, rebuildLockKey, shadowLockKey } from './rebuild-locks.js';
import type { CatchUpResult } from './catch-up.js';
import type { CatchUpConnection, CatchUpProcesses } from './catch-up-processes.js';
import { ProjectorRuntime } from './runtime.js';
import { segmentCount, segmentsOf, type ProjectionSegments } from './segments.js';
import {
  copyGrantsSql,
  createReadModelSchema,
  dropSchema,
  externalDependents,
  moveRelationsSql,
  pointGeneratedColumnsAt,
  probeSwap,
  finishBuild,
  dropIndexesForBuild,
  unlogTables,
  withPartitions,
  type LaterIndex,
  type Relations,
} from './read-model-schemas.js';

/**
 * `projections rebuild`: replays the whole log into fresh tables beside the current ones (a
 * shadow schema), while the API keeps answering from the current tables and the projector's
 * followers keep them current, then swaps the rebuilt projections' tables in, in one short
 * transaction.
 *
 * The swap, on the connection that holds the rebuild's locks:
 * 1. locks the current schema's checkpoint rows of the rebuilt projections (FOR UPDATE). A
 *    follower's batch locks its row before it writes (`begin_projection_batch`), so from here on
 *    no follower's batch of these projections commits, and none holds a table lock;
 * 2. lets the shadow catch up with the last events of the log (on its own connections);
 * 3. takes the current tables (ACCESS EXCLUSIVE: in-flight reads finish, new ones wait), moves
 *    them into a `retired` schema and the shadow's into the current schema (catalog changes, no
 *    rows copied), copies their grants, checks that nothing outside depends on what is left behind;
 * 4. replaces the current schema's set-aside streams of these projections with those the rebuild
 *    set aside (it met the same events and decided again), sets the current schema's checkpoint
 *    rows to the shadow's and NOTIFYs, then commits. A follower's
 *    next batch finds its checkpoint moved and goes on from the new one, on the new tables;
 *    commands waiting for read-your-writes see the checkpoints at once.
 * Queries prepared against the old tables are planned again by Postgres (DDL invalidates them) and
 * find the new tables by name. A swap that cannot get its locks within SWAP_LOCK_TIMEOUT_MS (a
 * long query on a current table) rolls back, lets the API go on, and tries again.
 *
 * Interrupted (the signal), it stops after the batch in flight, or rolls the swap back if it has
 * not committed: the current tables are untouched and the shadow schema is dropped. The log it
 * reads is the whole log: the scan archive's segments (`archiveDir`, checked against their
 * checksums) merged with the events still in the event store (shared/archive/archived-log.ts).
 * A projection that can be split is rebuilt as the segments of `segments` (PROJECTION_SEGMENTS),
 * replayed in `parallel` processes (catch-up-processes.ts, `processes`) or, without them, `parallel`
 * of them applying each batch side by side in this one (catch-up.ts), beside the other projections;
 * the swap then also locks and deletes the current checkpoints (and leases) of any other number of
 * segments of these projections, so a change of the number is this rebuild (docs/design.md
 * "Rebuild and replay").
 * One rebuild per projection at a time: a session advisory lock per projection; the second is
 * refused. A rebuild killed outright leaves its shadow schema behind: the next rebuild drops it
 * (its lock is free).
 */

const SWAP_LOCK_TIMEOUT_MS = 2_000;
const SWAP_ATTEMPTS = 5;
/** Catch-up passes before a swap, at most: each is shorter than the last while the log is calm. */
const CATCH_UP_PASSES = 20;

export type RebuildPhase = 'replaying' | 'analyzing' | 'catching up' | 'swapping';

export interface RebuildProgress {
  phase: RebuildPhase;
  /** Events of the log replayed so far. */
  events: number;
  /** Events in the log when it was last counted (it grows while the rebuild runs). */
  total: number;
}

export interface RebuildOptions {
  store: EventStore;
  pool: pg.Pool;
  log: Logger;
  /** The projections to rebuild (all of them by default). */
  projections: readonly Projection[];
  /** The current schema (the one the projections serve from). */
  schema?: string;
  /** ARCHIVE_DIR: required once the log has moved events into the archive (refused without it). */
  archiveDir?: string;
  batchSize?: number;
  /**
   * PROJECTION_SEGMENTS: a projection that can be split is rebuilt as that many segments, and the
   * swap leaves the checkpoints of that many (docs/design.md "Rebuild and replay"). Default: one each.
   */
  segments?: ProjectionSegments;
  /**
   * `--parallel`: with `processes`, how many processes replay the log; without, how many segments
   * of a split projection apply each batch side by side in this one (catch-up.ts). Default: all of them.
   */
  parallel?: number;
  /**
   * With it, the replay of the log runs in `parallel` processes, each applying its share of the
   * segments (catch-up-processes.ts); without it, in this one (the lanes of catch-up.ts).
   */
  processes?: ReplayProcesses;
  signal?: AbortSignal;
  onProgress?: (progress: RebuildProgress) => void;
}

/** How a rebuild or a replay starts processes of its own: where they connect, and the module forked. */
export interface ReplayProcesses {
  connection: CatchUpConnection;
  entry: URL;
}

/** The processes of a rebuild's or a replay's `parallel`, when it is given `processes`. */
export function replayProcessesOf(options: { parallel?: number; processes?: ReplayProcesses }): CatchUpProcesses | undefined {
  return options.processes && { count: options.parallel ?? 1, ...options.processes };
}

/** The projections a rebuild or a replay applies: each split projection as its segments, the others whole. */
export function appliedProjections(projections: readonly Projection[], segments: ProjectionSegments | undefined): Projection[] {
  return projections.flatMap((projection) => segmentsOf(projection, segmentCount(projection, segments)).map((segment) => segment.projection));
}

export interface RebuildResult {
  rebuilt: string[];
  events: number;
  seconds: number;
}

/** The rebuild cannot start: another one of these projections runs, or a name is unknown. */
export class RebuildRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RebuildRefusedError';
  }
}

/** The rebuild was stopped by its signal; the current tables are as they were. */
export class RebuildInterruptedError extends Error {
  constructor() {
    super('rebuild interrupted: the live tables are untouched and the shadow tables were dropped');
    this.name = 'RebuildInterruptedError';
  }
}

/** The projections named, in the order of `all`; every one of `all` when none is named. */
export function selectProjections(all: readonly Projection[], names: readonly string[]): Projection[] {
  if (names.length === 0) return [...all];
  const unknown = names.filter((name) => !all.some((p) => p.name === name));
  if (unknown.length > 0) {
    throw new RebuildRefusedError(`unknown projection ${unknown.join(', ')} (projections: ${all.map((p) => p.name).join(', ')})`);
  }
  return all.filter((p) => names.includes(p.name));
}

export function relationsOf(projections: readonly Projection[]): Relations {
  return { tables: projections.flatMap((p) => p.tables), sequences: projections.flatMap((p) => p.sequences ?? []) };
}

export async function rebuildProjections(options: RebuildOptions): Promise<RebuildResult> {
  const started = performance.now();
  const { pool, log, projections } = options;
  const current = options.schema ?? READ_MODEL_SCHEMA;
  const names = projections.map((p) => p.name);
  // The connection that holds the locks and runs the swap, for the whole rebuild.
  const control = await pool.connect();
  const onError = () => undefined; // surfaces as the failure of the query in flight
  control.on('error', onError);
  const connection = { broken: false };
  const locked: string[] = [];
  const closing: Array<() => Promise<void>> = [];
  try {
    await lockProjections(control, pool, current, names, locked);
    await dropLeftovers(control, current, log);
    // The whole log, archive first; no archive run moves events out under the rebuild.
    const store = await ArchivedLog.open({ store: options.store, pool, dir: options.archiveDir });
    closing.push(() => store.close());
    return await rebuildInShadow(control, store, options, { current, names, started, connection });
  } finally {
    for (const close of closing) await close();
    for (const key of locked) {
      await control.query('SELECT pg_advisory_unlock(hashtext($1))', [key]).catch(() => {
        connection.broken = true;
      });
    }
    control.off('error', onError);
    control.release(connection.broken);
  }
}

/** Takes the rebuild lock of each projection (in name order), pushing each to `locked`; refused when another rebuild holds one. */
async function lockProjections(control: pg.PoolClient, pool: pg.Pool, current: string, names: readonly string[], locked: string[]): Promise<void> {
  for (const name of [...names].sort()) {
    const key = rebuildLockKey(current, name);
    const { rows } = await control.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [key]);
    if (!rows[0]!.ok) {
      const holder = (await advisoryLockHolders(pool, [key])).get(key);
      const by = holder ? ` (database session ${holder.pid}, ${holder.application_name || 'unnamed'}, connected since ${holder.backend_start.toISOString()})` : '';
      throw new RebuildRefusedError(`a rebuild of ${name} is already running${by}; run it again once that one has finished`);
    }
    locked.push(key);
  }
}

/** What a rebuild has replayed so far, and how it says so (`onProgress`). */
class RebuildCounter {
  events = 0;

  constructor(
    /** Events in the log when it was last counted. */
    public total: number,
    private readonly onProgress?: (progress: RebuildProgress) => void,
  ) {}

  /** Says where the rebuild is. */
  at(phase: RebuildPhase): void {
    this.onProgress?.({ phase, events: this.events, total: this.total });
  }

  /** The progress callback of a catch-up, counting from the events replayed before it. */
  during(phase: RebuildPhase): (progress: CatchUpResult) => void {
    const base = this.events;
    return (progress) => {
      this.total = Math.max(this.total, base + progress.events);
      this.onProgress?.({ phase, events: base + progress.events, total: this.total });
    };
  }
}

/**
 * The rebuild proper, under the projections' locks: replays the log into a fresh shadow schema,
 * catches up and swaps it in; the shadow (or, after a swap, the retired tables) is dropped after.
 */
async function rebuildInShadow(
  control: pg.PoolClient,
  store: ArchivedLog,
  options: RebuildOptions,
  run: { current: string; names: readonly string[]; started: number; connection: { broken: boolean } },
): Promise<RebuildResult> {
  const { pool, log, signal, projections } = options;
  const { current, names } = run;
  const batchSize = options.batchSize ?? 5000;
  const relations = relationsOf(projections);
  const id = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const shadow = `${current}_rebuild_${id}`;
  const retired = `${current}_retired_${id}`;
  await control.query('SELECT pg_advisory_lock(hashtext($1))', [shadowLockKey(current, id)]);
  try {
    const later = await prepareShadow(pool, shadow, current, names, relations, projections);
    const applied = appliedProjections(projections, options.segments);
    const runtime = new ProjectorRuntime({ store, pool, projections: applied, log, schema: shadow, batchSize, parallel: options.parallel });
    const counter = new RebuildCounter((await store.lagAfter(START)).events, options.onProgress);
    counter.at('replaying');
    const replaying = { signal, deferred: true, onProgress: counter.during('replaying') };
    counter.events += (await runtime.catchUpInProcesses(replaying, replayProcessesOf(options))).events;

    // Logged again, then planner statistics and the visibility map, which move with the tables:
    // the API's plans on the new tables are as good as on the old ones from the first query.
    counter.at('analyzing');
    await finishBuild(pool, shadow, relations.tables, signal, later);
    if (signal?.aborted) throw new RebuildInterruptedError();

    const checkpoints = applied.map((p) => p.name);
    await catchUpAndSwap(control, runtime, counter, { current, shadow, retired, names, checkpoints, relations, signal }, log, batchSize);
    counter.total = Math.max(counter.total, counter.events);
    counter.at('swapping');
    return { rebuilt: [...names], events: counter.events, seconds: Math.round(performance.now() - run.started) / 1000 };
  } catch (error) {
    if (signal?.aborted) throw new RebuildInterruptedError();
    throw error;
  } finally {
    // After a swap, `retired` holds the old tables; otherwise the current schema is as it was.
    for (const schema of [shadow, retired]) {
      await dropSchema(pool, schema).catch((error: unknown) => log.error({ err: error, schema }, 'could not drop a rebuild schema; the next rebuild drops it'));
    }
    await control.query('SELECT pg_advisory_unlock(hashtext($1))', [shadowLockKey(current, id)]).catch(() => {
      run.connection.broken = true;
    });
  }
}

/**
 * The shadow schema, its generated columns pointed at the current one, checked to swap alone, its
 * tables unlogged and the projections' `indexesAfterReplay` dropped for the replay (their
 * definitions, for `finishBuild`).
 */
async function prepareShadow(pool: pg.Pool, shadow: string, current: string, names: readonly string[], relations: Relations, projections: readonly Projection[]): Promise<LaterIndex[]> {
  await createReadModelSchema(pool, shadow);
  await pointGeneratedColumnsAt(pool, shadow, current, relations.tables);
  const tangled = await probeSwap(pool, shadow, relations);
  if (tangled.length > 0) {
    throw new Error(`cannot swap ${names.join(', ')}: ${tangled[0]!.dependent} depends on ${tangled[0]!.referenced} (swap it too)`);
  }
  await unlogTables(pool, shadow, relations.tables);
  return dropIndexesForBuild(pool, shadow, projections.flatMap((p) => p.indexesAfterReplay ?? []));
}

/**
 * Catches the shadow up with the log (a few passes, each shorter while the log is calm), then
 * swaps; a swap that could not lock the current tables in time lets the API go on and tries again.
 */
async function catchUpAndSwap(control: pg.PoolClient, runtime: ProjectorRuntime, counter: RebuildCounter, plan: SwapPlan, log: Logger, batchSize: number): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    counter.at('catching up');
    for (let pass = 0; pass < CATCH_UP_PASSES; pass++) {
      const caught = await runtime.catchUp({ signal: plan.signal, onProgress: counter.during('catching up') });
      counter.events += caught.events;
      if (caught.events < batchSize) break;
    }
    counter.at('swapping');
    try {
      counter.events += await swapIn(control, runtime, plan);
      return;
    } catch (error) {
      const code = (error as { code?: string }).code;
      if ((code !== LOCK_NOT_AVAILABLE && code !== DEADLOCK_DETECTED) || attempt === SWAP_ATTEMPTS) throw error;
      log.warn(
        { attempt, projections: plan.names },
        code === DEADLOCK_DETECTED
          ? 'swap deadlocked with a transaction that holds one live table and waits for another; letting it go on, then trying again'
          : 'swap could not lock the live tables in time (a long query?); letting the API go on, then trying again',
      );
      await new Promise((resolve) => setTimeout(resolve, 500 * attempt));
    }
  }
}

/** SQLSTATE of a lock not obtained within lock_timeout. */
const LOCK_NOT_AVAILABLE = '55P03';
/**
 * SQLSTATE of a deadlock Postgres broke by failing this transaction: the swap locks the live tables
 * one after another, and a transaction that holds one of the later ones (a webhooks step reading
 * the outbox with the assets and locations, a reader in a transaction) and then asks for one the
 * swap already holds closes the circle. Rolled back, the swap lets it finish and tries again.
 */
const DEADLOCK_DETECTED = '40P01';

interface SwapPlan {
  current: string;
  shadow: string;
  retired: string;
  /** The projections rebuilt. */
  names: readonly string[];
  /** Their checkpoints as rebuilt: a split projection's segments' (`tracking#0/3`…), the others' own names. */
  checkpoints: readonly string[];
  relations: Relations;
  signal?: AbortSignal;
}

/** The swap transaction (see the module comment). Returns the events of the last catch-up in it. */
async function swapIn(control: pg.PoolClient, runtime: ProjectorRuntime, plan: SwapPlan): Promise<number> {
  const current = pg.escapeIdentifier(plan.current);
  const shadow = pg.escapeIdentifier(plan.shadow);
  const names = [...plan.checkpoints].sort();
  const bases = [...plan.names].sort();
  await control.query('BEGIN');
  try {
    await control.query(`SET LOCAL lock_timeout = ${SWAP_LOCK_TIMEOUT_MS}`);
    await control.query(
      `INSERT INTO ${current}.projection_checkpoints (name, position) SELECT n, $2 FROM unnest($1::text[]) AS n ON CONFLICT (name) DO NOTHING`,
      [names, formatPosition(START)],
    );
    // With the checkpoints of another number of segments of these projections (PROJECTION_SEGMENTS
    // changed): the swap removes them, so that the followers of the new number follow on.
    const currentRows = await control.query<{ name: string; position: string }>(
      `SELECT name, position FROM ${current}.projection_checkpoints WHERE name = ANY($1::text[]) OR ${BASE_OF_NAME} = ANY($2::text[]) ORDER BY name FOR UPDATE`,
      [names, bases],
    );
    const final = await runtime.catchUp({ signal: plan.signal });
    const shadowRows = await control.query<{ name: string; position: string }>(
      `SELECT name, position FROM ${shadow}.projection_checkpoints WHERE name = ANY($1::text[])`,
      [names],
    );
    const rebuiltAt = new Map(shadowRows.rows.map((row) => [row.name, parsePosition(row.position)]));
    const stale = currentRows.rows.filter((row) => !names.includes(row.name)).map((row) => row.name);
    for (const row of currentRows.rows.filter((r) => names.includes(r.name))) {
      const at = rebuiltAt.get(row.name);
      // The shadow read the log up to its head after the current rows were locked: it cannot be behind.
      if (!at || comparePositions(at, parsePosition(row.position)) < 0) {
        throw new Error(`rebuilt ${row.name} is at ${at ? formatPosition(at) : 'nothing'}, behind the live ${row.position}`);
      }
    }
    await control.query(`CREATE SCHEMA ${pg.escapeIdentifier(plan.retired)}`);
    await control.query(`LOCK TABLE ${plan.relations.tables.map((t) => `${current}.${pg.escapeIdentifier(t)}`).join(', ')} IN ACCESS EXCLUSIVE MODE`);
    // With their partitions, as they are now (the catch-up above may have made some).
    const statements = [
      ...moveRelationsSql(await withPartitions(control, plan.current, plan.relations), plan.current, plan.retired),
      ...moveRelationsSql(await withPartitions(control, plan.shadow, plan.relations), plan.shadow, plan.current),
    ];
    statements.push(...(await copyGrantsSql(control, plan.relations, plan.retired, plan.current)));
    await control.query(statements.join(';\n'));
    const left = await externalDependents(control, [plan.shadow, plan.retired]);
    if (left.length > 0) throw new Error(`refusing to swap: ${left[0]!.dependent} would depend on ${left[0]!.referenced}, which is dropped`);
    await carrySetAside(control, plan.shadow, plan.current, names, bases);
    // A process still following another number of segments finds its checkpoint and its lease gone:
    // it writes nothing more (its batch stops at the checkpoint, its renewal fails) and stands by.
    await control.query(`DELETE FROM ${current}.projection_checkpoints WHERE name = ANY($1::text[])`, [stale]);
    await control.query(`DELETE FROM ${current}.projection_leases WHERE name = ANY($1::text[])`, [stale]);
    for (const name of names) {
      const at = rebuiltAt.get(name)!;
      await control.query(`UPDATE ${current}.projection_checkpoints SET position = $2, updated_at = now() WHERE name = $1`, [name, formatPosition(at)]);
      await control.query('SELECT pg_notify($1, $2)', [CHECKPOINT_CHANNEL, notifyPayload(plan.current, name, at)]);
    }
    if (plan.signal?.aborted) throw new RebuildInterruptedError();
    await control.query('COMMIT');
    return final.events;
  } catch (error) {
    await control.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/** A checkpoint's (or lease's) projection: its name without a segment's `#<i>/<n>`. */
const BASE_OF_NAME = `regexp_replace(name, '#[0-9]+/[0-9]+$', '')`;
const BASE_OF_PROJECTION = `regexp_replace(projection, '#[0-9]+/[0-9]+$', '')`;

const SET_ASIDE_COLUMNS = 'projection, stream_id, position, revision, event_id, event_type, error, sqlstate, set_aside_at';
const HELD_COLUMNS = 'projection, stream_id, revision, position, event_id, event_type, held_at';

/**
 * In the swap: the set-aside streams (and their held events) of the rebuilt projections become
 * the shadow's, and every process's watchers learn the change before the new checkpoints.
 */
async function carrySetAside(control: pg.PoolClient, shadowSchema: string, currentSchema: string, names: readonly string[], bases: readonly string[]): Promise<void> {
  const current = pg.escapeIdentifier(currentSchema);
  const shadow = pg.escapeIdentifier(shadowSchema);
  const gone = await control.query<{ projection: string; stream_id: string }>(
    `DELETE FROM ${current}.projection_set_aside WHERE projection = ANY($1::text[]) OR ${BASE_OF_PROJECTION} = ANY($2::text[]) RETURNING projection, stream_id`,
    [names, bases],
  );
  const carried = await control.query<{ projection: string; stream_id: string; position: string }>(
    `INSERT INTO ${current}.projection_set_aside (${SET_ASIDE_COLUMNS}) SELECT ${SET_ASIDE_COLUMNS} FROM ${shadow}.projection_set_aside
      WHERE projection = ANY($1::text[]) RETURNING projection, stream_id, position`,
    [names],
  );
  await control.query(
    `INSERT INTO ${current}.projection_held_events (${HELD_COLUMNS}) SELECT ${HELD_COLUMNS} FROM ${shadow}.projection_held_events WHERE projection = ANY($1::text[])`,
    [names],
  );
  const kept = new Set(carried.rows.map((row) => `${row.projection}\u0000${row.stream_id}`));
  for (const row of gone.rows) {
    if (!kept.has(`${row.projection}\u0000${row.stream_id}`)) {
      await control.query('SELECT pg_notify($1, $2)', [SET_ASIDE_CHANNEL, setAsidePayload(currentSchema, row.projection, row.stream_id, null)]);
    }
  }
  for (const row of carried.rows) {
    await control.query('SELECT pg_notify($1, $2)', [SET_ASIDE_CHANNEL, setAsidePayload(currentSchema, row.projection, row.stream_id, parsePosition(row.position))]);
  }
}

/**
 * Shadow and retired schemas whose rebuild no longer holds their lock: a rebuild killed before it
 * could clean up. Dropped, unless something outside depends on them.
 */
async function dropLeftovers(control: pg.PoolClient, current: string, log: Logger): Promise<void> {
  const pattern = new RegExp(`^${current.replace(/[^a-z0-9_]/g, '')}_(?:rebuild|retired)_([a-z0-9]+)$`);
  const { rows } = await control.query<{ nspname: string }>(`SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1) OR starts_with(nspname, $2)`, [
    `${current}_rebuild_`,
    `${current}_retired_`,
  ]);
  const byId = new Map<string, string[]>();
  for (const { nspname } of rows) {
    const match = pattern.exec(nspname);
    if (match) byId.set(match[1]!, [...(byId.get(match[1]!) ?? []), nspname]);
  }
  for (const [id, schemas] of byId) {
    const key = shadowLockKey(current, id);
    const { rows: got } = await control.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [key]);
    if (!got[0]!.ok) continue; // its rebuild is running
    try {
      for (const schema of schemas) {
        await dropSchema(control, schema).catch((error: unknown) => log.warn({ err: error, schema }, 'left a rebuild leftover in place'));
        log.info({ schema }, 'dropped the leftover of an interrupted rebuild');
      }
    } finally {
      await control.query('SELECT pg_advisory_unlock(hashtext($1))', [key]);
    }
  }
}
