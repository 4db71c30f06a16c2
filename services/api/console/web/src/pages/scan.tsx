import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiFailure, app, publicApi, type ListPage, type UnknownCause } from '../api.js';
import { DataTable, useAction, type Column } from '../list.js';
import { clearAnswered, enqueueRead, readsOf, saveRead, type PlacedRead, type QueuedRead, type TagType } from '../scan-queue.js';
import { Alert, messageOf, PageTitle } from '../ui.js';
import { NameAndKey } from './tracking.js';
import { CAUSE_LABELS } from './unknown-reads.js';

/**
 * The Scan page (docs/console.md, "Scan"): a person with a scanner that types into the page
 * (keyboard wedge: keystrokes ending in Enter) or a phone's camera picks a location and scans.
 * Each read is kept in IndexedDB first (scan-queue.ts) and then sent to `POST /app/api/scans`
 * with the submission_id it got when it was kept; offline, or when the server cannot be reached,
 * reads wait and are sent when the browser is back online (the `online` event) or on a retry with
 * backoff. The list shows each read: waiting, the asset it placed (name first, key second), or why
 * it placed nothing; an open count of the zone shows its numbers.
 */

interface PickedLocation {
  id: number;
  name: string;
  external_key: string | null;
}

interface LocationHit extends PickedLocation {
  tags: Array<{ tag_type: string; value: string }>;
}

/** A count of the zone, as `GET /api/v1/counts` lists it (docs/api.md). */
interface OpenCount {
  id: number;
  name: string | null;
  expected: number;
  found: number;
  missing: number;
  misplaced: number;
  unexpected: number;
}

const TAG_TYPES: TagType[] = ['rfid', 'barcode', 'ble'];
const TAG_TYPE_LABELS: Record<TagType, string> = { rfid: 'RFID', barcode: 'Barcode', ble: 'BLE' };
/** The longest wait between two tries to reach the server. */
const MAX_BACKOFF_MS = 30_000;
const FIRST_BACKOFF_MS = 1_000;

const locationKey = (orgId: number) => `scan-location-${orgId}`;

function rememberedLocation(orgId: number): PickedLocation | null {
  try {
    const kept = localStorage.getItem(locationKey(orgId));
    return kept ? (JSON.parse(kept) as PickedLocation) : null;
  } catch {
    return null;
  }
}

/** A refusal that sending again would not change (a location deleted since, a value refused); the session's own refusals and the server's failures are retried. */
function settledRefusal(failure: unknown): failure is ApiFailure {
  return failure instanceof ApiFailure && failure.status >= 400 && failure.status < 500 && ![401, 403, 408, 429].includes(failure.status);
}

/**
 * The queue of one organization's reads and its sender: one request at a time, oldest read first;
 * a failed try waits (1 s, doubling to 30 s) unless the browser says it is back online first.
 */
