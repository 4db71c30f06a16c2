import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import {
  BACKWARDS,
  END,
  FORWARDS,
  KurrentDBClient,
  START as CLIENT_START,
  StreamNotFoundError,
  excludeSystemEvents,
  type AllStreamResolvedEvent,
  type AllStreamSubscription,
  type Filter,
  type JSONEventData,
  type ResolvedEvent,
} from '@kurrent/kurrentdb-client';
import type { EventCatalogue } from './catalogue.js';
import {
  checkServerVersion,
  isSystemEvent,
  laterOf,
  satisfies,
  serverFilter,
  toActualRevision,
  toClientEvent,
  toClientPosition,
  toRecordedEvent,
  toStreamState,
  translateError,
  type ServerVersion,
} from './kurrentdb-translation.js';
import {
  EVENT_ID_PATTERN,
  EventStoreUnavailableError,
  InvalidEventError,
  START,
  WrongExpectedRevisionError,
  comparePositions,
  matchesLogFilter,
  type AppendResult,
  EMPTY_APPEND,
  type EventData,
  type EventStore,
  type ExpectedRevision,
  type LogBatch,
  type LogFilter,
  type LogLag,
  type Position,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type StreamAppend,
  type SubscribeOptions,
} from './port.js';

/** `lagAfter` counts this many events exactly (it reads them); past them it estimates. */
const LAG_EXACT_COUNT = 2_000;
/** A subscription stops taking events from the server while this many batches wait for its consumer. */
const QUEUED_BATCHES = 4;

export interface KurrentDbEventStoreOptions {
  /** Validates every event at append. */
  catalogue?: EventCatalogue;
  /**
   * How soon a filtered subscription that has received nothing asks the log how far it may move
   * past the events its filter left out (doubling, while the log does not grow, up to
   * `progressMaxIntervalMs`). Appends of this store ask at once.
   */
  progressIntervalMs?: number;
  progressMaxIntervalMs?: number;
}

/**
 * Connects to KurrentDB at `connectionString` and checks that the server can do what the port
 * promises (atomic multi-stream appends: KurrentDB 25.1 or later). Throws InvalidConnectionStringError,
 * UnsupportedServerError (from `kurrentdb-translation.ts`) or EventStoreUnavailableError.
 */
export async function openKurrentDbEventStore(connectionString: string, options: KurrentDbEventStoreOptions = {}): Promise<KurrentDbEventStore> {
  let client: KurrentDBClient;
  try {
    client = clientOf(connectionString);
  } catch (error) {
    throw new InvalidConnectionStringError(error);
  }
  try {
    const version = checkServerVersion(await reportedServerVersion(client));
    return new KurrentDbEventStore(client, version, options);
  } catch (error) {
    await client.dispose().catch(() => undefined);
    throw translateError(error, { operation: 'connect' });
  }
}

/**
 * The client of a connection string. Of an option it does not know, the client warns on the
 * console quoting the whole string under it, password included: its warnings while it parses
 * (synchronously, so no other code's warning can fall in between) keep their first line only.
 */
function clientOf(connectionString: string): KurrentDBClient {
  const warn = console.warn;
  console.warn = (...parts: unknown[]) => warn(parts.map(String).join(' ').split('\n')[0]);
  try {
    return KurrentDBClient.connectionString(connectionString);
  } finally {
    console.warn = warn;
  }
}

/**
 * The client refused the connection string. The message says where and what was expected, and
 * never quotes the string (it may hold a password).
 */
export class InvalidConnectionStringError extends Error {
  constructor(cause: unknown) {
    const { location, expected } = (cause ?? {}) as { location?: unknown; expected?: unknown };
    const where = Array.isArray(location) && typeof location[0] === 'number' && typeof expected === 'string' ? ` (at character ${location[0] + 1}: expected ${expected})` : '';
    super(`not a connection string the KurrentDB client accepts${where}`);
    this.name = 'InvalidConnectionStringError';
  }
}

/**
 * The version the server reports with its features (`ServerFeatures.GetSupportedMethods`). The
 * client fetches and caches them for itself (it checks `multiStreamAppend` against them) but
 * keeps them protected; this reads the same cached answer.
 */
async function reportedServerVersion(client: KurrentDBClient): Promise<string> {
  const features = (client as unknown as { capabilities?: PromiseLike<{ serverVersion?: unknown }> }).capabilities;
  if (!features || typeof features.then !== 'function') throw new Error('this KurrentDB client does not expose the server version');
  const { serverVersion } = await features;
  return typeof serverVersion === 'string' ? serverVersion : 'unknown';
}

