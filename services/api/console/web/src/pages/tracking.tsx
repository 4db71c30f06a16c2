import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { namesByKey, publicApi, type ListPage } from '../api.js';
import { navigate } from '../router.js';
import { DeleteButton, MoveForm, RecordForm, RenameForm, RestoreButton, TagsEditor, type MasterRecord } from './master-data.js';
import { DataTable, useAction, useLoad, type Column } from '../list.js';
import { Alert, ExportButtons, formatTime, Pager, PageTitle } from '../ui.js';

/**
 * Where things are: only the public API (/api/v1, docs/api.md), with the session token. Members
 * and admins alike.
 */

interface ReportRow {
  asset_id: number;
  asset_external_key: string;
  location_id: number;
  location_external_key: string | null;
  asset_deleted_at: string | null;
  asset_last_seen: string;
  dwell_started_at: string;
}

interface Asset extends MasterRecord {
  description?: string | null;
  deleted_at?: string | null;
  location_id?: number | null;
  location_external_key?: string | null;
}

interface Location extends MasterRecord {
  parent_id: number | null;
  deleted_at?: string | null;
}

interface Visit {
  location_id: number;
  location_external_key: string | null;
  event_observed_at: string;
  last_observed_at: string;
  duration_seconds: number | null;
}

const PAGE = 50;

function duration(seconds: number | null): string {
  if (seconds === null) return 'still there';
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  return hours < 48 ? `${hours} h ${minutes % 60} min` : `${Math.floor(hours / 24)} days ${hours % 24} h`;
}

/** A record's name first, its key after it (docs/console.md, "Names first"); the key alone when the name is not known. */
export function NameAndKey({ name, keyText, href }: { name: string | undefined; keyText: string; href?: string }) {
  const shown = name ?? keyText;
  return (
    <>
      {href ? <a href={href} class="name">{shown}</a> : <span class="name">{shown}</span>}
      {name !== undefined && (
        <>
          {' '}
          <span class="mono hint key">{keyText}</span>
        </>
      )}
    </>
  );
}

interface Names {
  assets: Map<string, string>;
  locations: Map<string, string>;
}

const reportColumns = (names: Names, restore: ((row: ReportRow) => ComponentChildren) | null): Array<Column<ReportRow>> => [
  {
    header: 'Asset',
    cell: (row) => (
      <>
        <NameAndKey name={names.assets.get(row.asset_external_key)} keyText={row.asset_external_key} href={`/assets/${row.asset_id}`} />
        {row.asset_deleted_at && <span class="badge revoked">deleted</span>}
      </>
    ),
  },
  {
    header: 'Location',
    cell: (row) => (row.location_external_key === null ? `#${row.location_id} (deleted)` : <NameAndKey name={names.locations.get(row.location_external_key)} keyText={row.location_external_key} />),
  },
  { header: 'Last seen', cell: (row) => formatTime(row.asset_last_seen) },
  { header: 'There since', cell: (row) => formatTime(row.dwell_started_at) },
  // A deleted asset's row (with "Include deleted assets") carries Restore, for operators and admins.
  ...(restore ? [{ header: 'Actions', hiddenHeader: true, class: 'row-actions', cell: restore }] : []),
];

/** The report's filters as its query: the page's and its export's. */
function reportQuery(filters: ReportFilters) {
  return {
    location_external_key: filters.location_external_key.trim(),
    asset_external_key: filters.asset_external_key.trim(),
    include_deleted: filters.include_deleted ? 'true' : undefined,
    sort: filters.sort,
  };
}

interface ReportFilters {
  location_external_key: string;
  asset_external_key: string;
  include_deleted: boolean;
  sort: string;
}