function useScanQueue(orgId: number, onAnswered: () => void) {
  const [reads, setReads] = useState<QueuedRead[] | null>(null);
  const [online, setOnline] = useState(navigator.onLine);
  const [retryAt, setRetryAt] = useState<number | null>(null);
  const [stopped, setStopped] = useState<unknown>(null);
  const readsRef = useRef<QueuedRead[]>([]);
  const sending = useRef(false);
  const backoff = useRef(FIRST_BACKOFF_MS);
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  const alive = useRef(true);
  const answered = useRef(onAnswered);
  answered.current = onAnswered;

  const update = useCallback((read: QueuedRead) => {
    readsRef.current = readsRef.current.map((r) => (r.submission_id === read.submission_id ? read : r));
    if (alive.current) setReads(readsRef.current);
  }, []);

  const pump = useCallback(async () => {
    if (sending.current || !alive.current) return;
    if (!navigator.onLine) return;
    sending.current = true;
    try {
      for (;;) {
        const next = readsRef.current.find((r) => r.status === 'pending');
        if (!next || !alive.current) break;
        try {
          const { data } = await app<{ data: { reads: PlacedRead[] } }>('POST', '/scans', {
            submission_id: next.submission_id,
            device_id: 'console',
            location: { id: next.location.id },
            reads: [{ tag_type: next.tag_type, value: next.value, observed_at: next.observed_at }],
          });
          const placed = data.reads[0]!;
          const done: QueuedRead = { ...next, status: placed.asset ? 'placed' : 'unknown', placed, problem: null };
          await saveRead(done);
          update(done);
          backoff.current = FIRST_BACKOFF_MS;
          setRetryAt(null);
          setStopped(null);
          answered.current();
        } catch (failure) {
          if (settledRefusal(failure)) {
            const refused: QueuedRead = { ...next, status: 'refused', problem: messageOf(failure) };
            await saveRead(refused);
            update(refused);
            continue;
          }
          const waiting = { ...next, attempts: next.attempts + 1 };
          await saveRead(waiting);
          update(waiting);
          if (failure instanceof ApiFailure && (failure.status === 401 || failure.status === 403)) {
            // The session ended or the role changed: sending again would be refused again.
            setStopped(failure);
            break;
          }
          // Not reached (offline, a failed fetch, the server's failure): try again later.
          const delay = backoff.current;
          backoff.current = Math.min(MAX_BACKOFF_MS, delay * 2);
          setRetryAt(Date.now() + delay);
          if (timer.current) clearTimeout(timer.current);
          timer.current = setTimeout(() => {
            timer.current = null;
            void pump();
          }, delay);
          break;
        }
      }
    } finally {
      sending.current = false;
    }
  }, []);

  useEffect(() => {
    alive.current = true;
    void readsOf(orgId).then((kept) => {
      readsRef.current = kept;
      setReads(kept);
      void pump();
    }, setStopped);
    const wentOnline = () => {
      setOnline(true);
      backoff.current = FIRST_BACKOFF_MS;
      if (timer.current) clearTimeout(timer.current);
      timer.current = null;
      setRetryAt(null);
      void pump();
    };
    const wentOffline = () => setOnline(false);
    addEventListener('online', wentOnline);
    addEventListener('offline', wentOffline);
    return () => {
      alive.current = false;
      if (timer.current) clearTimeout(timer.current);
      removeEventListener('online', wentOnline);
      removeEventListener('offline', wentOffline);
    };
  }, [orgId]);

  const add = useCallback(
    async (location: PickedLocation, tagType: TagType, value: string) => {
      const queued = await enqueueRead({ org_id: orgId, location, tag_type: tagType, value });
      readsRef.current = [...readsRef.current, queued];
      setReads(readsRef.current);
      void pump();
    },
    [orgId],
  );

  const clear = useCallback(async () => {
    await clearAnswered(orgId);
    readsRef.current = readsRef.current.filter((r) => r.status === 'pending');
    setReads(readsRef.current);
  }, [orgId]);

  return { reads, online, retryAt, stopped, add, clear };
}

/** The open count of the zone, read again whenever `tick` changes; null when none is open or the counts API is not there. */
function useOpenCount(locationId: number | null, tick: number): OpenCount | null {
  const [count, setCount] = useState<OpenCount | null>(null);
  const latest = useRef(0);
  useEffect(() => {
    const request = ++latest.current;
    if (locationId === null) {
      setCount(null);
      return;
    }
    publicApi<ListPage<OpenCount>>('/counts', { status: 'open', location_id: locationId }).then(
      (page) => request === latest.current && setCount(page.data[0] ?? null),
      // A service without counts answers 404; the panel is then absent, as when none is open.
      () => request === latest.current && setCount(null),
    );
  }, [locationId, tick]);
  return count;
}

