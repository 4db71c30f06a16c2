import { useEffect, useRef, useState } from 'preact/hooks';
import { publicApi, publicApiWrite, WEBHOOK_EVENT_TYPES, type ListPage, type WebhookDelivery, type WebhookEndpoint, type WebhookEventType } from '../api.js';
import { DataTable, useAction, useLoad, type Column } from '../list.js';
import { Alert, besidesFields, ConfirmDialog, CopyField, ExportButtons, FieldError, fieldMessage, formatTime, Notice, PageTitle } from '../ui.js';

/**
 * Webhook endpoints of the current organization (admins; docs/console.md "Webhooks (admins)"): the public
 * API's own calls (/api/v1/webhook-endpoints, docs/api.md "Webhooks") with the session token. Create
 * (the signing secret shown once), edit, enable or disable, rotate the secret, delete; an
 * endpoint's recent deliveries, each one sent again on request.
 */

const EVENT_HINTS: Record<WebhookEventType, string> = {
  'asset.first_seen': 'an asset is placed for the first time',
  'asset.moved': 'an asset is read at another location',
  'asset.not_seen': 'an asset has not been read for a while',
  'asset.seen_again': 'an asset not seen for a while is read again',
  'alert.raised': 'an alert is raised',
  'alert.resolved': 'an alert is resolved',
};

const NOT_SEEN_DEFAULT = 3600;
const DELIVERIES_SHOWN = 50;

/** 3600 → "1 h", 90 → "1 min 30 s": the not-seen delay as people read it. */
function duration(seconds: number): string {
  const parts: string[] = [];
  const units: Array<[number, string]> = [
    [86400, 'd'],
    [3600, 'h'],
    [60, 'min'],
    [1, 's'],
  ];
  let rest = seconds;
  for (const [size, unit] of units) {
    const count = Math.floor(rest / size);
    if (count > 0) parts.push(`${count} ${unit}`);
    rest -= count * size;
  }
  return parts.length > 0 ? parts.join(' ') : '0 s';
}

/** What the page shows once: a new endpoint's secret, or a rotated one. */
interface ShownSecret {
  endpoint: WebhookEndpoint;
  secret: string;
  rotated: boolean;
}

type Pending = { kind: 'rotate' | 'delete'; endpoint: WebhookEndpoint };

interface EndpointActions {
  watch: (endpoint: WebhookEndpoint) => void;
  edit: (endpoint: WebhookEndpoint) => void;
  setActive: (endpoint: WebhookEndpoint, active: boolean) => void;
  ask: (pending: Pending) => void;
}

function endpointColumns({ watch, edit, setActive, ask }: EndpointActions): Array<Column<WebhookEndpoint>> {
  return [
    {
      header: 'URL',
      cell: (endpoint) => (
        <>
          <span class="mono">{endpoint.url}</span>
          {endpoint.description && <span class="hint block">{endpoint.description}</span>}
        </>
      ),
    },
    {
      header: 'Events',
      cell: (endpoint) => (
        <ul class="scopes">
          {endpoint.event_types.map((type) => (
            <li key={type} class="mono">
              {type}
            </li>
          ))}
        </ul>
      ),
    },
    {
      header: 'State',
      cell: (endpoint) => (
        <>
          <span class={`badge ${endpoint.is_active ? 'active' : 'disabled'}`}>{endpoint.is_active ? 'Active' : 'Disabled'}</span>
          {endpoint.disabled_reason && <span class="hint block">{endpoint.disabled_reason}</span>}
        </>
      ),
    },
    {
      header: 'Not seen after',
      cell: (endpoint) => (endpoint.event_types.includes('asset.not_seen') ? duration(endpoint.not_seen_after_seconds) : <span class="hint">Not used</span>),
    },
    { header: 'Created', cell: (endpoint) => formatTime(endpoint.created_at) },
    {
      header: 'Actions',
      hiddenHeader: true,
      cell: (endpoint) => (
        <div class="row-actions">
          <button type="button" onClick={() => watch(endpoint)} aria-label={`Deliveries to ${endpoint.url}`}>
            Deliveries
          </button>
          <button type="button" onClick={() => edit(endpoint)} aria-label={`Edit endpoint ${endpoint.url}`}>
            Edit
          </button>
          <button type="button" onClick={() => setActive(endpoint, !endpoint.is_active)} aria-label={`${endpoint.is_active ? 'Disable' : 'Enable'} endpoint ${endpoint.url}`}>
            {endpoint.is_active ? 'Disable' : 'Enable'}
          </button>
          <button type="button" onClick={() => ask({ kind: 'rotate', endpoint })} aria-label={`Rotate secret of ${endpoint.url}`}>
            Rotate secret
          </button>
          <button type="button" class="danger" onClick={() => ask({ kind: 'delete', endpoint })} aria-label={`Delete endpoint ${endpoint.url}`}>
            Delete
          </button>
        </div>
      ),
    },
  ];
}