/** One stream of an append, validated, in the client's form. */
interface PreparedAppend {
  streamId: string;
  expectedRevision: ExpectedRevision;
  events: JSONEventData[];
}

/**
 * The event store on KurrentDB (`EVENT_STORE=kurrentdb`), through the official gRPC client.
 *
 * - One stream is appended with the client's `appendToStream` (the server's idempotency by event
 *   id: assured for an exact expectation, best effort for `any`), several with `multiStreamAppend`
 *   (atomic, KurrentDB 25.1). A refused expectation is first checked for a repeat of an append
 *   already stored (same event ids at the end of every stream), which answers as the first did.
 * - Positions are the server's commit/prepare positions: every event of one append shares its
 *   commit position (the transaction's), which is what `endOfAppend` reads.
 * - Reads and subscriptions of the global log leave out the server's own events (`$` types), on
 *   the server. Subscriptions filter on the server too; see `subscribeToAll` for how they still
 *   move past what they do not deliver.
 * - Reads go to the leader, so that a read after an append sees it.
 */
export class KurrentDbEventStore implements EventStore {
  readonly name = 'kurrentdb';
  private readonly appended = new EventEmitter();
  private closed = false;

  constructor(
    private readonly client: KurrentDBClient,
    /** What the server reported at connection. */
    readonly serverVersion: ServerVersion,
    private readonly options: KurrentDbEventStoreOptions = {},
  ) {
    this.appended.setMaxListeners(0);
  }

  appendToStream(streamId: string, events: EventData[], expectedRevision: ExpectedRevision = 'any'): Promise<AppendResult> {
    return this.appendToStreams([{ streamId, events, expectedRevision }]);
  }

  async appendToStreams(appends: StreamAppend[]): Promise<AppendResult> {
    if (appends.length === 0) throw new Error(EMPTY_APPEND);
    const { streams, callerIds } = this.prepare(appends);
    const expected = new Map(streams.map((s) => [s.streamId, s.expectedRevision]));
    const writes = streams.filter((s) => s.events.length > 0);
    const revisions = new Map<string, bigint>();
    // A stream with no events only has its expectation checked. KurrentDB 25.1 cannot check a
    // stream it does not write, so this reads it first: atomic for an append of that stream alone,
    // but not with the other streams of the same call: a membership change checks its asker's
    // stream so (shared/domain/people/commands.ts); here two such changes a round trip apart can
    // both pass, where the Postgres store holds the checked stream until its commit.
    for (const check of streams.filter((s) => s.events.length === 0)) {
      const current = await this.currentRevision(check.streamId);
      if (!satisfies(check.expectedRevision, current)) throw new WrongExpectedRevisionError(check.streamId, check.expectedRevision, current);
      if (current !== 'no_stream') revisions.set(check.streamId, current);
    }
    if (writes.length === 0) return { revisions, position: START };
    try {
      if (writes.length === 1) {
        const [write] = writes as [PreparedAppend];
        const result = await this.client.appendToStream(write.streamId, write.events, {
          streamState: toStreamState(write.expectedRevision),
          requiresLeader: true,
        });
        revisions.set(write.streamId, result.nextExpectedRevision);
      } else {
        const result = await this.client.multiStreamAppend(
          writes.map((w) => ({ streamName: w.streamId, events: w.events, expectedState: toStreamState(w.expectedRevision) })),
        );
        for (const { streamName, revision } of result.responses) revisions.set(streamName, revision);
      }
    } catch (caught) {
      const error = translateError(caught, { operation: 'append', expected });
      if (error instanceof WrongExpectedRevisionError && callerIds) {
        const repeat = await this.storedRepeat(writes);
        if (repeat) {
          for (const [streamId, revision] of repeat.revisions) revisions.set(streamId, revision);
          return { revisions, position: repeat.position };
        }
      }
      throw error;
    }
    this.appended.emit('append');
    // The server answers with the transaction's position, not that of its last event: read the
    // last event of each stream written (at the revision the append gave it).
    const last = await Promise.all(
      writes.map((w) => {
        const revision = revisions.get(w.streamId);
        if (revision === undefined) throw new Error(`KurrentDB confirmed an append without the revision of stream ${w.streamId}`);
        return this.eventAt(w.streamId, revision);
      }),
    );
    return { revisions, position: last.reduce((p, e) => laterOf(p, e.position), START) };
  }

