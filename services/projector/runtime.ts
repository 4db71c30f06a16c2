import pg from 'pg';
import type { Logger } from '../../shared/logger.js';
import type { EventStore, Position, RecordedEvent } from '../../shared/event-store/port.js';
import { comparePositions, formatPosition } from '../../shared/event-store/port.js';
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
   * tests). With `until`, stops before the first event it refuses: the schema then holds a prefix
   * of the log, so that a later catch-up resumes from it without a hole.
   */
  async catchUp(until?: (event: RecordedEvent) => boolean): Promise<number> {
    let total = 0;
    for (const projection of this.options.projections) {
      const client = await this.options.pool.connect();
      const onError = () => undefined; // surfaces as the failure of the query in flight
      client.on('error', onError);
      let broken = false;
      try {
        await ensureCheckpoint(client, this.schema, projection.name);
        let after = await readCheckpoint(client, this.schema, projection.name);
        for (;;) {
          const batch = await this.options.store.readAll({ after, maxCount: this.options.batchSize ?? 1000 });
          const refused = until ? batch.findIndex((event) => !until(event)) : -1;
          const included = refused === -1 ? batch : batch.slice(0, refused);
          if (included.length === 0) break;
          try {
            await this.applyBatch(client, projection, included, after);
          } catch (error) {
            if (!(error instanceof CheckpointMovedError)) throw error;
            // Someone else applied this batch (a worker on the same schema): go on from theirs.
            after = await readCheckpoint(client, this.schema, projection.name);
            continue;
          }
          after = included[included.length - 1]!.position;
          total += included.length;
          if (included.length < batch.length) break;
        }
      } catch (error) {
        broken = true;
        throw error;
      } finally {
        client.off('error', onError);
        client.release(broken);
      }
    }
    return total;
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
              const subscription = this.options.store.subscribeToAll({
                after,
                maxCount: this.options.batchSize ?? 500,
                signal: AbortSignal.any([stopping, flushDue.signal]),
              });
              for await (const batch of subscription) {
                const last = batch[batch.length - 1]!.position;
                if (batch.some((e) => projection.eventTypes.includes(e.type))) {
                  await this.applyBatch(client, projection, batch, stored);
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
   * One transaction: the projection's writes and its checkpoint. The checkpoint row is locked and
   * must still be where this batch starts (`after`): whoever else applied events meanwhile (a
   * catch-up on the same schema, say), this batch is then refused rather than applied twice.
   */
  private async applyBatch(client: pg.PoolClient, projection: Projection, batch: RecordedEvent[], after: Position): Promise<void> {
    const last = batch[batch.length - 1]!.position;
    const relevant = batch.filter((e) => projection.eventTypes.includes(e.type));
    if (relevant.length === 0) {
      if (!(await advanceCheckpoint(client, this.schema, projection.name, after, last))) {
        throw new CheckpointMovedError(projection.name, after, await readCheckpoint(client, this.schema, projection.name));
      }
      this.options.onCheckpoint?.(projection.name, last);
      return;
    }
    // Projection commits need not wait for fsync: a read model is rebuildable from the log, and
    // a commit lost in a crash loses its checkpoint with it, so those events are applied again.
    // The append of the events themselves stays fully durable.
    await client.query(`BEGIN; SET LOCAL search_path TO ${pg.escapeIdentifier(this.schema)}; SET LOCAL synchronous_commit TO off`);
    try {
      await projection.apply(relevant, client);
      // The checkpoint must still be where this batch started: if another applier (a catch-up on
      // this schema, say) moved it meanwhile, this batch is rolled back rather than applied twice.
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
