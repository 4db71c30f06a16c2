import { useEffect, useRef, useState } from 'preact/hooks';
import { app, publicApi, type ListPage, type Reader, type ScanPoint } from '../api.js';
import { Alert, besidesFields, ConfirmDialog, FieldError, fieldMessage, formatTime, Notice, PageTitle, TableScroll } from '../ui.js';

/**
 * Readers and scan points of the current organization (admins; docs/web-app.md "Operator
 * endpoints"): register a fixed reader, assign one of its capture points to a location found by
 * search over the public API, unassign with confirmation. The same commands as the CLI's.
 */

interface LocationHit {
  id: number;
  name: string;
  external_key: string;
}

export function ReadersPage() {
  const [readers, setReaders] = useState<Reader[] | null>(null);
  const [points, setPoints] = useState<ScanPoint[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [unassigning, setUnassigning] = useState<ScanPoint | null>(null);

  async function load() {
    try {
      const [r, p] = await Promise.all([app<{ data: Reader[] }>('GET', '/readers'), app<{ data: ScanPoint[] }>('GET', '/scan-points')]);
      setReaders(r.data);
      setPoints(p.data);
    } catch (failure) {
      setError(failure);
    }
  }
  useEffect(() => {
    void load();
  }, []);

  async function unassign(point: ScanPoint) {
    setUnassigning(null);
    setError(null);
    try {
      await app('DELETE', `/scan-points/${encodeURIComponent(point.reader_id)}/${encodeURIComponent(point.capture_point)}`);
      await load();
      setNotice(`Capture point "${point.capture_point}" of reader "${point.reader_id}" is no longer assigned.`);
    } catch (failure) {
      setError(failure);
    }
  }

  const pointsOf = (reader: string) => points?.filter((p) => p.reader_id === reader).length ?? 0;

  return (
    <section>
      <PageTitle>Readers and scan points</PageTitle>
      <p class="hint">
        A fixed reader sends its reads with its id and the capture point (antenna, door) that took each one. A read places its asset once the reader is registered here and the capture point
        is assigned to a location.
      </p>
      {notice && <Notice>{notice}</Notice>}
      <Alert error={error} />
      <div class="two-columns">
        <RegisterReaderForm
          onRegistered={async (reader) => {
            // The notice comes with the list that shows it.
            await load();
            setNotice(`Reader "${reader.reader_id}" is registered.`);
          }}
        />
        <AssignForm
          readers={readers ?? []}
          onAssigned={async (point) => {
            await load();
            setNotice(`Capture point "${point.capture_point}" of reader "${point.reader_id}" is assigned to ${point.location_external_key ?? `location #${point.location_id}`}.`);
          }}
        />
      </div>
      <h2>Readers</h2>
      {readers === null ? (
        <p>Loading…</p>
      ) : readers.length === 0 ? (
        <p>No readers yet.</p>
      ) : (
        <TableScroll label="Readers">
          <table>
            <thead>
              <tr>
                <th scope="col">Reader</th>
                <th scope="col">Registered</th>
                <th scope="col">Scan points</th>
              </tr>
            </thead>
            <tbody>
              {readers.map((reader) => (
                <tr key={reader.reader_id} data-reader={reader.reader_id}>
                  <td class="mono">{reader.reader_id}</td>
                  <td>{formatTime(reader.registered_at)}</td>
                  <td>{pointsOf(reader.reader_id)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableScroll>
      )}
      <h2>Scan points</h2>
      {points === null ? (
        <p>Loading…</p>
      ) : points.length === 0 ? (
        <p>No capture point is assigned yet.</p>
      ) : (
        <TableScroll label="Scan points">
          <table>
            <thead>
              <tr>
                <th scope="col">Reader</th>
                <th scope="col">Capture point</th>
                <th scope="col">Location</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {points.map((point) => (
                <tr key={`${point.reader_id}\0${point.capture_point}`} data-scan-point={`${point.reader_id}/${point.capture_point}`}>
                  <td class="mono">{point.reader_id}</td>
                  <td class="mono">{point.capture_point}</td>
                  <td class="mono">{point.location_external_key ?? `#${point.location_id} (deleted)`}</td>
                  <td>
                    <button type="button" class="danger" onClick={() => setUnassigning(point)} aria-label={`Unassign capture point ${point.capture_point} of reader ${point.reader_id}`}>
                      Unassign
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableScroll>
      )}
      {unassigning && (
        <ConfirmDialog title="Unassign this capture point?" confirm="Unassign" onConfirm={() => void unassign(unassigning)} onCancel={() => setUnassigning(null)}>
          <p>
            Reads of capture point "<strong>{unassigning.capture_point}</strong>" of reader "<strong>{unassigning.reader_id}</strong>" will place nothing until it is assigned again; they
            are listed under Unknown reads.
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}

function RegisterReaderForm({ onRegistered }: { onRegistered: (reader: Reader) => Promise<void> }) {
  const [readerId, setReaderId] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  async function submit(event: Event) {
    event.preventDefault();
    setError(null);
    setBusy(true);
    try {
      const { data } = await app<{ data: Reader }>('POST', '/readers', { reader_id: readerId.trim() });
      setReaderId('');
      await onRegistered(data);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }
  const readerError = fieldMessage(error, 'reader_id');
  return (
    <form class="panel" onSubmit={submit} aria-labelledby="register-reader-title" noValidate>
      <h2 id="register-reader-title">Register a reader</h2>
      <label for="reader-id">Reader id</label>
      <input
        id="reader-id"
        class="mono"
        maxLength={255}
        value={readerId}
        onInput={(e) => setReaderId(e.currentTarget.value)}
        aria-invalid={readerError ? true : undefined}
        aria-describedby="reader-id-hint reader-id-error"
      />
      <span id="reader-id-hint" class="hint">
        As the reader sends it (its <span class="mono">reader_id</span>).
      </span>
      <FieldError id="reader-id-error" message={readerError} />
      <Alert error={besidesFields(error, 'reader_id')} />
      <button type="submit" class="primary" disabled={busy}>
        Register reader
      </button>
    </form>
  );
}

function AssignForm({ readers, onAssigned }: { readers: Reader[]; onAssigned: (point: ScanPoint) => Promise<void> }) {
  // The Unknown reads page links here with ?reader=…&capture_point=… for an unassigned capture point.
  const wanted = new URLSearchParams(window.location.search);
  const [readerId, setReaderId] = useState(wanted.get('reader') ?? '');
  const [capturePoint, setCapturePoint] = useState(wanted.get('capture_point') ?? '');
  const [locationText, setLocationText] = useState('');
  const [hits, setHits] = useState<ListPage<LocationHit> | null>(null);
  const [chosen, setChosen] = useState<LocationHit | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const locationField = useRef<HTMLInputElement>(null);

  useEffect(() => {
    if (!readerId && readers.length > 0) setReaderId(readers[0]!.reader_id);
  }, [readers]);

  async function find() {
    setError(null);
    setChosen(null);
    try {
      setHits(await publicApi<ListPage<LocationHit>>('/locations', { q: locationText.trim(), limit: 20, sort: 'name' }));
    } catch (failure) {
      setError(failure);
    }
  }

  async function submit(event: Event) {
    event.preventDefault();
    setError(null);
    setBusy(true);
    try {
      // A location chosen from the search goes by id; else the text is taken as its key.
      const location = chosen ? { id: chosen.id } : { external_key: locationText.trim() };
      const { data } = await app<{ data: ScanPoint }>('POST', '/scan-points', { reader_id: readerId, capture_point: capturePoint.trim(), location });
      setCapturePoint('');
      setLocationText('');
      setHits(null);
      setChosen(null);
      await onAssigned(data);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }

  const readerError = fieldMessage(error, 'reader_id');
  const pointError = fieldMessage(error, 'capture_point');
  const locationError = fieldMessage(error, 'location');
  return (
    <form class="panel" onSubmit={submit} aria-labelledby="assign-title" noValidate>
      <h2 id="assign-title">Assign a capture point</h2>
      <label for="assign-reader">Reader</label>
      <select id="assign-reader" value={readerId} onChange={(e) => setReaderId(e.currentTarget.value)} aria-invalid={readerError ? true : undefined} aria-describedby="assign-reader-error">
        {readers.length === 0 && <option value="">No reader registered</option>}
        {readerId && !readers.some((r) => r.reader_id === readerId) && <option value={readerId}>{readerId} (not registered)</option>}
        {readers.map((r) => (
          <option key={r.reader_id} value={r.reader_id}>
            {r.reader_id}
          </option>
        ))}
      </select>
      <FieldError id="assign-reader-error" message={readerError} />
      <label for="assign-point">Capture point</label>
      <input
        id="assign-point"
        class="mono"
        maxLength={255}
        value={capturePoint}
        onInput={(e) => setCapturePoint(e.currentTarget.value)}
        aria-invalid={pointError ? true : undefined}
        aria-describedby="assign-point-error"
      />
      <FieldError id="assign-point-error" message={pointError} />
      <label for="assign-location">Location</label>
      <div class="copy-row">
        <input
          id="assign-location"
          ref={locationField}
          type="search"
          value={chosen ? `${chosen.name} (${chosen.external_key})` : locationText}
          onInput={(e) => {
            setChosen(null);
            setLocationText(e.currentTarget.value);
          }}
          onKeyDown={(e) => {
            // Enter in the search field searches rather than assigns.
            if (e.key === 'Enter' && !chosen) {
              e.preventDefault();
              void find();
            }
          }}
          aria-invalid={locationError ? true : undefined}
          aria-describedby="assign-location-hint assign-location-error"
        />
        <button type="button" onClick={() => void find()}>
          Find location
        </button>
      </div>
      <span id="assign-location-hint" class="hint">
        Search by name or key and choose one, or type the location's exact key.
      </span>
      <FieldError id="assign-location-error" message={locationError} />
      {hits && !chosen && (
        <div role="status">
          {hits.data.length === 0 ? (
            <p class="hint">No location matches.</p>
          ) : (
            <ul class="choices" aria-label="Matching locations">
              {hits.data.map((hit) => (
                <li key={hit.id}>
                  <button
                    type="button"
                    onClick={() => {
                      setChosen(hit);
                      // The list goes away with the choice: the focus returns to the field that now shows it.
                      locationField.current?.focus();
                    }}
                    aria-label={`Choose ${hit.name} (${hit.external_key})`}
                  >
                    Choose
                  </button>{' '}
                  <span>{hit.name}</span> <span class="mono hint">{hit.external_key}</span>
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
      <Alert error={besidesFields(error, 'reader_id', 'capture_point', 'location')} />
      <button type="submit" class="primary" disabled={busy || readers.length === 0}>
        Assign
      </button>
    </form>
  );
}