  /** Validates, assigns ids, and drops an id repeated within the call (the same event: stored once). */
  private prepare(appends: StreamAppend[]): { streams: PreparedAppend[]; callerIds: boolean } {
    const seenStreams = new Set<string>();
    const seenIds = new Set<string>();
    let callerIds = true;
    let count = 0;
    const streams = appends.map((append) => {
      if (seenStreams.has(append.streamId)) throw new Error(`stream ${append.streamId} appears twice in one append`);
      seenStreams.add(append.streamId);
      const events: JSONEventData[] = [];
      for (const event of append.events) {
        const validated = this.options.catalogue ? this.options.catalogue.validate(event) : event;
        if (validated.id !== undefined && !EVENT_ID_PATTERN.test(validated.id)) throw new InvalidEventError(event.type, `id ${validated.id} is not a UUID`);
        if (validated.id === undefined) callerIds = false;
        const id = (validated.id ?? randomUUID()).toLowerCase();
        if (seenIds.has(id)) continue;
        seenIds.add(id);
        count++;
        events.push(toClientEvent({ ...validated, id }));
      }
      return { streamId: append.streamId, expectedRevision: append.expectedRevision, events };
    });
    return { streams, callerIds: callerIds && count > 0 };
  }

  /**
   * Whether the append was stored already (a retry, or concurrent copies of one append): every
   * stream ends with exactly its event ids. Then the answer the first append had.
   */
  private async storedRepeat(writes: PreparedAppend[]): Promise<AppendResult | null> {
    const tails = await Promise.all(
      writes.map(async (w) => ({ write: w, tail: (await this.readStream(w.streamId, { direction: 'backwards', maxCount: w.events.length })).reverse() })),
    );
    const revisions = new Map<string, bigint>();
    let position = START;
    for (const { write, tail } of tails) {
      if (tail.length !== write.events.length || tail.some((e, i) => e.id !== write.events[i]!.id)) return null;
      const last = tail[tail.length - 1]!;
      revisions.set(write.streamId, last.revision);
      position = laterOf(position, last.position);
    }
    return { revisions, position };
  }

  private async currentRevision(streamId: string): Promise<bigint | 'no_stream'> {
    const [last] = await this.readStream(streamId, { direction: 'backwards', maxCount: 1 });
    return toActualRevision(last?.revision);
  }

  private async eventAt(streamId: string, revision: bigint): Promise<RecordedEvent> {
    const [event] = await this.readStream(streamId, { fromRevision: revision, maxCount: 1 });
    if (!event || event.revision !== revision) throw new Error(`event ${revision} of stream ${streamId} is not readable after its append`);
    return event;
  }

  /** One read per stream (the client reads one stream at a time), run together. */
  async readStreams(streamIds: readonly string[]): Promise<Map<string, RecordedEvent[]>> {
    const read = await Promise.all([...new Set(streamIds)].map(async (streamId) => [streamId, await this.readStream(streamId)] as const));
    return new Map(read.filter(([, events]) => events.length > 0));
  }

