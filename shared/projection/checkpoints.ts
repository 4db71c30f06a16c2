import { EventEmitter } from 'node:events';
import pg from 'pg';
import {
  START,
  comparePositions,
  formatPosition,
  parsePosition,
  type Position,
} from '../event-store/port.js';
import { NotificationListener } from '../db/listener.js';
import { TransientFailure } from '../errors.js';
import type { Projection } from './projection.js';
import { parseSegmentName, segmentName } from './segments.js';
import { ProjectionSetAsideError, SET_ASIDE_CHANNEL, parseSetAsidePayload } from './set-aside.js';

export const CHECKPOINT_CHANNEL = 'projection_checkpoint';

export class CheckpointTimeoutError extends TransientFailure {
  constructor(position: Position, lagging: string[]) {
    super(`projections ${lagging.join(', ')} did not reach ${formatPosition(position)} in time`);
    this.name = 'CheckpointTimeoutError';
  }
}

/**
 * Checkpoints are stored as the text of a position (`formatPosition`): opaque to the read model,
 * whichever event-store adapter wrote the positions.
 */
export async function readCheckpoint(client: pg.ClientBase | pg.Pool, schema: string, name: string): Promise<Position> {
  const result = await client.query<{ position: string }>(
    `SELECT position FROM ${pg.escapeIdentifier(schema)}.projection_checkpoints WHERE name = $1`,
    [name],
  );
  const row = result.rows[0];
  return row ? parsePosition(row.position) : START;
}

/** Creates the projection's checkpoint row at the start of the log if it has none. */
export async function ensureCheckpoint(client: pg.ClientBase, schema: string, name: string): Promise<void> {
  await client.query(
    `INSERT INTO ${pg.escapeIdentifier(schema)}.projection_checkpoints (name, position)
     VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`,
    [name, formatPosition(START)],
  );
}

/** Streams a command appended to, each with the projections that read its events there. */
export interface AppendedStream {
  streamId: string;
  projections: readonly string[];
}

/**
 * Knows how far each projection of the current read model has got, and which streams each has set
 * aside, in this process and in others, and lets a command wait until its own events are visible
 * (`waitForCheckpoint`), or learn at once that they will not be.
 */
export class CheckpointWatcher {
  private readonly known = new Map<string, Position>();
  /** Positions of the segments of split projections, by segment name. */
  private readonly segments = new Map<string, Position>();
  /** Per projection, its set-aside streams and the position of the event that failed in each. */
  private readonly setAside = new Map<string, Map<string, Position>>();
  private readonly changed = new EventEmitter();
  private readonly listener: NotificationListener;
  private pollTimer: NodeJS.Timeout | null = null;
  private waiting = 0;
  private stopped = false;
  private readonly projections: readonly string[];
  private readonly consumersByType = new Map<string, string[]>();

  /** `projections`: names, or the projections themselves (then `consumersOf` knows who reads what). */
  constructor(
    private readonly pool: pg.Pool,
    connectionString: string,
    projections: readonly (string | Pick<Projection, 'name' | 'eventTypes'>)[],
    private readonly schema = 'read_model',
    private readonly pollIntervalMs = 50,
  ) {
    this.changed.setMaxListeners(0);
    this.listener = new NotificationListener({
      connectionString,
      // One connection for both channels: a batch's set-aside notifications arrive before its
      // checkpoint's, so a waiter never passes a checkpoint without knowing what it set aside.
      channels: [SET_ASIDE_CHANNEL, CHECKPOINT_CHANNEL],
      onNotification: (message) => {
        if (message.channel === SET_ASIDE_CHANNEL) {
          // Stryker disable next-line StringLiteral: equivalent; pg always hands over a notification's payload as a string ('' when none), the fallback is for the type only
          const change = parseSetAsidePayload(message.payload ?? '');
          if (change?.schema === this.schema) this.setAsideChanged(change.projection, change.streamId, change.position);
          return;
        }
        // Stryker disable next-line StringLiteral: equivalent; pg always hands over a notification's payload as a string ('' when none), the fallback is for the type only
        const [schema, name, position] = (message.payload ?? '').split(' ');
        if (schema === this.schema && name && position) this.advance(name, parsePosition(position));
      },
      // Notifications may have been missed while (re)connecting: read everything again.
      onListening: () => this.refresh(true).catch(() => undefined),
    });
    this.projections = projections.map((p) => (typeof p === 'string' ? p : p.name));
    for (const p of projections) {
      if (typeof p === 'string') continue;
      for (const type of p.eventTypes) this.consumersByType.set(type, [...(this.consumersByType.get(type) ?? []), p.name]);
    }
  }

  /**
   * Names of the projections that read any of these event types: the ones a command must wait for
   * before its own events are visible. Projections that ignore them have nothing of the command's to
   * show.
   */
  consumersOf(eventTypes: Iterable<string>): string[] {
    const names = new Set<string>();
    for (const type of eventTypes) for (const name of this.consumersByType.get(type) ?? []) names.add(name);
    return [...names];
  }

