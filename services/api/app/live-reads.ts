import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import client from 'prom-client';
import type pg from 'pg';
import { ApiError } from '../../../shared/errors.js';
import type { EventStore, Position, RecordedEvent } from '../../../shared/event-store/port.js';
import type { Logger } from '../../../shared/logger.js';
import { NO_ORG, ScansRecorded, type ScansRecordedData, type UnknownCause } from '../../../shared/domain/scans/events.js';
import { decodeReads } from '../../../shared/domain/scans/read-codec.js';
import { externalKeysById } from '../../../projections/tracking/queries.js';
import { sessionsStillInTheirOrg } from '../../../projections/people/queries.js';
import { metricsRegistry } from '../../ops/metrics.js';
import { NotificationListener } from '../../../shared/db/listener.js';
import { ALERTS_CHANGED_CHANNEL, parseAlertsChanged } from '../../../projections/alerts/notice.js';

/**
 * The live view of reads as they arrive (docs/web-app.md "Live reads", docs/operations.md "Live
 * reads"): server-sent events per organization. The process subscribes once to the event store's
 * log, from its head, while it has streams open (the Postgres store wakes on LISTEN/NOTIFY, so it
 * needs no projector and works in every api process on its own), and fans each scan event out to
 * the streams of its organization whose filters match. What a stream costs the database is
 * nothing of its own: one lookup of external keys per batch of the log (for every stream at
 * once) and one check of every stream's session per second.
 *
 * The same streams carry the console's Alerts inbox (docs/web-app.md "Live alerts"): a stream
 * opened for `alerts` gets no reads, only an `alerts` notice each time the `alerts` projection
 * commits a batch that changed the organization's alerts (its NOTIFY, forwarded here from one
 * LISTEN connection per process, opened while such a stream is open).
 *
 * A stream never grows the server's memory: a read is written only while the socket holds less
 * than `bufferedBytes` unsent; past that reads are skipped and counted, the count sent as a
 * `skipped` event once the client has caught up, and a client that has not caught up within
 * `stalledMs` is dropped.
 */

export const LIVE_READS_LIMITS = {
  /** Streams open at once per organization, in one process. */
  streamsPerOrg: 20,
  /** Streams open at once in one process. */
  streamsPerProcess: 500,
  /** A comment line this often keeps proxies from closing an idle stream. */
  heartbeatMs: 15_000,
  /** How often the sessions of open streams are checked (signed out, expired, no longer a member). */
  sessionCheckMs: 1_000,
  /** Unsent bytes a stream may hold; reads past it are skipped. */
  bufferedBytes: 1024 * 1024,
  /** A stream still skipping after this long is dropped. */
  stalledMs: 10_000,
  /** The subscription stops this long after its last stream closed. */
  idleMs: 5_000,
  /** How long an open waits for the subscription to read the log's head. */
  subscribeTimeoutMs: 5_000,
};

export type LiveReadsLimits = typeof LIVE_READS_LIMITS;

export interface LiveReadFilters {
  reader: string | null;
  capturePoint: string | null;
}

/** One read on the stream (`event: read`). */
export interface LiveRead {
  source: 'fixed' | 'handheld';
  reader_id: string | null;
  capture_point: string | null;
  device_id: string | null;
  tag_type: string;
  value: string;
  asset: { id: number; external_key: string | null } | null;
  location: { id: number; external_key: string | null } | null;
  /** Null for a read that placed its asset; else why it placed nothing. */
  cause: UnknownCause | null;
  observed_at: string;
  rssi: number | null;
  /** When the event that carries it was recorded: how late the stream shows it. */
  recorded_at: string;
}

const streamsOpen = new client.Gauge({
  name: 'tracking_live_streams',
  help: 'Live read streams (server-sent events) open in this process',
  registers: [metricsRegistry],
});
const streamsClosed = new client.Counter({
  name: 'tracking_live_streams_closed_total',
  help: 'Live read streams closed by the server, by reason (slow: dropped as a client that did not keep up; session: signed out, expired or no longer a member; shutdown)',
  labelNames: ['reason'] as const,
  registers: [metricsRegistry],
});
const readsSkipped = new client.Counter({
  name: 'tracking_live_reads_skipped_total',
  help: 'Reads not written to a live stream because its client had not read what it was sent',
  registers: [metricsRegistry],
});