export function WebhooksPage() {
  // At most 20 endpoints per organization: one page holds them all.
  const endpoints = useLoad(async () => (await publicApi<ListPage<WebhookEndpoint>>('/webhook-endpoints', { limit: 100 })).data, []);
  const action = useAction();
  const [shown, setShown] = useState<ShownSecret | null>(null);
  const [editing, setEditing] = useState<WebhookEndpoint | null>(null);
  const [pending, setPending] = useState<Pending | null>(null);
  const [watching, setWatching] = useState<number | null>(null);

  // The notice comes with the list that shows the change.
  const act = (work: () => Promise<string>) => action.run(() => work().then(async (message) => (await endpoints.reload(), message)), (message) => message);

  const setActive = (endpoint: WebhookEndpoint, active: boolean) =>
    void act(async () => {
      await publicApiWrite('PATCH', `/webhook-endpoints/${endpoint.id}`, { is_active: active });
      return active ? `Endpoint ${endpoint.url} is enabled: deliveries resume.` : `Endpoint ${endpoint.url} is disabled: nothing is sent to it until it is enabled.`;
    });

  function confirmed(what: Pending) {
    setPending(null);
    void act(async () => {
      if (what.kind === 'delete') {
        await publicApiWrite('DELETE', `/webhook-endpoints/${what.endpoint.id}`);
        if (watching === what.endpoint.id) setWatching(null);
        if (editing?.id === what.endpoint.id) setEditing(null);
        return `Endpoint ${what.endpoint.url} is deleted.`;
      }
      const { data } = await publicApiWrite<{ data: WebhookEndpoint }>('POST', `/webhook-endpoints/${what.endpoint.id}/rotate-secret`);
      setShown({ endpoint: data, secret: data.secret ?? '', rotated: true });
      return `Endpoint ${what.endpoint.url} has a new secret.`;
    });
  }

  const watched = endpoints.data?.find((e) => e.id === watching) ?? null;
  return (
    <section>
      <PageTitle>Webhooks</PageTitle>
      <p class="hint">
        The service sends an HTTP POST to each endpoint when one of its assets is first seen, moves, is not seen for a while or is seen again. Each delivery is signed with the endpoint's
        secret.
      </p>
      {editing ? (
        <EndpointForm
          key={`edit-${editing.id}`}
          endpoint={editing}
          onSaved={async (saved) => {
            setEditing(null);
            await act(async () => (saved ? `Endpoint ${saved.url} is saved.` : 'Nothing changed.'));
          }}
          onCancel={() => setEditing(null)}
        />
      ) : (
        <EndpointForm
          key="new"
          endpoint={null}
          onSaved={async (created) => {
            if (created) setShown({ endpoint: created, secret: created.secret ?? '', rotated: false });
            action.clear();
            await endpoints.reload();
          }}
        />
      )}
      {shown && <SecretBox shown={shown} onDone={() => setShown(null)} />}
      {action.notice && <Notice>{action.notice}</Notice>}
      <Alert error={action.error ?? endpoints.error} />
      <h2>Endpoints</h2>
      <ExportButtons path="/webhook-endpoints" label="endpoints" />
      <DataTable
        label="Webhook endpoints"
        tableClass="wide"
        columns={endpointColumns({ watch: (e) => setWatching(e.id), edit: setEditing, setActive, ask: setPending })}
        rows={endpoints.data}
        rowKey={(e) => e.id}
        rowProps={(e) => ({ 'data-endpoint-id': String(e.id) })}
        empty="No webhook endpoints yet."
      />
      {watched && <Deliveries key={watched.id} endpoint={watched} onClose={() => setWatching(null)} />}
      {pending && <PendingDialog pending={pending} onConfirm={() => confirmed(pending)} onCancel={() => setPending(null)} />}
    </section>
  );
}

