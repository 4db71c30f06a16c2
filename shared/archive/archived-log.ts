import type pg from 'pg';
import {
  START,
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
} from '../event-store/port.js';
import { ARCHIVE_LOCK, ArchiveInconsistentError, archiveInstallationId, checkInstallation, committedSegments, type SegmentRecord } from './scan-archive.js';
import { readManifest, readSegment } from './segment-file.js';

/** The store's events in (from, to] (to null: up to the end of the archive), in log order. */
interface StoreAhead {
  from: Position;
  to: Position | null;
  events: RecordedEvent[];
}

/** Segments kept decoded at a time: the one being read and the next (a catch-up reads ahead). */
const CACHED_SEGMENTS = 2;

/** The log has shed events to the archive, and the reader was given no archive directory. */
export class ArchiveNotGivenError extends Error {
  constructor(segments: number, events: number) {
    super(`the event log has moved ${events} scan events into ${segments} archive segments, and this reader was given no archive directory (ARCHIVE_DIR): it would miss them`);
    this.name = 'ArchiveNotGivenError';
  }
}

export interface ArchivedLogOptions {
  store: EventStore;
  pool: pg.Pool;
  /** ARCHIVE_DIR; may be absent only while nothing has been archived. */
  dir?: string;
}

/**
 * The whole log as it was before archiving: the committed archive segments merged, by position,
 * with the store's log, the events not archived (docs/design.md "The scan archive"). What `projections rebuild` and `replay`
 * read. `readAll` gives exactly the batches the log gave before its events were archived (the
 * first `maxCount` events after a position, of the union), so a rebuild applies the same batches
 * and builds the same rows. Every segment is checked against its SHA-256 before its events are
 * used; a missing or corrupt one fails the read with an error naming the file.
 *
 * Held open, it holds the archive's lock shared: no archive run moves events out of the log
 * under it. `close()` releases it (and leaves the wrapped store open). Stream reads and appends
 * go to the store's log only: commands read the last events of their streams, which are never archived.
 */
export class ArchivedLog implements EventStore {
  private readonly cache = new Map<string, Promise<RecordedEvent[]>>();
  private storeAhead: StoreAhead | null = null;
  private released = false;

  private constructor(
    private readonly store: EventStore,
    private readonly client: pg.PoolClient | null,
    private readonly dir: string | undefined,
    readonly segments: readonly SegmentRecord[],
  ) {}

  /**
   * Opens the archive beside `store`: waits for an archive run in progress to end, then reads the
   * committed segments. With a store other than Postgres' there is no archive: the store itself.
   */
  static async open(options: ArchivedLogOptions): Promise<ArchivedLog> {
    if (options.store.name !== 'postgres') return new ArchivedLog(options.store, null, options.dir, []);
    const client = await options.pool.connect();
    try {
      // Waits for a run (a run's segments take seconds each); the pool's statement timeout would cut that short.
      await client.query('SET statement_timeout TO 0');
      await client.query('SELECT pg_advisory_lock_shared(hashtext($1))', [ARCHIVE_LOCK]);
      await client.query('RESET statement_timeout');
      const segments = await committedSegments(client);
      if (segments.length > 0 && !options.dir) throw new ArchiveNotGivenError(segments.length, segments.reduce((n, s) => n + s.events, 0));
      // Another installation's archive is refused by name, before any of its files is read.
      if (segments.length > 0) checkInstallation(await readManifest(options.dir!), options.dir!, await archiveInstallationId(client));
      return new ArchivedLog(options.store, client, options.dir, segments);
    } catch (error) {
      client.release(true);
      throw error;
    }
  }

  get name(): string {
    return this.store.name;
  }

  /** Events the archive holds. */
  get archivedEvents(): number {
    return this.segments.reduce((n, s) => n + s.events, 0);
  }

  appendToStream(streamId: string, events: EventData[], expectedRevision?: ExpectedRevision): Promise<AppendResult> {
    return this.store.appendToStream(streamId, events, expectedRevision);
  }

  appendToStreams(appends: StreamAppend[]): Promise<AppendResult> {
    return this.store.appendToStreams(appends);
  }

  readStream(streamId: string, options?: ReadStreamOptions): Promise<RecordedEvent[]> {
    return this.store.readStream(streamId, options);
  }