const WRITE_CHUNK = 16 * 1024;

const CLOSE_REASONS = ['slow', 'session', 'shutdown'] as const;
type CloseReason = (typeof CLOSE_REASONS)[number];
// Every reason is a series from the start (at 0), so a dashboard's rate has something to read.
for (const reason of CLOSE_REASONS) streamsClosed.labels({ reason }).inc(0);

/** What a stream carries: every read (the Live reads page), or notices that alerts changed (the Alerts inbox). */
export type LiveTopic = 'reads' | 'alerts';

/** One client's server-sent-events stream of the live view, with its filters. */
class LiveReadStream {
  skipped = 0;
  stalledSince: number | null = null;
  closed = false;

  constructor(
    readonly raw: ServerResponse,
    readonly orgId: number,
    readonly sessionId: string,
    readonly filters: LiveReadFilters,
    private readonly limits: LiveReadsLimits,
    readonly topic: LiveTopic = 'reads',
  ) {}

  matches(read: LiveRead): boolean {
    return (
      this.topic === 'reads' &&
      (this.filters.reader === null || read.reader_id === this.filters.reader) &&
      (this.filters.capturePoint === null || read.capture_point === this.filters.capturePoint)
    );
  }

  /** Writes the reads it matches while the socket has room; counts the others. False when it is too slow to keep. */
  send(reads: readonly { read: LiveRead; text: string }[]): boolean {
    let chunk = '';
    const skippedBefore = this.skipped;
    for (const { read, text } of reads) {
      if (!this.matches(read)) continue;
      if (this.raw.writableLength + chunk.length + text.length > this.limits.bufferedBytes) {
        this.skipped++;
        continue;
      }
      chunk += text;
      // Written as it grows: the socket takes what it can at once, and only the rest counts against the bound.
      if (chunk.length >= WRITE_CHUNK) {
        this.raw.write(chunk);
        chunk = '';
      }
    }
    if (chunk) this.raw.write(chunk);
    if (this.skipped > skippedBefore) readsSkipped.inc(this.skipped - skippedBefore);
    return this.checkStall();
  }

  /** Writes one notice that alerts changed; one the socket has no room for is counted as skipped (a later `skipped` event makes the page read again). */
  notice(text: string): boolean {
    if (this.raw.writableLength + text.length > this.limits.bufferedBytes) {
      this.skipped++;
      readsSkipped.inc();
    } else {
      this.raw.write(text);
    }
    return this.checkStall();
  }

  /** Starts or ends the stall clock; false once it has run longer than allowed. */
  checkStall(): boolean {
    if (this.skipped === 0) return true;
    if (this.raw.writableLength === 0 || this.raw.writableLength + 256 < this.limits.bufferedBytes / 2) {
      // Caught up: say how many were skipped, and go on.
      this.raw.write(`event: skipped\ndata: ${JSON.stringify({ count: this.skipped })}\n\n`);
      this.skipped = 0;
      this.stalledSince = null;
      return true;
    }
    this.stalledSince ??= Date.now();
    return Date.now() - this.stalledSince <= this.limits.stalledMs;
  }
}

export interface LiveReadsDependencies {
  store: EventStore;
  pool: pg.Pool;
  log: Logger;
  /** The connection the notices that alerts changed are listened on; without it no alerts stream opens (503). */
  databaseUrl?: string;
}

/** The live-read fan-out of one api process. */
export class LiveReadsHub {
  private readonly streams = new Set<LiveReadStream>();
  private readonly byOrg = new Map<number, Set<LiveReadStream>>();
  private subscription: { abort: AbortController; ready: Promise<void>; done: Promise<void> } | null = null;
  private idleTimer: NodeJS.Timeout | null = null;
  private readonly heartbeat: NodeJS.Timeout;
  private readonly sessionCheck: NodeJS.Timeout;
  private checkingSessions = false;
  private closing = false;
  /** The LISTEN for alert notices, started with the first alerts stream; the schema of the current read model. */
  private alertsListener: { listener: NotificationListener; started: Promise<void> } | null = null;
  private currentSchema: Promise<string> | null = null;