  async start(): Promise<void> {
    // Stryker disable next-line BooleanLiteral: equivalent; nothing is known before start (every caller starts its watcher before using it), and the listener's first onListening, awaited before start resolves, reads everything again in full
    await this.refresh(true);
    await this.listener.start();
  }

  /**
   * Called by an in-process projector right after it commits a batch. A segment's checkpoint
   * (docs/design.md "Segmented processors") moves its projection to the least of its segments'.
   */
  advance(name: string, position: Position): void {
    const segment = parseSegmentName(name);
    if (segment) {
      this.advanceSegment(name, segment, position);
      return;
    }
    const current = this.known.get(name) ?? START;
    // Stryker disable next-line EqualityOperator: announcing an unchanged position again only makes waiters check again
    if (comparePositions(position, current) > 0) {
      this.known.set(name, position);
      this.changed.emit('change');
    }
  }

  private advanceSegment(name: string, segment: { base: string; count: number }, position: Position): void {
    const current = this.segments.get(name) ?? START;
    if (comparePositions(position, current) <= 0) return;
    this.segments.set(name, position);
    let least: Position | null = null;
    for (let index = 0; index < segment.count; index++) {
      const at = this.segments.get(segmentName(segment.base, index, segment.count));
      if (!at) return;
      if (!least || comparePositions(at, least) < 0) least = at;
    }
    this.advance(segment.base, least!);
  }

  /**
   * A projection set a stream aside at `position` (the failed event), or, with null, applied it
   * again (`projections retry`). Called by an in-process projector before it announces the
   * batch's checkpoint, and on every SET_ASIDE_CHANNEL notification.
   */
  setAsideChanged(segmentOrName: string, streamId: string, position: Position | null): void {
    // A segment's set-aside stream counts as its projection's.
    const name = parseSegmentName(segmentOrName)?.base ?? segmentOrName;
    let streams = this.setAside.get(name);
    if (position) {
      if (!streams) this.setAside.set(name, (streams = new Map()));
      streams.set(streamId, position);
    } else streams?.delete(streamId);
    // Stryker disable next-line StringLiteral: equivalent; a waiter settles only once its projections have passed its position, which only advance changes (and announces): a set-aside change alone settles none
    this.changed.emit('change');
  }

  position(name: string): Position {
    return this.known.get(name) ?? START;
  }

  /** Where `name` set `streamId` aside (its failed event), or null. */
  setAsideAt(name: string, streamId: string): Position | null {
    return this.setAside.get(name)?.get(streamId) ?? null;
  }

