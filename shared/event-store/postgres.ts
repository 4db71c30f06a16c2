import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type pg from 'pg';
import { NotificationListener } from '../db/listener.js';
import { UNIQUE_VIOLATION, isConnectionError } from '../db/pool.js';
import type { EventCatalogue } from './catalogue.js';
import {
  EVENT_ID_PATTERN,
  EventStoreUnavailableError,
  InvalidEventError,
  START,
  WrongExpectedRevisionError,
  type AppendResult,
  EMPTY_APPEND,
  comparePositions,
  formatPosition,
  type EventData,
  matchesLogFilter,
  type EventStore,
  type LogBatch,
  type LogLag,
  type Position,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type StreamAppend,
  type SubscribeOptions,
} from './port.js';

const NOTIFY_CHANNEL = 'event_store_appended';
/**
 * How many of the events last read for subscriptions a store keeps (docs/design.md "Projections"):
 * a subscription behind the one that read them by no more takes its batch from them, not from
 * the log.
 */
// On again since 2026-11-30: a loaded fresh-clone CI run once lost a read's placement in
// test/console/operator.e2e with them on, and once with them off (0) too; what a subscription
// takes from them is a stretch of the log read whole below the horizon, which no later append
// can enter (test/event-store/postgres-subscriptions.int). The import's 20,000 rows: 1,300 to
// 1,550 rows/s (docs/benchmarks.md "Import of assets (issue 33)").
const RECENT_EVENTS = 10_000;
/** Raised by event_store.append_events when an expectation does not hold. */
const WRONG_EXPECTED_REVISION = 'YE409';

/**
 * A row of EVENT_COLUMNS, read as an array (cheaper than an object per row): the log's stored row,
 * which the scan archive also keeps (shared/archive/segment-file.ts).
 */
export type EventRow = [
  commit: string,
  prepare: string,
  eventId: string,
  streamId: string,
  revision: string,
  type: string,
  data: RecordedEvent['data'],
  metadata: RecordedEvent['metadata'],
  /** Milliseconds since the epoch: cheaper to parse than a timestamptz. */
  recordedAt: number,
];

const EVENT_COLUMNS = `tx_id::text AS commit, global_position::text AS prepare, event_id, stream_id,
  stream_revision::text AS stream_revision, type, data, metadata,
  date_part('epoch', recorded_at) * 1000 AS recorded_at`;

// Named (prepared once per connection): readers run these constantly.
const READ_ALL = {
  // Stryker disable next-line StringLiteral: a statement's name only caches its plan on each connection
  name: 'event_store_read_all',
  text: `SELECT ${EVENT_COLUMNS} FROM event_store.events
         WHERE (tx_id, global_position) > ($1::text::xid8, $2::bigint)
           AND tx_id < pg_snapshot_xmin(pg_current_snapshot())
         ORDER BY tx_id, global_position
         LIMIT $3`,
};

const READ_STREAMS = {
  // Stryker disable next-line StringLiteral: a statement's name only caches its plan on each connection
  name: 'event_store_read_streams',
  text: `SELECT ${EVENT_COLUMNS} FROM event_store.events WHERE stream_id = ANY($1::text[]) ORDER BY stream_id, stream_revision`,
};

const HEAD_POSITION = {
  // Stryker disable next-line StringLiteral: a statement's name only caches its plan on each connection
  name: 'event_store_head_position',
  text: `SELECT tx_id::text AS commit, global_position::text AS prepare FROM event_store.events
         WHERE tx_id < pg_snapshot_xmin(pg_current_snapshot())
         ORDER BY tx_id DESC, global_position DESC LIMIT 1`,
};

const END_OF_APPEND = {
  // Stryker disable next-line StringLiteral: a statement's name only caches its plan on each connection
  name: 'event_store_end_of_append',
  text: `SELECT tx_id::text AS commit, max(global_position)::text AS prepare FROM event_store.events
         WHERE tx_id = $1::text::xid8 GROUP BY tx_id`,
};

