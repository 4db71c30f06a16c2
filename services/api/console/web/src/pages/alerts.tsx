import { useEffect, useRef, useState } from 'preact/hooks';
import { publicApi, publicApiWrite, type AlertItem, type AlertRule, type ListPage } from '../api.js';
import { DataTable, useAction, useLoad, type Column, type Load } from '../list.js';
import { Alert, besidesFields, ConfirmDialog, FieldError, fieldMessage, PageTitle } from '../ui.js';
import { useStreamAttempts } from '../stream-retry.js';
import { useNames } from './names.js';
import { NameAndKey } from './tracking.js';

/**
 * The Alerts inbox and the alert rules (docs/console.md "Alerts"): the organization's alerts from
 * the public API's own list (/api/v1/alerts, docs/api.md "Alerts") with the session token, open
 * ones first shown, filtered by status and rule, names before keys; operators and admins
 * acknowledge. The list reads itself again when the service says alerts changed (an
 * EventSource on /app/api/live/alerts, docs/web-app.md "Live alerts"), keeping the filters, the
 * page and the focus. Below it the rules: admins create, edit, deactivate and delete them; other
 * members read them.
 */

const PAGE = 50;
const STATUSES = ['open', 'acknowledged', 'resolved'] as const;
const KINDS: AlertRule['kind'][] = ['entered', 'left', 'dwell_exceeded', 'not_seen'];
export const KIND_LABELS: Record<AlertRule['kind'], string> = { entered: 'Entered', left: 'Left', dwell_exceeded: 'Stayed too long', not_seen: 'Not seen' };
const KIND_HINTS: Record<AlertRule['kind'], string> = {
  entered: 'An asset moves into the zone from outside it.',
  left: 'An asset moves from inside the zone to outside it.',
  dwell_exceeded: 'An asset stays in the zone longer than the threshold.',
  not_seen: 'An asset in the zone is not seen for the threshold.',
};
const TIMED = new Set<AlertRule['kind']>(['dwell_exceeded', 'not_seen']);
const UNITS = { minutes: 60, hours: 3600, days: 86_400 } as const;
type Unit = keyof typeof UNITS;