function PendingDialog({ pending, onConfirm, onCancel }: { pending: Pending; onConfirm: () => void; onCancel: () => void }) {
  return pending.kind === 'rotate' ? (
    <ConfirmDialog title="Rotate this endpoint's secret?" confirm="Rotate secret" onConfirm={onConfirm} onCancel={onCancel}>
      <p>
        A new secret is made for <span class="mono">{pending.endpoint.url}</span> and shown once. The current secret keeps signing beside it for 24 hours, so the receiver can switch over;
        after that only the new one signs.
      </p>
    </ConfirmDialog>
  ) : (
    <ConfirmDialog title="Delete this endpoint?" confirm="Delete endpoint" onConfirm={onConfirm} onCancel={onCancel}>
      <p>
        Nothing more is sent to <span class="mono">{pending.endpoint.url}</span>, and its deliveries are deleted with it. This cannot be undone.
      </p>
    </ConfirmDialog>
  );
}

/** The signing secret, shown this once, and how a receiver checks a delivery with it. */
function SecretBox({ shown, onDone }: { shown: ShownSecret; onDone: () => void }) {
  const title = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    title.current?.focus();
  }, [shown]);
  const until = new Date(Date.now() + 24 * 3600_000).toISOString();
  return (
    <div class="token-box" aria-live="polite">
      <h2 tabIndex={-1} ref={title}>
        {shown.rotated ? 'New secret for ' : 'Signing secret for '}
        <span class="mono">{shown.endpoint.url}</span>
      </h2>
      <p>Copy the secret now: it is shown this once and cannot be seen again.</p>
      {shown.rotated && <p>The previous secret also signs every delivery for 24 hours (until about {formatTime(until)}), then only this one does.</p>}
      <CopyField id="webhook-secret" label="Secret" value={shown.secret} />
      <p class="hint">
        Each delivery carries the Standard Webhooks headers <span class="mono">webhook-id</span>, <span class="mono">webhook-timestamp</span> and{' '}
        <span class="mono">webhook-signature</span>. Check them with this secret before trusting the body, for instance with the <span class="mono">standardwebhooks</span> library:{' '}
        <span class="mono">new Webhook(secret).verify(body, headers)</span>. The API guide's section "Verifying a delivery" shows a whole receiver; the{' '}
        <a href="/docs#/Webhooks">API reference</a> lists the webhook calls.
      </p>
      <button type="button" onClick={onDone}>
        Done
      </button>
    </div>
  );
}