// The count runs over the (tx_id, global_position) index, stopped at the limit.
const LAG_AFTER = {
  // Stryker disable next-line StringLiteral: a statement's name only caches its plan on each connection
  name: 'event_store_lag_after',
  text: `SELECT (SELECT count(*)::int FROM (SELECT 1 FROM event_store.events
                   WHERE (tx_id, global_position) > ($1::text::xid8, $2::bigint)
                     AND tx_id < pg_snapshot_xmin(pg_current_snapshot())
                   LIMIT $3) AS n) AS events,
                (SELECT date_part('epoch', recorded_at) * 1000 FROM event_store.events
                   WHERE (tx_id, global_position) > ($1::text::xid8, $2::bigint)
                     AND tx_id < pg_snapshot_xmin(pg_current_snapshot())
                   ORDER BY tx_id, global_position LIMIT 1) AS oldest`,
};

const NOTIFY = {
  // Stryker disable next-line StringLiteral: a statement's name only caches its plan on each connection
  name: 'event_store_notify',
  text: `SELECT set_config('synchronous_commit', 'off', true), pg_notify('${NOTIFY_CHANNEL}', $1)`,
};

const APPEND = {
  // Stryker disable next-line StringLiteral: a statement's name only caches its plan on each connection
  name: 'event_store_append',
  text: `SELECT revisions::text[] AS revisions, last_commit::text AS commit, last_prepare::text AS prepare
         FROM event_store.append_events($1::text[], $2::text[], $3::int[], $4::int[], $5::int[], $6::uuid[], $7::text[],
           ARRAY(SELECT d FROM jsonb_array_elements($8::jsonb) WITH ORDINALITY AS x(d, n) ORDER BY n),
           ARRAY(SELECT m FROM jsonb_array_elements($9::jsonb) WITH ORDINALITY AS x(m, n) ORDER BY n))`,
};

/** (ORDER BY names the table's column: the bare name would be the text alias of EVENT_COLUMNS.) */
function readStreamQuery(backwards: boolean, from: boolean): { name: string; text: string } {
  const condition = !from ? '' : backwards ? 'AND stream_revision <= $3::bigint' : 'AND stream_revision >= $3::bigint';
  return {
    // Stryker disable next-line StringLiteral: a statement's name only caches its plan on each connection (and these four stay distinct)
    name: `event_store_read_stream_${backwards ? 'b' : 'f'}${from ? '_from' : ''}`,
    text: `SELECT ${EVENT_COLUMNS} FROM event_store.events WHERE stream_id = $1 ${condition}
           ORDER BY events.stream_revision ${backwards ? 'DESC' : 'ASC'} LIMIT $2`,
  };
}

/** The one mapping of a stored row to a RecordedEvent: the log's reads, and the archive's (whose rows begin with the same fields). */
export function recordedEventFromRow(row: readonly [...EventRow, ...unknown[]]): RecordedEvent {
  return {
    id: row[2],
    type: row[5],
    data: row[6],
    metadata: row[7],
    streamId: row[3],
    revision: BigInt(row[4]),
    position: { commit: BigInt(row[0]), prepare: BigInt(row[1]) },
    recordedAt: new Date(row[8]),
  };
}

export interface PostgresEventStoreOptions {
  /** Validates every event at append. */
  catalogue?: EventCatalogue;
  /** Poll interval of subscriptions when no notification arrives. */
  pollIntervalMs?: number;
  /** How many of the events last read for subscriptions are kept for the subscriptions behind (default RECENT_EVENTS). */
  recentEvents?: number;
}

interface AppendParameters {
  /** The streams in lock order (sorted by id), with the caller's appends in the same order. */
  appends: StreamAppend[];
  streamIds: string[];
  expected: string[];
  counts: number[];
  eventStreams: number[];
  offsets: number[];
  ids: string[];
  types: string[];
  data: string[];
  metadata: string[];
  /** Every event id came from the caller (so a refused expectation may be a repeat that raced us). */
  callerIds: boolean;
}

