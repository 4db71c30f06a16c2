import { randomUUID } from 'node:crypto';
import type { EventCatalogue } from './catalogue.js';
import {
  EVENT_ID_PATTERN,
  EMPTY_APPEND,
  InvalidEventError,
  START,
  WrongExpectedRevisionError,
  comparePositions,
  matchesLogFilter,
  type AppendResult,
  type EventData,
  type EventStore,
  type ExpectedRevision,
  type LogBatch,
  type LogLag,
  type Position,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type StreamAppend,
  type SubscribeOptions,
} from './port.js';


/**
 * The event store port in the memory of one process: what the command handlers' unit tests
 * append to and read from, with no database. It keeps every promise of the port (it runs the
 * conformance suite, test/event-store/in-memory.unit.test.ts), like the Postgres adapter: streams
 * of one append are recorded by stream id, events are validated against the catalogue when given
 * one, payloads are stored as JSON (what a caller changes afterwards does not change the log).
 *
 * Each append is one `commit` (a counter) and each event one `prepare` (its place in the log).
 * Nothing is concurrent inside it, so an append is atomic by construction; `beforeAppend` lets a
 * test run something just before an append is checked, to make another writer win a race there.
 */
export class InMemoryEventStore implements EventStore {
  readonly name = 'in-memory';
  private readonly log: RecordedEvent[] = [];
  private readonly streams = new Map<string, RecordedEvent[]>();
  /** The answer of the append that stored each event id, for repeats. */
  private readonly appendOf = new Map<string, { streamId: string; result: AppendResult }>();
  private readonly lastOfAppend = new Map<bigint, Position>();
  private commits = 0n;
  private waiters: Array<() => void> = [];
  private hooks: Array<(appends: readonly StreamAppend[]) => Promise<void> | void> = [];

  constructor(private readonly options: { catalogue?: EventCatalogue } = {}) {}

  /**
   * Runs `hook` once, before the next append is checked (after the caller decided): whatever it
   * appends lands first, as another writer's would in a lost race.
   */
  beforeNextAppend(hook: (appends: readonly StreamAppend[]) => Promise<void> | void): void {
    this.hooks.push(hook);
  }

  appendToStream(streamId: string, events: EventData[], expectedRevision: ExpectedRevision = 'any'): Promise<AppendResult> {
    return this.appendToStreams([{ streamId, events, expectedRevision }]);
  }

  async appendToStreams(appends: StreamAppend[]): Promise<AppendResult> {
    if (appends.length === 0) throw new Error(EMPTY_APPEND);
    const seenStreams = new Set<string>();
    for (const append of appends) {
      if (seenStreams.has(append.streamId)) throw new Error(`stream ${append.streamId} appears twice in one append`);
      seenStreams.add(append.streamId);
    }
    const validated = appends.map((append): ValidatedAppend => ({ ...append, events: append.events.map((event) => this.validate(event)) }));
    const hooks = this.hooks.splice(0);
    for (const hook of hooks) await hook(appends);
    return this.appendNow(validated);
  }

  private validate(event: EventData): EventData & { id: string } {
    const validated = this.options.catalogue ? this.options.catalogue.validate(event) : event;
    if (validated.id !== undefined && !EVENT_ID_PATTERN.test(validated.id)) throw new InvalidEventError(event.type, `id ${validated.id} is not a UUID`);
    return { ...validated, id: (validated.id ?? randomUUID()).toLowerCase() };
  }

  /** Synchronous from here on: no other append can come in between its checks and its writes. */
  private appendNow(appends: ValidatedAppend[]): AppendResult {
    // A repeat (every event already stored) answers as the first append did.
    const ids = appends.flatMap((a) => a.events.map((e) => e.id));
    if (ids.length > 0 && ids.every((id) => this.appendOf.has(id))) return this.appendOf.get(ids.at(-1)!)!.result;

    for (const append of appends) {
      const actual = this.revisionOf(append.streamId);
      if (!holds(append.expectedRevision, actual)) throw new WrongExpectedRevisionError(append.streamId, append.expectedRevision, actual);
    }

    const commit = ++this.commits;
    const recordedAt = new Date();
    const revisions = new Map<string, bigint>();
    const seen = new Set<string>();
    let position: Position | null = null;
    // Like the Postgres adapter, the streams of one append go to the log in stream id order.
    const sorted = [...appends].sort((a, b) => (a.streamId < b.streamId ? -1 : a.streamId > b.streamId ? 1 : 0));
    for (const append of sorted) {
      const stream = this.streams.get(append.streamId) ?? [];
      for (const event of append.events) {
        // An event stored before, or twice in this call, is stored once.
        if (this.appendOf.has(event.id) || seen.has(event.id)) continue;
        seen.add(event.id);
        position = { commit, prepare: BigInt(this.log.length + 1) };
        const recorded: RecordedEvent = {
          id: event.id,
          type: event.type,
          data: json(event.data),
          metadata: json(event.metadata ?? {}),
          streamId: append.streamId,
          revision: BigInt(stream.length),
          position,
          recordedAt,
        };
        stream.push(recorded);
        this.log.push(recorded);
      }
      if (stream.length > 0) {
        this.streams.set(append.streamId, stream);
        revisions.set(append.streamId, BigInt(stream.length - 1));
      }
    }
    const result: AppendResult = { revisions, position: position ?? this.headNow() };
    if (position) {
      this.lastOfAppend.set(commit, position);
      for (const append of appends) for (const event of append.events) if (seen.has(event.id)) this.appendOf.set(event.id, { streamId: append.streamId, result });
      const waiters = this.waiters.splice(0);
      for (const wake of waiters) wake();
    }
    return result;
  }