  constructor(
    private readonly deps: LiveReadsDependencies,
    private readonly limits: LiveReadsLimits = LIVE_READS_LIMITS,
  ) {
    this.heartbeat = setInterval(() => this.beat(), limits.heartbeatMs).unref();
    this.sessionCheck = setInterval(() => void this.checkSessions(), limits.sessionCheckMs).unref();
  }

  /** Refuses a stream over a bound, before anything is written. */
  private admit(orgId: number): void {
    if (this.closing) throw new ApiError('service_unavailable', 'The service is stopping', { 'Retry-After': '1' });
    if (this.streams.size >= this.limits.streamsPerProcess) {
      throw new ApiError('rate_limited', `Too many live streams on this server (${this.limits.streamsPerProcess}); retry later`, { 'Retry-After': '5' });
    }
    if ((this.byOrg.get(orgId)?.size ?? 0) >= this.limits.streamsPerOrg) {
      throw new ApiError('rate_limited', `Too many live streams for this organization (${this.limits.streamsPerOrg}); close one first`, { 'Retry-After': '5' });
    }
  }

  /**
   * Opens a stream for a signed-in user of `orgId`: checks the bounds, waits until the log's head
   * is read (every read appended after the `ready` event reaches the stream), then answers 200
   * `text/event-stream` itself.
   */
  async open(reply: FastifyReply, input: { orgId: number; sessionId: string; filters: LiveReadFilters; requestId: string; topic?: LiveTopic }): Promise<void> {
    const topic = input.topic ?? 'reads';
    this.admit(input.orgId);
    // Reads come from the log; alert notices from the projection's NOTIFY.
    const ready = topic === 'reads' ? this.subscribe().ready : this.listenForAlerts();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), this.limits.subscribeTimeoutMs)));
    const outcome = await Promise.race([
      ready.then(
        () => 'ready' as const,
        (error: unknown) => (this.deps.log.warn({ err: error }, 'live alerts: could not listen for notices'), 'timeout' as const),
      ),
      timedOut,
    ]).finally(() => clearTimeout(timer));
    if (outcome === 'timeout') throw new ApiError('service_unavailable', topic === 'reads' ? 'The event store did not answer; retry' : 'The database did not answer; retry', { 'Retry-After': '1' });
    // Checked again: other streams may have opened while this one waited.
    this.admit(input.orgId);

    reply.hijack();
    const raw = reply.raw;
    raw.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-store',
      Connection: 'keep-alive',
      'X-Accel-Buffering': 'no',
      'X-Request-ID': input.requestId,
    });
    raw.socket?.setNoDelay(true);
    const stream = new LiveReadStream(raw, input.orgId, input.sessionId, input.filters, this.limits, topic);
    this.streams.add(stream);
    const ofOrg = this.byOrg.get(input.orgId) ?? new Set<LiveReadStream>();
    ofOrg.add(stream);
    this.byOrg.set(input.orgId, ofOrg);
    streamsOpen.set(this.streams.size);
    raw.on('close', () => this.forget(stream));
    raw.on('drain', () => {
      if (!stream.checkStall()) this.drop(stream, 'slow');
    });
    const hello =
      topic === 'reads'
        ? { org_id: input.orgId, reader: input.filters.reader, capture_point: input.filters.capturePoint, heartbeat_seconds: this.limits.heartbeatMs / 1000 }
        : { org_id: input.orgId, heartbeat_seconds: this.limits.heartbeatMs / 1000 };
    raw.write(`retry: 5000\nevent: ready\ndata: ${JSON.stringify(hello)}\n\n`);
  }

  private forget(stream: LiveReadStream): void {
    if (!this.streams.delete(stream)) return;
    stream.closed = true;
    const ofOrg = this.byOrg.get(stream.orgId);
    ofOrg?.delete(stream);
    if (ofOrg?.size === 0) this.byOrg.delete(stream.orgId);
    streamsOpen.set(this.streams.size);
    if (this.streams.size === 0) this.stopWhenIdle();
  }

  /** Ends a stream from the server's side: with a last `closed` event, except for a client too slow to read it. */
  private drop(stream: LiveReadStream, reason: CloseReason): void {
    if (stream.closed) return;
    streamsClosed.inc({ reason });
    this.forget(stream);
    if (reason === 'slow') {
      stream.raw.destroy();
      return;
    }
    stream.raw.end(`event: closed\ndata: ${JSON.stringify({ reason: reason === 'session' ? 'session_ended' : 'shutdown' })}\n\n`);
  }

  private beat(): void {
    for (const stream of this.streams) {
      if (!stream.checkStall()) this.drop(stream, 'slow');
      else if (stream.skipped === 0) stream.raw.write(': heartbeat\n\n');
    }
  }

  /** Closes the streams whose session has ended, expired, moved to another organization or lost its membership. */
  private async checkSessions(): Promise<void> {
    if (this.streams.size === 0 || this.checkingSessions) return;
    this.checkingSessions = true;
    try {
      const ids = [...new Set([...this.streams].map((s) => s.sessionId))];
      const stillIn = new Set((await sessionsStillInTheirOrg(this.deps.pool, ids)).map((r) => `${r.id_sha256}/${r.org_id}`));
      for (const stream of this.streams) if (!stillIn.has(`${stream.sessionId}/${stream.orgId}`)) this.drop(stream, 'session');
    } catch (error) {
      // The database is away: the streams go on, and the next check decides.
      this.deps.log.warn({ err: error }, 'live reads: could not check the sessions of open streams');
    } finally {
      this.checkingSessions = false;
    }
  }

  private stopWhenIdle(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      this.idleTimer = null;
      if (this.streams.size > 0) return;
      this.subscription?.abort.abort();
      this.subscription = null;
      const alerts = this.alertsListener;
      this.alertsListener = null;
      void alerts?.listener.stop();
    }, this.limits.idleMs).unref();
  }

  /**
   * Starts (once) the LISTEN for the notices that alerts changed; resolves once it listens. A
   * notice of the current read model's schema goes to the alerts streams of the organizations it
   * names; after a lost connection, every alerts stream gets one (what it missed is unknown).
   */
  private listenForAlerts(): Promise<void> {
    if (this.idleTimer) {
      clearTimeout(this.idleTimer);
      this.idleTimer = null;
    }
    if (this.alertsListener) return this.alertsListener.started;
    const databaseUrl = this.deps.databaseUrl;
    if (!databaseUrl) return Promise.reject(new ApiError('service_unavailable', 'Live alerts are not available in this process', { 'Retry-After': '5' }));
    // The current read model's schema, as the pool's search_path names it: a rebuild's notices name their own.
    this.currentSchema ??= this.deps.pool.query<{ schema: string }>('SELECT current_schema() AS schema').then((r) => r.rows[0]!.schema);
    const schema = this.currentSchema;
    schema.catch(() => (this.currentSchema = null));
    const listener = new NotificationListener({
      connectionString: databaseUrl,
      channels: [ALERTS_CHANGED_CHANNEL],
      onNotification: (message) => {
        const change = parseAlertsChanged(message.payload ?? '');
        if (!change) return;
        void schema.then((current) => {
          if (change.schema === current) this.noticeAlerts(change.orgIds);
        });
      },
      onListening: (reconnected) => {
        if (reconnected) this.noticeAlerts(null);
      },
      onLost: (error) => this.deps.log.warn({ err: error }, 'live alerts: the LISTEN connection was lost; reconnecting'),
    });
    const started = schema.then(() => listener.start());
    started.catch(() => {
      // Not listening: the next open tries again.
      if (this.alertsListener?.listener === listener) this.alertsListener = null;
      void listener.stop();
    });
    this.alertsListener = { listener, started };
    return started;
  }

  /** An `alerts` notice to the alerts streams of these organizations (null: every one). */
  private noticeAlerts(orgIds: readonly number[] | null): void {
    const text = `event: alerts\ndata: ${JSON.stringify({ at: new Date().toISOString() })}\n\n`;
    const targets = orgIds === null ? [...this.streams] : orgIds.flatMap((orgId) => [...(this.byOrg.get(orgId) ?? [])]);
    for (const stream of targets) {
      if (stream.topic !== 'alerts' || stream.closed) continue;
      if (!stream.notice(text)) this.drop(stream, 'slow');
    }
  }

  /** The subscription to the log, started on first use from its head. */
  private subscribe(): { ready: Promise<void> } {
    if (this.idleTimer) {
      clearTimeout(this.idleTimer);
      this.idleTimer = null;
    }
    if (this.subscription) return this.subscription;
    const abort = new AbortController();
    let markReady!: () => void;
    const ready = new Promise<void>((resolve) => (markReady = resolve));
    const done = this.follow(abort.signal, markReady);
    this.subscription = { abort, ready, done };
    return this.subscription;
  }

  private async follow(signal: AbortSignal, markReady: () => void): Promise<void> {
    let after: Position | null = null;
    while (!signal.aborted) {
      try {
        after ??= await this.deps.store.headPosition();
        markReady();
        for await (const batch of this.deps.store.subscribeToAll({ after, signal, filter: { eventTypes: [ScansRecorded.type] } })) {
          if (batch.events.length > 0) await this.fanOut(batch.events);
          after = batch.position;
        }
      } catch (error) {
        if (signal.aborted) break;
        this.deps.log.warn({ err: error }, 'live reads: the subscription to the log failed; resuming in a second');
        await new Promise((resolve) => setTimeout(resolve, 1000).unref());
      }
    }
  }

  /** Each read of the events to the streams of its organization whose filters it matches. */
  private async fanOut(events: readonly RecordedEvent[]): Promise<void> {
    const wanted = events.filter((e) => {
      const orgId = (e.data as ScansRecordedData).org_id;
      return orgId !== NO_ORG && this.byOrg.has(orgId);
    });
    if (wanted.length === 0) return;
    const decoded = wanted.map((event) => ({ event, data: event.data as ScansRecordedData, reads: decodeReads(event.data as ScansRecordedData) }));
    const assetIds = new Set<number>();
    const locationIds = new Set<number>();
    for (const { data, reads } of decoded) {
      if (data.location_id !== null) locationIds.add(data.location_id);
      for (const read of reads) if (read.assetId !== null) assetIds.add(read.assetId);
    }
    // One statement for every stream: the labels a page shows. Without it (the database away) the ids still go out.
    const keys = await externalKeysById(this.deps.pool, [...assetIds], [...locationIds]).catch((error: unknown) => {
      this.deps.log.warn({ err: error }, 'live reads: could not look up external keys');
      return { assets: new Map(), locations: new Map() };
    });
    const byOrg = new Map<number, Array<{ read: LiveRead; text: string }>>();
    for (const { event, data, reads } of decoded) {
      const recordedAt = event.recordedAt.toISOString();
      const location = data.location_id === null ? null : { id: data.location_id, external_key: keys.locations.get(data.location_id)?.externalKey ?? null };
      const list = byOrg.get(data.org_id) ?? [];
      byOrg.set(data.org_id, list);
      for (const read of reads) {
        const live: LiveRead = {
          source: data.source.kind === 'reader' ? 'fixed' : 'handheld',
          reader_id: data.source.kind === 'reader' ? data.source.reader_id : null,
          capture_point: read.capturePoint ?? null,
          device_id: data.source.kind === 'handheld' ? data.source.device_id : null,
          tag_type: read.tag_type,
          value: read.value,
          asset: read.assetId === null ? null : { id: read.assetId, external_key: keys.assets.get(read.assetId)?.externalKey ?? null },
          location,
          cause: read.cause,
          observed_at: new Date(Math.floor(read.observedUs / 1000)).toISOString(),
          rssi: read.rssi,
          recorded_at: recordedAt,
        };
        list.push({ read: live, text: `event: read\ndata: ${JSON.stringify(live)}\n\n` });
      }
    }
    for (const [orgId, reads] of byOrg) {
      for (const stream of this.byOrg.get(orgId) ?? []) {
        if (!stream.send(reads)) this.drop(stream, 'slow');
      }
    }
  }

  /** Ends every stream and the subscription (the api role stops: its listener can then close). */
  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.heartbeat);
    clearInterval(this.sessionCheck);
    if (this.idleTimer) clearTimeout(this.idleTimer);
    for (const stream of [...this.streams]) this.drop(stream, 'shutdown');
    const subscription = this.subscription;
    this.subscription = null;
    subscription?.abort.abort();
    await subscription?.done.catch(() => undefined);
    const alerts = this.alertsListener;
    this.alertsListener = null;
    await alerts?.listener.stop();
  }
}