/** Validates (with `catalogue`, when given) and flattens an append into the parameters of event_store.append_events. */
function prepareAppend(appends: StreamAppend[], catalogue: EventCatalogue | undefined): AppendParameters {
  if (appends.length === 0) throw new Error(EMPTY_APPEND);
  // A fixed lock order (by stream id) keeps concurrent multi-stream appends from deadlocking.
  // Stryker disable next-line EqualityOperator: V8 sorts a few streams by binary insertion, which only asks whether the comparator is negative: every variant still gives one order
  const sorted = [...appends].sort((a, b) => (a.streamId < b.streamId ? -1 : a.streamId > b.streamId ? 1 : 0));
  const streamIndex = new Map<string, number>();
  sorted.forEach((append, i) => {
    if (streamIndex.has(append.streamId)) throw new Error(`stream ${append.streamId} appears twice in one append`);
    streamIndex.set(append.streamId, i + 1);
  });
  const params: AppendParameters = {
    appends: sorted,
    streamIds: sorted.map((a) => a.streamId),
    expected: sorted.map((a) => String(a.expectedRevision)),
    counts: sorted.map(() => 0),
    eventStreams: [],
    offsets: [],
    ids: [],
    types: [],
    data: [],
    metadata: [],
    callerIds: true,
  };
  const seenIds = new Set<string>();
  // Events keep the caller's order in the log.
  for (const append of appends) {
    const index = streamIndex.get(append.streamId)!;
    for (const event of append.events) {
      const validated = catalogue ? catalogue.validate(event) : event;
      if (validated.id !== undefined && !EVENT_ID_PATTERN.test(validated.id)) throw new InvalidEventError(event.type, `id ${validated.id} is not a UUID`);
      if (validated.id === undefined) params.callerIds = false;
      // Stryker disable next-line MethodExpression: any one letter case would do (ids are compared among themselves, and the uuid cast ignores case)
      const id = (validated.id ?? randomUUID()).toLowerCase();
      // The same id twice in one call is the same event: stored once.
      if (seenIds.has(id)) continue;
      seenIds.add(id);
      params.eventStreams.push(index);
      params.offsets.push(params.counts[index - 1]!++);
      params.ids.push(id);
      params.types.push(validated.type);
      params.data.push(JSON.stringify(validated.data));
      params.metadata.push(JSON.stringify(validated.metadata ?? {}));
    }
  }
  params.callerIds &&= params.ids.length > 0;
  return params;
}

function appendStatement(p: AppendParameters): pg.QueryConfig {
  return {
    ...APPEND,
    // The events' data and metadata as one JSON array each, joined from their texts: as arrays
    // of jsonb, pg would escape every text into an array literal (a fifth of an append's CPU).
    values: [p.streamIds, p.expected, p.counts, p.eventStreams, p.offsets, p.ids, p.types, `[${p.data.join(',')}]`, `[${p.metadata.join(',')}]`],
  };
}

/**
 * The statement that appends `appends` atomically (what appendToStreams sends), for a caller that
 * runs it in a transaction of its own: the benches' baselines, which append and apply in one
 * transaction. Its row: `revisions` (text[], each stream's last revision, by stream id in sorted
 * order), `commit` and `prepare` (the last event's position).
 */
export function appendQuery(appends: StreamAppend[], catalogue?: EventCatalogue): pg.QueryConfig {
  return appendStatement(prepareAppend(appends, catalogue));
}

export class PostgresEventStore implements EventStore {
  readonly name = 'postgres';
  private readonly appended = new EventEmitter();
  private appendSequence = 0;
  private readonly sharedReads = new Map<string, { sequence: number; read: Promise<RecordedEvent[]> }>();
  /**
   * The events last read for subscriptions: exactly the log's events after `after`, up to and
   * including the last of `events` (one stretch, in log order; at most `options.recentEvents`). The log
   * never changes below its visible head, so a stretch once read stays true.
   */
  /** `sequence`: the append sequence when the read that ended them began (an append signalled since may lie past them). */
  private recent: { after: Position; events: RecordedEvent[]; sequence: number } = { after: START, events: [], sequence: -1 };
  /** One LISTEN connection per store, shared by its subscriptions; polling covers any gap while it reconnects. */
  private readonly listener: NotificationListener;
  private listenerStarted: Promise<void> | null = null;
  /** Tags this store's NOTIFYs, so its own listener can tell them from other processes' appends. */
  private readonly instanceId = randomUUID();
  private notifying: Promise<void> | null = null;
  // Stryker disable next-line BooleanLiteral: the NOTIFY loop clears it before it first reads it
  private notifyAgain = false;
  private closed = false;

  constructor(
    private readonly pool: pg.Pool,
    connectionString: string,
    private readonly options: PostgresEventStoreOptions = {},
  ) {
    this.appended.setMaxListeners(0);
    this.listener = new NotificationListener({
      connectionString,
      channels: [NOTIFY_CHANNEL],
      onNotification: (message) => {
        // Our own appends already woke our subscribers directly; an echo of our NOTIFY would
        // only look like an append nobody can see yet.
        if (message.payload === this.instanceId) return;
        // Stryker disable next-line UpdateOperator: equivalent, only whether the sequence moved is compared (!==), never which way
        this.appendSequence++;
        this.appended.emit('append');
      },
    });
  }

