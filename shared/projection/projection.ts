import type pg from 'pg';
import type { RecordedEvent } from '../event-store/port.js';

/** How a batch is applied: `segment`, for a splittable projection run as segments, the one whose keys it applies. */
export interface ApplyOptions {
  deferred?: boolean;
  segment?: { index: number; count: number };
}

/**
 * A projection maps events to SQL. It writes unqualified table names: the runtime sets the
 * search_path to the schema being built (the current read model, a rebuild, or a point-in-time
 * replay), so the same code builds all three.
 */
export interface Projection {
  readonly name: string;
  /** Event types it reads; a batch with none of them only moves its checkpoint. */
  readonly eventTypes: readonly string[];
  /**
   * The tables it writes, and only it (one projection writes each table): a rebuild swaps exactly
   * these into the current schema. Its reads touch no other projection's table.
   */
  readonly tables: readonly string[];
  /**
   * True when it may start past events the scan archive moved out of the log without missing
   * anything it needs (a subscriber that acts on recent events only, like the webhooks one): the
   * projector's follower then runs it even with a checkpoint behind the archive (archive-guard.ts).
   */
  readonly skipsArchivedEvents?: boolean;
  /**
   * True when it can run as several segments (docs/design.md "Segmented processors"): `apply` with
   * `segment` then applies only that segment's keys of each event, and the segments' results
   * together are identical to one segment's.
   */
  readonly splittable?: boolean;
  /**
   * Of `tables`, those that hold each segment's own working state (a row per segment, or rows
   * keyed by segment): they differ with the number of segments by nature, so "identical to one
   * segment" is judged on the other tables (docs/design.md "Segmented processors").
   */
  readonly segmentStateTables?: readonly string[];
  /**
   * Indexes of its tables that none of its own statements needs while it applies events (those
   * only the API's reads use): a rebuild or a replay fills a fresh schema without them and makes
   * each once the log is replayed (one sort of the whole table, instead of an entry per row
   * written). Never a unique index (conflicts are checked as rows are written).
   */
  readonly indexesAfterReplay?: readonly string[];
  /** Sequences it draws from, swapped with its tables. */
  readonly sequences?: readonly string[];
  /**
   * Applies a batch inside the runtime's transaction. Must not commit, and must be deterministic.
   * `deferred`: see `completeDeferred`.
   */
  apply(events: RecordedEvent[], tx: pg.PoolClient, options?: ApplyOptions): Promise<void>;
  /**
   * For a projection with tables derived from others that are cheaper to compute once at the end
   * than batch by batch. A catch-up of an empty schema from the start of the log (a rebuild, a
   * replay) may apply its batches with `deferred` (those tables left out), then calls this once,
   * in a transaction, before any batch is applied normally.
   */
  completeDeferred?(tx: pg.PoolClient): Promise<void>;
  /**
   * Called once, in a transaction, before the first deferred batch: a projection may drop what
   * only slows a bulk load (indexes, built again by `completeDeferred`, which then must exist).
   */
  beginDeferred?(tx: pg.PoolClient): Promise<void>;
}
