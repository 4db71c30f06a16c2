import pg from 'pg';
import type { Logger } from '../logger.js';
import type { Position, RecordedEvent } from '../event-store/port.js';
import { comparePositions, formatPosition } from '../event-store/port.js';
import { isTransient } from '../errors.js';
import { isTransientDatabaseError } from '../db/pool.js';
import { sleep } from '../retry.js';
import { CHECKPOINT_MOVED_SQLSTATE, LEASE_LOST_SQLSTATE, advanceCheckpoint, moveCheckpointAndCommit, readCheckpoint } from './checkpoints.js';
import type { Projection } from './projection.js';
import { recordHeld, recordSetAside, type ApplyFailure } from './set-aside.js';

/**
 * What catch-up (catch-up.ts), the followers (follower.ts) and `projections retry`
 * (retry-set-aside.ts) share: one batch applied in a transaction with its checkpoint, the
 * bisection that narrows a failing batch down to the events it cannot apply, and which failures
 * are transient.
 */

/**
 * A batch that fails for a reason of its own (not a transient one: see `passesOnRetry`) is tried
 * this many times, APPLY_RETRY_MS apart and then twice that, before it is narrowed down to the
 * events that fail, whose streams are set aside (docs/design.md "A projection that cannot apply
 * an event").
 */
const APPLY_ATTEMPTS = 3;
const APPLY_RETRY_MS = 100;

/** Where batches are applied, and who hears of them. */
export interface ApplyContext {
  /** Schema the projections build: `read_model` for the current one. */
  schema: string;
  log: Logger;
  /** Called after each committed batch (the in-process checkpoint watcher listens here). */
  onCheckpoint?: (name: string, position: Position) => void;
  /**
   * Called when a batch sets a stream aside (`position`: the event that failed), after it commits
   * and before its `onCheckpoint`.
   */
  onSetAside?: (name: string, streamId: string, position: Position) => void;
  /** The runtime stopping: it also cuts short the wait between two attempts of a failing batch. */
  stopping: AbortSignal;
  /**
   * A follower's lease epoch on the segment it applies (docs/design.md "Segmented processors"):
   * every checkpoint move is then fenced, and a batch of a process that lost the segment rolls back
   * (LeaseLostError).
   */
  leaseEpoch?: number;
}

/**
 * The events of `batch` the projection reads, applied in one transaction with its checkpoint,
 * moved from `after` to `to` (by default the batch's last event). Events of streams the
 * projection has set aside are held instead of applied. A failure that is not transient is
 * tried APPLY_ATTEMPTS times; then the batch is applied piece by piece (`applyIsolating`) and the
 * streams of the events that still fail are set aside, so the checkpoint moves on.
 */