/** Create (endpoint null) or edit an endpoint; an edit sends only what changed (a merge patch). */
function EndpointForm(props: { endpoint: WebhookEndpoint | null; onSaved: (saved: WebhookEndpoint | null) => Promise<void>; onCancel?: () => void }) {
  const current = props.endpoint;
  const prefix = current ? 'edit' : 'new';
  const [url, setUrl] = useState(current?.url ?? '');
  const [types, setTypes] = useState<WebhookEventType[]>(current?.event_types ?? ['asset.first_seen', 'asset.moved']);
  const [description, setDescription] = useState(current?.description ?? '');
  const [notSeen, setNotSeen] = useState(String(current?.not_seen_after_seconds ?? NOT_SEEN_DEFAULT));
  const action = useAction();
  const [localNotSeen, setLocalNotSeen] = useState<string | null>(null);
  const urlField = useRef<HTMLInputElement>(null);
  useEffect(() => {
    // Editing starts in the form, where the keyboard is needed next.
    if (current) urlField.current?.focus();
  }, []);

  const wantsNotSeen = types.includes('asset.not_seen');

  async function submit(event: Event) {
    event.preventDefault();
    action.clear();
    setLocalNotSeen(null);
    const seconds = Number(notSeen.trim());
    if (wantsNotSeen && (notSeen.trim() === '' || !Number.isFinite(seconds))) {
      setLocalNotSeen('Enter a number of seconds');
      return;
    }
    // The four types in their usual order, whatever order they were ticked in.
    const eventTypes = WEBHOOK_EVENT_TYPES.filter((type) => types.includes(type));
    const text = description.trim() === '' ? null : description;
    await action.run(async () => {
      if (!current) {
        const body: Record<string, unknown> = { url: url.trim(), event_types: eventTypes };
        if (text !== null) body.description = text;
        if (wantsNotSeen) body.not_seen_after_seconds = seconds;
        const { data } = await publicApiWrite<{ data: WebhookEndpoint }>('POST', '/webhook-endpoints', body);
        setUrl('');
        setDescription('');
        setTypes(['asset.first_seen', 'asset.moved']);
        setNotSeen(String(NOT_SEEN_DEFAULT));
        return props.onSaved(data);
      }
      const patch: Record<string, unknown> = {};
      if (url.trim() !== current.url) patch.url = url.trim();
      if (text !== current.description) patch.description = text;
      if (eventTypes.join() !== current.event_types.join()) patch.event_types = eventTypes;
      if (wantsNotSeen && seconds !== current.not_seen_after_seconds) patch.not_seen_after_seconds = seconds;
      if (Object.keys(patch).length === 0) return props.onSaved(null);
      const { data } = await publicApiWrite<{ data: WebhookEndpoint }>('PATCH', `/webhook-endpoints/${current.id}`, patch);
      return props.onSaved(data);
    });
  }

  const error = action.error;
  const urlError = fieldMessage(error, 'url');
  const typesError = fieldMessage(error, 'event_types');
  const descriptionError = fieldMessage(error, 'description');
  const notSeenError = localNotSeen ?? fieldMessage(error, 'not_seen_after_seconds');
  const id = (name: string) => `${prefix}-${name}`;
  return (
    <form class="panel" onSubmit={submit} aria-labelledby={id('title')} noValidate>
      <h2 id={id('title')}>{current ? 'Edit endpoint' : 'New endpoint'}</h2>
      <label for={id('url')}>URL</label>
      <input
        id={id('url')}
        ref={urlField}
        type="url"
        class="mono"
        maxLength={2048}
        value={url}
        onInput={(e) => setUrl(e.currentTarget.value)}
        aria-invalid={urlError ? true : undefined}
        aria-describedby={`${id('url-hint')} ${id('url-error')}`}
      />
      <span id={id('url-hint')} class="hint">
        Where the service sends the events: an https:// address of the receiver.
      </span>
      <FieldError id={id('url-error')} message={urlError} />
      <fieldset aria-describedby={id('types-error')}>
        <legend>Events</legend>
        {WEBHOOK_EVENT_TYPES.map((type) => (
          <div key={type} class="check">
            <input
              id={id(type)}
              type="checkbox"
              checked={types.includes(type)}
              onChange={(e) => setTypes(e.currentTarget.checked ? [...types, type] : types.filter((t) => t !== type))}
              aria-describedby={id(`${type}-hint`)}
            />
            <label for={id(type)} class="mono">
              {type}
            </label>
            <span id={id(`${type}-hint`)} class="hint">
              {EVENT_HINTS[type]}
            </span>
          </div>
        ))}
        <FieldError id={id('types-error')} message={typesError} />
      </fieldset>
      {wantsNotSeen && (
        <>
          <label for={id('not-seen')}>Not seen after (seconds)</label>
          <input
            id={id('not-seen')}
            type="number"
            inputMode="numeric"
            min={60}
            max={2592000}
            step={1}
            value={notSeen}
            onInput={(e) => setNotSeen(e.currentTarget.value)}
            aria-invalid={notSeenError ? true : undefined}
            aria-describedby={`${id('not-seen-hint')} ${id('not-seen-error')}`}
          />
          <span id={id('not-seen-hint')} class="hint">
            <span class="mono">asset.not_seen</span> is sent when an asset has not been read for this long: 60 (a minute) to 2592000 (30 days).
          </span>
          <FieldError id={id('not-seen-error')} message={notSeenError} />
        </>
      )}
      <label for={id('description')}>Description (optional)</label>
      <input
        id={id('description')}
        maxLength={1024}
        value={description}
        onInput={(e) => setDescription(e.currentTarget.value)}
        aria-invalid={descriptionError ? true : undefined}
        aria-describedby={id('description-error')}
      />
      <FieldError id={id('description-error')} message={descriptionError} />
      <Alert error={besidesFields(error, 'url', 'event_types', 'description', 'not_seen_after_seconds')} />
      <div class="actions">
        <button type="submit" class="primary" disabled={action.busy}>
          {current ? 'Save endpoint' : 'Create endpoint'}
        </button>
        {props.onCancel && (
          <button type="button" onClick={props.onCancel}>
            Cancel
          </button>
        )}
      </div>
    </form>
  );
}

