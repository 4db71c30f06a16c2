import { Fragment } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { publicApi, publicApiWrite, type ListPage } from '../api.js';
import { DataTable, useAction, useLoad, type Column } from '../list.js';
import { navigate } from '../router.js';
import { Alert, ConfirmDialog, ExportButtons, formatTime, PageTitle } from '../ui.js';
import { useNames } from './names.js';
import { NameAndKey } from './tracking.js';

/**
 * The Counts page (docs/console.md, "Counts"): the organization's counts from the public API
 * (/api/v1/counts, described in docs/api.md) with the session token; operators and admins start one on
 * a zone and close it; a count's page shows its numbers, read again every few seconds while it is
 * open, and its four lists, each exported as every list is.
 */

interface Count {
  id: number;
  name: string | null;
  location_id: number;
  location_external_key: string | null;
  status: 'open' | 'closed';
  started_at: string;
  closed_at: string | null;
  expected: number;
  found: number;
  missing: number;
  misplaced: number;
  unexpected: number;
}

interface CountItem {
  asset_id: number;
  asset_external_key: string | null;
  status: ItemStatus;
  seen_location_id: number | null;
  seen_location_external_key: string | null;
  last_seen_at: string | null;
}

type ItemStatus = 'found' | 'missing' | 'misplaced' | 'unexpected';

const PAGE = 50;
const ITEM_STATUSES: ItemStatus[] = ['missing', 'found', 'misplaced', 'unexpected'];
const STATUS_LABELS: Record<ItemStatus, string> = { found: 'Found', missing: 'Missing', misplaced: 'Elsewhere', unexpected: 'Unexpected' };
/** How often an open count's numbers are read again. */
const WATCH_MS = 2_000;

function countTitle(count: Count): string {
  return count.name ?? `Count ${count.id}`;
}

function StartCount({ onStarted }: { onStarted: (count: Count) => void }) {
  const [zone, setZone] = useState('');
  const [name, setName] = useState('');
  const action = useAction();
  async function start(event: Event) {
    event.preventDefault();
    const started = await action.run(() =>
      publicApiWrite<{ data: Count }>('POST', '/counts', { location_external_key: zone.trim(), ...(name.trim() ? { name: name.trim() } : {}) }),
    );
    if (started) onStarted(started.data);
  }
  return (
    <form class="panel" aria-labelledby="start-count" onSubmit={start}>
      <h2 id="start-count">Start a count</h2>
      <div class="inline-fields">
        <div>
          <label for="count-zone">Zone (location key)</label>
          <input id="count-zone" autocomplete="off" value={zone} onInput={(e) => setZone(e.currentTarget.value)} />
        </div>
        <div>
          <label for="count-name">Name (optional)</label>
          <input id="count-name" value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </div>
      </div>
      <button type="submit" disabled={action.busy || zone.trim() === ''}>
        Start count
      </button>
      <Alert error={action.error} />
    </form>
  );
}

/** A location, name first and key second (docs/console.md "Names first"); a deleted one by its id. */
function Place({ names, externalKey, id }: { names: Map<string, string>; externalKey: string | null; id: number }) {
  return externalKey ? <NameAndKey name={names.get(externalKey)} keyText={externalKey} /> : <span class="mono">#{id}</span>;
}

export function CountsPage({ operator }: { operator: boolean }) {
  const [status, setStatus] = useState('');
  const [offset, setOffset] = useState(0);
  const page = useLoad(() => publicApi<ListPage<Count>>('/counts', { status: status || undefined, limit: PAGE, offset }), [status, offset]);
  const zones = useNames('locations', page.data?.data.map((c) => c.location_external_key) ?? []);
  const columns: Array<Column<Count>> = [
    { header: 'Count', cell: (c) => <a href={`/counts/${c.id}`}>{countTitle(c)}</a> },
    { header: 'Zone', cell: (c) => <Place names={zones} externalKey={c.location_external_key} id={c.location_id} /> },
    { header: 'Status', cell: (c) => <span class={`badge ${c.status === 'open' ? 'active' : 'invited'}`}>{c.status}</span> },
    { header: 'Started', cell: (c) => formatTime(c.started_at) },
    { header: 'Found', cell: (c) => c.found },
    { header: 'Missing', cell: (c) => c.missing },
    { header: 'Elsewhere', cell: (c) => c.misplaced },
    { header: 'Unexpected', cell: (c) => c.unexpected },
  ];
  return (
    <section>
      <PageTitle>Counts</PageTitle>
      {operator && <StartCount onStarted={(count) => navigate(`/counts/${count.id}`)} />}
      <form class="panel filters" aria-labelledby="count-filters" onSubmit={(e) => e.preventDefault()}>
        <h2 id="count-filters">Filters</h2>
        <label for="count-status">Status</label>
        <select id="count-status" value={status} onChange={(e) => (setOffset(0), setStatus(e.currentTarget.value))}>
          <option value="">Any</option>
          <option value="open">Open</option>
          <option value="closed">Closed</option>
        </select>
      </form>
      <Alert error={page.error} />
      {page.data && (
        <DataTable
          label="Counts"
          columns={columns}
          rows={page.data.data}
          rowKey={(c) => c.id}
          rowProps={(c) => ({ 'data-count-id': String(c.id) })}
          empty="No counts yet."
          pager={{ offset: page.data.offset, limit: page.data.limit, total: page.data.total_count, onPage: setOffset }}
        />
      )}
      <ExportButtons path="/counts" query={{ status: status || undefined }} label="counts" />
    </section>
  );
}

