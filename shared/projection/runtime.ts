import type pg from 'pg';
import type { Logger } from '../logger.js';
import type { EventStore, Position } from '../event-store/port.js';
import type { ApplyContext } from './apply-batch.js';
import { catchUp, type CatchUpOptions, type CatchUpResult } from './catch-up.js';
import { runFollower } from './follower.js';
import type { Projection } from './projection.js';
import { retrySetAside, type RetryOutcome } from './retry-set-aside.js';

export interface ProjectorOptions {
  store: EventStore;
  pool: pg.Pool;
  projections: readonly Projection[];
  log: Logger;
  /** Schema the projections build: `read_model` for the current one. */
  schema?: string;
  batchSize?: number;
  /** How often a standby instance tries to take over a projection another process holds. */
  takeoverIntervalMs?: number;
  /** How often a projection refused for being behind the scan archive looks again (follower.ts). */
  behindArchiveRetryMs?: number;
  /** Called after each committed batch (the in-process checkpoint watcher listens here). */
  onCheckpoint?: (name: string, position: Position) => void;
  /**
   * Called when a batch sets a stream aside (`position`: the event that failed), after it commits
   * and before its `onCheckpoint`.
   */
  onSetAside?: (name: string, streamId: string, position: Position) => void;
}

/**
 * Runs projections on one schema. Each one is applied in batches inside a transaction that also
 * writes its checkpoint (apply-batch.ts), so a crash at any point resumes exactly where the last
 * commit left off. Three ways to run them: `start` a follower per projection (follower.ts:
 * one active instance per projection across processes), `catchUp` to the head once
 * (catch-up.ts: rebuild, replay, tests), or `retrySetAside` (retry-set-aside.ts:
 * `projections retry`).
 */
export class ProjectorRuntime {
  private readonly abort = new AbortController();
  private readonly followers: Promise<void>[] = [];
  private readonly context: ProjectorOptions & ApplyContext;

  constructor(options: ProjectorOptions) {
    this.context = { ...options, schema: options.schema ?? 'read_model', stopping: this.abort.signal };
  }

  start(): void {
    for (const projection of this.context.projections) this.followers.push(runFollower(this.context, projection));
  }

  /** Finishes the batch in flight, then stops every follower. */
  async stop(): Promise<void> {
    this.abort.abort();
    await Promise.allSettled(this.followers);
  }

  /** Applies every event up to the current head once, without subscriptions: see `catchUp`. */
  catchUp(options: CatchUpOptions = {}): Promise<CatchUpResult> {
    return catchUp(this.context, options);
  }

  /** `projections retry`: see `retrySetAside`. */
  retrySetAside(filter: { projection?: string; stream?: string } = {}): Promise<RetryOutcome[]> {
    return retrySetAside(this.context, filter);
  }
}