export function ReportPage({ operator }: { operator: boolean }) {
  // The location tree links here with ?location=<key>.
  const [filters, setFilters] = useState<ReportFilters>({ location_external_key: new URLSearchParams(window.location.search).get('location') ?? '', asset_external_key: '', include_deleted: false, sort: '-asset_last_seen' });
  const [offset, setOffset] = useState(0);
  const page = useLoad(async () => {
    const report = await publicApi<ListPage<ReportRow>>('/reports/asset-locations', { ...reportQuery(filters), limit: PAGE, offset });
    // The names of the page's assets and locations: one request each, never one per row.
    const [assets, locations] = await Promise.all([namesByKey('assets', report.data.map((r) => r.asset_external_key)), namesByKey('locations', report.data.map((r) => r.location_external_key))]);
    return { report, names: { assets, locations } };
  }, [filters, offset]);
  const data = page.data?.report;
  return (
    <section>
      <PageTitle>Where things are</PageTitle>
      <AssetSearch operator={operator} />
      {operator && <RecordForm kind="assets" record={null} onSaved={(asset) => navigate(`/assets/${asset.id}`)} />}
      {operator && (
        <p>
          <a href="/import?resource=assets">Import assets from a file</a>
        </p>
      )}
      <ReportFilterForm
        initial={filters}
        onApply={(next) => {
          setOffset(0);
          setFilters(next);
        }}
      />
      <ExportButtons path="/reports/asset-locations" query={reportQuery(filters)} label="current locations" />
      <Alert error={page.error} />
      {data && (
        <DataTable
          label="Current locations of assets"
          columns={reportColumns(
            page.data!.names,
            operator
              ? (row) =>
                  row.asset_deleted_at && (
                    <RestoreButton kind="assets" record={{ id: row.asset_id, external_key: row.asset_external_key, name: page.data!.names.assets.get(row.asset_external_key) ?? row.asset_external_key }} onRestored={page.reload} />
                  )
              : null,
          )}
          rows={data.data}
          rowKey={(row) => row.asset_id}
          pager={{ offset: data.offset, limit: data.limit, total: data.total_count, onPage: setOffset }}
        />
      )}
    </section>
  );
}

function ReportFilterForm({ initial, onApply }: { initial: ReportFilters; onApply: (filters: ReportFilters) => void }) {
  const [draft, setDraft] = useState(initial);
  return (
    <form
      class="panel filters"
      aria-labelledby="report-filters"
      onSubmit={(e) => {
        e.preventDefault();
        onApply(draft);
      }}
    >
      <h2 id="report-filters">Current locations</h2>
      <div class="inline-fields">
        <div>
          <label for="f-location">Location key</label>
          <input id="f-location" value={draft.location_external_key} onInput={(e) => setDraft({ ...draft, location_external_key: e.currentTarget.value })} />
        </div>
        <div>
          <label for="f-asset">Asset key</label>
          <input id="f-asset" value={draft.asset_external_key} onInput={(e) => setDraft({ ...draft, asset_external_key: e.currentTarget.value })} />
        </div>
        <div>
          <label for="f-sort">Order</label>
          <select id="f-sort" value={draft.sort} onChange={(e) => setDraft({ ...draft, sort: e.currentTarget.value })}>
            <option value="-asset_last_seen">Last seen, newest first</option>
            <option value="asset_last_seen">Last seen, oldest first</option>
            <option value="asset_external_key">Asset key</option>
            <option value="location_external_key">Location key</option>
          </select>
        </div>
        <div class="check">
          <input id="f-deleted" type="checkbox" checked={draft.include_deleted} onChange={(e) => setDraft({ ...draft, include_deleted: e.currentTarget.checked })} />
          <label for="f-deleted">Include deleted assets</label>
        </div>
      </div>
      <button type="submit">Apply</button>
    </form>
  );
}

/**
 * Search over assets (name, key, description, tag values: the API's `q`); with "Include deleted
 * assets", deleted ones too, each with Restore for operators and admins (docs/api.md, "Restoring").
 */
