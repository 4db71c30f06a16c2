import { useEffect, useRef, useState } from 'preact/hooks';
import { app, publicApi, publicApiWrite, type ListPage, type UnknownCause, type UnknownRead } from '../api.js';
import { DataTable, useAction, useLoad, type Column } from '../list.js';
import { Alert, formatTime, Notice, PageTitle } from '../ui.js';
import { useNames } from './names.js';
import { NameAndKey } from './tracking.js';

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

/** The names of the assets and locations the rows' tags are attached to (docs/console.md, "Names first"). */
interface Names {
  assets: Map<string, string>;
  locations: Map<string, string>;
}

function attachedCell(row: UnknownRead, admin: boolean, operator: boolean, attach: (row: UnknownRead) => void, names: Names) {
  const owner = row.attached_to;
  if (owner) {
    const kind = owner.owner_type === 'asset' ? 'Asset' : 'Location';
    if (owner.external_key === null) return owner.owner_type === 'asset' ? <a href={`/assets/${owner.id}`}>{`asset #${owner.id}`}</a> : `location #${owner.id}`;
    const name = (owner.owner_type === 'asset' ? names.assets : names.locations).get(owner.external_key);
    return (
      <>
        <span class="visually-hidden">{kind}: </span>
        <NameAndKey name={name} keyText={owner.external_key} href={owner.owner_type === 'asset' ? `/assets/${owner.id}` : undefined} />
        {owner.owner_type === 'location' && <span class="hint"> (a location)</span>}
      </>
    );
  }
  if (operator && attachable(row)) {
    return (
      <button type="button" onClick={() => attach(row)} aria-label={`Attach to an asset: ${row.tag_type} ${row.value}`}>
        Attach to an asset
      </button>
    );
  }
  if (admin && row.cause === 'unassigned_capture_point' && row.reader_id !== null && row.capture_point !== null) {
    return <a href={`/readers?${new URLSearchParams({ reader: row.reader_id, capture_point: row.capture_point })}`}>Assign this capture point</a>;
  }
  return '—';
}

const unknownColumns = (attached: (row: UnknownRead) => preact.ComponentChildren): Array<Column<UnknownRead>> => [
  { header: 'Cause', cell: (row) => CAUSE_LABELS[row.cause] ?? row.cause },
  { header: 'Tag', class: 'mono', cell: (row) => (row.tag_type !== null ? `${row.tag_type} ${row.value ?? ''}` : '—') },
  { header: 'Reader / capture point', class: 'mono', cell: (row) => (row.reader_id !== null ? `${row.reader_id}${row.capture_point !== null ? ` / ${row.capture_point}` : ''}` : '—') },
  { header: 'Reads', cell: (row) => row.count },
  { header: 'First seen', cell: (row) => formatTime(row.first_seen) },
  { header: 'Last seen', cell: (row) => formatTime(row.last_seen) },
  { header: 'Attached to', class: 'attached', cell: attached },
];

export function UnknownReadsPage({ admin, operator }: { admin: boolean; operator: boolean }) {
  const reads = useLoad(() => app<{ data: UnknownRead[]; total_count: number }>('GET', `/scans/unknown?limit=${SHOWN}`), []);
  const action = useAction();
  const [attaching, setAttaching] = useState<UnknownRead | null>(null);
  const rows = reads.data?.data ?? null;
  const ownerKeys = (type: 'asset' | 'location') => (rows ?? []).map((row) => (row.attached_to?.owner_type === type ? row.attached_to.external_key : null));
  const names: Names = { assets: useNames('assets', ownerKeys('asset')), locations: useNames('locations', ownerKeys('location')) };

  return (
    <section>
      <PageTitle>Unknown reads</PageTitle>
      <p class="hint">Reads that placed no asset, by cause, the largest count first. Attach an unknown tag to its asset and its next read places it.</p>
      <div class="row-actions">
        <button
          type="button"
          onClick={() => {
            action.clear();
            void reads.reload();
          }}
        >
          Refresh
        </button>
      </div>
      {action.notice && <Notice>{action.notice}</Notice>}
      <Alert error={action.error ?? reads.error} />
      {rows !== null && reads.data && reads.data.total_count > rows.length && (
        <p class="hint">
          The {rows.length} largest counts of {reads.data.total_count} are shown.
        </p>
      )}
      {(rows !== null || !reads.error) && (
        <DataTable
          label="Unknown reads"
          tableClass="wide"
          columns={unknownColumns((row) => attachedCell(row, admin, operator, setAttaching, names))}
          rows={rows}
          rowKey={rowKey}
          rowProps={(row) => ({ 'data-tag': row.value ?? undefined })}
          empty="Every read placed its asset."
        />
      )}
      {attaching && (
        <AttachDialog
          row={attaching}
          onCancel={() => setAttaching(null)}
          onAttached={async (asset) => {
            setAttaching(null);
            await action.run(reads.reload, `Tag ${attaching.value} is attached to ${asset.name} (${asset.external_key}); its next read places it.`);
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
  const action = useAction();
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
    return () => dialog?.close();
  }, []);

  async function search(event: Event) {
    event.preventDefault();
    const found = await action.run(() => publicApi<ListPage<AssetHit>>('/assets', { q: q.trim(), limit: 20, sort: 'name' }));
    if (found) setHits(found);
  }
  const attach = (asset: AssetHit) =>
    action.run(async () => {
      await publicApiWrite('POST', `/assets/${asset.id}/tags`, { tag_type: row.tag_type, value: row.value });
      await onAttached(asset);
    });

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
      <Alert error={action.error} />
      {hits && (
        <div role="status">
          <p class="hint">{hits.total_count === 0 ? 'No asset matches.' : `${hits.total_count} match${hits.total_count === 1 ? '' : 'es'}${hits.total_count > hits.data.length ? ` (first ${hits.data.length})` : ''}.`}</p>
          <ul class="choices">
            {hits.data.map((asset) => (
              <li key={asset.id}>
                <button type="button" disabled={action.busy} onClick={() => void attach(asset)} aria-label={`Attach to ${asset.name} (${asset.external_key})`}>
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
