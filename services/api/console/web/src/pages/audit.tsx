import { useEffect, useState } from 'preact/hooks';
import { publicApi, type AuditActorType, type AuditEvent, type ListPage } from '../api.js';
import { Alert, besidesFields, ExportButtons, FieldError, fieldMessage, formatTime, Pager, PageTitle, TableScroll } from '../ui.js';

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
  'location.created',
  'location.updated',
  'location.moved',
  'location.renamed',
  'location.deleted',
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
  const [draft, setDraft] = useState<Filters>(NO_FILTERS);
  const [offset, setOffset] = useState(0);
  const [page, setPage] = useState<ListPage<AuditEvent> | null>(null);
  const [error, setError] = useState<unknown>(null);

  useEffect(() => {
    let current = true;
    setError(null);
    publicApi<ListPage<AuditEvent>>('/audit-events', { ...auditQuery(filters), limit: PAGE, offset }).then(
      (next) => current && setPage(next),
      (failure) => current && setError(failure),
    );
    return () => {
      current = false;
    };
  }, [filters, offset]);

  const field = (name: keyof Filters) => ({
    value: draft[name],
    onInput: (e: { currentTarget: HTMLInputElement | HTMLSelectElement }) => setDraft({ ...draft, [name]: e.currentTarget.value }),
  });
  const fieldError = (name: keyof Filters) => fieldMessage(error, name);

  return (
    <section>
      <PageTitle>Audit log</PageTitle>
      <p class="hint">Every change to this organization's data, keys and members, with who asked and the request it came in. Scans are not listed.</p>
      <form
        class="panel filters"
        aria-labelledby="audit-filters"
        onSubmit={(e) => {
          e.preventDefault();
          setOffset(0);
          setFilters(draft);
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
              setOffset(0);
              setFilters(NO_FILTERS);
            }}
          >
            Clear
          </button>
        </div>
      </form>
      <ExportButtons path="/audit-events" query={auditQuery(filters)} label="audit log" />
      <Alert error={besidesFields(error, 'since', 'until')} />
      {page && (
        <>
          {page.data.length === 0 ? (
            <p>No entries.</p>
          ) : (
            <TableScroll label="Audit log">
              <table>
                <thead>
                  <tr>
                    <th scope="col">When</th>
                    <th scope="col">Action</th>
                    <th scope="col">Resource</th>
                    <th scope="col">Who</th>
                    <th scope="col">Changes</th>
                    <th scope="col">Request</th>
                  </tr>
                </thead>
                <tbody>
                  {page.data.map((entry) => (
                    <tr key={entry.id} data-audit-id={entry.id}>
                      <td>{formatTime(entry.occurred_at)}</td>
                      <td class="mono audit-action">{entry.action}</td>
                      <td>
                        {entry.resource_type} <span class="mono">{entry.resource_external_key ?? entry.resource_id}</span>
                        {entry.resource_external_key && <span class="mono hint"> #{entry.resource_id}</span>}
                      </td>
                      <td>
                        <Who actor={entry.actor} />
                      </td>
                      <td>
                        <Changes changes={entry.changes} />
                      </td>
                      <td class="mono hint">{entry.request_id ?? '—'}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableScroll>
          )}
          <Pager offset={page.offset} limit={page.limit} total={page.total_count} onPage={setOffset} />
        </>
      )}
    </section>
  );
}