  appendToStream(streamId: string, events: EventData[], expectedRevision: StreamAppend['expectedRevision'] = 'any') {
    return this.appendToStreams([{ streamId, events, expectedRevision }]);
  }

  async appendToStreams(appends: StreamAppend[]): Promise<AppendResult> {
    const params = this.prepare(appends);
    let result: AppendResult;
    try {
      result = await this.appendOnce(params);
    } catch (error) {
      // Two writers raced with the same event id: the loser's statement fails on the unique
      // index (or, for a `no_stream` append, on the expectation); run again, it finds the events
      // stored and answers as for any repeat.
      const raced =
        ((error as { code?: string }).code === UNIQUE_VIOLATION && (error as { constraint?: string }).constraint === 'events_event_id_key') ||
        (error instanceof WrongExpectedRevisionError && params.callerIds);
      if (!raced) throw error;
      result = await this.appendOnce(params);
    }
    this.signalAppended();
    return result;
  }

  private prepare(appends: StreamAppend[]): AppendParameters {
    return prepareAppend(appends, this.options.catalogue);
  }

  private async appendOnce(p: AppendParameters): Promise<AppendResult> {
    let row: { revisions: Array<string | null>; commit: string | null; prepare: string | null };
    try {
      const result = await this.pool.query<typeof row>(appendStatement(p));
      row = result.rows[0]!;
    } catch (error) {
      const e = error as { code?: string; detail?: string };
      if (e.code === WRONG_EXPECTED_REVISION) {
        const [index, actual] = (e.detail ?? '').split(' ');
        const append = p.appends[Number(index) - 1]!;
        throw new WrongExpectedRevisionError(append.streamId, append.expectedRevision, actual === '-1' ? 'no_stream' : BigInt(actual!));
      }
      if (isConnectionError(error)) {
        // One statement, one transaction: either all of it committed or none. Lost before the
        // answer, we cannot tell which; repeating with the same event ids is safe.
        throw new EventStoreUnavailableError(
          'connection to the event store was lost during an append: it was written entirely or not at all; repeat it with the same event ids',
          { cause: error },
        );
      }
      throw error;
    }
    const revisions = new Map<string, bigint>();
    row.revisions.forEach((revision, i) => {
      if (revision !== null && revision !== '-1') revisions.set(p.streamIds[i]!, BigInt(revision));
    });
    // Stryker disable next-line LogicalOperator: commit and prepare come from one row, both null (an empty log) or neither
    const position = row.commit !== null && row.prepare !== null ? { commit: BigInt(row.commit), prepare: BigInt(row.prepare) } : START;
    return { revisions, position };
  }

  /**
   * Wakes subscribers: those of this process at once, other processes by NOTIFY. The NOTIFY is sent
   * after the append committed, in its own transaction without a synchronous commit: a NOTIFY
   * inside the append would hold Postgres' global notify lock through the commit's WAL flush and
   * serialise every append of the cluster. At most one is in flight; appends meanwhile share the next.
   */
  private signalAppended(): void {
    // Stryker disable next-line UpdateOperator: equivalent, only whether the sequence moved is compared (!==), never which way
    this.appendSequence++;
    this.appended.emit('append');
    if (this.closed) return;
    if (this.notifying) {
      this.notifyAgain = true;
      return;
    }
    this.notifying = (async () => {
      do {
        this.notifyAgain = false;
        await this.pool
          .query({ ...NOTIFY, values: [this.instanceId] })
          .catch(() => undefined); // subscribers poll as well
      } while (this.notifyAgain && !this.closed);
    })().finally(() => {
      this.notifying = null;
    });
  }

