import { useState } from 'preact/hooks';
import { publicApi, type AuditActorType, type AuditEvent, type ListPage } from '../api.js';
import { DataTable, useLoad, type Column } from '../list.js';
import { Alert, besidesFields, ExportButtons, FieldError, fieldMessage, formatTime, PageTitle } from '../ui.js';

/**
 * The audit log of the current organization (admins; docs/console.md "Audit log (admins)"): who changed
 * what, newest first, from the public API's own list (/api/v1/audit-events, docs/api.md "Audit
 * log") with the session token, and its filters.
 */

const PAGE = 50;

const AUDIT_ACTOR_TYPES: readonly AuditActorType[] = ['api_key', 'user', 'cli', 'system'];

/** The audit log's resource types and actions (docs/api.md "Audit log"); both lists may grow. */
const AUDIT_RESOURCE_TYPES = ['asset', 'location', 'tag', 'api_key', 'user', 'membership', 'reader', 'scan_point', 'organization'] as const;
const AUDIT_ACTIONS = [
  'asset.created',
  'asset.updated',
  'asset.renamed',
  'asset.deleted',
  'asset.restored',
  'location.created',
  'location.updated',
  'location.moved',
  'location.renamed',
  'location.deleted',
  'location.restored',
  'tag.attached',
  'tag.detached',
  'organization.created',
  'api_key.minted',
  'api_key.revoked',
  'user.created',
  'user.setup_link_issued',
  'user.password_set',
  'membership.granted',
  'membership.role_changed',
  'membership.removed',
  'membership.invited',
  'membership.invitation_accepted',
  'membership.invitation_cancelled',
  'reader.registered',
  'scan_point.assigned',
  'scan_point.unassigned',
  'webhook_endpoint.created',
  'webhook_endpoint.updated',
  'webhook_endpoint.deleted',
  'webhook_endpoint.secret_rotated',
  'alert_rule.created',
  'alert_rule.updated',
  'alert_rule.deleted',
  'alert.acknowledged',
  'count.started',
  'count.closed',
] as const;

const ACTOR_LABELS: Record<AuditActorType, string> = { api_key: 'API key', user: 'Person', cli: 'CLI', system: 'The service' };

interface Filters {
  since: string;
  until: string;
  actor_type: string;
  actor_id: string;
  resource_type: string;
  resource_id: string;
  action: string;
}

const NO_FILTERS: Filters = { since: '', until: '', actor_type: '', actor_id: '', resource_type: '', resource_id: '', action: '' };

/** A datetime-local field's value (this browser's time zone) as RFC 3339; empty stays empty. */
function instant(local: string): string {
  if (!local) return '';
  const date = new Date(local);
  return Number.isNaN(date.getTime()) ? local : date.toISOString();
}

/** A value of `changes`, as short text. */
function shown(value: unknown): string {
  if (value === null || value === undefined) return '—';
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
}

function Who({ actor }: { actor: AuditEvent['actor'] }) {
  const label = ACTOR_LABELS[actor.type] ?? actor.type;
  if (actor.type === 'cli' || actor.type === 'system') return <span>{label}</span>;
  return (
    <span>
      {label}: {actor.name ?? actor.id ?? '—'}
      {actor.id && actor.id !== actor.name && <span class="mono hint"> {actor.id}</span>}
    </span>
  );
}

function Changes({ changes }: { changes: AuditEvent['changes'] }) {
  if (!changes) return <span class="hint">—</span>;
  return (
    <ul class="changes">
      {Object.entries(changes).map(([field, { from, to }]) => (
        <li key={field}>
          <span class="mono">{field}</span>: {shown(from)} → {shown(to)}
        </li>
      ))}
    </ul>
  );
}