function LocationPicker({ onPick }: { onPick: (location: PickedLocation) => void }) {
  const field = useRef<HTMLInputElement>(null);
  const [hits, setHits] = useState<LocationHit[] | null>(null);
  const action = useAction();
  async function search(event: Event) {
    event.preventDefault();
    // From the field itself: a scanned label's Enter may come before the page renders its keystrokes.
    const text = field.current?.value.trim() ?? '';
    if (text === '') return;
    const found = await action.run(() => publicApi<ListPage<LocationHit>>('/locations', { q: text, limit: 20, sort: 'name' }));
    if (!found) return;
    // A shelf label scanned into the field: the one location holding exactly that tag is picked at once.
    const labelled = found.data.filter((l) => l.tags.some((t) => t.value.toLowerCase() === text.toLowerCase()));
    if (labelled.length === 1) onPick(labelled[0]!);
    else setHits(found.data);
  }
  return (
    <form class="panel" role="search" aria-label="Locations" onSubmit={search}>
      <label for="scan-location-q">Find a location, or scan its label</label>
      <div class="copy-row">
        <input id="scan-location-q" ref={field} type="search" autocomplete="off" />
        <button type="submit" disabled={action.busy}>
          Search
        </button>
      </div>
      <Alert error={action.error} />
      {hits && (
        <div role="status">
          <p class="hint">{hits.length === 0 ? 'No location matches.' : 'Pick the location you are scanning at.'}</p>
          <ul class="results">
            {hits.map((hit) => (
              <li key={hit.id} data-location-id={String(hit.id)}>
                <button type="button" onClick={() => onPick(hit)}>
                  Scan at {hit.name}
                </button>{' '}
                <span class="mono hint">{hit.external_key}</span>
              </li>
            ))}
          </ul>
        </div>
      )}
    </form>
  );
}

/** What a read shows: waiting, the asset it placed (name first, key second), or why it placed nothing. */
function Outcome({ read }: { read: QueuedRead }) {
  if (read.status === 'pending') return <span class="badge invited">Waiting</span>;
  if (read.status === 'refused') return <span class="badge revoked">{read.problem}</span>;
  const asset = read.placed?.asset;
  if (asset) return <NameAndKey name={asset.name} keyText={asset.external_key ?? String(asset.id)} href={`/assets/${asset.id}`} />;
  return <span class="badge revoked">{CAUSE_LABELS[(read.placed?.cause ?? 'unknown_tag') as UnknownCause] ?? read.placed?.cause}</span>;
}

/** The camera's reads, where the browser has BarcodeDetector: each new value once, until another is seen. */
function CameraScanner({ onRead, onClose }: { onRead: (value: string) => void; onClose: () => void }) {
  const video = useRef<HTMLVideoElement>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    let stream: MediaStream | null = null;
    let stopped = false;
    let last = '';
    const Detector = (globalThis as unknown as { BarcodeDetector: new () => { detect(source: HTMLVideoElement): Promise<Array<{ rawValue: string }>> } }).BarcodeDetector;
    const detector = new Detector();
    const look = async () => {
      if (stopped || !video.current) return;
      try {
        const [code] = await detector.detect(video.current);
        if (code && code.rawValue !== last) {
          last = code.rawValue;
          onRead(code.rawValue);
        }
      } catch {
        // A frame not ready yet: the next one is looked at.
      }
      if (!stopped) setTimeout(() => void look(), 250);
    };
    navigator.mediaDevices.getUserMedia({ video: { facingMode: 'environment' } }).then(async (media) => {
      stream = media;
      if (stopped || !video.current) return media.getTracks().forEach((t) => t.stop());
      video.current.srcObject = media;
      await video.current.play();
      void look();
    }, setError);
    return () => {
      stopped = true;
      stream?.getTracks().forEach((t) => t.stop());
    };
  }, []);
  return (
    <div class="panel camera">
      <video ref={video} muted playsInline aria-label="Camera" />
      <Alert error={error} />
      <button type="button" onClick={onClose}>
        Stop camera
      </button>
    </div>
  );
}

function statusText(pending: number, online: boolean, retryAt: number | null): string {
  if (pending === 0) return online ? 'Every read is sent.' : 'Offline: reads you scan wait here and are sent when the connection is back.';
  const reads = `${pending} read${pending === 1 ? '' : 's'}`;
  if (!online) return `Offline: ${reads} waiting; they are sent when the connection is back.`;
  if (retryAt !== null) return `${reads} waiting: the server could not be reached; trying again in ${Math.max(1, Math.round((retryAt - Date.now()) / 1000))} s.`;
  return `Sending ${reads}…`;
}

