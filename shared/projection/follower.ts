import type pg from 'pg';
import type { EventStore } from '../event-store/port.js';
import { comparePositions, formatPosition, type Position } from '../event-store/port.js';
import { sleep } from '../retry.js';
import { CheckpointMovedError, applyBatch, type ApplyContext } from './apply-batch.js';
import { behindArchiveReason, behindArchiveSettled } from './archive-guard.js';
import { advanceCheckpoint, ensureCheckpoint, readCheckpoint } from './checkpoints.js';
import type { Projection } from './projection.js';

/**
 * How long the checkpoint row of a projection may trail the batches it had nothing to apply in:
 * under load that turns a write transaction per batch into a few per second, and other
 * processes (waiting on the row) see the position within this delay.
 */
const FOREIGN_FLUSH_MS = 100;

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
 * Keeps one projection current with the log until `ctx.stopping` aborts (the batch in flight is
 * finished first). A session-level advisory lock on the follower's own connection keeps one
 * active instance per projection and schema across processes: the lock dies with the connection,
 * and a standby, trying every `takeoverIntervalMs`, takes over. A failure goes back to the
 * checkpoint and tries again, backing off up to 10 s.
 */
export async function runFollower(ctx: FollowerContext, projection: Projection): Promise<void> {
  const backoff: Backoff = { ms: 250 };
  while (!ctx.stopping.aborted) await followerSession(ctx, projection, backoff);
}

/** The pause after a failure: it doubles up to 10 s, and a batch applied resets it. */
interface Backoff {
  ms: number;
}

/**
 * One connection's turn: takes the projection's lock and follows the log while it holds it, or
 * waits `takeoverIntervalMs` as a standby; a failure is logged and waited out (`backoff`).
 */
async function followerSession(ctx: FollowerContext, projection: Projection, backoff: Backoff): Promise<void> {
  const { log, pool } = ctx;
  const signal = ctx.stopping;
  const lockKey = `projection:${ctx.schema}:${projection.name}`;
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
      await sleep(ctx.takeoverIntervalMs ?? 1000, signal);
      return;
    }
    log.debug({ projection: projection.name }, 'projection active');
    try {
      await followWhileLocked(ctx, projection, client, lost.signal, backoff);
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
      await sleep(backoff.ms, signal);
      backoff.ms = Math.min(backoff.ms * 2, 10_000);
    }
  } finally {
    if (client) {
      client.off('error', onError);
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

/** Applies the log from the checkpoint on, holding the lock, until stopped, lost, or refused behind the archive. */
async function followWhileLocked(ctx: FollowerContext, projection: Projection, client: pg.PoolClient, lost: AbortSignal, backoff: Backoff): Promise<void> {
  await ensureCheckpoint(client, ctx.schema, projection.name);
  const stored = await readCheckpoint(client, ctx.schema, projection.name);
  const at: Positions = { stored, after: stored };
  const stopping = AbortSignal.any([ctx.stopping, lost]);
  let refused = await refusedBehindArchive(ctx, client, projection, at.stored);
  while (!refused && !stopping.aborted) {
    refused = await applyUntilIdle(ctx, projection, client, stopping, at, backoff);
    if (!refused && comparePositions(at.after, at.stored) > 0 && !lost.aborted) refused = await recordCheckpoint(ctx, projection, client, at);
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
      maxCount: ctx.batchSize ?? 500,
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
  if (!(await advanceCheckpoint(client, ctx.schema, projection.name, at.stored, at.after))) {
    ctx.log.warn({ projection: projection.name }, 'checkpoint moved under the projector; resuming from it');
    at.after = await readCheckpoint(client, ctx.schema, projection.name);
    refused = await refusedBehindArchive(ctx, client, projection, at.after);
  }
  at.stored = at.after;
  return refused;
}