const STATUS_LABELS: Record<WebhookDelivery['status'], string> = { pending: 'Pending', succeeded: 'Succeeded', failed: 'Failed' };

const deliveryColumns = (redeliver: (delivery: WebhookDelivery) => void): Array<Column<WebhookDelivery>> => [
  { header: 'Created', cell: (d) => formatTime(d.created_at) },
  { header: 'Event', class: 'mono', cell: (d) => d.event_type },
  { header: 'Status', cell: (d) => <span class={`badge ${d.status}`}>{STATUS_LABELS[d.status]}</span> },
  { header: 'Attempt', cell: (d) => d.attempt },
  { header: 'Response', cell: (d) => d.response_status ?? '—' },
  { header: 'Duration', cell: (d) => (d.duration_ms === null ? '—' : `${d.duration_ms} ms`) },
  { header: 'Error', cell: (d) => d.error ?? '—' },
  { header: 'Next retry', cell: (d) => (d.next_attempt_at ? formatTime(d.next_attempt_at) : '—') },
  {
    header: 'Actions',
    hiddenHeader: true,
    cell: (d) => (
      <button type="button" onClick={() => redeliver(d)} aria-label={`Redeliver ${d.event_type} delivery ${d.id}`}>
        Redeliver
      </button>
    ),
  },
];

/** An endpoint's most recent deliveries, newest first; any of them sent again on request. */
function Deliveries({ endpoint, onClose }: { endpoint: WebhookEndpoint; onClose: () => void }) {
  const deliveries = useLoad(() => publicApi<ListPage<WebhookDelivery>>(`/webhook-endpoints/${endpoint.id}/deliveries`, { limit: DELIVERIES_SHOWN }), []);
  const action = useAction();
  const title = useRef<HTMLHeadingElement>(null);
  useEffect(() => title.current?.focus(), []);

  const redeliver = (delivery: WebhookDelivery) =>
    void action.run(
      async () => {
        const { data } = await publicApiWrite<{ data: WebhookDelivery }>('POST', `/webhook-endpoints/${endpoint.id}/deliveries/${delivery.id}/redeliver`);
        await deliveries.reload();
        return data;
      },
      (data) => `The ${delivery.event_type} event is queued to be sent again (delivery ${data.id}).`,
    );
  const page = deliveries.data;
  return (
    <section aria-labelledby="deliveries-title" class="deliveries">
      <h2 id="deliveries-title" tabIndex={-1} ref={title}>
        Recent deliveries to <span class="mono">{endpoint.url}</span>
      </h2>
      <ExportButtons path={`/webhook-endpoints/${endpoint.id}/deliveries`} label="deliveries" />
      <div class="row-actions">
        <button
          type="button"
          onClick={() => {
            action.clear();
            void deliveries.reload();
          }}
        >
          Refresh
        </button>
        <button type="button" onClick={onClose}>
          Close deliveries
        </button>
      </div>
      {action.notice && <Notice>{action.notice}</Notice>}
      <Alert error={action.error ?? deliveries.error} />
      {page && page.data.length > 0 && (
        <p class="hint">{page.total_count > page.data.length ? `The newest ${page.data.length} of ${page.total_count}.` : `${page.total_count} in all.`}</p>
      )}
      <DataTable
        label={`Deliveries to ${endpoint.url}`}
        tableClass="wide"
        columns={deliveryColumns(redeliver)}
        rows={page?.data ?? null}
        rowKey={(d) => d.id}
        rowProps={(d) => ({ 'data-delivery-id': String(d.id) })}
        empty="No deliveries yet."
      />
    </section>
  );
}