  async readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    const backwards = options.direction === 'backwards';
    const from = options.fromRevision;
    const values: unknown[] = [streamId, options.maxCount ?? 2_147_483_647];
    if (from !== undefined) values.push(String(from));
    return this.queryEvents({ ...readStreamQuery(backwards, from !== undefined), values });
  }

  async readStreams(streamIds: readonly string[]): Promise<Map<string, RecordedEvent[]>> {
    const byStream = new Map<string, RecordedEvent[]>();
    if (streamIds.length === 0) return byStream;
    const events = await this.queryEvents({ ...READ_STREAMS, values: [[...new Set(streamIds)]] });
    for (const event of events) {
      const stream = byStream.get(event.streamId);
      if (stream) stream.push(event);
      else byStream.set(event.streamId, [event]);
    }
    return byStream;
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const after = options.after ?? START;
    return this.queryEvents({ ...READ_ALL, values: [String(after.commit), String(after.prepare), options.maxCount ?? 1000] });
  }

  /**
   * A filter is applied here, after the read: the read stays shared by every subscription at the
   * same position (see `readAllShared`), whatever each one keeps of it.
   */
  async *subscribeToAll(options: SubscribeOptions = {}): AsyncIterable<LogBatch> {
    const { signal, filter } = options;
    const maxCount = options.maxCount ?? 1000;
    const pollMs = this.options.pollIntervalMs ?? 100;
    let position = options.after ?? START;
    if (!this.closed) await (this.listenerStarted ??= this.listener.startInBackground());
    let quickRetries = 0;
    // While catching up (full batches), the next batch is read while the consumer handles this one.
    let prefetched: Promise<RecordedEvent[]> | null = null;
    try {
      while (!signal?.aborted && !this.closed) {
        const seenSequence = this.appendSequence;
        const batch = await (prefetched ?? this.readForSubscription(position, maxCount));
        prefetched = null;
        if (batch.length > 0) {
          position = batch[batch.length - 1]!.position;
          quickRetries = 0;
          if (batch.length === maxCount) {
            prefetched = this.readForSubscription(position, maxCount);
            prefetched.catch(() => undefined); // surfaces when awaited
          }
          yield { events: filter ? batch.filter((event) => matchesLogFilter(filter, event)) : batch, position };
          continue;
        }
        // An append signalled while this read ran, yet nothing readable: the read may have begun
        // before it, or an older transaction still holds the horizon back. Look again soon, backing
        // off, rather than at the next poll. (A notification that woke this read and found nothing
        // waits for the poll, or for the next notification.)
        const notified = this.appendSequence !== seenSequence;
        if (notified && quickRetries < 20) {
          quickRetries++;
          // A new append ends the wait early: it must not sit out a back-off meant for another.
          await this.waitForAppend(this.appendSequence, Math.min(2 ** quickRetries, 50), signal);
          continue;
        }
        quickRetries = 0;
        await this.waitForAppend(seenSequence, pollMs, signal);
      }
    } finally {
      await prefetched?.catch(() => undefined);
    }
  }

  /**
   * A subscription's next batch: from the events this store read last (`recent`) when they reach
   * past `after` (up to `maxCount` of them), else read (`readAllShared`). When the kept events end
   * before `maxCount` and an append was signalled since the read that ended them began, the rest
   * of the batch is read from their end (shared, and kept in turn): a follower behind then takes
   * as much as one reading the log would, not the smaller batch the one ahead read (smaller
   * batches cost each projection a transaction more). So the followers of a process read each
   * event of the log once while they stay within `options.recentEvents` of each other, whichever
   * reads first; one further behind reads on its own.
   */
  private async readForSubscription(after: Position, maxCount: number): Promise<RecordedEvent[]> {
    const kept = this.fromRecent(after, maxCount);
    if (!kept) return this.readAllShared(after, maxCount);
    if (kept.length >= maxCount || this.appendSequence === this.recent.sequence) return kept;
    const more = await this.readAllShared(kept[kept.length - 1]!.position, maxCount);
    return more.length === 0 ? kept : [...kept, ...more.slice(0, maxCount - kept.length)];
  }

  /** The kept events after `after` (at most `maxCount`), or null when `after` is not within them. */
  private fromRecent(after: Position, maxCount: number): RecordedEvent[] | null {
    const { events } = this.recent;
    const last = events[events.length - 1];
    if (!last || comparePositions(after, this.recent.after) < 0 || comparePositions(after, last.position) >= 0) return null;
    let low = 0;
    let high = events.length - 1;
    // The first event past `after` (the last one is).
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (comparePositions(events[middle]!.position, after) > 0) high = middle;
      else low = middle + 1;
    }
    return events.slice(low, low + maxCount);
  }

  /**
   * Keeps what a read found after `after`: added to the kept events when it starts where they
   * end, in their place when it starts past them (a reader further on), ignored when it starts
   * before their end (a reader behind, catching up on its own). The oldest go past the limit.
   */
  private remember(after: Position, events: RecordedEvent[], sequence: number): void {
    const kept = this.recent;
    const end = kept.events[kept.events.length - 1]?.position ?? kept.after;
    const order = comparePositions(after, end);
    // Nothing readable past their end when this read began: they are as long as the log was.
    if (events.length === 0 && order === 0) kept.sequence = sequence;
    if (events.length === 0 || order < 0) return;
    const limit = this.options.recentEvents ?? RECENT_EVENTS;
    if (order > 0) this.recent = { after, events: events.slice(0, limit), sequence };
    else {
      for (const event of events) kept.events.push(event);
      kept.sequence = sequence;
    }
    const over = this.recent.events.length - limit;
    if (over > 0) {
      this.recent.after = this.recent.events[over - 1]!.position;
      this.recent.events.splice(0, over);
    }
  }

  /**
   * Subscriptions at the same position (the projection workers of a process, woken by the same
   * append) share one read while no append has been signalled since it began: an append signalled
   * before it began is in it, and one signalled after makes each of them read again. What it
   * finds is kept for the subscriptions behind (`remember`).
   */
  private readAllShared(after: Position, maxCount: number): Promise<RecordedEvent[]> {
    const key = `${formatPosition(after)}/${maxCount}`;
    const inflight = this.sharedReads.get(key);
    if (inflight && inflight.sequence === this.appendSequence) return inflight.read;
    const sequence = this.appendSequence;
    const read: Promise<RecordedEvent[]> = this.readAll({ after, maxCount })
      .then((events) => {
        this.remember(after, events, sequence);
        return events;
      })
      .finally(() => {
        if (this.sharedReads.get(key)?.read === read) this.sharedReads.delete(key);
      });
    this.sharedReads.set(key, { sequence, read });
    return read;
  }

  async headPosition(): Promise<Position> {
    const result = await this.query<{ commit: string; prepare: string }>(HEAD_POSITION);
    const row = result.rows[0];
    return row ? { commit: BigInt(row.commit), prepare: BigInt(row.prepare) } : START;
  }

  /** Every event of one append is one transaction here: its last event is the transaction's last. */
  async endOfAppend(position: Position): Promise<Position> {
    const result = await this.query<{ commit: string; prepare: string }>({ ...END_OF_APPEND, values: [String(position.commit)] });
    const row = result.rows[0];
    if (!row) throw new Error(`no event at ${formatPosition(position)}`);
    return { commit: BigInt(row.commit), prepare: BigInt(row.prepare) };
  }

  async lagAfter(after: Position, options: { countLimit?: number } = {}): Promise<LogLag> {
    const limit = options.countLimit ?? Number.MAX_SAFE_INTEGER;
    const result = await this.query<{ events: number; oldest: number | null }>({
      ...LAG_AFTER,
      // Stryker disable next-line MethodExpression: the same answer (events and capped come from the count either way); the limit only stops the count early
      values: [String(after.commit), String(after.prepare), Math.min(limit + 1, Number.MAX_SAFE_INTEGER)],
    });
    const row = result.rows[0]!;
    const capped = row.events > limit;
    return { events: capped ? limit : row.events, capped, oldestRecordedAt: row.oldest === null ? null : new Date(row.oldest) };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.appended.emit('append');
    await this.notifying;
    await this.listener.stop();
  }

  private async query<R extends pg.QueryResultRow>(query: pg.QueryConfig): Promise<pg.QueryResult<R>> {
    try {
      return await this.pool.query<R>(query);
    } catch (error) {
      if (isConnectionError(error)) throw new EventStoreUnavailableError('event store unreachable', { cause: error });
      throw error;
    }
  }

  private async queryEvents(query: pg.QueryConfig): Promise<RecordedEvent[]> {
    try {
      const result = await this.pool.query<EventRow>({ ...query, rowMode: 'array' });
      return result.rows.map(recordedEventFromRow);
    } catch (error) {
      if (isConnectionError(error)) throw new EventStoreUnavailableError('event store unreachable', { cause: error });
      throw error;
    }
  }

  private waitForAppend(seenSequence: number, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    // (An abort while the read before ran: its event has fired already, and would never reach this wait.)
    if (this.appendSequence !== seenSequence || this.closed || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.appended.off('append', done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.appended.on('append', done);
      // Stryker disable next-line ObjectLiteral,BooleanLiteral: `once` is redundant, done removes itself from the signal whichever way it runs
      signal?.addEventListener('abort', done, { once: true });
    });
  }
}
