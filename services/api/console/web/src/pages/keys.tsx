import { useState } from 'preact/hooks';
import { app, type Actor, type Key } from '../api.js';
import { DataTable, useAction, useLoad, type Column } from '../list.js';
import { Alert, ConfirmDialog, CopyField, formatTime, Notice, PageTitle } from '../ui.js';

/**
 * API keys of the current organization (admins): the contract's form, a name, scopes as a level
 * per resource and an optional expiry; the token shown once; the list; revoke with confirmation.
 */

type Level = 'none' | 'read' | 'read_write' | 'write';

const RESOURCES: Array<{ name: 'assets' | 'locations' | 'tracking' | 'webhooks' | 'audit' | 'alerts' | 'counts'; label: string; levels: Level[] }> = [
  { name: 'assets', label: 'Assets', levels: ['none', 'read', 'read_write'] },
  { name: 'locations', label: 'Locations', levels: ['none', 'read', 'read_write'] },
  // Tracking has no write level: where things are comes only from scans.
  { name: 'tracking', label: 'Tracking', levels: ['none', 'read'] },
  { name: 'webhooks', label: 'Webhooks', levels: ['none', 'read', 'read_write'] },
  // The audit log is read only: its entries are made by the changes themselves.
  { name: 'audit', label: 'Audit log', levels: ['none', 'read'] },
  { name: 'alerts', label: 'Alerts', levels: ['none', 'read', 'read_write'] },
  { name: 'counts', label: 'Counts', levels: ['none', 'read', 'read_write'] },
];

const LEVEL_LABELS: Record<Level, string> = { none: 'None', read: 'Read', read_write: 'Read + Write', write: 'Write' };

function actorText(actor: Actor): string {
  if (!actor) return '—';
  return actor.kind === 'cli' ? 'CLI' : actor.email;
}

function keyState(key: Key): string {
  if (key.revoked_at) return 'Revoked';
  if (key.expires_at && Date.parse(key.expires_at) <= Date.now()) return 'Expired';
  return 'Active';
}

const KEY_COLUMNS = (revoke: (key: Key) => void): Array<Column<Key>> => [
  { header: 'Name', class: 'key-name', cell: (key) => key.name },
  { header: 'Prefix', class: 'mono', cell: (key) => key.prefix },
  {
    header: 'Scopes',
    cell: (key) => (
      <ul class="scopes">
        {key.scopes.map((scope) => (
          <li key={scope} class="mono">
            {scope}
          </li>
        ))}
      </ul>
    ),
  },
  { header: 'Created', cell: (key) => formatTime(key.created_at) },
  { header: 'Last used', cell: (key) => (key.last_used_at ? formatTime(key.last_used_at) : 'Never') },
  { header: 'Expires', cell: (key) => (key.expires_at ? formatTime(key.expires_at) : 'Never') },
  {
    header: 'State',
    cell: (key) => (
      <>
        <span class={`badge ${keyState(key).toLowerCase()}`}>{keyState(key)}</span>
        {key.revoked_at && <span class="hint"> {formatTime(key.revoked_at)}</span>}
      </>
    ),
  },
  { header: 'Minted by', cell: (key) => actorText(key.minted_by) },
  { header: 'Revoked by', cell: (key) => (key.revoked_at ? actorText(key.revoked_by) : '—') },
  {
    header: 'Actions',
    hiddenHeader: true,
    cell: (key) =>
      !key.revoked_at && (
        <button type="button" class="danger" onClick={() => revoke(key)} aria-label={`Revoke key ${key.name}`}>
          Revoke
        </button>
      ),
  },
];

