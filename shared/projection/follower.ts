import type pg from 'pg';
import type { EventStore } from '../event-store/port.js';
import { START, comparePositions, formatPosition, type Position } from '../event-store/port.js';
import { sleep } from '../retry.js';
import { CheckpointMovedError, LeaseLostError, applyBatch, leaseStillAt, type ApplyContext } from './apply-batch.js';
import { behindArchiveReason, behindArchiveSettled } from './archive-guard.js';
import { advanceCheckpoint, ensureCheckpoint, readCheckpoint } from './checkpoints.js';
import type { Projection } from './projection.js';
import { checkpointsOfOtherCounts, type Segment, type SegmentLeases } from './segments.js';

/**
 * How long the checkpoint row of a projection may trail the batches it had nothing to apply in:
 * under load that turns a write transaction per batch into a few per second, and other
 * processes (waiting on the row) see the position within this delay.
 */
const FOREIGN_FLUSH_MS = 100;
/** The most events a follower applies in one batch (docs/design.md "Projections"). */
const FOLLOW_BATCH = 5000;

/** The log a follower follows, and where. */
export interface FollowerContext extends ApplyContext {
  store: EventStore;
  pool: pg.Pool;
  batchSize?: number;
  /** How often a standby instance tries to take over a projection another process holds. */
  takeoverIntervalMs?: number;
  /** How often a projection refused for being behind the scan archive looks again (a rebuild moves it past). */
  behindArchiveRetryMs?: number;
}

const BEHIND_ARCHIVE_RETRY_MS = 30_000;

/**
 * Keeps one segment of a projection (the whole projection when it is not split) current with the
 * log until `ctx.stopping` aborts (the batch in flight is finished first). One process applies
 * each segment at a time, under a lease (docs/design.md "Segmented processors"): the follower
 * claims it on its own connection, renews it every third of the lease, and every batch it commits
 * carries the lease's epoch (fenced: a batch of a process that lost the segment rolls back). A
 * standby, trying every `takeoverIntervalMs`, takes over a lease that expired, was released, or
 * whose holder's connection is gone. A failure goes back to the checkpoint and tries again,
 * backing off up to 10 s.
 */
export async function runFollower(ctx: FollowerContext, leases: SegmentLeases, segment: Segment): Promise<void> {
  const backoff: Backoff = { ms: 250 };
  while (!ctx.stopping.aborted) await followerSession(ctx, leases, segment, backoff);
}

/** The pause after a failure: it doubles up to 10 s, and a batch applied resets it. */
interface Backoff {
  ms: number;
}

/**
 * One connection's turn: claims the segment and follows the log while it holds it, or waits
 * `takeoverIntervalMs` as a standby; a failure is logged and waited out (`backoff`).
 */
