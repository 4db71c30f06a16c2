import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import pg from 'pg';
import type { EventCatalogue } from '../events/catalogue.js';
import {
  EventStoreUnavailableError,
  START,
  WrongExpectedRevisionError,
  comparePositions,
  type AppendResult,
  type EventData,
  type EventStore,
  type Position,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type StreamAppend,
  type SubscribeOptions,
} from './port.js';

type PreparedAppend = Omit<StreamAppend, 'events'> & { events: Array<Required<EventData>> };

const NOTIFY_CHANNEL = 'event_store_appended';
const UNIQUE_VIOLATION = '23505';

interface EventRow {
  commit: string;
  prepare: string;
  event_id: string;
  stream_id: string;
  stream_revision: string;
  type: string;
  data: RecordedEvent['data'];
  metadata: RecordedEvent['metadata'];
  recorded_at: Date;
}

const EVENT_COLUMNS = `tx_id::text AS commit, global_position::text AS prepare, event_id, stream_id,
  stream_revision::text AS stream_revision, type, data, metadata, recorded_at`;

function toRecorded(row: EventRow): RecordedEvent {
  return {
    id: row.event_id,
    type: row.type,
    data: row.data,
    metadata: row.metadata,
    streamId: row.stream_id,
    revision: BigInt(row.stream_revision),
    position: { commit: BigInt(row.commit), prepare: BigInt(row.prepare) },
    recordedAt: row.recorded_at,
  };
}

/** Errors that mean the database is unreachable or the connection died, as opposed to a refused statement. */
function isConnectionError(error: unknown): boolean {
  const e = error as { code?: string; message?: string };
  if (typeof e?.code === 'string') {
    if (/^(08|57P0[1-3]|53300)/.test(e.code)) return true;
    if (['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND'].includes(e.code)) return true;
  }
  return /Connection terminated|connection timeout|Query read timeout|Client has encountered a connection error/i.test(
    e?.message ?? '',
  );
}

export interface PostgresEventStoreOptions {
  /** Validates every event at append. */
  catalogue?: EventCatalogue;
  /** Poll interval of live subscriptions when no notification arrives. */
  pollIntervalMs?: number;
}

