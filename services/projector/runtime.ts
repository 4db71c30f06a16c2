import type pg from 'pg';
import type { Logger } from '../../shared/logger.js';
import type { EventStore, Position, RecordedEvent } from '../../shared/event-store/port.js';
import { comparePositions } from '../../shared/event-store/port.js';
import { readCheckpoint, writeCheckpoint } from './checkpoints.js';
import type { Projection } from './projection.js';

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

  /** Applies every event up to the current head once, without locks or subscriptions (rebuild, replay, tests). */
  async catchUp(until?: (event: RecordedEvent) => boolean): Promise<number> {
    let total = 0;
    for (const projection of this.options.projections) {
      const client = await this.options.pool.connect();
      try {
        let after = await readCheckpoint(client, this.schema, projection.name);
        for (;;) {
          const batch = await this.options.store.readAll({ after, maxCount: this.options.batchSize ?? 1000 });
          const included = until ? batch.filter(until) : batch;
          if (included.length === 0) break;
          await this.applyBatch(client, projection, included);
          after = included[included.length - 1]!.position;
          total += included.length;
          if (included.length < batch.length) break;
        }
      } finally {
        client.release();
      }
    }
    return total;
  }

  private async runWorker(projection: Projection): Promise<void> {
    const { log, pool } = this.options;
    const signal = this.abort.signal;
    let backoffMs = 250;
    while (!signal.aborted) {
      let client: pg.PoolClient | null = null;
      let broken = false;
      try {
        client = await pool.connect();
        const lockKey = `projection:${this.schema}:${projection.name}`;
        const locked = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS locked', [lockKey]);
        if (!locked.rows[0]?.locked) {
          client.release();
          client = null;
          await sleep(this.options.takeoverIntervalMs ?? 1000, signal);
          continue;
        }
        log.debug({ projection: projection.name }, 'projection active');
        try {
          const after = await readCheckpoint(client, this.schema, projection.name);
          const batches = this.options.store.subscribeToAll({ after, maxCount: this.options.batchSize ?? 500, signal });
          for await (const batch of batches) {
            await this.applyBatch(client, projection, batch);
            backoffMs = 250;
            if (signal.aborted) break;
          }
        } finally {
          await client.query('SELECT pg_advisory_unlock(hashtext($1))', [lockKey]).catch(() => {
            broken = true;
          });
        }
      } catch (error) {
        broken = true;
        if (!signal.aborted) {
          log.error({ err: error, projection: projection.name }, 'projection failed; retrying from its checkpoint');
          await sleep(backoffMs, signal);
          backoffMs = Math.min(backoffMs * 2, 10_000);
        }
      } finally {
        client?.release(broken);
      }
    }
  }

  private async applyBatch(client: pg.PoolClient, projection: Projection, batch: RecordedEvent[]): Promise<void> {
    const last = batch[batch.length - 1]!.position;
    const relevant = batch.filter((e) => projection.eventTypes.includes(e.type));
    await client.query('BEGIN');
    try {
      await client.query(`SET LOCAL search_path TO "${this.schema}"`);
      if (relevant.length > 0) await projection.apply(relevant, client);
      await writeCheckpoint(client, this.schema, projection.name, last);
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
    this.options.onCheckpoint?.(projection.name, last);
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