  private revisionOf(streamId: string): bigint | 'no_stream' {
    const stream = this.streams.get(streamId);
    return stream && stream.length > 0 ? BigInt(stream.length - 1) : 'no_stream';
  }

  private headNow(): Position {
    return this.log.at(-1)?.position ?? START;
  }

  async readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    const stream = this.streams.get(streamId) ?? [];
    const max = options.maxCount ?? Number.MAX_SAFE_INTEGER;
    if (options.direction === 'backwards') {
      const from = options.fromRevision ?? BigInt(stream.length - 1);
      return stream.filter((e) => e.revision <= from).reverse().slice(0, max);
    }
    const from = options.fromRevision ?? 0n;
    return stream.filter((e) => e.revision >= from).slice(0, max);
  }

  async readStreams(streamIds: readonly string[]): Promise<Map<string, RecordedEvent[]>> {
    const byStream = new Map<string, RecordedEvent[]>();
    for (const streamId of streamIds) {
      const stream = this.streams.get(streamId);
      if (stream && stream.length > 0) byStream.set(streamId, [...stream]);
    }
    return byStream;
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    return this.after(options.after ?? START).slice(0, options.maxCount ?? 1000);
  }

  /** The events of the log after `position`. */
  private after(position: Position): RecordedEvent[] {
    // Positions are the log's places (prepare counts from 1), so the index is at hand.
    let index = Math.min(Number(position.prepare), this.log.length);
    while (index > 0 && comparePositions(this.log[index - 1]!.position, position) > 0) index--;
    while (index < this.log.length && comparePositions(this.log[index]!.position, position) <= 0) index++;
    return this.log.slice(index);
  }

  async *subscribeToAll(options: SubscribeOptions = {}): AsyncIterable<LogBatch> {
    const signal = options.signal;
    const maxCount = options.maxCount ?? 1000;
    let position = options.after ?? START;
    while (!signal?.aborted) {
      const later = this.after(position);
      if (later.length === 0) {
        await this.nextAppend(signal);
        continue;
      }
      const events: RecordedEvent[] = [];
      let read = position;
      for (const event of later) {
        if (events.length === maxCount) break;
        read = event.position;
        if (matchesLogFilter(options.filter, event)) events.push(event);
      }
      position = read;
      yield { events, position };
    }
  }

  /** Resolves at the next append, or when `signal` aborts. */
  private nextAppend(signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        signal?.removeEventListener('abort', wake);
        this.waiters = this.waiters.filter((w) => w !== wake);
        resolve();
      };
      this.waiters.push(wake);
      signal?.addEventListener('abort', wake, { once: true });
    });
  }

  async headPosition(): Promise<Position> {
    return this.headNow();
  }

  async endOfAppend(position: Position): Promise<Position> {
    return this.lastOfAppend.get(position.commit) ?? position;
  }

  async lagAfter(after: Position, options: { countLimit?: number } = {}): Promise<LogLag> {
    const later = this.after(after);
    const limit = options.countLimit ?? Number.MAX_SAFE_INTEGER;
    return { events: Math.min(later.length, limit), capped: later.length > limit, oldestRecordedAt: later[0]?.recordedAt ?? null };
  }

  async close(): Promise<void> {
    const waiters = this.waiters.splice(0);
    for (const wake of waiters) wake();
  }
}

type ValidatedAppend = Omit<StreamAppend, 'events'> & { events: Array<EventData & { id: string }> };

function holds(expected: ExpectedRevision, actual: bigint | 'no_stream'): boolean {
  if (expected === 'any') return true;
  if (expected === 'no_stream') return actual === 'no_stream';
  if (expected === 'stream_exists') return actual !== 'no_stream';
  return actual === expected;
}

function json<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}