function AssetSearch({ operator }: { operator: boolean }) {
  const [q, setQ] = useState('');
  const [includeDeleted, setIncludeDeleted] = useState(false);
  const [result, setResult] = useState<ListPage<Asset> | null>(null);
  const action = useAction();
  const find = () => publicApi<ListPage<Asset>>('/assets', { q: q.trim(), limit: 20, sort: 'name', include_deleted: includeDeleted ? 'true' : undefined });
  async function search(event: Event) {
    event.preventDefault();
    const found = await action.run(find);
    if (found) setResult(found);
  }
  return (
    <form class="panel" role="search" aria-label="Assets" onSubmit={search}>
      <label for="asset-q">Find an asset (name, key, description or tag)</label>
      <div class="copy-row">
        <input id="asset-q" type="search" value={q} onInput={(e) => setQ(e.currentTarget.value)} />
        <button type="submit">Search</button>
      </div>
      <div class="check">
        <input id="asset-q-deleted" type="checkbox" checked={includeDeleted} onChange={(e) => setIncludeDeleted(e.currentTarget.checked)} />
        <label for="asset-q-deleted">Include deleted assets</label>
      </div>
      <Alert error={action.error} />
      {result && (
        <div role="status">
          <p class="hint">{result.total_count === 0 ? 'No asset matches.' : `${result.total_count} match${result.total_count === 1 ? '' : 'es'}${result.total_count > result.data.length ? ` (first ${result.data.length})` : ''}.`}</p>
          <ul class="results">
            {result.data.map((asset) => (
              <li key={asset.id} data-asset-id={String(asset.id)}>
                {asset.deleted_at ? <span class="name">{asset.name}</span> : <a href={`/assets/${asset.id}`}>{asset.name}</a>} <span class="mono hint">{asset.external_key}</span>
                {asset.location_external_key && <span class="hint"> at {asset.location_external_key}</span>}
                {asset.deleted_at && (
                  <>
                    {' '}
                    <span class="badge revoked">deleted</span>
                  </>
                )}
                {asset.deleted_at && operator && (
                  <>
                    {' '}
                    <RestoreButton
                      kind="assets"
                      record={asset}
                      onRestored={async () => {
                        const again = await action.run(find);
                        if (again) setResult(again);
                      }}
                    />
                  </>
                )}
              </li>
            ))}
          </ul>
        </div>
      )}
    </form>
  );
}

/** Every row of a list, page by page (200 a page), up to `max`. */
async function readAll<T>(path: string, max: number, query: Record<string, string | undefined> = {}): Promise<{ rows: T[]; complete: boolean }> {
  const rows: T[] = [];
  for (let offset = 0; offset < max; offset += 200) {
    const page = await publicApi<ListPage<T>>(path, { ...query, limit: 200, offset });
    rows.push(...page.data);
    if (offset + page.data.length >= page.total_count) return { rows, complete: true };
  }
  return { rows, complete: false };
}

interface Tree {
  roots: Location[];
  children: Map<number, Location[]>;
  counts: Map<number, number>;
  complete: boolean;
}

/** The location tree and, for each location, how many assets were last read there; deleted locations too when asked. */
async function loadTree(includeDeleted: boolean): Promise<Tree> {
  const [locations, report] = await Promise.all([readAll<Location>('/locations', 5000, { include_deleted: includeDeleted ? 'true' : undefined }), readAll<ReportRow>('/reports/asset-locations', 20000)]);
  const ids = new Set(locations.rows.map((l) => l.id));
  const children = new Map<number, Location[]>();
  const roots: Location[] = [];
  for (const location of locations.rows) {
    if (location.parent_id === null || !ids.has(location.parent_id)) roots.push(location);
    else children.set(location.parent_id, [...(children.get(location.parent_id) ?? []), location]);
  }
  const counts = new Map<number, number>();
  for (const row of report.rows) counts.set(row.location_id, (counts.get(row.location_id) ?? 0) + 1);
  return { roots, children, counts, complete: locations.complete && report.complete };
}

