import pg from 'pg';
import type { Logger } from '../logger.js';
import type { EventStore, Position, RecordedEvent } from '../event-store/port.js';
import { EventStoreUnavailableError, START, comparePositions, formatPosition } from '../event-store/port.js';
import { isTransientDatabaseError } from '../db/pool.js';
import { CHECKPOINT_MOVED_SQLSTATE, advanceCheckpoint, ensureCheckpoint, moveCheckpointAndCommit, readCheckpoint } from './checkpoints.js';
import type { Projection } from './projection.js';
import {
  SET_ASIDE_CHANNEL,
  listSetAside,
  recordHeld,
  recordSetAside,
  setAsidePayload,
  type ApplyFailure,
} from './set-aside.js';

/**
 * How long the checkpoint row of a projection may trail the batches it had nothing to apply in:
 * under load that turns a write transaction per batch into a few per second, and other
 * processes (waiting on the row) see the position within this delay.
 */
const FOREIGN_FLUSH_MS = 100;

/**
 * A batch that fails for a reason of its own (not a transient one: see `isTransient`) is tried
 * this many times, APPLY_RETRY_MS apart and then twice that, before it is narrowed down to the
 * events that fail, whose streams are set aside (docs/design.md "A projection that cannot apply
 * an event").
 */
const APPLY_ATTEMPTS = 3;
const APPLY_RETRY_MS = 100;

export interface ProjectorOptions {
  store: EventStore;
  pool: pg.Pool;
  projections: readonly Projection[];
  log: Logger;
  /** Schema the projections build: `read_model` for the live one. */
  schema?: string;
  batchSize?: number;
  /** How often a standby instance tries to take over a projection another process holds. */
  takeoverIntervalMs?: number;
  /** Called after each committed batch (the in-process checkpoint watcher listens here). */
  onCheckpoint?: (name: string, position: Position) => void;
  /**
   * Called when a batch sets a stream aside (`position`: the event that failed), after it commits
   * and before its `onCheckpoint`.
   */
  onSetAside?: (name: string, streamId: string, position: Position) => void;
}

/** What `projections retry` did with one set-aside stream. */
export interface RetryOutcome {
  projection: string;
  stream: string;
  outcome: 'recovered' | 'failed again';
  /** Events of the stream applied now (the failed one and those held behind it, or a part). */
  applied: number;
  /** Events still held behind the failed one. */
  held_events: number;
  /** Why it failed again; null when it recovered. */
  error: string | null;
}

/**
 * Runs projections. Each one is applied in batches inside a transaction that also writes its
 * checkpoint, so a crash at any point resumes exactly where the last commit left off. A
 * session-level advisory lock on the worker's own connection keeps one active instance per
 * projection across processes: the lock dies with the connection, and a standby takes over.
 */
export class ProjectorRuntime {
  private readonly abort = new AbortController();
  private readonly workers: Promise<void>[] = [];
  private readonly schema: string;

  constructor(private readonly options: ProjectorOptions) {
    this.schema = options.schema ?? 'read_model';
  }

  start(): void {
    for (const projection of this.options.projections) this.workers.push(this.runWorker(projection));
  }

  /** Finishes the batch in flight, then stops every worker. */
  async stop(): Promise<void> {
    this.abort.abort();
    await Promise.allSettled(this.workers);
  }