  readStreams(streamIds: readonly string[]): Promise<Map<string, RecordedEvent[]>> {
    return this.store.readStreams(streamIds);
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const maxCount = options.maxCount ?? 1000;
    const archived = await this.readArchived(options.after, maxCount);
    if (archived.length === 0) return this.store.readAll(options);
    let fromStore: RecordedEvent[];
    if (archived.length === maxCount) {
      // Only the store's events up to the last archived one can be in this batch.
      const after = options.after ?? START;
      const upTo = archived.at(-1)!.position;
      const known = this.storeAhead;
      const buffer = known && comparePositions(known.from, after) <= 0 && (known.to === null || comparePositions(upTo, known.to) <= 0) ? known : await this.readStoreAhead(after, maxCount);
      const start = firstAfter(buffer.events, after);
      fromStore = buffer.events.slice(start, firstAfter(buffer.events, upTo));
    } else {
      fromStore = await this.store.readAll(options);
    }
    const merged: RecordedEvent[] = [];
    let a = 0;
    let l = 0;
    while (merged.length < maxCount && (a < archived.length || l < fromStore.length)) {
      if (l >= fromStore.length) merged.push(archived[a++]!);
      else if (a >= archived.length) merged.push(fromStore[l++]!);
      else {
        const order = comparePositions(archived[a]!.position, fromStore[l]!.position);
        if (order === 0) throw new ArchiveInconsistentError(`event ${archived[a]!.id} is both in the archive and in the log`);
        merged.push(order < 0 ? archived[a++]! : fromStore[l++]!);
      }
    }
    return merged;
  }

  /**
   * Reads the store's log ahead from `after` and keeps it: in the archived part of the log the
   * store's events are few (master data between the scans), so one read serves many batches instead of
   * each batch reading (and dropping) the same events past its end.
   */
  private async readStoreAhead(after: Position, maxCount: number): Promise<StoreAhead> {
    const events = await this.store.readAll({ after, maxCount });
    // A read that was not full reached the head: every event of the store up to the archive's end is in it.
    const ahead: StoreAhead = { from: after, to: events.length === maxCount ? events.at(-1)!.position : null, events };
    this.storeAhead = ahead;
    return ahead;
  }

  /** The archived part (read like `readAll`), then the store's subscription from there. */
  async *subscribeToAll(options: SubscribeOptions = {}): AsyncIterable<LogBatch> {
    let after = options.after;
    const last = this.segments.at(-1)?.last;
    while (last && !options.signal?.aborted && (!after || comparePositions(after, last) < 0)) {
      const batch = await this.readAll({ after, maxCount: options.maxCount });
      if (batch.length === 0) break;
      after = batch.at(-1)!.position;
      yield { events: options.filter ? batch.filter((e) => matchesLogFilter(options.filter, e)) : batch, position: after };
    }
    yield* this.store.subscribeToAll({ ...options, after });
  }

  async headPosition(): Promise<Position> {
    const storeHead = await this.store.headPosition();
    const last = this.segments.at(-1)?.last;
    return last && comparePositions(last, storeHead) > 0 ? last : storeHead;
  }

  endOfAppend(position: Position): Promise<Position> {
    return this.store.endOfAppend(position);
  }

  async lagAfter(after: Position, options?: { countLimit?: number }): Promise<LogLag> {
    const storeLag = await this.store.lagAfter(after, options);
    let events = 0;
    let oldest: Date | null = null;
    for (const segment of this.segments) {
      if (comparePositions(segment.last, after) <= 0) continue;
      // A segment the position falls inside counts whole: a rebuild's progress total, not an exact lag.
      events += segment.events;
      if (!oldest || segment.oldestRecordedAt < oldest) oldest = segment.oldestRecordedAt;
    }
    const oldestInStore = storeLag.oldestRecordedAt;
    return { ...storeLag, events: storeLag.events + events, oldestRecordedAt: oldest && (!oldestInStore || oldest < oldestInStore) ? oldest : oldestInStore };
  }

  /** Releases the archive's lock; the wrapped store stays open (its owner closes it). */
  async close(): Promise<void> {
    if (this.released || !this.client) return;
    this.released = true;
    let broken = false;
    await this.client.query('SELECT pg_advisory_unlock_shared(hashtext($1))', [ARCHIVE_LOCK]).catch(() => {
      broken = true;
    });
    this.client.release(broken);
  }

  /** Up to `maxCount` archived events after `after`, in log order. */
  private async readArchived(after: Position | undefined, maxCount: number): Promise<RecordedEvent[]> {
    const out: RecordedEvent[] = [];
    let i = after ? this.segments.findIndex((s) => comparePositions(s.last, after) > 0) : 0;
    if (i === -1) return out;
    for (; i < this.segments.length && out.length < maxCount; i++) {
      const events = await this.load(this.segments[i]!);
      let j = after ? firstAfter(events, after) : 0;
      while (j < events.length && out.length < maxCount) out.push(events[j++]!);
    }
    return out;
  }

  private load(segment: SegmentRecord): Promise<RecordedEvent[]> {
    let loading = this.cache.get(segment.file);
    if (!loading) {
      loading = readSegment(this.dir!, segment.file, segment);
      this.cache.set(segment.file, loading);
      loading.catch(() => this.cache.delete(segment.file));
      while (this.cache.size > CACHED_SEGMENTS) this.cache.delete(this.cache.keys().next().value!);
    }
    return loading;
  }
}

/** Index of the first event after `after` (events in log order). */
function firstAfter(events: readonly RecordedEvent[], after: Position): number {
  let lo = 0;
  let hi = events.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (comparePositions(events[mid]!.position, after) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
