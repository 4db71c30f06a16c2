import pg from 'pg';
import type { Logger } from '../../shared/logger.js';
import type { EventStore, Position, RecordedEvent } from '../../shared/event-store/port.js';
import { START, comparePositions, formatPosition } from '../../shared/event-store/port.js';
import { CHECKPOINT_MOVED_SQLSTATE, advanceCheckpoint, ensureCheckpoint, moveCheckpointAndCommit, readCheckpoint } from '../../shared/projection/checkpoints.js';
import type { Projection } from '../../shared/projection/projection.js';

/**
 * How long the checkpoint row of a projection may trail the batches it had nothing to apply in:
 * under load that turns a write transaction per batch into a few per second, and other
 * processes (waiting on the row) see the position within this delay.
 */
const FOREIGN_FLUSH_MS = 100;

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
   *
   * A function argument is the older form of `stopBefore`'s opposite: the events it refuses.
   */
  async catchUp(options: CatchUpOptions | ((event: RecordedEvent) => boolean) = {}): Promise<CatchUpResult> {
    const opts: CatchUpOptions = typeof options === 'function' ? { stopBefore: (event) => !options(event) } : options;
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
   * One transaction: the projection's writes and its checkpoint, moved from `after` to `to` (by
   * default the batch's last event). The batch first locks the checkpoint row and checks it is
   * still at `after` (`begin_projection_batch`): whoever else applied events meanwhile (a catch-up
   * on the same schema, a rebuild's swap), this batch then stops before writing anything rather
   * than apply events twice; and a swap holding that row keeps the batch from taking any table lock.
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
    const schema = pg.escapeIdentifier(this.schema);
    try {
      // Projection commits need not wait for fsync: a read model is rebuildable from the log, and
      // a commit lost in a crash loses its checkpoint with it, so those events are applied again.
      // The append of the events themselves stays fully durable.
      await client.query(
        `BEGIN; SET LOCAL search_path TO ${schema}; SET LOCAL synchronous_commit TO off;
         SELECT ${schema}.begin_projection_batch(${pg.escapeLiteral(projection.name)}, ${pg.escapeLiteral(formatPosition(after))})`,
      );
      await projection.apply(relevant, client, deferred ? { deferred } : undefined);
      await moveCheckpointAndCommit(client, this.schema, projection.name, after, last);
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      if ((error as { code?: string }).code === CHECKPOINT_MOVED_SQLSTATE) {
        throw new CheckpointMovedError(projection.name, after, await readCheckpoint(client, this.schema, projection.name));
      }
      throw error;
    }
    this.options.onCheckpoint?.(projection.name, last);
  }
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
