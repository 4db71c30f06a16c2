import { useEffect, useRef, useState } from 'preact/hooks';
import { app, publicApi, publicApiWrite, type ListPage, type UnknownCause, type UnknownRead } from '../api.js';
import { Alert, formatTime, Notice, PageTitle, TableScroll } from '../ui.js';

/**
 * The reads that placed nothing (docs/web-app.md "Operator endpoints"), largest count first, for
 * members and admins. An unknown or retired tag is attached to an asset found by search, through
 * the public API (`POST /api/v1/assets/{id}/tags`); the next read of it places the asset.
 */

export const CAUSE_LABELS: Record<UnknownCause, string> = {
  unknown_tag: 'Unknown tag',
  retired_tag: 'Retired tag',
  location_tag: "A location's tag",
  unknown_location: 'Location deleted',
  unassigned_capture_point: 'Capture point not assigned',
  unknown_reader: 'Reader not registered',
};

interface AssetHit {
  id: number;
  name: string;
  external_key: string;
}

/** Rows shown at once: the largest counts; a page of thousands of rows would help nobody. */
const SHOWN = 500;

const rowKey = (row: UnknownRead) => [row.cause, row.reader_id, row.capture_point, row.tag_type, row.value].join('\0');

/** A row whose tag could be attached to an asset: a tag of no existing owner. */
const attachable = (row: UnknownRead) => (row.cause === 'unknown_tag' || row.cause === 'retired_tag') && row.tag_type !== null && row.value !== null && row.attached_to === null;

export function UnknownReadsPage({ admin, operator }: { admin: boolean; operator: boolean }) {
  const [rows, setRows] = useState<UnknownRead[] | null>(null);
  const [total, setTotal] = useState(0);
  const [error, setError] = useState<unknown>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [attaching, setAttaching] = useState<UnknownRead | null>(null);

  async function load() {
    try {
      const page = await app<{ data: UnknownRead[]; total_count: number }>('GET', `/scans/unknown?limit=${SHOWN}`);
      setRows(page.data);
      setTotal(page.total_count);
    } catch (failure) {
      setError(failure);
    }
  }
  useEffect(() => {
    void load();
  }, []);

  return (
    <section>
      <PageTitle>Unknown reads</PageTitle>
      <p class="hint">Reads that placed no asset, by cause, the largest count first. Attach an unknown tag to its asset and its next read places it.</p>
      <div class="row-actions">
        <button
          type="button"
          onClick={() => {
            setNotice(null);
            setError(null);
            void load();
          }}
        >
          Refresh
        </button>
      </div>
      {notice && <Notice>{notice}</Notice>}
      <Alert error={error} />
      {rows === null ? (
        !error && <p role="status">Loading…</p>
      ) : rows.length === 0 ? (
        <p>Every read placed its asset.</p>
      ) : (
        <>
          {total > rows.length && (
            <p class="hint">
              The {rows.length} largest counts of {total} are shown.
            </p>
          )}
          <TableScroll label="Unknown reads">
            <table class="wide">
              <thead>
                <tr>
                  <th scope="col">Cause</th>
                  <th scope="col">Tag</th>
                  <th scope="col">Reader / capture point</th>
                  <th scope="col">Reads</th>
                  <th scope="col">First seen</th>
                  <th scope="col">Last seen</th>
                  <th scope="col">Attached to</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((row) => (
                  <tr key={rowKey(row)} data-tag={row.value ?? undefined}>
                    <td>{CAUSE_LABELS[row.cause] ?? row.cause}</td>
                    <td class="mono">{row.tag_type !== null ? `${row.tag_type} ${row.value ?? ''}` : '—'}</td>
                    <td class="mono">{row.reader_id !== null ? `${row.reader_id}${row.capture_point !== null ? ` / ${row.capture_point}` : ''}` : '—'}</td>
                    <td>{row.count}</td>
                    <td>{formatTime(row.first_seen)}</td>
                    <td>{formatTime(row.last_seen)}</td>
                    <td class="attached">
                      {row.attached_to ? (
                        row.attached_to.owner_type === 'asset' ? (
                          <a href={`/assets/${row.attached_to.id}`}>asset {row.attached_to.external_key ?? `#${row.attached_to.id}`}</a>
                        ) : (
                          <span>location {row.attached_to.external_key ?? `#${row.attached_to.id}`}</span>
                        )
                      ) : operator && attachable(row) ? (
                        <button type="button" onClick={() => setAttaching(row)} aria-label={`Attach to an asset: ${row.tag_type} ${row.value}`}>
                          Attach to an asset
                        </button>
                      ) : admin && row.cause === 'unassigned_capture_point' && row.reader_id !== null && row.capture_point !== null ? (
                        <a href={`/readers?${new URLSearchParams({ reader: row.reader_id, capture_point: row.capture_point })}`}>Assign this capture point</a>
                      ) : (
                        '—'
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableScroll>
        </>
      )}
      {attaching && (
        <AttachDialog
          row={attaching}
          onCancel={() => setAttaching(null)}
          onAttached={async (asset) => {
            setAttaching(null);
            await load();
            setNotice(`Tag ${attaching.value} is attached to ${asset.name} (${asset.external_key}); its next read places it.`);
          }}
        />
      )}
    </section>
  );
}

/** Finds an asset by the public API's search and attaches the row's tag to it; a modal <dialog>. */
function AttachDialog({ row, onAttached, onCancel }: { row: UnknownRead; onAttached: (asset: AssetHit) => Promise<void>; onCancel: () => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  const [q, setQ] = useState('');
  const [hits, setHits] = useState<ListPage<AssetHit> | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
    return () => dialog?.close();
  }, []);

  async function search(event: Event) {
    event.preventDefault();
    setError(null);
    try {
      setHits(await publicApi<ListPage<AssetHit>>('/assets', { q: q.trim(), limit: 20, sort: 'name' }));
    } catch (failure) {
      setError(failure);
    }
  }
  async function attach(asset: AssetHit) {
    setError(null);
    setBusy(true);
    try {
      await publicApiWrite('POST', `/assets/${asset.id}/tags`, { tag_type: row.tag_type, value: row.value });
      await onAttached(asset);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }

  return (
    <dialog ref={ref} aria-labelledby="attach-title" onCancel={onCancel} onClose={onCancel}>
      <h2 id="attach-title">Attach a tag to an asset</h2>
      <p>
        Tag <span class="mono">{row.tag_type}</span> <strong class="mono">{row.value}</strong>
      </p>
      <form role="search" aria-label="Assets" onSubmit={search}>
        <label for="attach-q">Find the asset (name, key, description or tag)</label>
        <div class="copy-row">
          <input id="attach-q" type="search" value={q} onInput={(e) => setQ(e.currentTarget.value)} autoFocus />
          <button type="submit">Search</button>
        </div>
      </form>
      <Alert error={error} />
      {hits && (
        <div role="status">
          <p class="hint">{hits.total_count === 0 ? 'No asset matches.' : `${hits.total_count} match${hits.total_count === 1 ? '' : 'es'}${hits.total_count > hits.data.length ? ` (first ${hits.data.length})` : ''}.`}</p>
          <ul class="choices">
            {hits.data.map((asset) => (
              <li key={asset.id}>
                <button type="button" disabled={busy} onClick={() => void attach(asset)} aria-label={`Attach to ${asset.name} (${asset.external_key})`}>
                  Attach
                </button>{' '}
                <span>{asset.name}</span> <span class="mono hint">{asset.external_key}</span>
              </li>
            ))}
          </ul>
        </div>
      )}
      <div class="actions">
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </dialog>
  );
}