async function followerSession(ctx: FollowerContext, leases: SegmentLeases, segment: Segment, backoff: Backoff): Promise<void> {
  const { log, pool } = ctx;
  const projection = segment.projection;
  const signal = ctx.stopping;
  let client: pg.PoolClient | null = null;
  let broken = false;
  let epoch: number | null = null;
  let renewal: NodeJS.Timeout | null = null;
  // The connection may die while we hold it (backend terminated, network gone). pg then emits
  // 'error' on the client, which would crash the process without a listener; the session stops
  // at once and goes back to standby (the lease is claimable as soon as the backend is gone).
  const lost = new AbortController();
  // Over its fair share: the segment is given up after the batch in flight.
  const yielded = new AbortController();
  const onError = (error: Error) => {
    broken = true;
    lost.abort(error);
  };
  try {
    if (!(await leases.mayClaim(segment))) {
      await sleep(ctx.takeoverIntervalMs ?? 1000, signal);
      return;
    }
    client = await pool.connect();
    client.on('error', onError);
    // A process paused inside a batch loses its transaction, and the row locks it holds, within the lease.
    await client.query(`SET idle_in_transaction_session_timeout = ${Math.round(leases.leaseMs)}`);
    epoch = await leases.claim(client, segment);
    if (epoch === null) {
      await sleep(ctx.takeoverIntervalMs ?? 1000, signal);
      return;
    }
    // After the claim: a rebuild that changes the number swaps in after this check only by
    // deleting the lease just claimed, so no batch of this epoch commits (docs/design.md "Rebuild and replay").
    const otherCounts = await checkpointsOfOtherCounts(client, ctx.schema, segment, formatPosition(START));
    if (otherCounts.length > 0) {
      log.error(
        { projection: segment.base.name, segments: segment.count, checkpoints: otherCounts },
        'the projection has checkpoints of another number of segments (PROJECTION_SEGMENTS changed): rebuild it (projections rebuild); not running it live',
      );
      await sleep(ctx.behindArchiveRetryMs ?? BEHIND_ARCHIVE_RETRY_MS, signal);
      return;
    }
    const claimed = epoch;
    log.debug({ projection: projection.name, epoch }, 'projection active');
    renewal = setInterval(() => {
      void (async () => {
        if (!(await leases.renew(segment, claimed))) lost.abort(new LeaseLostError(projection.name, claimed));
        else if (await leases.overShare(segment)) yielded.abort();
      })().catch(() => undefined); // a renewal that fails is tried again; the lease runs out meanwhile
    }, Math.max(50, Math.floor(leases.leaseMs / 3)));
    try {
      await followWhileLocked({ ...ctx, leaseEpoch: claimed }, projection, client, AbortSignal.any([lost.signal, yielded.signal]), lost.signal, backoff);
    } catch (error) {
      if (!(error instanceof LeaseLostError || lost.signal.reason instanceof LeaseLostError)) throw error;
      // Another process claimed it (this one was paused or cut off past its lease): it wrote nothing since.
      log.warn({ projection: projection.name, epoch }, 'segment claimed by another process; standing by');
      leases.lost(segment);
      epoch = null;
    }
  } catch (error) {
    broken = true;
    if (!signal.aborted) {
      log.error({ err: error, projection: projection.name }, 'projection failed; retrying from its checkpoint');
      await sleep(backoff.ms, signal);
      backoff.ms = Math.min(backoff.ms * 2, 10_000);
    }
  } finally {
    if (renewal) clearInterval(renewal);
    if (epoch !== null) await leases.release(segment, lost.signal.aborted ? null : epoch).catch(() => undefined);
    if (client) {
      client.off('error', onError);
      // The pool's other users keep the server's default.
      if (!broken) await client.query('RESET idle_in_transaction_session_timeout').catch(() => (broken = true));
      client.release(broken);
    }
  }
}

/**
 * Where a follower is: `stored` is the checkpoint row, `after` the last event looked at. They differ
 * while a run of batches without any of this projection's event types waits to be recorded.
 */
interface Positions {
  stored: Position;
  after: Position;
}

/**
 * Applies the log from the checkpoint on, holding the lease, until stopped, ended (`ended`: the
 * lease lost or given up), or refused behind the archive; `lost` (the connection or the lease)
 * throws.
 */
async function followWhileLocked(ctx: FollowerContext, projection: Projection, client: pg.PoolClient, ended: AbortSignal, lost: AbortSignal, backoff: Backoff): Promise<void> {
  await ensureCheckpoint(client, ctx.schema, projection.name);
  const stored = await readCheckpoint(client, ctx.schema, projection.name);
  const at: Positions = { stored, after: stored };
  const stopping = AbortSignal.any([ctx.stopping, ended]);
  let refused = await refusedBehindArchive(ctx, client, projection, at.stored);
  while (!refused && !stopping.aborted) {
    refused = await applyUntilIdle(ctx, projection, client, stopping, at, backoff);
    if (!refused && comparePositions(at.after, at.stored) > 0 && !ended.aborted) refused = await recordCheckpoint(ctx, projection, client, at);
  }
  if (lost.aborted) throw lost.reason;
  // Refused: the lock goes (another instance finds the same), and it looks again later.
  if (refused) await sleep(ctx.behindArchiveRetryMs ?? BEHIND_ARCHIVE_RETRY_MS, stopping);
}