const AUDIT_COLUMNS: Array<Column<AuditEvent>> = [
  { header: 'When', cell: (entry) => formatTime(entry.occurred_at) },
  { header: 'Action', class: 'mono audit-action', cell: (entry) => entry.action },
  {
    header: 'Resource',
    cell: (entry) => (
      <>
        {entry.resource_type} <span class="mono">{entry.resource_external_key ?? entry.resource_id}</span>
        {entry.resource_external_key && <span class="mono hint"> #{entry.resource_id}</span>}
      </>
    ),
  },
  { header: 'Who', cell: (entry) => <Who actor={entry.actor} /> },
  { header: 'Changes', cell: (entry) => <Changes changes={entry.changes} /> },
  { header: 'Request', class: 'mono hint', cell: (entry) => entry.request_id ?? '—' },
];

/** The filters as the list's query: the page's and its export's. */
function auditQuery(filters: Filters) {
  return {
    since: instant(filters.since),
    until: instant(filters.until),
    actor_type: filters.actor_type,
    actor_id: filters.actor_id.trim(),
    resource_type: filters.resource_type,
    resource_id: filters.resource_id.trim(),
    action: filters.action,
  };
}

export function AuditPage() {
  const [filters, setFilters] = useState<Filters>(NO_FILTERS);
  const [offset, setOffset] = useState(0);
  const page = useLoad(
    () =>
      publicApi<ListPage<AuditEvent>>('/audit-events', { ...auditQuery(filters), limit: PAGE, offset }),
    [filters, offset],
  );
  const apply = (next: Filters) => {
    setOffset(0);
    setFilters(next);
  };
  const data = page.data;
  return (
    <section>
      <PageTitle>Audit log</PageTitle>
      <p class="hint">Every change to this organization's data, keys and members, with who asked and the request it came in. Scans are not listed.</p>
      <AuditFilters error={page.error} onApply={apply} />
      <ExportButtons path="/audit-events" query={auditQuery(filters)} label="audit log" />
      <Alert error={besidesFields(page.error, 'since', 'until')} />
      {data && (
        <DataTable
          label="Audit log"
          columns={AUDIT_COLUMNS}
          rows={data.data}
          rowKey={(entry) => entry.id}
          rowProps={(entry) => ({ 'data-audit-id': entry.id })}
          empty="No entries."
          pager={{ offset: data.offset, limit: data.limit, total: data.total_count, onPage: setOffset }}
        />
      )}
    </section>
  );
}

function AuditFilters({ error, onApply }: { error: unknown; onApply: (filters: Filters) => void }) {
  const [draft, setDraft] = useState<Filters>(NO_FILTERS);
  const field = (name: keyof Filters) => ({
    value: draft[name],
    onInput: (e: { currentTarget: HTMLInputElement | HTMLSelectElement }) => setDraft({ ...draft, [name]: e.currentTarget.value }),
  });
  const fieldError = (name: keyof Filters) => fieldMessage(error, name);
  return (
      <form
        class="panel filters"
        aria-labelledby="audit-filters"
        onSubmit={(e) => {
          e.preventDefault();
          onApply(draft);
        }}
      >
        <h2 id="audit-filters">Filters</h2>
        <div class="inline-fields">
          <div>
            <label for="a-since">From</label>
            <input id="a-since" type="datetime-local" step="1" {...field('since')} aria-describedby="a-since-error" />
            <FieldError id="a-since-error" message={fieldError('since')} />
          </div>
          <div>
            <label for="a-until">Until</label>
            <input id="a-until" type="datetime-local" step="1" {...field('until')} aria-describedby="a-until-error" />
            <FieldError id="a-until-error" message={fieldError('until')} />
          </div>
          <div>
            <label for="a-actor-type">Who</label>
            <select id="a-actor-type" {...field('actor_type')}>
              <option value="">Anyone</option>
              {AUDIT_ACTOR_TYPES.map((type) => (
                <option key={type} value={type}>
                  {ACTOR_LABELS[type]}
                </option>
              ))}
            </select>
          </div>
          <div>
            <label for="a-actor-id">Key or user id</label>
            <input id="a-actor-id" {...field('actor_id')} maxLength={255} />
          </div>
          <div>
            <label for="a-resource-type">Resource</label>
            <select id="a-resource-type" {...field('resource_type')}>
              <option value="">Any</option>
              {AUDIT_RESOURCE_TYPES.map((type) => (
                <option key={type} value={type}>
                  {type}
                </option>
              ))}
            </select>
          </div>
          <div>
            <label for="a-resource-id">Resource id</label>
            <input id="a-resource-id" {...field('resource_id')} maxLength={1024} />
          </div>
          <div>
            <label for="a-action">Action</label>
            <select id="a-action" {...field('action')}>
              <option value="">Any</option>
              {AUDIT_ACTIONS.map((action) => (
                <option key={action} value={action}>
                  {action}
                </option>
              ))}
            </select>
          </div>
        </div>
        <div class="actions">
          <button type="submit">Apply</button>
          <button
            type="button"
            onClick={() => {
              setDraft(NO_FILTERS);
              onApply(NO_FILTERS);
            }}
          >
            Clear
          </button>
        </div>
      </form>
  );
}