  /**
   * Applies every event up to the current head once, without subscriptions (rebuild, replay,
   * tests). The log is read once for all the runtime's projections (each applies, on its own
   * connection and in parallel, the events past its own checkpoint), and the next batch is read
   * while this one is applied. A batch that is not full means the head was reached.
   */
  async catchUp(opts: CatchUpOptions = {}): Promise<CatchUpResult> {
    const batchSize = this.options.batchSize ?? 1000;
    const cursors: Cursor[] = [];
    const result: CatchUpResult = { events: 0, applied: 0, position: START };
    try {
      for (const projection of this.options.projections) {
        const client = await this.options.pool.connect();
        const cursor: Cursor = { projection, client, after: START, broken: false, deferring: false, onError: () => undefined };
        // A connection error surfaces as the failure of the query in flight.
        client.on('error', cursor.onError);
        cursors.push(cursor);
        await ensureCheckpoint(client, this.schema, projection.name);
        cursor.after = await readCheckpoint(client, this.schema, projection.name);
        cursor.deferring = Boolean(opts.deferred && projection.completeDeferred && comparePositions(cursor.after, START) === 0);
        if (cursor.deferring && projection.beginDeferred) await this.inSchemaTransaction(client, () => projection.beginDeferred!(client));
      }
      if (cursors.length === 0) return result;
      const read = (after: Position) => {
        const batch = this.options.store.readAll({ after, maxCount: batchSize });
        batch.catch(() => undefined); // surfaces when awaited
        return batch;
      };
      let from = earliest(cursors);
      result.position = from;
      let next = read(from);
      for (;;) {
        if (opts.signal?.aborted) throw abortReason(opts.signal);
        const batch = await next;
        const refused = opts.stopBefore ? batch.findIndex(opts.stopBefore) : -1;
        const inBounds = refused === -1 ? batch : batch.slice(0, refused);
        if (inBounds.length === 0) break;
        const end = inBounds[inBounds.length - 1]!.position;
        const more = refused === -1 && batch.length === batchSize;
        if (more) next = read(end);
        const events = opts.include ? inBounds.filter(opts.include) : inBounds;
        const outcomes = await Promise.allSettled(cursors.map((cursor) => this.catchUpCursor(cursor, events, end)));
        const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
        if (failed) throw failed.reason;
        result.events += inBounds.length;
        result.applied += events.length;
        result.position = end;
        opts.onProgress?.(result);
        if (!more) break;
        // A checkpoint another applier moved elsewhere: read again from the earliest one.
        from = earliest(cursors);
        if (comparePositions(from, end) !== 0) next = read(from);
      }
      for (const cursor of cursors) {
        if (cursor.deferring) await this.completeDeferred(cursor);
      }
      return result;
    } catch (error) {
      for (const cursor of cursors) cursor.broken = true;
      throw error;
    } finally {
      for (const cursor of cursors) {
        cursor.client.off('error', cursor.onError);
        cursor.client.release(cursor.broken);
      }
    }
  }

  /** The deferred tables of a projection, computed once after its deferred batches. */
  private async completeDeferred(cursor: Cursor): Promise<void> {
    await this.inSchemaTransaction(cursor.client, () => cursor.projection.completeDeferred!(cursor.client));
    cursor.deferring = false;
  }

