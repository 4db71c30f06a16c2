import { useEffect, useRef, useState } from 'preact/hooks';
import { app, publicApi, type ListPage, type Reader, type ScanPoint } from '../api.js';
import { DataTable, useAction, useLoad, type Column } from '../list.js';
import { Alert, besidesFields, ConfirmDialog, FieldError, fieldMessage, formatTime, Notice, PageTitle } from '../ui.js';
import { useNames } from './names.js';
import { NameAndKey } from './tracking.js';

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

const READER_COLUMNS = (pointsOf: (reader: string) => number): Array<Column<Reader>> => [
  { header: 'Reader', class: 'mono', cell: (reader) => reader.reader_id },
  { header: 'Registered', cell: (reader) => formatTime(reader.registered_at) },
  { header: 'Scan points', cell: (reader) => pointsOf(reader.reader_id) },
];

const POINT_COLUMNS = (unassign: (point: ScanPoint) => void, locations: Map<string, string>): Array<Column<ScanPoint>> => [
  { header: 'Reader', class: 'mono', cell: (point) => point.reader_id },
  { header: 'Capture point', class: 'mono', cell: (point) => point.capture_point },
  // The location's name first, its key after it (docs/console.md, "Names first").
  {
    header: 'Location',
    cell: (point) => (point.location_external_key === null ? `#${point.location_id} (deleted)` : <NameAndKey name={locations.get(point.location_external_key)} keyText={point.location_external_key} />),
  },
  {
    header: 'Actions',
    hiddenHeader: true,
    cell: (point) => (
      <button type="button" class="danger" onClick={() => unassign(point)} aria-label={`Unassign capture point ${point.capture_point} of reader ${point.reader_id}`}>
        Unassign
      </button>
    ),
  },
];

