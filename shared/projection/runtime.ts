import { setMaxListeners } from 'node:events';
import type pg from 'pg';
import type { Logger } from '../logger.js';
import type { EventStore, Position } from '../event-store/port.js';
import type { ApplyContext } from './apply-batch.js';
import { catchUp, type CatchUpOptions, type CatchUpResult } from './catch-up.js';
import { catchUpInProcesses, type CatchUpProcesses, type PortableCatchUp } from './catch-up-processes.js';
import { runFollower } from './follower.js';
import type { Projection } from './projection.js';
import { SegmentLeases, segmentCount, segmentsOf, type ProjectionSegments } from './segments.js';
import { retrySetAside, type RetryOutcome } from './retry-set-aside.js';

/** PROJECTOR_LEASE_SECONDS' default (docs/operations.md "Configuration"). */
const DEFAULT_LEASE_MS = 10_000;

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
  /** PROJECTION_SEGMENTS: how many segments each projection that can be split runs as (default: 1 each). */
  segments?: ProjectionSegments;
  /** A catch-up's segments side by side (catch-up.ts, `CatchUpContext.parallel`): rebuild and replay `--parallel`. */
  parallel?: number;
  /** PROJECTOR_LEASE_SECONDS, in ms: how long a claim of a segment lasts without renewal (default 10 s). */
  leaseMs?: number;
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
  private leases: SegmentLeases | null = null;
  private heartbeat: NodeJS.Timeout | null = null;

  constructor(options: ProjectorOptions) {
    // Every follower of every segment waits on this one signal (a standby one sleeps on it between
    // tries to claim): dozens of listeners by design, not a leak, and no warning on stderr.
    setMaxListeners(0, this.abort.signal);
    this.context = { ...options, schema: options.schema ?? 'read_model', stopping: this.abort.signal };
  }

  /**
   * Follows the log: a follower per segment of each projection (one segment unless split), each
   * applying its segment while this process holds its lease (docs/design.md "Segmented processors").
   */
  start(): void {
    const leases = new SegmentLeases(this.context.pool, this.context.schema, this.context.leaseMs ?? DEFAULT_LEASE_MS);
    this.leases = leases;
    // Membership divides the segments of split projections among processes (fair shares): a
    // runtime that runs none (the webhooks role's, beside a projector in one process) is no member,
    // or the projector would give up segments that nobody else follows.
    if (this.context.projections.some((projection) => segmentCount(projection, this.context.segments) > 1)) {
      const heartbeat = () => leases.heartbeat().catch((error: unknown) => this.context.log.warn({ err: error }, 'projector membership not renewed; trying again'));
      this.followers.push(heartbeat().then(() => undefined));
      this.heartbeat = setInterval(() => void heartbeat(), Math.max(50, Math.floor(leases.leaseMs / 3)));
    }
    for (const projection of this.context.projections) {
      for (const segment of segmentsOf(projection, segmentCount(projection, this.context.segments))) {
        this.followers.push(runFollower(this.context, leases, segment));
      }
    }
  }

  /** Finishes the batch in flight, then stops every follower and gives up its segments. */
  async stop(): Promise<void> {
    this.abort.abort();
    if (this.heartbeat) clearInterval(this.heartbeat);
    await Promise.allSettled(this.followers);
    await this.leases?.leave().catch(() => undefined);
  }

  /** Applies every event up to the current head once, without subscriptions: see `catchUp`. */
  catchUp(options: CatchUpOptions = {}): Promise<CatchUpResult> {
    return catchUp(this.context, options);
  }

  /** Applies every event up to the current head once, the segments spread over `processes` if given: see `catchUpInProcesses`. */
  catchUpInProcesses(options: PortableCatchUp, processes: CatchUpProcesses | undefined): Promise<CatchUpResult> {
    return catchUpInProcesses(this.context, options, processes);
  }

  /** `projections retry`: see `retrySetAside`. */
  retrySetAside(filter: { projection?: string; stream?: string } = {}): Promise<RetryOutcome[]> {
    return retrySetAside(this.context, filter);
  }
}
