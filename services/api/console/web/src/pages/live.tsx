import { useEffect, useRef, useState } from 'preact/hooks';
import type { LiveRead } from '../api.js';
import { DataTable, type Column } from '../list.js';
import { type StreamAttempts, useStreamAttempts } from '../stream-retry.js';
import { Alert, Notice, PageTitle } from '../ui.js';
import { useNames } from './names.js';
import { NameAndKey } from './tracking.js';
import { CAUSE_LABELS } from './unknown-reads.js';

/**
 * Reads as they arrive (docs/web-app.md "Live reads"): an EventSource on /app/api/live/reads
 * (same origin, the session cookie), filtered by reader and capture point as query parameters.
 * The page keeps at most MAX_ROWS reads, newest first, paused or not, so a busy organization
 * cannot grow its memory; what the server left out is said, not hidden.
 */

export const MAX_ROWS = 200;

interface Row extends LiveRead {
  seq: number;
}

interface Filters {
  reader: string;
  capture_point: string;
}

type Connection = 'connecting' | 'open' | 'reconnecting' | 'ended' | 'failed';

const CONNECTION_TEXT: Record<Connection, string> = {
  connecting: 'Connecting…',
  open: 'Receiving reads as they arrive.',
  reconnecting: 'Connection lost; reconnecting…',
  ended: 'The session ended: sign in again to see reads.',
  failed: 'The server refused the stream; trying again in a moment.',
};