export function LocationsPage({ operator }: { operator: boolean }) {
  const [showDeleted, setShowDeleted] = useState(false);
  const { data: tree, error, reload } = useLoad(() => loadTree(showDeleted), [showDeleted]);
  const [editing, setEditing] = useState<number | null>(null);
  const edited = tree && editing !== null ? findLocation(tree, editing) : null;
  return (
    <section>
      <PageTitle>Locations</PageTitle>
      <p class="hint">Each location with the number of assets whose newest read was taken there.</p>
      <ExportButtons path="/locations" label="locations" />
      <div class="check">
        <input id="tree-deleted" type="checkbox" checked={showDeleted} onChange={(e) => setShowDeleted(e.currentTarget.checked)} />
        <label for="tree-deleted">Include deleted locations</label>
      </div>
      <Alert error={error} />
      {!tree && !error && <p role="status">Loading…</p>}
      {tree && !tree.complete && <p class="notice">Only the first few thousand locations or assets are shown.</p>}
      {tree && tree.roots.length === 0 && <p>No locations yet.</p>}
      {tree && operator && <RecordForm kind="locations" record={null} onSaved={() => reload()} />}
      {operator && (
        <p>
          <a href="/import?resource=locations">Import locations from a file</a>
        </p>
      )}
      {tree && (
        <ul class="tree" aria-label="Location tree">
          {tree.roots.map((location) => (
            <TreeNode key={location.id} location={location} tree={tree} onEdit={operator ? setEditing : undefined} onRestored={operator ? reload : undefined} />
          ))}
        </ul>
      )}
      {tree && edited && (
        <LocationEditor
          key={JSON.stringify(edited)}
          location={edited}
          tree={tree}
          onChanged={reload}
          onDeleted={() => {
            setEditing(null);
            void reload();
          }}
        />
      )}
    </section>
  );
}

function findLocation(tree: Tree, id: number): Location | null {
  const all = [...tree.roots, ...[...tree.children.values()].flat()];
  return all.find((l) => l.id === id) ?? null;
}

/** An operator's controls for one location: edit, rename, move, tags, delete. */
function LocationEditor({ location, tree, onChanged, onDeleted }: { location: Location; tree: Tree; onChanged: () => Promise<void>; onDeleted: () => void }) {
  return (
    <section class="editor" aria-labelledby="location-editor-title">
      <h2 id="location-editor-title" tabIndex={-1}>
        {location.name} <span class="mono hint">{location.external_key}</span>
      </h2>
      <div class="two-columns">
        <RecordForm kind="locations" record={location} onSaved={onChanged} />
        <div>
          <MoveForm location={location} roots={tree.roots} children={tree.children} onMoved={onChanged} />
          <RenameForm kind="locations" record={location} onRenamed={onChanged} />
          <TagsEditor kind="locations" record={location} onChanged={onChanged} />
          <DeleteButton kind="locations" record={location} onDeleted={onDeleted} />
        </div>
      </div>
    </section>
  );
}

function TreeNode(props: { location: Location; tree: { children: Map<number, Location[]>; counts: Map<number, number> }; onEdit?: (id: number) => void; onRestored?: () => Promise<void> }) {
  const { location, tree, onRestored } = props;
  // A deleted location (with "Include deleted locations") is not edited, only restored.
  const onEdit = location.deleted_at ? undefined : props.onEdit;
  const kids = tree.children.get(location.id) ?? [];
  const count = tree.counts.get(location.id) ?? 0;
  return (
    <li>
      <span class="node">
        <span class="node-name">{location.name}</span> <span class="mono hint">{location.external_key}</span>{' '}
        {count > 0 ? (
          <a class="count" href={`/assets?location=${encodeURIComponent(location.external_key)}`} aria-label={`${count} assets at ${location.name}`}>
            {count}
          </a>
        ) : (
          <span class="count zero" aria-label={`no assets at ${location.name}`}>
            0
          </span>
        )}
        {location.deleted_at && <span class="badge revoked">deleted</span>}
        {location.deleted_at && onRestored && <RestoreButton kind="locations" record={location} onRestored={onRestored} />}
        {onEdit && (
          <button type="button" class="small" onClick={() => onEdit(location.id)} aria-label={`Edit ${location.name} (${location.external_key})`}>
            Edit
          </button>
        )}
      </span>
      {kids.length > 0 && (
        <ul>
          {kids.map((kid) => (
            <TreeNode key={kid.id} location={kid} tree={tree} onEdit={props.onEdit} onRestored={onRestored} />
          ))}
        </ul>
      )}
    </li>
  );
}