export class PostgresEventStore implements EventStore {
  readonly name = 'postgres';
  private readonly appended = new EventEmitter();
  private appendSequence = 0;
  private listener: pg.Client | null = null;
  private listenerStarting: Promise<void> | null = null;
  private closed = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly connectionString: string,
    private readonly options: PostgresEventStoreOptions = {},
  ) {
    this.appended.setMaxListeners(0);
  }

  appendToStream(streamId: string, events: EventData[], expectedRevision: StreamAppend['expectedRevision'] = 'any') {
    return this.appendToStreams([{ streamId, events, expectedRevision }]);
  }

  async appendToStreams(appends: StreamAppend[]): Promise<AppendResult> {
    const seen = new Set<string>();
    for (const append of appends) {
      if (seen.has(append.streamId)) throw new Error(`stream ${append.streamId} appears twice in one append`);
      seen.add(append.streamId);
      if (append.events.length === 0 && typeof append.expectedRevision !== 'bigint') {
        throw new Error(`an append of no events to ${append.streamId} needs an exact expected revision`);
      }
    }
    const prepared = appends.map((append) => ({
      ...append,
      events: append.events.map((event) => {
        const validated = this.options.catalogue ? this.options.catalogue.validate(event) : event;
        return { ...validated, id: validated.id ?? randomUUID(), metadata: validated.metadata ?? {} };
      }),
    }));
    try {
      return await this.appendOnce(prepared);
    } catch (error) {
      // Two writers raced with the same event id: the loser retries and finds it stored.
      if ((error as { code?: string }).code === UNIQUE_VIOLATION && (error as { constraint?: string }).constraint === 'events_event_id_key') {
        return this.appendOnce(prepared);
      }
      throw error;
    }
  }

  private async appendOnce(appends: PreparedAppend[]): Promise<AppendResult> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (error) {
      throw new EventStoreUnavailableError('event store unreachable', { cause: error });
    }
    let broken = false;
    try {
      await client.query('BEGIN');
      const result = await this.appendInTransaction(client, appends);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {
        broken = true;
      });
      if (isConnectionError(error)) {
        broken = true;
        throw new EventStoreUnavailableError('connection to the event store was lost during an append; nothing was written', {
          cause: error,
        });
      }
      throw error;
    } finally {
      client.release(broken);
    }
  }

  private async appendInTransaction(
    client: pg.PoolClient,
    appends: PreparedAppend[],
  ): Promise<AppendResult> {
    const allIds = appends.flatMap((a) => a.events.map((e) => e.id));
    const existing = new Map<string, Position>();
    if (allIds.length > 0) {
      const found = await client.query<{ event_id: string; commit: string; prepare: string }>(
        'SELECT event_id, tx_id::text AS commit, global_position::text AS prepare FROM event_store.events WHERE event_id = ANY($1::uuid[])',
        [allIds],
      );
      for (const row of found.rows) existing.set(row.event_id, { commit: BigInt(row.commit), prepare: BigInt(row.prepare) });
    }
    const revisions = new Map<string, bigint>();

    if (allIds.length > 0 && existing.size === allIds.length) {
      // A repeat of an append that already happened: nothing to write, same answer.
      const streams = await client.query<{ stream_id: string; revision: string }>(
        'SELECT stream_id, revision::text AS revision FROM event_store.event_streams WHERE stream_id = ANY($1::text[])',
        [appends.map((a) => a.streamId)],
      );
      for (const row of streams.rows) revisions.set(row.stream_id, BigInt(row.revision));
      let last = START;
      for (const p of existing.values()) if (comparePositions(p, last) > 0) last = p;
      return { revisions, position: last };
    }

    const ids: string[] = [];
    const streamIds: string[] = [];
    const streamRevisions: string[] = [];
    const types: string[] = [];
    const data: string[] = [];
    const metadata: string[] = [];

    // A fixed lock order keeps concurrent multi-stream appends from deadlocking.
    const ordered = [...appends].sort((a, b) => (a.streamId < b.streamId ? -1 : a.streamId > b.streamId ? 1 : 0));
    for (const append of ordered) {
      const events = append.events.filter((e) => !existing.has(e.id));
      const next = await this.reserveRevisions(client, append, events.length);
      revisions.set(append.streamId, next);
      let revision = next - BigInt(events.length) + 1n;
      for (const event of events) {
        ids.push(event.id);
        streamIds.push(append.streamId);
        streamRevisions.push(String(revision++));
        types.push(event.type);
        data.push(JSON.stringify(event.data));
        metadata.push(JSON.stringify(event.metadata));
      }
    }

    if (ids.length === 0) {
      // Expectation checks only.
      return { revisions, position: await this.headPositionWith(client) };
    }
    const inserted = await client.query<{ commit: string; prepare: string }>(
      `INSERT INTO event_store.events (event_id, stream_id, stream_revision, type, data, metadata)
       SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::text[], $5::jsonb[], $6::jsonb[])
       RETURNING tx_id::text AS commit, global_position::text AS prepare`,
      [ids, streamIds, streamRevisions, types, data, metadata],
    );
    await client.query(`SELECT pg_notify('${NOTIFY_CHANNEL}', '')`);
    let last = START;
    for (const row of inserted.rows) {
      const p = { commit: BigInt(row.commit), prepare: BigInt(row.prepare) };
      if (comparePositions(p, last) > 0) last = p;
    }
    return { revisions, position: last };
  }

  /** Checks the expectation and moves the stream's revision forward by `count`; returns the new last revision. */
  private async reserveRevisions(client: pg.PoolClient, append: PreparedAppend, count: number): Promise<bigint> {
    const { streamId, expectedRevision } = append;
    const n = String(count);
    const actual = async (): Promise<bigint | 'no_stream'> => {
      const row = await client.query<{ revision: string }>(
        'SELECT revision::text AS revision FROM event_store.event_streams WHERE stream_id = $1',
        [streamId],
      );
      return row.rows[0] ? BigInt(row.rows[0].revision) : 'no_stream';
    };
    const fail = async (): Promise<never> => {
      throw new WrongExpectedRevisionError(streamId, expectedRevision, await actual());
    };

    if (count === 0) {
      // Only an exact revision reaches here: hold the row so no one appends until we commit.
      const row = await client.query<{ revision: string }>(
        'SELECT revision::text AS revision FROM event_store.event_streams WHERE stream_id = $1 FOR SHARE',
        [streamId],
      );
      const current = row.rows[0] ? BigInt(row.rows[0].revision) : null;
      if (current !== expectedRevision) return fail();
      return current;
    }

    let result: pg.QueryResult<{ revision: string }>;
    if (expectedRevision === 'any') {
      result = await client.query(
        `INSERT INTO event_store.event_streams (stream_id, revision) VALUES ($1, $2::bigint - 1)
         ON CONFLICT (stream_id) DO UPDATE SET revision = event_streams.revision + $2::bigint
         RETURNING revision::text AS revision`,
        [streamId, n],
      );
    } else if (expectedRevision === 'no_stream') {
      result = await client.query(
        `INSERT INTO event_store.event_streams (stream_id, revision) VALUES ($1, $2::bigint - 1)
         ON CONFLICT (stream_id) DO NOTHING RETURNING revision::text AS revision`,
        [streamId, n],
      );
    } else if (expectedRevision === 'stream_exists') {
      result = await client.query(
        `UPDATE event_store.event_streams SET revision = revision + $2::bigint WHERE stream_id = $1
         RETURNING revision::text AS revision`,
        [streamId, n],
      );
    } else {
      result = await client.query(
        `UPDATE event_store.event_streams SET revision = revision + $2::bigint WHERE stream_id = $1 AND revision = $3::bigint
         RETURNING revision::text AS revision`,
        [streamId, n, String(expectedRevision)],
      );
    }
    const row = result.rows[0];
    if (!row) return fail();
    return BigInt(row.revision);
  }

  async readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    const backwards = options.direction === 'backwards';
    const limit = options.maxCount ?? 2_147_483_647;
    const from = options.fromRevision;
    const condition = from === undefined ? '' : backwards ? 'AND stream_revision <= $2::bigint' : 'AND stream_revision >= $2::bigint';
    const params: unknown[] = [streamId];
    if (from !== undefined) params.push(String(from));
    params.push(limit);
    const result = await this.query<EventRow>(
      `SELECT ${EVENT_COLUMNS} FROM event_store.events WHERE stream_id = $1 ${condition}
       ORDER BY events.stream_revision ${backwards ? 'DESC' : 'ASC'} LIMIT $${params.length}`,
      params,
    );
    return result.rows.map(toRecorded);
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const after = options.after ?? START;
    const result = await this.query<EventRow>(
      `SELECT ${EVENT_COLUMNS} FROM event_store.events
       WHERE (tx_id, global_position) > ($1::text::xid8, $2::bigint)
         AND tx_id < pg_snapshot_xmin(pg_current_snapshot())
       ORDER BY tx_id, global_position
       LIMIT $3`,
      [String(after.commit), String(after.prepare), options.maxCount ?? 1000],
    );
    return result.rows.map(toRecorded);
  }

  async *subscribeToAll(options: SubscribeOptions = {}): AsyncIterable<RecordedEvent[]> {
    const { signal } = options;
    const maxCount = options.maxCount ?? 1000;
    const pollMs = this.options.pollIntervalMs ?? 100;
    let position = options.after ?? START;
    await this.ensureListener();
    let quickRetries = 0;
    while (!signal?.aborted && !this.closed) {
      const seenSequence = this.appendSequence;
      const batch = await this.readAll({ after: position, maxCount });
      if (batch.length > 0) {
        position = batch[batch.length - 1]!.position;
        quickRetries = 0;
        yield batch;
        continue;
      }
      // A notification that found nothing readable means an older transaction is still open and
      // holds the horizon back: look again soon rather than at the next poll.
      const notified = this.appendSequence !== seenSequence;
      if (notified && quickRetries < 20) {
        quickRetries++;
        await this.sleep(Math.min(2 ** quickRetries, 50), signal);
        continue;
      }
      quickRetries = 0;
      await this.waitForAppend(seenSequence, pollMs, signal);
    }
  }

  async headPosition(): Promise<Position> {
    const client = await this.pool.connect();
    try {
      return await this.headPositionWith(client);
    } finally {
      client.release();
    }
  }

  private async headPositionWith(client: pg.PoolClient): Promise<Position> {
    const result = await client.query<{ commit: string; prepare: string }>(
      `SELECT tx_id::text AS commit, global_position::text AS prepare FROM event_store.events
       WHERE tx_id < pg_snapshot_xmin(pg_current_snapshot())
       ORDER BY tx_id DESC, global_position DESC LIMIT 1`,
    );
    const row = result.rows[0];
    return row ? { commit: BigInt(row.commit), prepare: BigInt(row.prepare) } : START;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.appended.emit('append');
    const listener = this.listener;
    this.listener = null;
    await listener?.end().catch(() => undefined);
  }

  private async query<R extends pg.QueryResultRow>(text: string, params: unknown[]): Promise<pg.QueryResult<R>> {
    try {
      return await this.pool.query<R>(text, params);
    } catch (error) {
      if (isConnectionError(error)) throw new EventStoreUnavailableError('event store unreachable', { cause: error });
      throw error;
    }
  }

  private sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      }
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  private waitForAppend(seenSequence: number, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (this.appendSequence !== seenSequence || this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.appended.off('append', done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.appended.on('append', done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /** One LISTEN connection per store, shared by its subscriptions; polling covers any gap while it reconnects. */
  private ensureListener(): Promise<void> {
    if (this.listener || this.closed) return Promise.resolve();
    if (this.listenerStarting) return this.listenerStarting;
    this.listenerStarting = (async () => {
      const client = new pg.Client({ connectionString: this.connectionString, keepAlive: true });
      client.on('notification', () => {
        this.appendSequence++;
        this.appended.emit('append');
      });
      client.on('error', () => {
        if (this.listener === client) this.listener = null;
        client.end().catch(() => undefined);
        if (!this.closed) setTimeout(() => void this.ensureListener().catch(() => undefined), 500).unref();
      });
      try {
        await client.connect();
        await client.query(`LISTEN ${NOTIFY_CHANNEL}`);
        if (this.closed) {
          await client.end();
          return;
        }
        this.listener = client;
      } catch {
        await client.end().catch(() => undefined);
        if (!this.closed) setTimeout(() => void this.ensureListener().catch(() => undefined), 500).unref();
      }
    })().finally(() => {
      this.listenerStarting = null;
    });
    return this.listenerStarting;
  }
}