  /**
   * Resolves once every required projection has applied everything up to `position`. With
   * `streams` (those the append at `position` wrote), rejects with ProjectionSetAsideError once
   * those projections have passed it but one of them set one of these streams aside at or before
   * it: the command's own event failed, or waits behind an earlier one that did.
   */
  async waitForCheckpoint(
    position: Position,
    options: { timeoutMs?: number; projections?: readonly string[]; streams?: readonly AppendedStream[] } = {},
  ): Promise<void> {
    const names = options.projections ?? this.projections;
    const lagging = () => names.filter((n) => comparePositions(this.position(n), position) < 0);
    const setAside = (): ProjectionSetAsideError | null => {
      for (const stream of options.streams ?? []) {
        for (const name of stream.projections) {
          const at = this.setAsideAt(name, stream.streamId);
          if (at && comparePositions(at, position) <= 0) return new ProjectionSetAsideError(name, stream.streamId, at);
        }
      }
      return null;
    };
    // Stryker disable next-line ConditionalExpression,BlockStatement: without it (or with its block emptied) the promise's first check settles at once the same way, and the poll timer it starts stops unused
    if (lagging().length === 0) {
      const failed = setAside();
      if (failed) throw failed;
      return;
    }
    const timeoutMs = options.timeoutMs ?? 10_000;
    this.waiting++;
    this.ensurePolling();
    try {
      await new Promise<void>((resolve, reject) => {
        const check = () => {
          if (lagging().length === 0) finish(setAside() ?? undefined);
        };
        const timer = setTimeout(() => finish(new CheckpointTimeoutError(position, lagging())), timeoutMs);
        const finish = (error?: Error) => {
          clearTimeout(timer);
          this.changed.off('change', check);
          if (error) reject(error);
          else resolve();
        };
        this.changed.on('change', check);
        check();
      });
    } finally {
      this.waiting--;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    // Stryker disable next-line ConditionalExpression: clearInterval(null) does nothing
    if (this.pollTimer) clearInterval(this.pollTimer);
    this.pollTimer = null;
    await this.listener.stop();
  }

  private ensurePolling(): void {
    // Polling backs up the notifications (a listener reconnecting can miss some).
    if (this.pollTimer || this.stopped) return;
    this.pollTimer = setInterval(() => {
      if (this.waiting === 0) {
        clearInterval(this.pollTimer!);
        this.pollTimer = null;
        return;
      }
      void this.refresh().catch(() => undefined);
    }, this.pollIntervalMs);
    this.pollTimer.unref();
  }

  /**
   * Reads the checkpoints and the set-aside streams in one statement (one snapshot), set-asides
   * first. A poll only adds set-asides: a notification that arrived while it ran may be newer than
   * its snapshot, and a stream recovers by notification. `full` (at start and after a reconnect,
   * when notifications may have been missed) replaces them.
   */
  private async refresh(full = false): Promise<void> {
    const s = pg.escapeIdentifier(this.schema);
    const result = await this.pool.query<{ name: string; position: string; stream_id: string | null }>(
      `SELECT projection AS name, position, stream_id FROM ${s}.projection_set_aside
       UNION ALL SELECT name, position, NULL FROM ${s}.projection_checkpoints`,
    );
    if (full) this.setAside.clear();
    for (const row of result.rows) {
      if (row.stream_id === null) continue;
      const name = parseSegmentName(row.name)?.base ?? row.name;
      let streams = this.setAside.get(name);
      if (!streams) this.setAside.set(name, (streams = new Map()));
      streams.set(row.stream_id, parsePosition(row.position));
    }
    for (const row of result.rows) if (row.stream_id === null) this.advance(row.name, parsePosition(row.position));
  }
}

/**
 * The statement that moves a checkpoint from `from` to `to` and tells every process (NOTIFY is
 * delivered at commit). It changes nothing when the checkpoint is no longer at `from`: whoever
 * moved it first wins, and the caller rolls back. Every interpolated value is an escaped literal,
 * so it can run in a multi-statement simple query.
 */
function moveCheckpointSql(schema: string, name: string, from: Position, to: Position, epoch?: number): string {
  // Fenced (docs/design.md "Segmented processors"): only while the lease is still at `epoch`, its row locked against a claim until commit.
  const fenced =
    epoch === undefined
      ? ''
      : ` AND EXISTS (SELECT 1 FROM ${pg.escapeIdentifier(schema)}.projection_leases
                       WHERE name = ${pg.escapeLiteral(name)} AND epoch = ${Number(epoch)} FOR SHARE)`;
  return `WITH moved AS (
      UPDATE ${pg.escapeIdentifier(schema)}.projection_checkpoints
         SET position = ${pg.escapeLiteral(formatPosition(to))}, updated_at = now()
       WHERE name = ${pg.escapeLiteral(name)} AND position = ${pg.escapeLiteral(formatPosition(from))}${fenced}
       RETURNING 1)
    SELECT pg_notify('${CHECKPOINT_CHANNEL}', ${pg.escapeLiteral(notifyPayload(schema, name, to))}) FROM moved`;
}

/** What NOTIFY on CHECKPOINT_CHANNEL carries: watchers of `schema` advance `name` to `position`. */
export function notifyPayload(schema: string, name: string, position: Position): string {
  return `${schema} ${name} ${formatPosition(position)}`;
}

/** SQLSTATE of move_projection_checkpoint when the checkpoint is no longer where the batch began. */
export const CHECKPOINT_MOVED_SQLSTATE = 'PC001';

/** SQLSTATE of the fenced move_projection_checkpoint when the segment's lease has a newer epoch (migration 006). */
export const LEASE_LOST_SQLSTATE = 'PC002';

/**
 * Ends the batch's own transaction: moves the checkpoint and commits, in one round trip (a
 * multi-statement simple query). When the checkpoint is no longer at `from`, the call raises
 * CHECKPOINT_MOVED_SQLSTATE and the COMMIT is skipped: the caller rolls back.
 */
export async function moveCheckpointAndCommit(client: pg.ClientBase, schema: string, name: string, from: Position, to: Position, epoch?: number): Promise<void> {
  // With a lease `epoch` (a follower's batch), the fenced move: raises LEASE_LOST_SQLSTATE once another process claimed the segment.
  const fence = epoch === undefined ? '' : `, ${Number(epoch)}`;
  await client.query(
    `SELECT ${pg.escapeIdentifier(schema)}.move_projection_checkpoint(${pg.escapeLiteral(name)},
       ${pg.escapeLiteral(formatPosition(from))}, ${pg.escapeLiteral(formatPosition(to))},
       '${CHECKPOINT_CHANNEL}', ${pg.escapeLiteral(notifyPayload(schema, name, to))}${fence}); COMMIT`,
  );
}

/**
 * For a batch that holds none of the projection's events: the move alone, in its own
 * transaction, in one round trip, without waiting for fsync (a lost move only means those events
 * are looked at again).
 */
export async function advanceCheckpoint(client: pg.ClientBase, schema: string, name: string, from: Position, to: Position, epoch?: number): Promise<boolean> {
  const results = (await client.query(
    `BEGIN; SET LOCAL synchronous_commit TO off; ${moveCheckpointSql(schema, name, from, to, epoch)}; COMMIT;`,
  )) as unknown as pg.QueryResult[];
  // Stryker disable next-line OptionalChaining: the four statements always give four results
  return (results[2]?.rowCount ?? 0) > 0;
}