  /** Runs `work` in a transaction on the schema being built; work over the whole schema: no statement timeout. */
  private async inSchemaTransaction(client: pg.PoolClient, work: () => Promise<void>): Promise<void> {
    await client.query(`BEGIN; SET LOCAL search_path TO ${pg.escapeIdentifier(this.schema)}; SET LOCAL synchronous_commit TO off; SET LOCAL statement_timeout TO 0`);
    try {
      await work();
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  }

  /** One projection's part of a catch-up batch: the events past its checkpoint, up to `end`. */
  private async catchUpCursor(cursor: Cursor, events: RecordedEvent[], end: Position): Promise<void> {
    if (comparePositions(end, cursor.after) <= 0) return;
    const after = cursor.after;
    const mine = events.filter((event) => comparePositions(event.position, after) > 0);
    try {
      await this.applyBatch(cursor.client, cursor.projection, mine, after, end, cursor.deferring);
      cursor.after = end;
    } catch (error) {
      if (!(error instanceof CheckpointMovedError)) throw error;
      // Someone else applied this batch (a worker on the same schema): go on from theirs.
      cursor.after = await readCheckpoint(cursor.client, this.schema, cursor.projection.name);
    }
  }

  private async runWorker(projection: Projection): Promise<void> {
    const { log, pool } = this.options;
    const signal = this.abort.signal;
    const lockKey = `projection:${this.schema}:${projection.name}`;
    let backoffMs = 250;
    while (!signal.aborted) {
      let client: pg.PoolClient | null = null;
      let broken = false;
      // The connection may die while we hold it (backend terminated, network gone). pg then emits
      // 'error' on the client, which would crash the process without a listener; and the
      // advisory lock died with it, so this session stops at once and goes back to standby.
      const lost = new AbortController();
      const onError = (error: Error) => {
        broken = true;
        lost.abort(error);
      };
      try {
        client = await pool.connect();
        client.on('error', onError);
        const locked = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS locked', [lockKey]);
        if (!locked.rows[0]?.locked) {
          client.off('error', onError);
          client.release();
          client = null;
          await sleep(this.options.takeoverIntervalMs ?? 1000, signal);
          continue;
        }
        log.debug({ projection: projection.name }, 'projection active');
        try {
          await ensureCheckpoint(client, this.schema, projection.name);
          // `stored` is the checkpoint row, `after` the last event looked at. They differ while a
          // run of batches without any of this projection's event types waits to be recorded.
          let stored = await readCheckpoint(client, this.schema, projection.name);
          let after = stored;
          const stopping = AbortSignal.any([signal, lost.signal]);
          while (!stopping.aborted) {
            const flushDue = new AbortController();
            let flushTimer: NodeJS.Timeout | null = null;
            try {
              // Only the projection's own event types: a store that filters on its side (KurrentDB)
              // then never sends the others; the batches' positions still move past them.
              const subscription = this.options.store.subscribeToAll({
                after,
                maxCount: this.options.batchSize ?? 500,
                signal: AbortSignal.any([stopping, flushDue.signal]),
                filter: { eventTypes: projection.eventTypes },
              });
              for await (const batch of subscription) {
                const last = batch.position;
                if (batch.events.length > 0) {
                  await this.applyBatch(client, projection, batch.events, stored, last);
                  stored = last;
                } else {
                  // Nothing to apply: the read model already is what it would be at `last`, so
                  // in-process waiters may go on now, and the row is written later, once for a
                  // whole run of such batches (FOREIGN_FLUSH_MS), not once per batch.
                  this.options.onCheckpoint?.(projection.name, last);
                  flushTimer ??= setTimeout(() => flushDue.abort(), FOREIGN_FLUSH_MS);
                }
                after = last;
                backoffMs = 250;
              }
            } catch (error) {
              if (!(error instanceof CheckpointMovedError)) throw error;
              // Someone else applied events here (a catch-up on this schema): go on from there.
              log.warn({ projection: projection.name, err: error }, 'checkpoint moved under the projector; resuming from it');
              stored = after = await readCheckpoint(client, this.schema, projection.name);
            } finally {
              if (flushTimer) clearTimeout(flushTimer);
            }
            if (comparePositions(after, stored) > 0 && !lost.signal.aborted) {
              if (!(await advanceCheckpoint(client, this.schema, projection.name, stored, after))) {
                log.warn({ projection: projection.name }, 'checkpoint moved under the projector; resuming from it');
                after = await readCheckpoint(client, this.schema, projection.name);
              }
              stored = after;
            }
          }
          if (lost.signal.aborted) throw lost.signal.reason;
        } finally {
          if (!broken) {
            await client.query('SELECT pg_advisory_unlock(hashtext($1))', [lockKey]).catch(() => {
              broken = true;
            });
          }
        }
      } catch (error) {
        broken = true;
        if (!signal.aborted) {
          log.error({ err: error, projection: projection.name }, 'projection failed; retrying from its checkpoint');
          await sleep(backoffMs, signal);
          backoffMs = Math.min(backoffMs * 2, 10_000);
        }
      } finally {
        if (client) {
          client.off('error', onError);
          client.release(broken);
        }
      }
    }
  }

  /**
   * The events of `batch` the projection reads, applied in one transaction with its checkpoint,
   * moved from `after` to `to` (by default the batch's last event). Events of streams the
   * projection has set aside are held instead of applied. A failure that is not transient is
   * tried APPLY_ATTEMPTS times; then the batch is applied piece by piece (`applyIsolating`) and the
   * streams of the events that still fail are set aside, so the checkpoint moves on.
   */
  private async applyBatch(client: pg.PoolClient, projection: Projection, batch: RecordedEvent[], after: Position, to?: Position, deferred = false): Promise<void> {
    const last = to ?? batch[batch.length - 1]!.position;
    const relevant = batch.filter((e) => projection.eventTypes.includes(e.type));
    if (relevant.length === 0) {
      if (!(await advanceCheckpoint(client, this.schema, projection.name, after, last))) {
        throw new CheckpointMovedError(projection.name, after, await readCheckpoint(client, this.schema, projection.name));
      }
      this.options.onCheckpoint?.(projection.name, last);
      return;
    }
    for (let attempt = 1; ; attempt++) {
      const isolating = attempt > APPLY_ATTEMPTS;
      try {
        await this.applyInTransaction(client, projection, relevant, after, last, deferred, isolating);
        return;
      } catch (error) {
        if (isolating || error instanceof CheckpointMovedError || isTransient(error)) throw error;
        const context = { err: error, projection: projection.name, from: formatPosition(after), to: formatPosition(last), attempt };
        if (attempt < APPLY_ATTEMPTS) {
          this.options.log.warn(context, 'projection batch failed; trying it again');
          await sleep(APPLY_RETRY_MS * 2 ** (attempt - 1), this.abort.signal);
        } else {
          this.options.log.error(context, 'projection batch keeps failing; looking for the events it cannot apply, to set their streams aside');
        }
      }
    }
  }

  /**
   * One transaction: the batch's writes and its checkpoint. It first locks the checkpoint row and
   * checks it is still at `after` (`begin_projection_batch`): whoever else applied events meanwhile
   * (a catch-up on the same schema, a rebuild's swap), this batch then stops before writing
   * anything rather than apply events twice; and a swap holding that row keeps the batch from
   * taking any table lock. In the same round trip it reads the projection's set-aside streams,
   * after the lock, so that a `projections retry` (which takes the same row) is seen whole.
   */
  private async applyInTransaction(
    client: pg.PoolClient,
    projection: Projection,
    relevant: RecordedEvent[],
    after: Position,
    last: Position,
    deferred: boolean,
    isolating: boolean,
  ): Promise<void> {
    const schema = pg.escapeIdentifier(this.schema);
    const name = pg.escapeLiteral(projection.name);
    const options = deferred ? { deferred } : undefined;
    let failed: ApplyFailure[] = [];
    try {
      // Projection commits need not wait for fsync: a read model is rebuildable from the log, and
      // a commit lost in a crash loses its checkpoint with it, so those events are applied again.
      // The append of the events themselves stays fully durable.
      const results = (await client.query(
        `BEGIN; SET LOCAL search_path TO ${schema}; SET LOCAL synchronous_commit TO off;
         SELECT ${schema}.begin_projection_batch(${name}, ${pg.escapeLiteral(formatPosition(after))});
         SELECT stream_id FROM ${schema}.projection_set_aside WHERE projection = ${name}`,
      )) as unknown as pg.QueryResult<{ stream_id: string }>[];
      const blocked = new Set(results[results.length - 1]!.rows.map((row) => row.stream_id));
      let events = relevant;
      let held: RecordedEvent[] = [];
      if (blocked.size > 0) {
        held = relevant.filter((e) => blocked.has(e.streamId));
        events = relevant.filter((e) => !blocked.has(e.streamId));
      }
      if (isolating) {
        const isolated = await this.applyIsolating(client, projection, events, blocked, options);
        failed = isolated.failed;
        held = [...held, ...isolated.held].sort((a, b) => comparePositions(a.position, b.position));
        await recordSetAside(client, this.schema, projection.name, failed);
      } else if (events.length > 0) {
        await projection.apply(events, client, options);
      }
      await recordHeld(client, this.schema, projection.name, held);
      await moveCheckpointAndCommit(client, this.schema, projection.name, after, last);
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      if ((error as { code?: string }).code === CHECKPOINT_MOVED_SQLSTATE) {
        throw new CheckpointMovedError(projection.name, after, await readCheckpoint(client, this.schema, projection.name));
      }
      throw error;
    }
    for (const { event, error } of failed) {
      this.options.log.error(
        { err: error, projection: projection.name, stream: event.streamId, position: formatPosition(event.position), event_type: event.type },
        'event set aside: the projection cannot apply it, and the later events of its stream wait behind it (npx tracking projections failures)',
      );
      this.options.onSetAside?.(projection.name, event.streamId, event.position);
    }
    this.options.onCheckpoint?.(projection.name, last);
  }

  /**
   * Applies `events` in the caller's transaction, bisecting on failure, each part under a
   * savepoint: a part that fails is rolled back and split in two halves, applied in order, down
   * to single events. A single event that fails sets its stream aside (added to `blocked`), and
   * the stream's later events are held, not applied. Deterministic: the same events, in the same
   * state, fail the same way, so a rebuild or a replay sets the same streams aside. A transient
   * failure ends it (the caller rolls back and starts the batch again).
   */
  private async applyIsolating(
    client: pg.PoolClient,
    projection: Projection,
    events: RecordedEvent[],
    blocked: Set<string>,
    options: { deferred?: boolean } | undefined,
  ): Promise<{ failed: ApplyFailure[]; held: RecordedEvent[] }> {
    const failed: ApplyFailure[] = [];
    const held: RecordedEvent[] = [];
    const applyPart = async (part: RecordedEvent[]): Promise<void> => {
      const todo = part.filter((event) => {
        if (!blocked.has(event.streamId)) return true;
        held.push(event);
        return false;
      });
      if (todo.length === 0) return;
      await client.query('SAVEPOINT apply_part');
      try {
        await projection.apply(todo, client, options);
        await client.query('RELEASE SAVEPOINT apply_part');
        return;
      } catch (error) {
        if (isTransient(error)) throw error;
        await client.query('ROLLBACK TO SAVEPOINT apply_part; RELEASE SAVEPOINT apply_part');
        if (todo.length === 1) {
          failed.push({ event: todo[0]!, error });
          blocked.add(todo[0]!.streamId);
          return;
        }
        const middle = Math.ceil(todo.length / 2);
        await applyPart(todo.slice(0, middle));
        await applyPart(todo.slice(middle));
      }
    };
    await applyPart(events);
    return { failed, held };
  }

  /**
   * `projections retry`: applies each set-aside stream again (those of `filter`), the failed event
   * then the held ones, in stream order, read afresh from the log. Each stream in a transaction
   * that first locks its projection's checkpoint row, as a batch does: the live projector's
   * batches wait meanwhile, and the next one sees the stream recovered. What fails again is set
   * aside again at that event; what came before it stays applied.
   */
  async retrySetAside(filter: { projection?: string; stream?: string } = {}): Promise<RetryOutcome[]> {
    const outcomes: RetryOutcome[] = [];
    for (const row of await listSetAside(this.options.pool, this.schema, filter)) {
      const projection = this.options.projections.find((p) => p.name === row.projection);
      if (projection) outcomes.push(await this.retryStream(projection, row.stream));
    }
    return outcomes;
  }

  private async retryStream(projection: Projection, streamId: string): Promise<RetryOutcome> {
    const client = await this.options.pool.connect();
    const onError = () => undefined; // surfaces as the failure of the query in flight
    client.on('error', onError);
    let broken = false;
    const schema = pg.escapeIdentifier(this.schema);
    const key = [projection.name, streamId];
    try {
      await client.query(`BEGIN; SET LOCAL search_path TO ${schema}`);
      await client.query(`SELECT 1 FROM ${schema}.projection_checkpoints WHERE name = $1 FOR UPDATE`, [projection.name]);
      const failedRow = await client.query<{ revision: string }>(
        `SELECT revision::text AS revision FROM ${schema}.projection_set_aside WHERE projection = $1 AND stream_id = $2 FOR UPDATE`,
        key,
      );
      const from = failedRow.rows[0]?.revision;
      if (from === undefined) {
        // Retried meanwhile by someone else.
        await client.query('ROLLBACK');
        return { projection: projection.name, stream: streamId, outcome: 'recovered', applied: 0, held_events: 0, error: null };
      }
      const heldRows = await client.query<{ revision: string }>(
        `SELECT revision::text AS revision FROM ${schema}.projection_held_events WHERE projection = $1 AND stream_id = $2`,
        key,
      );
      const wanted = new Set([from, ...heldRows.rows.map((row) => row.revision)]);
      const events = (await this.options.store.readStream(streamId, { fromRevision: BigInt(from) })).filter((e) => wanted.has(e.revision.toString()));
      const { failed, held } = await this.applyIsolating(client, projection, events, new Set(), undefined);
      await client.query(`DELETE FROM ${schema}.projection_set_aside WHERE projection = $1 AND stream_id = $2`, key);
      await recordSetAside(client, this.schema, projection.name, failed);
      await recordHeld(client, this.schema, projection.name, held);
      if (failed.length === 0) await client.query('SELECT pg_notify($1, $2)', [SET_ASIDE_CHANNEL, setAsidePayload(this.schema, projection.name, streamId, null)]);
      await client.query('COMMIT');
      const error = failed[0]?.error;
      return {
        projection: projection.name,
        stream: streamId,
        outcome: failed.length === 0 ? 'recovered' : 'failed again',
        applied: events.length - failed.length - held.length,
        held_events: held.length,
        error: error === undefined ? null : error instanceof Error ? error.message : String(error),
      };
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {
        broken = true;
      });
      throw error;
    } finally {
      client.off('error', onError);
      client.release(broken);
    }
  }
}