/** A read's time to the second: reads a second apart must not look alike. */
function readTime(value: string): string {
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? value : date.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

/** Newest first, at most MAX_ROWS. */
function prepend(rows: Row[], newer: Row[]): Row[] {
  return [...newer.slice(-MAX_ROWS).reverse(), ...rows].slice(0, MAX_ROWS);
}

/** An asset's or a location's name first, its key after it (docs/console.md, "Names first"); its id when it has no key any more. */
function named(record: { id: number; external_key: string | null } | null, names: Map<string, string>, href?: string) {
  if (!record) return '—';
  if (record.external_key === null) return href ? <a href={href}>#{record.id}</a> : `#${record.id}`;
  return <NameAndKey name={names.get(record.external_key)} keyText={record.external_key} href={href} />;
}

const liveColumns = (assets: Map<string, string>, locations: Map<string, string>): Array<Column<Row>> => [
  { header: 'Observed', cell: (read) => <time dateTime={read.observed_at}>{readTime(read.observed_at)}</time> },
  { header: 'Tag', class: 'mono', cell: (read) => `${read.tag_type} ${read.value}` },
  { header: 'Asset', cell: (read) => named(read.asset, assets, read.asset ? `/assets/${read.asset.id}` : undefined) },
  { header: 'Location', cell: (read) => named(read.location, locations) },
  { header: 'Source', class: 'mono', cell: (read) => (read.source === 'fixed' ? `${read.reader_id ?? ''} / ${read.capture_point ?? ''}` : `handheld ${read.device_id ?? ''}`) },
  { header: 'Result', cell: (read) => (read.cause ? <span class="badge revoked">{CAUSE_LABELS[read.cause] ?? read.cause}</span> : <span class="badge active">Placed</span>) },
];

/**
 * The stream of reads for these filters: newest first, at most MAX_ROWS; while paused, new reads
 * are held (bounded the same way) until `resume`.
 */
function useReadStream(filters: Filters, attempts: StreamAttempts) {
  const [rows, setRows] = useState<Row[]>([]);
  const [paused, setPaused] = useState(false);
  // Reads that arrived while paused, bounded like the list; shown on resume.
  const held = useRef<Row[]>([]);
  const [heldCount, setHeldCount] = useState(0);
  const [skipped, setSkipped] = useState(0);
  const [connection, setConnection] = useState<Connection>('connecting');
  const pausedRef = useRef(paused);
  pausedRef.current = paused;

  useEffect(() => {
    const params = new URLSearchParams();
    if (filters.reader.trim()) params.set('reader', filters.reader.trim());
    if (filters.capture_point.trim()) params.set('capture_point', filters.capture_point.trim());
    const source = new EventSource(`/app/api/live/reads${params.size > 0 ? `?${params}` : ''}`);
    let seq = 0;
    // Reads of one burst are added in one render.
    let pending: Row[] = [];
    let flush: ReturnType<typeof setTimeout> | null = null;
    let retry: (() => void) | null = null;
    let ended = false;
    setConnection('connecting');
    source.addEventListener('ready', () => {
      setConnection('open');
      attempts.opened();
    });
    source.addEventListener('read', (event) => {
      pending.push({ ...(JSON.parse((event as MessageEvent<string>).data) as LiveRead), seq: ++seq });
      if (pending.length > MAX_ROWS) pending = pending.slice(-MAX_ROWS);
      flush ??= setTimeout(() => {
        flush = null;
        const batch = pending;
        pending = [];
        if (pausedRef.current) {
          held.current = prepend(held.current, batch);
          setHeldCount((n) => n + batch.length);
        } else {
          setRows((current) => prepend(current, batch));
        }
      }, 50);
    });
    source.addEventListener('skipped', (event) => {
      const { count } = JSON.parse((event as MessageEvent<string>).data) as { count: number };
      setSkipped((n) => n + count);
    });
    source.addEventListener('closed', (event) => {
      const { reason } = JSON.parse((event as MessageEvent<string>).data) as { reason: string };
      // After a shutdown the browser reconnects by itself; a session that ended must not.
      if (reason === 'session_ended') {
        ended = true;
        source.close();
        setConnection('ended');
      }
    });
    source.onerror = () => {
      if (ended) return;
      // CONNECTING: the browser retries by itself; CLOSED: the server refused (403, 429, 503), and the page opens another later.
      if (source.readyState !== EventSource.CLOSED) {
        setConnection('reconnecting');
        return;
      }
      setConnection('failed');
      retry ??= attempts.refused();
    };
    return () => {
      source.close();
      retry?.();
      if (flush) clearTimeout(flush);
    };
  }, [filters, attempts.attempt]);

  function resume() {
    setRows((current) => prepend(current, [...held.current].reverse()));
    held.current = [];
    setHeldCount(0);
    setPaused(false);
  }
  /** A new filter starts an empty list. */
  function reset() {
    setRows([]);
    held.current = [];
    setHeldCount(0);
    setSkipped(0);
  }
  return { rows, reset, clear: () => setRows([]), paused, pause: () => setPaused(true), resume, heldCount, skipped, connection };
}

export function LivePage() {
  const [filters, setFilters] = useState<Filters>({ reader: '', capture_point: '' });
  const attempts = useStreamAttempts();
  const stream = useReadStream(filters, attempts);
  const { connection, paused, heldCount, skipped, rows } = stream;
  // Names of the reads on the page, fetched for keys not seen yet: one request per kind and batch, never per read.
  const assets = useNames('assets', rows.map((read) => read.asset?.external_key));
  const locations = useNames('locations', rows.map((read) => read.location?.external_key));

  return (
    <section>
      <PageTitle>Live reads</PageTitle>
      <p class="hint">
        Every read of this organization as the service records it, placed or not; the newest {MAX_ROWS} are kept on the page. Nothing earlier is shown: the list starts when the page
        connects.
      </p>
      <LiveFilters
        onApply={(next) => {
          stream.reset();
          setFilters({ ...next });
        }}
      />
      <div class="live-bar">
        <p role="status" class={`connection ${connection}`}>
          {CONNECTION_TEXT[connection]}
          {(filters.reader || filters.capture_point) && connection === 'open' && (
            <span class="hint">
              {' '}
              Filtered: {[filters.reader && `reader ${filters.reader}`, filters.capture_point && `capture point ${filters.capture_point}`].filter(Boolean).join(', ')}.
            </span>
          )}
        </p>
        <div class="row-actions">
          {paused ? (
            <button type="button" onClick={stream.resume}>
              Resume
            </button>
          ) : (
            <button type="button" onClick={stream.pause}>
              Pause
            </button>
          )}
          <button type="button" onClick={stream.clear} disabled={rows.length === 0}>
            Clear
          </button>
          {(connection === 'failed' || connection === 'ended') && (
            <button type="button" onClick={attempts.now}>
              Reconnect
            </button>
          )}
        </div>
      </div>
      {connection === 'failed' && <Alert error={new Error('The live stream could not be opened (too many open streams, the service busy, or no longer allowed); the page tries again by itself, waiting longer each time.')} />}
      {paused && <Notice>Paused: {heldCount === 0 ? 'no new reads yet.' : `${heldCount} new read${heldCount === 1 ? '' : 's'} waiting (the newest ${MAX_ROWS} are kept).`}</Notice>}
      {skipped > 0 && (
        <p class="alert" role="alert">
          The server left out {skipped} read{skipped === 1 ? '' : 's'}: this page did not keep up. They are recorded; only this view missed them.
        </p>
      )}
      <DataTable
        label="Live reads, newest first"
        tableClass="live wide"
        columns={liveColumns(assets, locations)}
        rows={rows}
        rowKey={(read) => read.seq}
        rowProps={(read) => ({ class: read.cause ? 'unplaced' : undefined, 'data-value': read.value })}
        empty="No reads yet."
      />
    </section>
  );
}

function LiveFilters({ onApply }: { onApply: (filters: Filters) => void }) {
  const [draft, setDraft] = useState<Filters>({ reader: '', capture_point: '' });
  return (
    <form
      class="panel filters"
      aria-labelledby="live-filters"
      onSubmit={(e) => {
        e.preventDefault();
        onApply(draft);
      }}
    >
      <h2 id="live-filters">Filters</h2>
      <div class="inline-fields">
        <div>
          <label for="live-reader">Reader</label>
          <input id="live-reader" class="mono" value={draft.reader} maxLength={255} onInput={(e) => setDraft({ ...draft, reader: e.currentTarget.value })} />
        </div>
        <div>
          <label for="live-point">Capture point</label>
          <input id="live-point" class="mono" value={draft.capture_point} maxLength={255} onInput={(e) => setDraft({ ...draft, capture_point: e.currentTarget.value })} />
        </div>
      </div>
      <span class="hint">Empty: every read. A filter keeps only fixed readers' reads (handhelds have no reader).</span>
      <button type="submit">Apply</button>
    </form>
  );
}
