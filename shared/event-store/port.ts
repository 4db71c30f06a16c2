import { TransientFailure } from '../errors.js';

/**
 * The event store port. Three adapters implement it (Postgres, KurrentDB, and one in memory for
 * the command handlers' unit tests); all run the same conformance suite in
 * `test/event-store/conformance.ts`, which checks exactly the promises below and nothing more. The service relies on nothing beyond them.
 *
 * What every adapter guarantees:
 * - **Atomicity.** `appendToStreams` writes every event of every stream, or none: when any
 *   stream's expected revision does not hold, nothing is written (`WrongExpectedRevisionError`).
 *   The KurrentDB adapter needs a server with atomic multi-stream appends (KurrentDB 25.1 or later)
 *   and refuses to start against an older one. A stream given with no events is only checked; the
 *   KurrentDB adapter checks it with a read before the write, so in a call that also writes other
 *   streams its check is not atomic with their writes (no command makes such a call).
 * - **Order.** Within one stream, events keep the caller's order and revisions count up from 0.
 *   Within one append, the relative order of *different* streams in the global log is the
 *   adapter's (the Postgres adapter records them by stream id): to cover a whole append, wait for
 *   `endOfAppend`, never for the last event of one of its streams.
 * - **The global log** is read in one total order, without gaps: a reader never passes a position
 *   behind which an event can still appear (transactions that commit late are accounted for).
 * - **Idempotency** is per stream: appending events whose ids are already the last events of that
 *   stream (a retried append) stores them once and answers as the first append did. Callers must
 *   not rely on more (the Postgres adapter is stronger, by event id across the whole log; KurrentDB's
 *   is per stream and best effort), so consumers that must count a delivery once (scans) dedupe in
 *   their read models too.
 * - **Positions** are totally ordered (`comparePositions`); their text form (`formatPosition`) is
 *   what read models store as checkpoints, opaque to them.
 * - **Filtered subscriptions** deliver only the events their `LogFilter` matches (the KurrentDB
 *   adapter filters on the server, so a subscriber never receives what it would ignore), and still
 *   report how far they have read the log: every batch carries a `position`, and batches with no
 *   events move it past the events the filter left out, so a checkpoint stored from it passes them.
 */

/**
 * A place in the global log. Like KurrentDB's, it has two parts: `commit` orders transactions
 * (the Postgres adapter uses the transaction id), `prepare` orders events inside one.
 * Compare with `comparePositions`, never by a single part.
 */
export interface Position {
  commit: bigint;
  prepare: bigint;
}

export const START: Position = Object.freeze({ commit: 0n, prepare: 0n });

/** What `appendToStreams` throws for an append that names no stream (a caller's mistake). */
export const EMPTY_APPEND = 'an append names at least one stream';

/** An event id a caller may choose: a UUID (every adapter refuses anything else). */
export const EVENT_ID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function comparePositions(a: Position, b: Position): number {
  if (a.commit !== b.commit) return a.commit < b.commit ? -1 : 1;
  if (a.prepare !== b.prepare) return a.prepare < b.prepare ? -1 : 1;
  return 0;
}

export function formatPosition(p: Position): string {
  return `${p.commit}/${p.prepare}`;
}

export function parsePosition(text: string): Position {
  const match = /^(\d+)\/(\d+)$/.exec(text);
  if (!match) throw new Error(`not a position: ${text}`);
  return { commit: BigInt(match[1]!), prepare: BigInt(match[2]!) };
}

/**
 * What the stream must look like for an append to go through:
 * `any`, `no_stream` (it must not exist), `stream_exists`, or the exact revision of its last event
 * (revisions start at 0).
 */
export type ExpectedRevision = 'any' | 'no_stream' | 'stream_exists' | bigint;

export type JsonObject = { [key: string]: unknown };

export interface EventData {
  /** UUID. Appends are idempotent by id: the same id twice is stored once. Random when absent. */
  id?: string;
  type: string;
  data: JsonObject;
  metadata?: JsonObject;
}

export interface RecordedEvent {
  id: string;
  type: string;
  data: JsonObject;
  metadata: JsonObject;
  streamId: string;
  revision: bigint;
  position: Position;
  recordedAt: Date;
}

export interface StreamAppend {
  streamId: string;
  events: EventData[];
  expectedRevision: ExpectedRevision;
}

export interface AppendResult {
  /** Revision of the last event of each stream after the append, by stream id. */
  revisions: Map<string, bigint>;
  /** Position of the last event written (or, for a fully duplicate append, of the last stored original). */
  position: Position;
}