/**
 * Behind the scan archive, following the log it would skip the archived scans (archive-guard.ts):
 * refused, at the start and whenever its checkpoint moved under it, until a rebuild.
 */
async function refusedBehindArchive(ctx: FollowerContext, client: pg.PoolClient, projection: Projection, at: Position): Promise<boolean> {
  const through = await behindArchiveSettled(ctx.store, client, projection, at);
  if (!through) return false;
  ctx.log.error(
    { projection: projection.name, checkpoint: formatPosition(at), archivedThrough: formatPosition(through) },
    `${behindArchiveReason(projection.name, at, through)}; not running it live`,
  );
  return true;
}

/**
 * Applies batches of the subscription until it ends: stopped, or woken to record the checkpoint
 * of a run of batches with nothing to apply. Whether the projection is now refused (its checkpoint
 * moved under it, behind the archive).
 */
async function applyUntilIdle(ctx: FollowerContext, projection: Projection, client: pg.PoolClient, stopping: AbortSignal, at: Positions, backoff: Backoff): Promise<boolean> {
  const flushDue = new AbortController();
  let flushTimer: NodeJS.Timeout | null = null;
  try {
    // Only the projection's own event types: a store that filters on its side (KurrentDB)
    // then never sends the others; the batches' positions still move past them.
    const subscription = ctx.store.subscribeToAll({
      after: at.after,
      // Up to FOLLOW_BATCH events: much of a batch's cost is per batch (docs/design.md "Projections").
      maxCount: ctx.batchSize ?? FOLLOW_BATCH,
      signal: AbortSignal.any([stopping, flushDue.signal]),
      filter: { eventTypes: projection.eventTypes },
    });
    for await (const batch of subscription) {
      const last = batch.position;
      if (batch.events.length > 0) {
        await applyBatch(ctx, client, projection, batch.events, at.stored, last);
        at.stored = last;
      } else {
        // Nothing to apply: the read model already is what it would be at `last`, so
        // in-process waiters may go on now, and the row is written later, once for a
        // whole run of such batches (FOREIGN_FLUSH_MS), not once per batch.
        ctx.onCheckpoint?.(projection.name, last);
        flushTimer ??= setTimeout(() => flushDue.abort(), FOREIGN_FLUSH_MS);
      }
      at.after = last;
      backoff.ms = 250;
    }
    return false;
  } catch (error) {
    if (!(error instanceof CheckpointMovedError)) throw error;
    // Someone else applied events here (a catch-up on this schema): go on from there.
    ctx.log.warn({ projection: projection.name, err: error }, 'checkpoint moved under the projector; resuming from it');
    at.stored = at.after = await readCheckpoint(client, ctx.schema, projection.name);
    return await refusedBehindArchive(ctx, client, projection, at.stored);
  } finally {
    if (flushTimer) clearTimeout(flushTimer);
  }
}

/** Writes the checkpoint row at `after`; whether the projection is now refused (the row had moved under it). */
async function recordCheckpoint(ctx: FollowerContext, projection: Projection, client: pg.PoolClient, at: Positions): Promise<boolean> {
  let refused = false;
  if (!(await advanceCheckpoint(client, ctx.schema, projection.name, at.stored, at.after, ctx.leaseEpoch))) {
    if (ctx.leaseEpoch !== undefined && !(await leaseStillAt(client, ctx.schema, projection.name, ctx.leaseEpoch))) {
      throw new LeaseLostError(projection.name, ctx.leaseEpoch);
    }
    ctx.log.warn({ projection: projection.name }, 'checkpoint moved under the projector; resuming from it');
    at.after = await readCheckpoint(client, ctx.schema, projection.name);
    refused = await refusedBehindArchive(ctx, client, projection, at.after);
  }
  at.stored = at.after;
  return refused;
}