export function ScanPage({ orgId }: { orgId: number }) {
  const [location, setLocation] = useState<PickedLocation | null>(() => rememberedLocation(orgId));
  const [tagType, setTagType] = useState<TagType>('rfid');
  const [camera, setCamera] = useState(false);
  const [tick, setTick] = useState(0);
  const field = useRef<HTMLInputElement>(null);
  const queue = useScanQueue(orgId, () => setTick((t) => t + 1));
  const count = useOpenCount(location?.id ?? null, tick);
  const hasDetector = typeof (globalThis as { BarcodeDetector?: unknown }).BarcodeDetector === 'function';

  function pick(next: PickedLocation | null) {
    const kept = next ? { id: next.id, name: next.name, external_key: next.external_key } : null;
    setLocation(kept);
    try {
      if (kept) localStorage.setItem(locationKey(orgId), JSON.stringify(kept));
      else localStorage.removeItem(locationKey(orgId));
    } catch {
      // No storage: the location is forgotten on a reload.
    }
  }

  useEffect(() => {
    if (location) field.current?.focus();
  }, [location?.id]);

  function scan(event: Event) {
    event.preventDefault();
    // Read from the field itself, not from the page's state: a scanner types faster than the page
    // renders, so the state of the last render may not hold the keystrokes just before this Enter.
    const input = field.current;
    const text = input?.value.trim() ?? '';
    if (input) input.value = '';
    // The field keeps the focus, so the scanner's next read lands here too.
    field.current?.focus();
    if (text === '' || !location) return;
    void queue.add(location, tagType, text);
  }

  const reads = queue.reads ? [...queue.reads].reverse() : null;
  const pending = queue.reads?.filter((r) => r.status === 'pending').length ?? 0;
  const columns: Array<Column<QueuedRead>> = [
    { header: 'Read', cell: (r) => `${TAG_TYPE_LABELS[r.tag_type]} ${r.value}`, class: 'mono' },
    { header: 'What it is', cell: (r) => <Outcome read={r} /> },
    { header: 'Where', cell: (r) => r.location.name },
    { header: 'When', cell: (r) => new Date(r.observed_at).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' }) },
  ];

  return (
    <section class="scan-page">
      <PageTitle>Scan</PageTitle>
      {location ? (
        <div class="panel">
          <p>
            Scanning at <NameAndKey name={location.name} keyText={location.external_key ?? String(location.id)} />{' '}
            <button type="button" onClick={() => pick(null)}>
              Change location
            </button>
          </p>
          <form aria-label="Scan" onSubmit={scan}>
            <label for="scan-tag-type">Tag type</label>
            <select id="scan-tag-type" value={tagType} onChange={(e) => setTagType(e.currentTarget.value as TagType)}>
              {TAG_TYPES.map((t) => (
                <option key={t} value={t}>
                  {TAG_TYPE_LABELS[t]}
                </option>
              ))}
            </select>
            <label for="scan-value">Scan or type a tag</label>
            <div class="copy-row">
              <input
                id="scan-value"
                ref={field}
                autocomplete="off"
                autocapitalize="off"
                spellcheck={false}
                enterKeyHint="send"
              />
              <button type="submit">Add</button>
            </div>
          </form>
          {hasDetector && !camera && (
            <button type="button" onClick={() => setCamera(true)}>
              Scan with camera
            </button>
          )}
          {camera && <CameraScanner onRead={(code) => void queue.add(location, 'barcode', code)} onClose={() => setCamera(false)} />}
        </div>
      ) : (
        <LocationPicker onPick={pick} />
      )}
      {count && (
        <section class="panel count-panel" aria-label="Open count">
          <h2>Count open{count.name ? `: ${count.name}` : ''}</h2>
          <dl class="facts" data-count-id={String(count.id)}>
            <dt>Found</dt>
            <dd data-number="found">{count.found}</dd>
            <dt>Missing</dt>
            <dd data-number="missing">{count.missing}</dd>
            <dt>Unexpected</dt>
            <dd data-number="unexpected">{count.unexpected}</dd>
          </dl>
        </section>
      )}
      <p role="status" class="hint scan-status" data-pending={String(pending)}>
        {statusText(pending, queue.online, queue.retryAt)}
      </p>
      <Alert error={queue.stopped} />
      <DataTable
        label="Reads"
        columns={columns}
        rows={reads}
        rowKey={(r) => r.submission_id}
        rowProps={(r) => ({ 'data-value': r.value, 'data-status': r.status })}
        tableClass="stack"
        empty={<p>No reads yet.</p>}
      />
      {queue.reads && queue.reads.length > pending && (
        <button type="button" onClick={() => void queue.clear()}>
          Clear sent reads
        </button>
      )}
    </section>
  );
}