export interface LogLag {
  events: number;
  /** `events` stopped at the count limit: there are more. */
  capped: boolean;
  /**
   * `events` is an estimate, not a count (the KurrentDB adapter counts a few thousand events and
   * estimates the rest from the log's byte positions). Absent when it is exact.
   */
  approximate?: true;
  oldestRecordedAt: Date | null;
}

export interface ReadStreamOptions {
  direction?: 'forwards' | 'backwards';
  /** Inclusive. Default: the start (forwards) or the end (backwards). */
  fromRevision?: bigint;
  maxCount?: number;
}

export interface ReadAllOptions {
  /** Exclusive: events strictly after this position. Default: the start. */
  after?: Position;
  maxCount?: number;
}

/**
 * The events a subscription delivers: those of one of these types, or of a stream whose id starts
 * with one of these prefixes.
 */
export type LogFilter = { eventTypes: readonly string[] } | { streamPrefixes: readonly string[] };

export function matchesLogFilter(filter: LogFilter | undefined, event: Pick<RecordedEvent, 'type' | 'streamId'>): boolean {
  if (!filter) return true;
  if ('eventTypes' in filter) return filter.eventTypes.includes(event.type);
  return filter.streamPrefixes.some((prefix) => event.streamId.startsWith(prefix));
}

export interface SubscribeOptions extends ReadAllOptions {
  signal?: AbortSignal;
  /** Only the events it matches are delivered; `position` still moves past the others. */
  filter?: LogFilter;
}

/** What a subscription delivers at a time. */
export interface LogBatch {
  /** In log order, at most `maxCount`; with a filter, only matching events, and possibly none. */
  events: RecordedEvent[];
  /**
   * How far the log has been read: the last event's position, or later with a filter (the events
   * in between did not match). Resuming after it misses nothing and repeats nothing.
   */
  position: Position;
}

export interface EventStore {
  readonly name: string;
  appendToStream(streamId: string, events: EventData[], expectedRevision?: ExpectedRevision): Promise<AppendResult>;
  /** Atomic: every stream's expectation holds and every event is written, or nothing is. */
  appendToStreams(appends: StreamAppend[]): Promise<AppendResult>;
  readStream(streamId: string, options?: ReadStreamOptions): Promise<RecordedEvent[]>;
  /**
   * Every event of each of these streams, by stream id, in stream order, as `readStream` reads
   * one (a stream with no events is absent): one round trip where the adapter can (Postgres), for
   * a caller that decides many commands at once (an import's batch of rows).
   */
  readStreams(streamIds: readonly string[]): Promise<Map<string, RecordedEvent[]>>;
  /** The global log in order, from a position, one batch. */
  readAll(options?: ReadAllOptions): Promise<RecordedEvent[]>;
  /**
   * Catches up, then follows the log's head: yields batches in log order, without gaps or
   * duplicates, until aborted. Each batch moves `position` forward.
   */
  subscribeToAll(options?: SubscribeOptions): AsyncIterable<LogBatch>;
  /** Position of the last event readers can see, or START for an empty log. */
  headPosition(): Promise<Position>;
  /**
   * The position of the last event of the append that wrote the event at `position`: once a
   * checkpoint has passed it, every event of that append has been applied, whatever the order of
   * its streams in the log.
   */
  endOfAppend(position: Position): Promise<Position>;
  /**
   * How far the log readers can see runs past `after`: the number of events (counted up to
   * `countLimit`, default unlimited; `capped` when there are more) and when the first of them was
   * recorded (null when there is none). Lag of a projection, for status and readiness.
   */
  lagAfter(after: Position, options?: { countLimit?: number }): Promise<LogLag>;
  close(): Promise<void>;
}

export class WrongExpectedRevisionError extends Error {
  constructor(
    readonly streamId: string,
    readonly expected: ExpectedRevision,
    readonly actual: bigint | 'no_stream',
  ) {
    super(`Wrong expected revision on stream ${streamId}: expected ${String(expected)}, actual ${String(actual)}`);
    this.name = 'WrongExpectedRevisionError';
  }
}

export class InvalidEventError extends Error {
  constructor(
    readonly eventType: string,
    readonly reason: string,
  ) {
    super(`Invalid event ${eventType}: ${reason}`);
    this.name = 'InvalidEventError';
  }
}

export class EventStoreUnavailableError extends TransientFailure {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'EventStoreUnavailableError';
  }
}