export function ReadersPage() {
  const lists = useLoad(async () => {
    const [r, p] = await Promise.all([app<{ data: Reader[] }>('GET', '/readers'), app<{ data: ScanPoint[] }>('GET', '/scan-points')]);
    return { readers: r.data, points: p.data };
  }, []);
  const action = useAction();
  const [unassigning, setUnassigning] = useState<ScanPoint | null>(null);

  function unassign(point: ScanPoint) {
    setUnassigning(null);
    void action.run(
      () => app('DELETE', `/scan-points/${encodeURIComponent(point.reader_id)}/${encodeURIComponent(point.capture_point)}`).then(lists.reload),
      `Capture point "${point.capture_point}" of reader "${point.reader_id}" is no longer assigned.`,
    );
  }
  // The notice comes with the list that shows it.
  const reloadThen = (notice: string) => action.run(lists.reload, notice).then(() => undefined);
  const locations = useNames('locations', lists.data?.points.map((p) => p.location_external_key) ?? []);
  const pointsOf = (reader: string) => lists.data?.points.filter((p) => p.reader_id === reader).length ?? 0;

  return (
    <section>
      <PageTitle>Readers and scan points</PageTitle>
      <p class="hint">
        A fixed reader sends its reads with its id and the capture point (antenna, door) that took each one. A read places its asset once the reader is registered here and the capture point
        is assigned to a location.
      </p>
      {action.notice && <Notice>{action.notice}</Notice>}
      <Alert error={action.error ?? lists.error} />
      <div class="two-columns">
        <RegisterReaderForm onRegistered={(reader) => reloadThen(`Reader "${reader.reader_id}" is registered.`)} />
        <AssignForm
          readers={lists.data?.readers ?? []}
          onAssigned={(point) =>
            reloadThen(`Capture point "${point.capture_point}" of reader "${point.reader_id}" is assigned to ${point.location_external_key ?? `location #${point.location_id}`}.`)
          }
        />
      </div>
      <h2>Readers</h2>
      <DataTable label="Readers" columns={READER_COLUMNS(pointsOf)} rows={lists.data?.readers ?? null} rowKey={(r) => r.reader_id} rowProps={(r) => ({ 'data-reader': r.reader_id })} empty="No readers yet." />
      <h2>Scan points</h2>
      <DataTable
        label="Scan points"
        columns={POINT_COLUMNS(setUnassigning, locations)}
        rows={lists.data?.points ?? null}
        rowKey={(p) => `${p.reader_id}\0${p.capture_point}`}
        rowProps={(p) => ({ 'data-scan-point': `${p.reader_id}/${p.capture_point}` })}
        empty="No capture point is assigned yet."
      />
      {unassigning && (
        <ConfirmDialog title="Unassign this capture point?" confirm="Unassign" onConfirm={() => unassign(unassigning)} onCancel={() => setUnassigning(null)}>
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
  const action = useAction();
  async function submit(event: Event) {
    event.preventDefault();
    const answer = await action.run(() => app<{ data: Reader }>('POST', '/readers', { reader_id: readerId.trim() }));
    if (!answer) return;
    setReaderId('');
    await onRegistered(answer.data);
  }
  const error = action.error;
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
      <button type="submit" class="primary" disabled={action.busy}>
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
  const [location, setLocation] = useState<{ text: string; chosen: LocationHit | null }>({ text: '', chosen: null });
  // A new finder (no list of matches) after each assignment.
  const [round, setRound] = useState(0);
  const action = useAction();

  useEffect(() => {
    if (!readerId && readers.length > 0) setReaderId(readers[0]!.reader_id);
  }, [readers]);

  async function submit(event: Event) {
    event.preventDefault();
    // A location chosen from the search goes by id; else the text is taken as its key.
    const where = location.chosen ? { id: location.chosen.id } : { external_key: location.text.trim() };
    await action.run(async () => {
      const { data } = await app<{ data: ScanPoint }>('POST', '/scan-points', { reader_id: readerId, capture_point: capturePoint.trim(), location: where });
      setCapturePoint('');
      setLocation({ text: '', chosen: null });
      setRound((n) => n + 1);
      await onAssigned(data);
    });
  }

  const error = action.error;
  const readerError = fieldMessage(error, 'reader_id');
  const pointError = fieldMessage(error, 'capture_point');
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
      <LocationFinder key={round} value={location} onChange={setLocation} error={fieldMessage(error, 'location')} />
      <Alert error={besidesFields(error, 'reader_id', 'capture_point', 'location')} />
      <button type="submit" class="primary" disabled={action.busy || readers.length === 0}>
        Assign
      </button>
    </form>
  );
}

/** The location field: search by name or key and choose one, or type an exact key. */
function LocationFinder(props: { value: { text: string; chosen: LocationHit | null }; onChange: (value: { text: string; chosen: LocationHit | null }) => void; error: string | null }) {
  const { text, chosen } = props.value;
  const [hits, setHits] = useState<ListPage<LocationHit> | null>(null);
  const search = useAction();
  const locationField = useRef<HTMLInputElement>(null);
  async function find() {
    props.onChange({ text, chosen: null });
    const found = await search.run(() => publicApi<ListPage<LocationHit>>('/locations', { q: text.trim(), limit: 20, sort: 'name' }));
    if (found) setHits(found);
  }
  return (
    <>
      <label for="assign-location">Location</label>
      <div class="copy-row">
        <input
          id="assign-location"
          ref={locationField}
          type="search"
          value={chosen ? `${chosen.name} (${chosen.external_key})` : text}
          onInput={(e) => props.onChange({ text: e.currentTarget.value, chosen: null })}
          onKeyDown={(e) => {
            // Enter in the search field searches rather than assigns.
            if (e.key === 'Enter' && !chosen) {
              e.preventDefault();
              void find();
            }
          }}
          aria-invalid={props.error ? true : undefined}
          aria-describedby="assign-location-hint assign-location-error"
        />
        <button type="button" onClick={() => void find()}>
          Find location
        </button>
      </div>
      <span id="assign-location-hint" class="hint">
        Search by name or key and choose one, or type the location's exact key.
      </span>
      <FieldError id="assign-location-error" message={props.error} />
      <Alert error={search.error} />
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
                      props.onChange({ text, chosen: hit });
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
    </>
  );
}
