import pg from 'pg';
import type { EventStore, Position, RecordedEvent } from '../event-store/port.js';
import { START, comparePositions } from '../event-store/port.js';
import { CheckpointMovedError, applyBatch, type ApplyContext } from './apply-batch.js';
import { ensureCheckpoint, readCheckpoint } from './checkpoints.js';
import { sleep } from '../retry.js';
import type { Projection } from './projection.js';
import { parseSegmentName } from './segments.js';

/** The projections a catch-up applies, the log it reads, and where. */
export interface CatchUpContext extends ApplyContext {
  store: EventStore;
  pool: pg.Pool;
  projections: readonly Projection[];
  batchSize?: number;
  /**
   * How many segments of one split projection apply a batch at the same time (`projections
   * rebuild --parallel`, docs/design.md "Rebuild and replay"): its segments are dealt round-robin
   * into this many lanes, a lane applies its segments one after another, the lanes side by side.
   * Every other projection is a lane of its own. Without it, every segment is a lane of its own.
   */
  parallel?: number;
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

/**
 * Applies every event up to the current head once, without subscriptions (rebuild, replay,
 * tests). The log is read once for all the context's projections (each applies, on its own
 * connection and in parallel, the events past its own checkpoint), and the next batch is read
 * while this one is applied. A batch that is not full means the head was reached.
 */
export async function catchUp(ctx: CatchUpContext, opts: CatchUpOptions = {}): Promise<CatchUpResult> {
  const batchSize = ctx.batchSize ?? 1000;
  const cursors: Cursor[] = [];
  const result: CatchUpResult = { events: 0, applied: 0, position: START };
  try {
    for (const projection of ctx.projections) {
      const client = await ctx.pool.connect();
      const cursor: Cursor = { projection, client, after: START, broken: false, deferring: false, onError: () => undefined };
      // A connection error surfaces as the failure of the query in flight.
      client.on('error', cursor.onError);
      cursors.push(cursor);
      await ensureCheckpoint(client, ctx.schema, projection.name);
      cursor.after = await readCheckpoint(client, ctx.schema, projection.name);
      cursor.deferring = Boolean(opts.deferred && projection.completeDeferred && comparePositions(cursor.after, START) === 0);
      if (cursor.deferring && projection.beginDeferred) await inSchemaTransaction(ctx, client, () => projection.beginDeferred!(client));
    }
    if (cursors.length === 0) return result;
    const lanes = lanesOf(cursors, ctx.parallel);
    const read = (after: Position) => {
      const batch = ctx.store.readAll({ after, maxCount: batchSize });
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
      const outcomes = await Promise.allSettled(
        lanes.map(async (lane) => {
          for (const cursor of lane) await catchUpCursor(ctx, cursor, events, end);
        }),
      );
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
      if (cursor.deferring) await completeDeferred(ctx, cursor);
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
async function completeDeferred(ctx: CatchUpContext, cursor: Cursor): Promise<void> {
  await inSchemaTransaction(ctx, cursor.client, () => cursor.projection.completeDeferred!(cursor.client));
  cursor.deferring = false;
}

/** Runs `work` in a transaction on the schema being built; work over the whole schema: no statement timeout. */
async function inSchemaTransaction(ctx: CatchUpContext, client: pg.PoolClient, work: () => Promise<void>): Promise<void> {
  await client.query(`BEGIN; SET LOCAL search_path TO ${pg.escapeIdentifier(ctx.schema)}; SET LOCAL synchronous_commit TO off; SET LOCAL statement_timeout TO 0`);
  try {
    await work();
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/**
 * A batch that lost a deadlock or a serialization conflict to another segment applying beside it
 * (rows several segments write, like an organization's counts) rolled back whole: it is applied
 * again, up to this many times, a little later each time.
 */
const CONFLICT_ATTEMPTS = 10;
const CONFLICT_RETRY_MS = 20;

/** One projection's part of a catch-up batch: the events past its checkpoint, up to `end`. */
async function catchUpCursor(ctx: CatchUpContext, cursor: Cursor, events: RecordedEvent[], end: Position): Promise<void> {
  if (comparePositions(end, cursor.after) <= 0) return;
  const after = cursor.after;
  const mine = events.filter((event) => comparePositions(event.position, after) > 0);
  for (let attempt = 1; ; attempt++) {
    try {
      await applyBatch(ctx, cursor.client, cursor.projection, mine, after, end, cursor.deferring);
      cursor.after = end;
      return;
    } catch (error) {
      if (error instanceof CheckpointMovedError) {
        // Someone else applied this batch (a worker on the same schema): go on from theirs.
        cursor.after = await readCheckpoint(cursor.client, ctx.schema, cursor.projection.name);
        return;
      }
      const code = (error as { code?: unknown }).code;
      if ((code !== '40P01' && code !== '40001') || attempt === CONFLICT_ATTEMPTS || ctx.stopping.aborted) throw error;
      ctx.log.debug({ err: error, projection: cursor.projection.name, attempt }, 'catch-up batch lost a conflict with another segment; applying it again');
      await sleep(CONFLICT_RETRY_MS * attempt * (1 + Math.random()), ctx.stopping);
    }
  }
}

/** The cursors in lanes (see `CatchUpContext.parallel`): the segments of a split projection in at most `parallel` lanes, every other cursor alone. */
function lanesOf(cursors: readonly Cursor[], parallel: number | undefined): Cursor[][] {
  const lanes: Cursor[][] = [];
  const byBase = new Map<string, Cursor[][]>();
  for (const cursor of cursors) {
    const segment = parseSegmentName(cursor.projection.name);
    if (!segment || parallel === undefined) {
      lanes.push([cursor]);
      continue;
    }
    let own = byBase.get(segment.base);
    if (!own) byBase.set(segment.base, (own = []));
    const width = Math.max(1, Math.min(parallel, segment.count));
    if (own.length < width) own.push([cursor]);
    else own[segment.index % width]!.push(cursor);
  }
  for (const own of byBase.values()) lanes.push(...own);
  return lanes;
}

function earliest(cursors: readonly Cursor[]): Position {
  return cursors.reduce((min, c) => (comparePositions(c.after, min) < 0 ? c.after : min), cursors[0]!.after);
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('aborted');
}