/** A time to the second, date included: two alerts of one minute must not look alike. */
export function secondsTime(value: string | null | undefined): string {
  if (!value) return '—';
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? value : date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

/** A threshold in words: "90 minutes", "2 hours", "1 day". */
export function durationWords(seconds: number): string {
  const [unit, size] = seconds % UNITS.days === 0 ? (['day', UNITS.days] as const) : seconds % UNITS.hours === 0 ? (['hour', UNITS.hours] as const) : (['minute', UNITS.minutes] as const);
  const n = Math.round((seconds / size) * 100) / 100;
  return `${n} ${unit}${n === 1 ? '' : 's'}`;
}

type Connection = 'connecting' | 'open' | 'reconnecting' | 'ended' | 'failed';
const CONNECTION_TEXT: Record<Connection, string> = {
  connecting: 'Connecting…',
  open: 'Updates by itself as alerts are raised, acknowledged or resolved.',
  reconnecting: 'Connection lost; reconnecting… (the list may be behind)',
  ended: 'The session ended: sign in again.',
  failed: 'Live updates are not available now; trying again in a moment (the list may be behind).',
};

/**
 * Calls `changed` when the service says this organization's alerts changed, and after a
 * reconnection (notices may have been missed meanwhile). One connection at a time for the page's
 * life; a stream the server refused is opened again by itself (stream-retry.ts).
 */
function useAlertNotices(changed: () => void): Connection {
  const [connection, setConnection] = useState<Connection>('connecting');
  const attempts = useStreamAttempts();
  const changedRef = useRef(changed);
  changedRef.current = changed;
  // Across attempts: whether a stream was ever ready (a later ready reads the list again).
  const readyBefore = useRef(false);
  // The session ended: no stream opens again.
  const ended = useRef(false);
  useEffect(() => {
    const source = new EventSource('/app/api/live/alerts');
    let retry: (() => void) | null = null;
    source.addEventListener('ready', () => {
      setConnection('open');
      attempts.opened();
      if (readyBefore.current) changedRef.current();
      readyBefore.current = true;
    });
    source.addEventListener('alerts', () => changedRef.current());
    // Notices the page did not read fast enough: what changed is not known, so read again.
    source.addEventListener('skipped', () => changedRef.current());
    source.addEventListener('closed', (event) => {
      const { reason } = JSON.parse((event as MessageEvent<string>).data) as { reason: string };
      if (reason === 'session_ended') {
        ended.current = true;
        source.close();
        setConnection('ended');
      }
    });
    source.onerror = () => {
      if (ended.current) return;
      if (source.readyState !== EventSource.CLOSED) {
        setConnection('reconnecting');
        return;
      }
      setConnection('failed');
      retry ??= attempts.refused();
    };
    return () => {
      source.close();
      retry?.();
    };
  }, [attempts.attempt]);
  return connection;
}

/**
 * Reads again on every call, but never two at once: a call while a read is under way makes one
 * more read after it (a burst of notices costs at most two reads).
 */
function useCoalescedReload(reload: () => Promise<void>): () => void {
  const state = useRef({ running: false, again: false });
  const reloadRef = useRef(reload);
  reloadRef.current = reload;
  return () => {
    const s = state.current;
    if (s.running) {
      s.again = true;
      return;
    }
    s.running = true;
    void (async () => {
      try {
        do {
          s.again = false;
          await reloadRef.current();
        } while (s.again);
      } finally {
        s.running = false;
      }
    })();
  };
}

export function AlertsPage({ operator, admin = false }: { operator: boolean; admin?: boolean }) {
  const [status, setStatus] = useState<string>('open');
  const [ruleId, setRuleId] = useState<string>('');
  const [offset, setOffset] = useState(0);
  const rules = useLoad(() => publicApi<ListPage<AlertRule>>('/alert-rules', { limit: 200 }), []);
  const page = useLoad(() => publicApi<ListPage<AlertItem>>('/alerts', { status: status || undefined, rule_id: ruleId || undefined, limit: PAGE, offset }), [status, ruleId, offset]);
  const connection = useAlertNotices(useCoalescedReload(page.reload));
  const action = useAction();
  const rows = page.data?.data ?? null;
  const assets = useNames('assets', rows?.map((a) => a.asset_external_key) ?? []);
  const locations = useNames('locations', [...(rows?.map((a) => a.location_external_key) ?? []), ...(rules.data?.data.map((r) => r.location_external_key) ?? [])]);
  const ruleOf = (id: number) => rules.data?.data.find((r) => r.id === id);
  const acknowledge = async (alert: AlertItem) => {
    const done = await action.run(() => publicApiWrite('POST', `/alerts/${encodeURIComponent(alert.id)}/acknowledge`), 'Acknowledged.');
    if (done !== undefined) await page.reload();
  };
  const columns: Array<Column<AlertItem>> = [
    { header: 'Raised', cell: (a) => <time dateTime={a.raised_at}>{secondsTime(a.raised_at)}</time> },
    {
      header: 'Rule',
      cell: (a) => (
        <span>
          <span class="name">{ruleOf(a.rule_id)?.name ?? (rules.data ? `Rule #${a.rule_id} (deleted)` : `Rule #${a.rule_id}`)}</span> <span class="hint">{KIND_LABELS[a.kind]}</span>
        </span>
      ),
    },
    {
      header: 'Asset',
      cell: (a) => (
        <span>
          {a.asset_external_key ? <NameAndKey name={assets.get(a.asset_external_key)} keyText={a.asset_external_key} href={`/assets/${a.asset_id}`} /> : <a href={`/assets/${a.asset_id}`}>#{a.asset_id}</a>}
        </span>
      ),
    },
    { header: 'Where', cell: (a) => <span>{a.location_external_key ? <NameAndKey name={locations.get(a.location_external_key)} keyText={a.location_external_key} /> : `#${a.location_id} (deleted)`}</span> },
    { header: 'Status', cell: (a) => <StatusCell alert={a} /> },
    ...(operator
      ? [
          {
            header: 'Actions',
            hiddenHeader: true,
            class: 'row-actions',
            cell: (a: AlertItem) =>
              a.acknowledged_at === null ? (
                <button type="button" disabled={action.busy} onClick={() => void acknowledge(a)} aria-label={`Acknowledge alert ${a.id}`}>
                  Acknowledge
                </button>
              ) : null,
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
      <p class={`connection ${connection} hint`} data-live={connection}>
        {CONNECTION_TEXT[connection]}
      </p>
      <Alert error={page.error ?? action.error} />
      {action.notice && <p role="status">{action.notice}</p>}
      {data && (
        <DataTable
          label="Alerts"
          tableClass="stack"
          columns={columns}
          rows={data.data}
          rowKey={(a) => a.id}
          rowProps={(a) => ({ 'data-alert-id': a.id, 'data-status': a.status })}
          empty="No alerts."
          pager={{ offset: data.offset, limit: data.limit, total: data.total_count, onPage: setOffset }}
        />
      )}
      <RulesSection admin={admin} rules={rules} locations={locations} />
    </section>
  );
}

/** Open; acknowledged when and by whom; resolved when. */
function StatusCell({ alert }: { alert: AlertItem }) {
  const by = alert.acknowledged_by?.name ?? (alert.acknowledged_by?.type === 'system' ? 'the service' : null);
  return (
    <span class="status-lines">
      <span class={`badge ${alert.status === 'open' ? 'revoked' : alert.status === 'resolved' ? 'active' : 'invited'}`}>{alert.status[0]!.toUpperCase() + alert.status.slice(1)}</span>
      {alert.acknowledged_at && (
        <span class="hint">
          Acknowledged <time dateTime={alert.acknowledged_at}>{secondsTime(alert.acknowledged_at)}</time>
          {by ? ` by ${by}` : ''}
        </span>
      )}
      {alert.resolved_at && (
        <span class="hint">
          Resolved <time dateTime={alert.resolved_at}>{secondsTime(alert.resolved_at)}</time>
        </span>
      )}
    </span>
  );
}

// ---- the rules ------------------------------------------------------------------------------

function RulesSection({ admin, rules, locations }: { admin: boolean; rules: Load<ListPage<AlertRule>>; locations: Map<string, string> }) {
  const [editing, setEditing] = useState<AlertRule | 'new' | null>(null);
  const [deleting, setDeleting] = useState<AlertRule | null>(null);
  const [savedNotice, setSavedNotice] = useState<string | null>(null);
  const action = useAction();
  const list = rules.data?.data ?? null;
  const setActive = async (rule: AlertRule, isActive: boolean) => {
    const done = await action.run(() => publicApiWrite('PATCH', `/alert-rules/${rule.id}`, { is_active: isActive }), `Rule "${rule.name}" ${isActive ? 'activated' : 'deactivated'}.`);
    if (done !== undefined) await rules.reload();
  };
  const remove = async (rule: AlertRule) => {
    setDeleting(null);
    const done = await action.run(() => publicApiWrite('DELETE', `/alert-rules/${rule.id}`).then(() => true), `Rule "${rule.name}" deleted.`);
    if (done) {
      if (editing !== null && editing !== 'new' && editing.id === rule.id) setEditing(null);
      await rules.reload();
    }
  };
  const columns: Array<Column<AlertRule>> = [
    { header: 'Name', cell: (r) => <span class="name">{r.name}</span> },
    { header: 'Kind', cell: (r) => `${KIND_LABELS[r.kind]}${r.threshold_seconds !== null ? ` after ${durationWords(r.threshold_seconds)}` : ''}` },
    { header: 'Zone', cell: (r) => <span>{r.location_external_key ? <NameAndKey name={locations.get(r.location_external_key)} keyText={r.location_external_key} /> : `#${r.location_id} (deleted)`}</span> },
    { header: 'Assets', cell: (r) => (r.asset_ids === null ? 'Every asset' : `${r.asset_ids.length} asset${r.asset_ids.length === 1 ? '' : 's'}`) },
    { header: 'Active', cell: (r) => (r.is_active ? <span class="badge active">Active</span> : <span class="badge invited">Inactive</span>) },
    ...(admin
      ? [
          {
            header: 'Actions',
            hiddenHeader: true,
            class: 'row-actions',
            cell: (r: AlertRule) => (
              <span class="buttons">
                <button type="button" onClick={() => (action.clear(), setSavedNotice(null), setEditing(r))} aria-label={`Edit rule ${r.name}`}>
                  Edit
                </button>{' '}
                <button type="button" disabled={action.busy} onClick={() => void setActive(r, !r.is_active)} aria-label={`${r.is_active ? 'Deactivate' : 'Activate'} rule ${r.name}`}>
                  {r.is_active ? 'Deactivate' : 'Activate'}
                </button>{' '}
                <button type="button" class="danger" onClick={() => setDeleting(r)} aria-label={`Delete rule ${r.name}`}>
                  Delete
                </button>
              </span>
            ),
          },
        ]
      : []),
  ];
  return (
    <section aria-labelledby="rules-title">
      <h2 id="rules-title">Rules</h2>
      <p class="hint">
        {admin
          ? 'What raises an alert. A rule judges the reads that arrive after it is saved; changes apply from then on.'
          : 'What raises an alert. Only admins change rules.'}
      </p>
      <Alert error={rules.error ?? action.error} />
      {(action.notice ?? savedNotice) && <p role="status">{action.notice ?? savedNotice}</p>}
      <DataTable label="Alert rules" tableClass="stack" columns={columns} rows={list} rowKey={(r) => r.id} rowProps={(r) => ({ 'data-rule-id': String(r.id) })} empty="No rules yet." />
      {admin && editing === null && (
        <button type="button" class="primary" onClick={() => (action.clear(), setSavedNotice(null), setEditing('new'))}>
          New rule
        </button>
      )}
      {admin && editing !== null && (
        <RuleForm
          key={editing === 'new' ? 'new' : editing.id}
          rule={editing === 'new' ? null : editing}
          locationName={(key) => locations.get(key)}
          onCancel={() => setEditing(null)}
          onSaved={async (saved, created) => {
            setEditing(null);
            action.clear();
            await rules.reload();
            setSavedNotice(`Rule "${saved.name}" ${created ? 'created' : 'saved'}.`);
          }}
        />
      )}
      {deleting && (
        <ConfirmDialog title="Delete this rule?" confirm="Delete rule" onConfirm={() => void remove(deleting)} onCancel={() => setDeleting(null)}>
          <p>
            <strong>{deleting.name}</strong> raises no more alerts. Its alerts stay in the inbox. It cannot be restored.
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}

interface Hit {
  id: number;
  name: string;
  external_key: string;
}

interface RuleDraft {
  name: string;
  kind: AlertRule['kind'];
  threshold: string;
  unit: Unit;
  zone: Hit | null;
  /** What is typed in the zone's field while no location is chosen: taken as a key. */
  zoneText: string;
  everyAsset: boolean;
  assets: Hit[];
  isActive: boolean;
}

function unitOf(seconds: number): Unit {
  return seconds % UNITS.days === 0 ? 'days' : seconds % UNITS.hours === 0 ? 'hours' : 'minutes';
}

function draftOf(rule: AlertRule | null, zoneName: string | undefined): RuleDraft {
  const unit = rule?.threshold_seconds ? unitOf(rule.threshold_seconds) : 'hours';
  return {
    name: rule?.name ?? '',
    kind: rule?.kind ?? 'left',
    threshold: rule?.threshold_seconds ? String(Math.round((rule.threshold_seconds / UNITS[unit]) * 100) / 100) : '',
    unit,
    zone: rule ? { id: rule.location_id, name: zoneName ?? rule.location_external_key ?? `#${rule.location_id}`, external_key: rule.location_external_key ?? '' } : null,
    zoneText: '',
    everyAsset: rule ? rule.asset_ids === null : true,
    assets: (rule?.asset_ids ?? []).map((id) => ({ id, name: `#${id}`, external_key: '' })),
    isActive: rule?.is_active ?? true,
  };
}

/** The threshold in seconds for the API: the number times its unit, null when empty (the API then says it is required). */
function thresholdSeconds(draft: RuleDraft): number | null {
  if (draft.threshold.trim() === '') return null;
  const n = Number(draft.threshold);
  return Number.isFinite(n) ? Math.round(n * UNITS[draft.unit]) : NaN;
}

/** The names of a rule's assets (the list has no filter by id: one read each, at most the first 50). */
function useAssetNames(ids: number[], onFound: (found: Hit[]) => void) {
  useEffect(() => {
    if (ids.length === 0) return;
    let live = true;
    void Promise.all(ids.slice(0, 50).map((id) => publicApi<{ data: Hit }>(`/assets/${id}`).then((r) => r.data, () => null))).then((found) => {
      if (live) onFound(found.filter((hit): hit is Hit => hit !== null));
    });
    return () => {
      live = false;
    };
  }, []);
}

/** Create (rule null) or edit a rule; an edit sends only what changed (a merge patch). */
function RuleForm(props: { rule: AlertRule | null; locationName: (key: string) => string | undefined; onCancel: () => void; onSaved: (rule: AlertRule, created: boolean) => void | Promise<void> }) {
  const { rule } = props;
  const [draft, setDraft] = useState<RuleDraft>(() => draftOf(rule, rule?.location_external_key ? props.locationName(rule.location_external_key) : undefined));
  const action = useAction();
  const prefix = rule ? `rule-${rule.id}` : 'new-rule';
  useAssetNames(rule?.asset_ids ?? [], (found) => setDraft((d) => ({ ...d, assets: d.assets.map((a) => found.find((f) => f.id === a.id) ?? a) })));
  const timed = TIMED.has(draft.kind);

  function body(): Record<string, unknown> {
    const seconds = timed ? thresholdSeconds(draft) : null;
    const zone: Record<string, unknown> = draft.zone ? { location_id: draft.zone.id } : draft.zoneText.trim() ? { location_external_key: draft.zoneText.trim() } : {};
    const full: Record<string, unknown> = {
      name: draft.name,
      kind: draft.kind,
      ...zone,
      threshold_seconds: seconds,
      asset_ids: draft.everyAsset ? null : draft.assets.map((a) => a.id),
      is_active: draft.isActive,
    };
    if (!rule) return full;
    // A merge patch of what changed; a zone given as a key when none was chosen.
    const patch: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(full)) {
      const before = key === 'location_external_key' ? undefined : (rule as unknown as Record<string, unknown>)[key];
      if (JSON.stringify(before) !== JSON.stringify(value)) patch[key] = value;
    }
    return patch;
  }

  async function submit(event: Event) {
    event.preventDefault();
    const seconds = timed ? thresholdSeconds(draft) : null;
    if (Number.isNaN(seconds)) {
      action.fail(new Error('The threshold must be a number.'));
      return;
    }
    const saved = await action.run(() =>
      rule ? publicApiWrite<{ data: AlertRule }>('PATCH', `/alert-rules/${rule.id}`, body()) : publicApiWrite<{ data: AlertRule }>('POST', '/alert-rules', body()),
    );
    if (saved) await props.onSaved(saved.data, !rule);
  }

  const error = action.error;
  const mine = (...names: string[]) => fieldMessage(error, ...names);
  const fields = ['name', 'kind', 'location_id', 'location_external_key', 'threshold_seconds', 'asset_ids', 'is_active'];
  return (
    <form class="panel" onSubmit={submit} aria-labelledby={`${prefix}-title`} noValidate>
      <h2 id={`${prefix}-title`}>{rule ? `Edit rule ${rule.name}` : 'New rule'}</h2>
      <label for={`${prefix}-name`}>Name</label>
      <input
        id={`${prefix}-name`}
        maxLength={255}
        value={draft.name}
        onInput={(e) => setDraft({ ...draft, name: e.currentTarget.value })}
        aria-invalid={mine('name') ? true : undefined}
        aria-describedby={`${prefix}-name-error`}
      />
      <FieldError id={`${prefix}-name-error`} message={mine('name')} />
      <label for={`${prefix}-kind`}>When</label>
      <select
        id={`${prefix}-kind`}
        value={draft.kind}
        onChange={(e) => setDraft({ ...draft, kind: e.currentTarget.value as AlertRule['kind'] })}
        aria-invalid={mine('kind') ? true : undefined}
        aria-describedby={`${prefix}-kind-hint ${prefix}-kind-error`}
      >
        {KINDS.map((kind) => (
          <option key={kind} value={kind}>
            {KIND_LABELS[kind]}
          </option>
        ))}
      </select>
      <span id={`${prefix}-kind-hint`} class="hint">
        {KIND_HINTS[draft.kind]}
      </span>{' '}
      <FieldError id={`${prefix}-kind-error`} message={mine('kind')} />
      {timed && (
        <>
          <label for={`${prefix}-threshold`}>Threshold</label>
          <div class="copy-row">
            <input
              id={`${prefix}-threshold`}
              type="number"
              inputMode="decimal"
              min="0"
              step="any"
              value={draft.threshold}
              onInput={(e) => setDraft({ ...draft, threshold: e.currentTarget.value })}
              aria-invalid={mine('threshold_seconds') ? true : undefined}
              aria-describedby={`${prefix}-threshold-hint ${prefix}-threshold-error`}
            />
            <select aria-label="Threshold unit" value={draft.unit} onChange={(e) => setDraft({ ...draft, unit: e.currentTarget.value as Unit })}>
              {(Object.keys(UNITS) as Unit[]).map((unit) => (
                <option key={unit} value={unit}>
                  {unit}
                </option>
              ))}
            </select>
          </div>
          <span id={`${prefix}-threshold-hint`} class="hint">
            From 1 minute to 30 days.
          </span>{' '}
          <FieldError id={`${prefix}-threshold-error`} message={mine('threshold_seconds')} />
        </>
      )}
      <Finder
        id={`${prefix}-zone`}
        label="Zone"
        hint="A location and everything inside it. Search by name or key and choose one, or type the location's exact key."
        path="/locations"
        noun="location"
        chosen={draft.zone ? [draft.zone] : []}
        text={draft.zoneText}
        onText={(text) => setDraft((d) => ({ ...d, zone: null, zoneText: text }))}
        onChoose={(hit) => setDraft((d) => ({ ...d, zone: hit, zoneText: '' }))}
        error={mine('location_id', 'location_external_key')}
      />
      <fieldset>
        <legend>Assets</legend>
        <div class="check">
          <input id={`${prefix}-every`} type="radio" name={`${prefix}-assets`} checked={draft.everyAsset} onChange={() => setDraft({ ...draft, everyAsset: true })} />
          <label for={`${prefix}-every`}>Every asset</label>
        </div>
        <div class="check">
          <input id={`${prefix}-some`} type="radio" name={`${prefix}-assets`} checked={!draft.everyAsset} onChange={() => setDraft({ ...draft, everyAsset: false })} />
          <label for={`${prefix}-some`}>Only these assets</label>
        </div>
        {!draft.everyAsset && (
          <AssetsPicker
            id={`${prefix}-assets`}
            chosen={draft.assets}
            onChange={(assets) => setDraft((d) => ({ ...d, assets }))}
            error={mine('asset_ids')}
          />
        )}
        {draft.everyAsset && <FieldError id={`${prefix}-assets-error`} message={mine('asset_ids')} />}
      </fieldset>
      <div class="check">
        <input id={`${prefix}-active`} type="checkbox" checked={draft.isActive} onChange={(e) => setDraft({ ...draft, isActive: e.currentTarget.checked })} />
        <label for={`${prefix}-active`}>Active</label>
      </div>
      <Alert error={besidesFields(error, ...fields)} />
      <div class="row-actions">
        <button type="submit" class="primary" disabled={action.busy}>
          {rule ? 'Save rule' : 'Create rule'}
        </button>
        <button type="button" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

/** The chosen assets, each with Remove, and a search to add more. */
function AssetsPicker(props: { id: string; chosen: Hit[]; onChange: (assets: Hit[]) => void; error: string | null }) {
  const [text, setText] = useState('');
  return (
    <>
      {props.chosen.length > 0 && (
        <ul class="choices" aria-label="Chosen assets">
          {props.chosen.map((asset) => (
            <li key={asset.id} data-asset-id={String(asset.id)}>
              <span class="name">{asset.name}</span> {asset.external_key && <span class="mono hint">{asset.external_key}</span>}{' '}
              <button type="button" onClick={() => props.onChange(props.chosen.filter((a) => a.id !== asset.id))} aria-label={`Remove ${asset.name}`}>
                Remove
              </button>
            </li>
          ))}
        </ul>
      )}
      <Finder
        id={props.id}
        label="Add an asset"
        hint="Search by name, key or tag and choose one."
        path="/assets"
        noun="asset"
        chosen={[]}
        text={text}
        onText={setText}
        onChoose={(hit) => {
          if (!props.chosen.some((a) => a.id === hit.id)) props.onChange([...props.chosen, hit]);
          setText('');
        }}
        error={props.error}
        exclude={new Set(props.chosen.map((a) => a.id))}
      />
    </>
  );
}

/**
 * A search field over a list of the public API (`q`, by name first) whose hits are chosen with a
 * button (the Readers page's location picker, docs/console.md "Readers and scan points (admins)").
 */
function Finder(props: {
  id: string;
  label: string;
  hint: string;
  path: '/locations' | '/assets';
  noun: string;
  chosen: Hit[];
  text: string;
  onText: (text: string) => void;
  onChoose: (hit: Hit) => void;
  error: string | null;
  exclude?: Set<number>;
}) {
  const [hits, setHits] = useState<ListPage<Hit> | null>(null);
  const search = useAction();
  const field = useRef<HTMLInputElement>(null);
  const chosen = props.chosen[0];
  async function find() {
    const q = chosen ? '' : props.text.trim();
    const found = await search.run(() => publicApi<ListPage<Hit>>(props.path, { q: q || undefined, limit: 20, sort: 'name' }));
    if (found) setHits(found);
  }
  const shown = hits?.data.filter((hit) => !props.exclude?.has(hit.id)) ?? [];
  return (
    <>
      <label for={props.id}>{props.label}</label>
      <div class="copy-row">
        <input
          id={props.id}
          ref={field}
          type="search"
          value={chosen ? `${chosen.name}${chosen.external_key ? ` (${chosen.external_key})` : ''}` : props.text}
          onInput={(e) => {
            setHits(null);
            props.onText(e.currentTarget.value);
          }}
          onKeyDown={(e) => {
            // Enter in a search field searches rather than saves.
            if (e.key === 'Enter') {
              e.preventDefault();
              void find();
            }
          }}
          aria-invalid={props.error ? true : undefined}
          aria-describedby={`${props.id}-hint ${props.id}-error`}
        />
        <button type="button" onClick={() => void find()}>
          Find {props.noun}
        </button>
      </div>
      <span id={`${props.id}-hint`} class="hint">
        {props.hint}
      </span>{' '}
      <FieldError id={`${props.id}-error`} message={props.error} />
      <Alert error={search.error} />
      {hits && (
        <div role="status">
          {shown.length === 0 ? (
            <p class="hint">No {props.noun} matches.</p>
          ) : (
            <ul class="choices" aria-label={`Matching ${props.noun}s`}>
              {shown.map((hit) => (
                <li key={hit.id}>
                  <button
                    type="button"
                    onClick={() => {
                      props.onChoose(hit);
                      setHits(null);
                      // The list goes away with the choice: the focus returns to the field.
                      field.current?.focus();
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