export function KeysPage() {
  const keys = useLoad(async () => (await app<{ data: Key[] }>('GET', '/keys')).data, []);
  const action = useAction();
  const [minted, setMinted] = useState<(Key & { token: string }) | null>(null);
  const [revoking, setRevoking] = useState<Key | null>(null);

  function revoke(key: Key) {
    setRevoking(null);
    void action.run(() => app('DELETE', `/keys/${encodeURIComponent(key.id)}`).then(keys.reload), `Key "${key.name}" revoked.`);
  }

  return (
    <section>
      <PageTitle>API keys</PageTitle>
      <p class="hint">Keys let partners' systems call the API for this organization. A key's scopes and expiry cannot be changed: mint a new one and revoke the old.</p>
      <NewKeyForm
        onMinted={(key) => {
          setMinted(key);
          action.clear();
          void keys.reload();
        }}
      />
      {minted && (
        <div class="token-box" aria-live="polite">
          <h2>New key "{minted.name}"</h2>
          <p>Copy the token now: it is shown this once and cannot be seen again.</p>
          <CopyField id="new-token" label="Token" value={minted.token} />
          <button type="button" onClick={() => setMinted(null)}>
            Done
          </button>
        </div>
      )}
      {action.notice && <Notice>{action.notice}</Notice>}
      <Alert error={action.error ?? keys.error} />
      <h2>Keys</h2>
      <DataTable label="API keys" tableClass="keys stack" columns={KEY_COLUMNS(setRevoking)} rows={keys.data} rowKey={(key) => key.id} rowProps={(key) => ({ 'data-key-id': key.id })} empty="No keys yet." />
      {revoking && (
        <ConfirmDialog title="Revoke this key?" confirm="Revoke key" onConfirm={() => revoke(revoking)} onCancel={() => setRevoking(null)}>
          <p>
            Key "<strong>{revoking.name}</strong>" (<span class="mono">{revoking.prefix}</span>) will be refused from now on. This cannot be undone.
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}

function NewKeyForm({ onMinted }: { onMinted: (key: Key & { token: string }) => void }) {
  const [name, setName] = useState('');
  const [levels, setLevels] = useState<Record<string, Level>>({ assets: 'read', locations: 'read', tracking: 'read', webhooks: 'none', audit: 'none', alerts: 'none', counts: 'none' });
  const [ingestion, setIngestion] = useState(false);
  const [expires, setExpires] = useState('');
  const action = useAction();

  async function submit(event: Event) {
    event.preventDefault();
    let expiresAt: string | null = null;
    if (expires) {
      // The date picker gives a day; the key expires at the end of it, in this browser's time zone.
      const end = new Date(`${expires}T23:59:59`);
      if (Number.isNaN(end.getTime())) return action.fail(new Error('The expiry is not a date'));
      expiresAt = end.toISOString();
    }
    const access = { ...levels, scans: ingestion ? 'write' : 'none' };
    const minted = await action.run(() => app<{ data: Key & { token: string } }>('POST', '/keys', { name, access, expires_at: expiresAt }));
    if (!minted) return;
    setName('');
    setExpires('');
    onMinted(minted.data);
  }

  return (
    <form class="panel" onSubmit={submit} aria-labelledby="new-key-title">
      <h2 id="new-key-title">New key</h2>
      <label for="key-name">Name</label>
      <input id="key-name" required maxLength={255} value={name} onInput={(e) => setName(e.currentTarget.value)} />
      <fieldset>
        <legend>Scopes</legend>
        <div class="scope-grid">
          {RESOURCES.map((resource) => (
            <div key={resource.name} class="scope-row">
              <label for={`level-${resource.name}`}>{resource.label}</label>
              <select id={`level-${resource.name}`} value={levels[resource.name]} onChange={(e) => setLevels({ ...levels, [resource.name]: e.currentTarget.value as Level })}>
                {resource.levels.map((level) => (
                  <option key={level} value={level}>
                    {LEVEL_LABELS[level]}
                  </option>
                ))}
              </select>
            </div>
          ))}
        </div>
        <div class="check">
          <input id="scope-scans" type="checkbox" checked={ingestion} onChange={(e) => setIngestion(e.currentTarget.checked)} aria-describedby="scope-scans-hint" />
          <label for="scope-scans">Ingestion key (scans:write)</label>
        </div>
        <span id="scope-scans-hint" class="hint">
          For handheld backends that submit scans to the ingest listener.
        </span>
      </fieldset>
      <label for="key-expires">Expires (optional)</label>
      <input id="key-expires" type="date" value={expires} onInput={(e) => setExpires(e.currentTarget.value)} aria-describedby="key-expires-hint" />
      <span id="key-expires-hint" class="hint">
        Leave empty for a key that never expires.
      </span>
      <Alert error={action.error} />
      <button type="submit" class="primary" disabled={action.busy}>
        Mint key
      </button>
    </form>
  );
}
