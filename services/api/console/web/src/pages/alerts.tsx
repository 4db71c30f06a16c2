import { useState } from 'preact/hooks';
import { publicApi, publicApiWrite, type AlertItem, type AlertRule, type ListPage } from '../api.js';
import { DataTable, useAction, useLoad, type Column } from '../list.js';
import { Alert, formatTime, PageTitle } from '../ui.js';

/**
 * The Alerts inbox (docs/console.md "Alerts"): the organization's alerts from the public API's
 * own list (/api/v1/alerts, docs/api.md "Alerts") with the session token, open ones first shown,
 * filtered by status and rule, names before keys; operators and admins acknowledge.
 */

const PAGE = 50;
const STATUSES = ['open', 'acknowledged', 'resolved'] as const;
const KIND_LABELS: Record<AlertRule['kind'], string> = { entered: 'Entered', left: 'Left', dwell_exceeded: 'Stayed too long', not_seen: 'Not seen' };

export function AlertsPage({ operator }: { operator: boolean }) {
  const [status, setStatus] = useState<string>('open');
  const [ruleId, setRuleId] = useState<string>('');
  const [offset, setOffset] = useState(0);
  const rules = useLoad(() => publicApi<ListPage<AlertRule>>('/alert-rules', { limit: 200 }), []);
  const page = useLoad(() => publicApi<ListPage<AlertItem>>('/alerts', { status: status || undefined, rule_id: ruleId || undefined, limit: PAGE, offset }), [status, ruleId, offset]);
  const action = useAction();
  const ruleName = (id: number) => rules.data?.data.find((r) => r.id === id)?.name ?? `Rule ${id}`;
  const acknowledge = async (alert: AlertItem) => {
    const done = await action.run(() => publicApiWrite('POST', `/alerts/${encodeURIComponent(alert.id)}/acknowledge`), 'Acknowledged.');
    if (done !== undefined) await page.reload();
  };
  const columns: Array<Column<AlertItem>> = [
    { header: 'Raised', cell: (a) => formatTime(a.raised_at) },
    { header: 'Rule', cell: (a) => <>{ruleName(a.rule_id)} <span class="hint">{KIND_LABELS[a.kind]}</span></> },
    { header: 'Asset', cell: (a) => (a.asset_external_key ? <a href={`/assets/${a.asset_id}`}>{a.asset_external_key}</a> : <span class="mono">#{a.asset_id}</span>) },
    { header: 'Where', class: 'mono', cell: (a) => a.location_external_key ?? `#${a.location_id}` },
    { header: 'Status', cell: (a) => a.status },
    ...(operator
      ? [
          {
            header: 'Actions',
            hiddenHeader: true,
            class: 'row-actions',
            cell: (a: AlertItem) =>
              a.acknowledged_at === null ? (
                <button type="button" disabled={action.busy} onClick={() => void acknowledge(a)}>
                  Acknowledge
                </button>
              ) : (
                <span class="hint">Acknowledged {formatTime(a.acknowledged_at)}</span>
              ),
          },
        ]
      : []),
  ];
  const data = page.data;
  return (
    <section>
      <PageTitle>Alerts</PageTitle>
      <form class="panel filters" aria-labelledby="alert-filters" onSubmit={(e) => e.preventDefault()}>
        <h2 id="alert-filters">Filters</h2>
        <div class="inline-fields">
          <div>
            <label for="al-status">Status</label>
            <select id="al-status" value={status} onChange={(e) => (setOffset(0), setStatus(e.currentTarget.value))}>
              <option value="">Any</option>
              {STATUSES.map((s) => (
                <option key={s} value={s}>
                  {s[0]!.toUpperCase() + s.slice(1)}
                </option>
              ))}
            </select>
          </div>
          <div>
            <label for="al-rule">Rule</label>
            <select id="al-rule" value={ruleId} onChange={(e) => (setOffset(0), setRuleId(e.currentTarget.value))}>
              <option value="">Any</option>
              {(rules.data?.data ?? []).map((r) => (
                <option key={r.id} value={String(r.id)}>
                  {r.name}
                </option>
              ))}
            </select>
          </div>
        </div>
      </form>
      <Alert error={page.error ?? action.error} />
      {action.notice && <p role="status">{action.notice}</p>}
      {data && (
        <DataTable
          label="Alerts"
          columns={columns}
          rows={data.data}
          rowKey={(a) => a.id}
          rowProps={(a) => ({ 'data-alert-id': a.id })}
          empty="No alerts."
          pager={{ offset: data.offset, limit: data.limit, total: data.total_count, onPage: setOffset }}
        />
      )}
    </section>
  );
}