export function AssetPage({ assetId, operator }: { assetId: number; operator: boolean }) {
  const [offset, setOffset] = useState(0);
  const loaded = useLoad(async () => (await publicApi<{ data: Asset }>(`/assets/${assetId}`)).data, [assetId]);
  const history = useLoad(async () => {
    const visits = await publicApi<ListPage<Visit>>(`/assets/${assetId}/history`, { limit: PAGE, offset });
    return { visits, names: await namesByKey('locations', visits.data.map((v) => v.location_external_key)) };
  }, [assetId, offset]);
  const asset = loaded.data;
  const visits = history.data?.visits ?? null;
  const places = history.data?.names ?? new Map<string, string>();
  const error = loaded.error ?? history.error;
  return (
    <section>
      <PageTitle>{asset ? asset.name : `Asset ${assetId}`}</PageTitle>
      <Alert error={error} />
      {asset && (
        <dl class="facts">
          <dt>Key</dt>
          <dd class="mono">{asset.external_key}</dd>
          {asset.description && (
            <>
              <dt>Description</dt>
              <dd>{asset.description}</dd>
            </>
          )}
          <dt>Now at</dt>
          <dd>{asset.location_external_key ? <NowAt keyText={asset.location_external_key} /> : 'not seen yet'}</dd>
          <dt>Tags</dt>
          <dd>
            {asset.tags && asset.tags.length > 0 ? (
              <ul class="scopes">
                {asset.tags.map((tag) => (
                  <li key={`${tag.tag_type}:${tag.value}`} class="mono">
                    {tag.tag_type} {tag.value}
                  </li>
                ))}
              </ul>
            ) : (
              'none'
            )}
          </dd>
        </dl>
      )}
      {asset && operator && (
        <div class="two-columns" key={JSON.stringify(asset)}>
          <RecordForm kind="assets" record={asset} onSaved={loaded.reload} />
          <div>
            <RenameForm kind="assets" record={asset} onRenamed={loaded.reload} />
            <TagsEditor kind="assets" record={asset} onChanged={loaded.reload} />
            <DeleteButton kind="assets" record={asset} onDeleted={() => navigate('/assets')} />
          </div>
        </div>
      )}
      <h2>Visits</h2>
      <ExportButtons path={`/assets/${assetId}/history`} label="visits" />
      {visits && visits.total_count === 0 && <p>No reads of this asset yet.</p>}
      {visits && visits.data.length > 0 && (
        <>
          <ol class="timeline" aria-label="Visits, newest first">
            {visits.data.map((visit) => (
              <li key={visit.event_observed_at}>
                <span class="when">
                  <time dateTime={visit.event_observed_at}>{formatTime(visit.event_observed_at)}</time> –{' '}
                  <time dateTime={visit.last_observed_at}>{formatTime(visit.last_observed_at)}</time>
                </span>
                <span class="where">
                  {visit.location_external_key === null ? `#${visit.location_id} (deleted)` : <NameAndKey name={places.get(visit.location_external_key)} keyText={visit.location_external_key} />}
                </span>
                <span class="hint">{duration(visit.duration_seconds)}</span>
              </li>
            ))}
          </ol>
          <Pager offset={visits.offset} limit={visits.limit} total={visits.total_count} onPage={setOffset} />
        </>
      )}
    </section>
  );
}

/** Where an asset is now: the location's name, its key after it. */
function NowAt({ keyText }: { keyText: string }) {
  const { data } = useLoad(() => namesByKey('locations', [keyText]), [keyText]);
  return <NameAndKey name={data?.get(keyText)} keyText={keyText} />;
}