export async function applyBatch(
  ctx: ApplyContext,
  client: pg.PoolClient,
  projection: Projection,
  batch: RecordedEvent[],
  after: Position,
  to?: Position,
  deferred = false,
): Promise<void> {
  const last = to ?? batch[batch.length - 1]!.position;
  const relevant = batch.filter((e) => projection.eventTypes.includes(e.type));
  if (relevant.length === 0) {
    if (!(await advanceCheckpoint(client, ctx.schema, projection.name, after, last, ctx.leaseEpoch))) {
      if (ctx.leaseEpoch !== undefined) await throwIfLeaseLost(client, ctx.schema, projection.name, ctx.leaseEpoch);
      throw new CheckpointMovedError(projection.name, after, await readCheckpoint(client, ctx.schema, projection.name));
    }
    ctx.onCheckpoint?.(projection.name, last);
    return;
  }
  for (let attempt = 1; ; attempt++) {
    const isolating = attempt > APPLY_ATTEMPTS;
    try {
      await applyInTransaction(ctx, client, projection, relevant, after, last, deferred, isolating);
      return;
    } catch (error) {
      if (isolating || error instanceof CheckpointMovedError || error instanceof LeaseLostError || passesOnRetry(error)) throw error;
      const context = { err: error, projection: projection.name, from: formatPosition(after), to: formatPosition(last), attempt };
      if (attempt < APPLY_ATTEMPTS) {
        ctx.log.warn(context, 'projection batch failed; trying it again');
        await sleep(APPLY_RETRY_MS * 2 ** (attempt - 1), ctx.stopping);
      } else {
        ctx.log.error(context, 'projection batch keeps failing; looking for the events it cannot apply, to set their streams aside');
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
async function applyInTransaction(
  ctx: ApplyContext,
  client: pg.PoolClient,
  projection: Projection,
  relevant: RecordedEvent[],
  after: Position,
  last: Position,
  deferred: boolean,
  isolating: boolean,
): Promise<void> {
  const schema = pg.escapeIdentifier(ctx.schema);
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
      const isolated = await applyIsolating(client, projection, events, blocked, options);
      failed = isolated.failed;
      held = [...held, ...isolated.held].sort((a, b) => comparePositions(a.position, b.position));
      await recordSetAside(client, ctx.schema, projection.name, failed);
    } else if (events.length > 0) {
      await projection.apply(events, client, options);
    }
    await recordHeld(client, ctx.schema, projection.name, held);
    await moveCheckpointAndCommit(client, ctx.schema, projection.name, after, last, ctx.leaseEpoch);
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    if ((error as { code?: string }).code === LEASE_LOST_SQLSTATE) throw new LeaseLostError(projection.name, ctx.leaseEpoch!);
    if ((error as { code?: string }).code === CHECKPOINT_MOVED_SQLSTATE) {
      throw new CheckpointMovedError(projection.name, after, await readCheckpoint(client, ctx.schema, projection.name));
    }
    throw error;
  }
  for (const { event, error } of failed) {
    ctx.log.error(
      { err: error, projection: projection.name, stream: event.streamId, position: formatPosition(event.position), event_type: event.type },
      'event set aside: the projection cannot apply it, and the later events of its stream wait behind it (npx tracking projections failures)',
    );
    ctx.onSetAside?.(projection.name, event.streamId, event.position);
  }
  ctx.onCheckpoint?.(projection.name, last);
}

/**
 * Applies `events` in the caller's transaction, bisecting on failure, each part under a
 * savepoint: a part that fails is rolled back and split in two halves, applied in order, down
 * to single events. A single event that fails sets its stream aside (added to `blocked`), and
 * the stream's later events are held, not applied. Deterministic: the same events, in the same
 * state, fail the same way, so a rebuild or a replay sets the same streams aside. A transient
 * failure ends it (the caller rolls back and starts the batch again).
 */
export async function applyIsolating(
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
      if (passesOnRetry(error)) throw error;
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
 * A failure that says nothing about the events, so the batch is tried again from its checkpoint
 * for as long as it takes: a transient one (the log or the database unreachable), and here also a
 * serialization failure, a deadlock, a cancel or a lock timeout, which pass on a retry (the edge
 * answers those 500; a projection tries again).
 */
function passesOnRetry(error: unknown): boolean {
  return isTransient(error) || isTransientDatabaseError(error);
}

/** The checkpoint moved under a batch: another applier got there first. */
export class CheckpointMovedError extends Error {
  constructor(projection: string, expected: Position, actual: Position) {
    super(`checkpoint of ${projection} is at ${formatPosition(actual)}, not ${formatPosition(expected)}`);
    this.name = 'CheckpointMovedError';
  }
}

/** Another process claimed the segment (a newer lease epoch): this batch rolled back, and its follower stops. */
export class LeaseLostError extends Error {
  constructor(segment: string, epoch: number) {
    super(`lease of ${segment} is no longer at epoch ${epoch}: another process claimed it`);
    this.name = 'LeaseLostError';
  }
}

/** Whether the segment's lease is still at `epoch` (after a fenced move that changed nothing). */
export async function leaseStillAt(client: pg.ClientBase, schema: string, name: string, epoch: number): Promise<boolean> {
  const { rows } = await client.query<{ epoch: string }>(`SELECT epoch::text FROM ${pg.escapeIdentifier(schema)}.projection_leases WHERE name = $1`, [name]);
  return rows[0]?.epoch === String(epoch);
}

async function throwIfLeaseLost(client: pg.ClientBase, schema: string, name: string, epoch: number): Promise<void> {
  if (!(await leaseStillAt(client, schema, name, epoch))) throw new LeaseLostError(name, epoch);
}