  async readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    const maxCount = options.maxCount ?? Number.MAX_SAFE_INTEGER;
    if (maxCount <= 0) return [];
    const backwards = options.direction === 'backwards';
    const events: RecordedEvent[] = [];
    try {
      const read = this.client.readStream(streamId, {
        direction: backwards ? BACKWARDS : FORWARDS,
        fromRevision: options.fromRevision ?? (backwards ? END : CLIENT_START),
        maxCount,
        requiresLeader: true,
      });
      for await (const resolved of read as AsyncIterable<ResolvedEvent>) {
        if (resolved.event) events.push(toRecordedEvent(resolved.event));
      }
    } catch (error) {
      if (error instanceof StreamNotFoundError) return [];
      throw translateError(error, { operation: 'read' });
    }
    return events;
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    return this.readLog(options.after ?? START, options.maxCount ?? 1000, excludeSystemEvents());
  }

  /**
   * Up to `maxCount` events strictly after `after` that `filter` lets through (and none of the
   * server's own). The server may start a read at its position itself: one more is asked for, and
   * whatever is not past it is dropped; a page that held only dropped events is followed by
   * the next, so that fewer than `maxCount` events always means the end of the log.
   */
  private async readLog(after: Position, maxCount: number, filter: Filter): Promise<RecordedEvent[]> {
    const events: RecordedEvent[] = [];
    let from = after;
    try {
      while (events.length < maxCount) {
        const want = maxCount - events.length + 1;
        let received = 0;
        let last = from;
        for await (const resolved of this.client.readAll({ fromPosition: toClientPosition(from), maxCount: want, filter, requiresLeader: true })) {
          received++;
          if (!resolved.event) continue;
          const event = toRecordedEvent(resolved.event);
          last = laterOf(last, event.position);
          if (comparePositions(event.position, from) <= 0 || isSystemEvent(event)) continue;
          events.push(event);
          if (events.length === maxCount) break;
        }
        if (received < want || comparePositions(last, from) <= 0) break;
        from = last;
      }
    } catch (error) {
      throw translateError(error, { operation: 'read' });
    }
    return events;
  }

  /**
   * Catches up, then follows the head, on the server's catch-up subscription to `$all` with the filter applied
   * on the server. Batches are what has arrived, up to `maxCount` events.
   *
   * How far the log has been read moves with each event delivered and, for a filtered
   * subscription that has received nothing for a while, with a probe: the head of the log H, then
   * the first matching event after the current position. When there is none up to H, nothing the
   * subscription could still deliver lies at or before H, and H is the new position (an empty
   * batch). That way a projection's checkpoint passes the events it ignores, and no one waiting on
   * it (read-your-writes) is left hanging. The server's own checkpoints and catch-up notices only
   * make the next probe come sooner: what they mean exactly (the last event looked at, or the
   * next to read) is not something to bet a checkpoint on.
   */
  async *subscribeToAll(options: SubscribeOptions = {}): AsyncIterable<LogBatch> {
    const { signal, filter } = options;
    if (signal?.aborted || this.closed) return;
    const maxCount = options.maxCount ?? 1000;
    let position = options.after ?? START;

    const queue: AllStreamResolvedEvent[] = [];
    let failure: unknown = null;
    let stopping = false;
    let wake: (() => void) | null = null;
    const wakeUp = () => {
      const w = wake;
      wake = null;
      w?.();
    };
    const minIntervalMs = this.options.progressIntervalMs ?? 200;
    const maxIntervalMs = Math.max(minIntervalMs, this.options.progressMaxIntervalMs ?? 1000);
    let intervalMs = minIntervalMs;
    let lastProbe = performance.now();
    // The log grew (an append of this store, or the server passed events the filter left out): a
    // probe is due soon, at most one per minIntervalMs however often this happens.
    const probeSoon = () => {
      intervalMs = minIntervalMs;
      wakeUp();
    };

    const subscription: AllStreamSubscription = this.client.subscribeToAll({
      fromPosition: toClientPosition(position),
      filter: { ...serverFilter(filter), checkpointReached: () => probeSoon() },
      requiresLeader: true,
    });
    const onData = (event: AllStreamResolvedEvent) => {
      queue.push(event);
      if (queue.length >= maxCount * QUEUED_BATCHES) subscription.pause();
      wakeUp();
    };
    const onError = (error: unknown) => {
      failure ??= translateError(error, { operation: 'read' });
      wakeUp();
    };
    const onEnd = () => {
      if (!stopping) failure ??= new EventStoreUnavailableError('the KurrentDB subscription ended');
      wakeUp();
    };
    subscription.on('data', onData);
    subscription.on('caughtUp', probeSoon);
    subscription.on('error', onError);
    subscription.on('end', onEnd);
    subscription.on('close', onEnd);
    signal?.addEventListener('abort', wakeUp);
    this.appended.on('append', probeSoon);

    try {
      while (!signal?.aborted && !this.closed) {
        if (queue.length === 0) {
          if (failure) throw failure;
          // Without a filter every event is delivered: nothing to probe for.
          const dueInMs = filter ? lastProbe + intervalMs - performance.now() : 60_000;
          if (dueInMs > 0) {
            await this.waitFor(dueInMs, (w) => (wake = w));
            continue;
          }
          lastProbe = performance.now();
          const reached = await this.probeProgress(position, filter!);
          if (reached === null) {
            intervalMs = Math.min(intervalMs * 2, maxIntervalMs);
          } else if (reached !== 'grown') {
            // Whatever arrived meanwhile lies past it (only matching events arrive, and none is up to it).
            position = reached;
            yield { events: [], position };
          }
          continue;
        }
        const events: RecordedEvent[] = [];
        let reached = position;
        while (queue.length > 0 && events.length < maxCount) {
          const resolved = queue.shift()!;
          if (!resolved.event) continue;
          const event = toRecordedEvent(resolved.event);
          // Not past where we are: the server started at `position` itself, or a probe moved past it.
          if (comparePositions(event.position, position) <= 0) continue;
          reached = event.position;
          if (!isSystemEvent(event) && matchesLogFilter(filter, event)) events.push(event);
        }
        if (subscription.isPaused() && queue.length < maxCount) subscription.resume();
        intervalMs = minIntervalMs;
        lastProbe = performance.now();
        if (comparePositions(reached, position) > 0) {
          position = reached;
          yield { events, position };
        }
      }
    } finally {
      stopping = true;
      signal?.removeEventListener('abort', wakeUp);
      this.appended.off('append', probeSoon);
      subscription.off('data', onData).off('caughtUp', probeSoon).off('end', onEnd).off('close', onEnd);
      // An error after this point has nobody to tell; without a listener it would end the process.
      subscription.off('error', onError).on('error', () => undefined);
      await subscription.unsubscribe().catch(() => undefined);
      subscription.destroy();
    }
  }

  /**
   * How far a filtered subscription at `after` may move with nothing delivered: the head of the
   * log, when no event after `after` up to it matches (null when one does, or the log has not
   * grown past `after`). 'grown' when it has grown but a matching event is on its way.
   */
  private async probeProgress(after: Position, filter: LogFilter): Promise<Position | 'grown' | null> {
    const head = await this.headPosition();
    if (comparePositions(head, after) <= 0) return null;
    const [next] = await this.readLog(after, 1, serverFilter(filter));
    if (next && comparePositions(next.position, head) <= 0) return 'grown';
    return head;
  }

  /** Resolves after `timeoutMs` (true) or when woken (false); `register` hands out the waker. */
  private waitFor(timeoutMs: number, register: (wake: () => void) => void): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(true), timeoutMs);
      register(() => {
        clearTimeout(timer);
        resolve(false);
      });
      if (this.closed) {
        clearTimeout(timer);
        resolve(false);
      }
    });
  }

  async headPosition(): Promise<Position> {
    try {
      const read = this.client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1, filter: excludeSystemEvents(), requiresLeader: true });
      for await (const resolved of read) {
        if (resolved.event) return toRecordedEvent(resolved.event).position;
      }
    } catch (error) {
      throw translateError(error, { operation: 'read' });
    }
    return START;
  }

  /**
   * Every event of one append is one transaction, and shares its commit position: the last event
   * after `position` with the same commit position ends the append.
   */
  async endOfAppend(position: Position): Promise<Position> {
    let last = position;
    for (;;) {
      const batch = await this.readAll({ after: last, maxCount: 500 });
      for (const event of batch) {
        if (event.position.commit !== position.commit) return last;
        last = event.position;
      }
      if (batch.length < 500) return last;
    }
  }

  /**
   * Counts the first LAG_EXACT_COUNT events exactly (reading them); past them, estimates the rest
   * from the log's byte positions (the head's against the counted events' average size) and says
   * so (`approximate`). The server keeps no count of `$all`.
   */
  async lagAfter(after: Position, options: { countLimit?: number } = {}): Promise<LogLag> {
    const limit = options.countLimit ?? Number.MAX_SAFE_INTEGER;
    const window = Math.min(limit, LAG_EXACT_COUNT);
    const events = await this.readAll({ after, maxCount: window + 1 });
    const oldestRecordedAt = events[0]?.recordedAt ?? null;
    if (events.length <= window) return { events: events.length, capped: false, oldestRecordedAt };
    if (window === limit) return { events: limit, capped: true, oldestRecordedAt };
    const head = await this.headPosition();
    const counted = events[window]!;
    const bytesPerEvent = Number(counted.position.prepare - events[0]!.position.prepare) / window;
    const rest = bytesPerEvent > 0 ? Math.round(Number(head.prepare - counted.position.prepare) / bytesPerEvent) : 0;
    const estimate = window + 1 + Math.max(0, rest);
    return { events: Math.min(estimate, limit), capped: estimate > limit, approximate: true, oldestRecordedAt };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.appended.emit('append');
    await this.client.dispose();
  }
}