/**
 * A failure that says nothing about the events (the database or the event store unreachable, a
 * deadlock, a cancel...): the batch is tried again from its checkpoint for as long as it takes.
 */
function isTransient(error: unknown): boolean {
  return error instanceof EventStoreUnavailableError || isTransientDatabaseError(error);
}

export interface CatchUpOptions {
  /**
   * Applies only the events it accepts; the checkpoints still move past the others (a replay to
   * an instant applies the events recorded by then, wherever they fall in the log).
   */
  include?: (event: RecordedEvent) => boolean;
  /** Stops before the first event it accepts: the schema then holds a prefix of the log. */
  stopBefore?: (event: RecordedEvent) => boolean;
  /** Stops between batches (the batch in flight is committed first) and rejects with its reason. */
  signal?: AbortSignal;
  /** After each batch. */
  onProgress?: (progress: CatchUpResult) => void;
  /**
   * Projections that start from the beginning of the log and can defer tables
   * (`completeDeferred`) do, and complete them at the end. A catch-up that fails midway then
   * leaves them incomplete: only for a schema that is dropped on failure (a rebuild, a replay).
   */
  deferred?: boolean;
}

export interface CatchUpResult {
  /** Events of the log passed (within `stopBefore`). */
  events: number;
  /** Of those, the events `include` accepted (all of them without `include`). */
  applied: number;
  /** Where the last batch ended. */
  position: Position;
}

interface Cursor {
  projection: Projection;
  client: pg.PoolClient;
  after: Position;
  broken: boolean;
  /** Applying with `deferred`, to be completed at the end. */
  deferring: boolean;
  onError: () => void;
}

function earliest(cursors: readonly Cursor[]): Position {
  return cursors.reduce((min, c) => (comparePositions(c.after, min) < 0 ? c.after : min), cursors[0]!.after);
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('aborted');
}

/** The checkpoint moved under a batch: another applier got there first. */
export class CheckpointMovedError extends Error {
  constructor(projection: string, expected: Position, actual: Position) {
    super(`checkpoint of ${projection} is at ${formatPosition(actual)}, not ${formatPosition(expected)}`);
    this.name = 'CheckpointMovedError';
  }
}

export function isAtOrPast(position: Position, target: Position): boolean {
  return comparePositions(position, target) >= 0;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