function CountItems({ count, status }: { count: Count; status: ItemStatus }) {
  const [offset, setOffset] = useState(0);
  // Read again whenever the count's numbers change (a watched open count).
  const signature = `${count.found}/${count.missing}/${count.misplaced}/${count.unexpected}/${count.status}`;
  const items = useLoad(() => publicApi<ListPage<CountItem>>(`/counts/${count.id}/items`, { status, limit: PAGE, offset }), [count.id, status, offset, signature]);
  const names = useNames('assets', items.data?.data.map((i) => i.asset_external_key) ?? []);
  const places = useNames('locations', items.data?.data.map((i) => i.seen_location_external_key) ?? []);
  const columns: Array<Column<CountItem>> = [
    {
      header: 'Asset',
      cell: (i) => (i.asset_external_key ? <NameAndKey name={names.get(i.asset_external_key)} keyText={i.asset_external_key} href={`/assets/${i.asset_id}`} /> : <span class="mono">#{i.asset_id}</span>),
    },
    { header: 'Seen at', cell: (i) => (i.seen_location_id === null ? '—' : <Place names={places} externalKey={i.seen_location_external_key} id={i.seen_location_id} />) },
    { header: 'Last seen', cell: (i) => formatTime(i.last_seen_at) },
  ];
  return (
    <>
      <Alert error={items.error} />
      {items.data && (
        <DataTable
          label={`${STATUS_LABELS[status]} assets`}
          columns={columns}
          rows={items.data.data}
          rowKey={(i) => i.asset_id}
          rowProps={(i) => ({ 'data-asset-id': String(i.asset_id) })}
          empty="None."
          pager={{ offset: items.data.offset, limit: items.data.limit, total: items.data.total_count, onPage: setOffset }}
        />
      )}
      <ExportButtons path={`/counts/${count.id}/items`} query={{ status }} label={`${STATUS_LABELS[status].toLowerCase()} assets`} />
    </>
  );
}

export function CountPage({ countId, operator }: { countId: number; operator: boolean }) {
  const count = useLoad(() => publicApi<{ data: Count }>(`/counts/${countId}`), [countId]);
  const [list, setList] = useState<ItemStatus>('missing');
  const [confirming, setConfirming] = useState(false);
  const action = useAction();
  const open = count.data?.data.status === 'open';
  // Watch an open count: its numbers fill in as reads arrive.
  useEffect(() => {
    if (!open) return;
    const timer = setInterval(() => void count.reload(), WATCH_MS);
    return () => clearInterval(timer);
  }, [open]);
  async function close() {
    setConfirming(false);
    const closed = await action.run(() => publicApiWrite<{ data: Count }>('POST', `/counts/${countId}/close`), 'Count closed.');
    if (closed) await count.reload();
  }
  const c = count.data?.data;
  const zone = useNames('locations', [c?.location_external_key]);
  return (
    <section>
      <PageTitle>{c ? countTitle(c) : 'Count'}</PageTitle>
      <Alert error={count.error ?? action.error} />
      {action.notice && <p role="status">{action.notice}</p>}
      {c && (
        <>
          <dl class="facts count-numbers" data-status={c.status}>
            <dt>Zone</dt>
            <dd>
              <Place names={zone} externalKey={c.location_external_key} id={c.location_id} />
            </dd>
            <dt>Status</dt>
            <dd>{c.status === 'open' ? `Open since ${formatTime(c.started_at)}` : `Closed ${formatTime(c.closed_at)}`}</dd>
            <dt>Expected</dt>
            <dd data-number="expected">{c.expected}</dd>
            {ITEM_STATUSES.map((s) => (
              <Fragment key={s}>
                <dt>{STATUS_LABELS[s]}</dt>
                <dd data-number={s}>{c[s]}</dd>
              </Fragment>
            ))}
          </dl>
          {operator && open && (
            <div class="actions">
              <button type="button" disabled={action.busy} onClick={() => setConfirming(true)}>
                Close count
              </button>
            </div>
          )}
          {confirming && (
            <ConfirmDialog title="Close this count?" confirm="Close count" onConfirm={() => void close()} onCancel={() => setConfirming(false)}>
              <p>Reads taken after now no longer count. Reads taken before now still count when they arrive later.</p>
            </ConfirmDialog>
          )}
          <div class="tabs" role="group" aria-label="Lists">
            {ITEM_STATUSES.map((s) => (
              <button key={s} type="button" aria-pressed={list === s} onClick={() => setList(s)}>
                {STATUS_LABELS[s]} ({c[s]})
              </button>
            ))}
          </div>
          <CountItems key={list} count={c} status={list} />
        </>
      )}
      <p>
        <a href="/counts">All counts</a>
      </p>
    </section>
  );
}
