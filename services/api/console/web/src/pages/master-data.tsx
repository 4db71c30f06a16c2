import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { ApiFailure, publicApiWrite } from '../api.js';
import { useAction } from '../list.js';
import { Alert, besidesFields, ConfirmDialog, FieldError, fieldMessage, Notice } from '../ui.js';

/**
 * Keeping assets and locations (docs/console.md, "Keeping assets and locations"): the public API's
 * own calls (/api/v1, docs/api.md "Assets", "Locations", "Changing a record: PATCH", "Renaming: a new external_key",
 * "Tags", "Deleting", "Restoring") with the person's session token, so its rules, concurrency and audit apply
 * unchanged. Shown to operators and admins only; a viewer's token is refused 403 anyway.
 */

export type Kind = 'assets' | 'locations';

export interface Tag {
  id: number;
  tag_type: string;
  value: string;
}

export interface MasterRecord {
  id: number;
  name: string;
  external_key: string;
  description?: string | null;
  is_active?: boolean;
  valid_from?: string | null;
  valid_to?: string | null;
  metadata?: Record<string, unknown>;
  parent_id?: number | null;
  tags?: Tag[];
}

const NOUN: Record<Kind, string> = { assets: 'asset', locations: 'location' };

/** An RFC 3339 instant as a datetime-local field's value (this browser's time zone), and back. */
function toLocal(value: string | null | undefined): string {
  if (!value) return '';
  const date = new Date(value);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}
function fromLocal(value: string): string | null {
  return value ? new Date(value).toISOString() : null;
}

/** A labelled field with its error beside it (the API's refusal in words, src/messages.ts). */
function Field(props: { id: string; label: string; error: string | null; children: (aria: { id: string; 'aria-invalid'?: true; 'aria-describedby': string }) => ComponentChildren }) {
  return (
    <>
      <label for={props.id}>{props.label}</label>
      {props.children({ id: props.id, 'aria-invalid': props.error ? true : undefined, 'aria-describedby': `${props.id}-error` })}
      <FieldError id={`${props.id}-error`} message={props.error} />
    </>
  );
}

interface Draft {
  external_key: string;
  name: string;
  description: string;
  is_active: boolean;
  valid_from: string;
  valid_to: string;
  metadata: string;
}

const draftOf = (record: MasterRecord | null): Draft => ({
  external_key: '',
  name: record?.name ?? '',
  description: record?.description ?? '',
  is_active: record?.is_active ?? true,
  valid_from: toLocal(record?.valid_from),
  valid_to: toLocal(record?.valid_to),
  metadata: JSON.stringify(record?.metadata ?? {}),
});

/** The body of a create, or the merge patch of an edit: only what changed. */
function bodyOf(kind: Kind, draft: Draft, record: MasterRecord | null, metadata: unknown): Record<string, unknown> {
  const next: Record<string, unknown> = {
    name: draft.name,
    description: draft.description === '' ? null : draft.description,
    is_active: draft.is_active,
    valid_to: fromLocal(draft.valid_to),
  };
  if (draft.valid_from) next.valid_from = fromLocal(draft.valid_from);
  if (kind === 'assets') next.metadata = metadata;
  if (!record) {
    if (draft.external_key.trim()) next.external_key = draft.external_key.trim();
    if (next.description === null) delete next.description;
    if (next.valid_to === null) delete next.valid_to;
    return next;
  }
  const before: Record<string, unknown> = { name: record.name, description: record.description ?? null, is_active: record.is_active, valid_to: record.valid_to ?? null, valid_from: record.valid_from ?? null, metadata: record.metadata };
  const same = (a: unknown, b: unknown) => (typeof a === 'string' && typeof b === 'string' && !Number.isNaN(Date.parse(a)) && /T/.test(a) ? Date.parse(a) === Date.parse(b) : JSON.stringify(a) === JSON.stringify(b));
  return Object.fromEntries(Object.entries(next).filter(([field, value]) => !same(value, before[field])));
}

/** Create (record null) or edit a record: name, description, active, validity dates and, for an asset, its metadata as JSON. */
export function RecordForm(props: { kind: Kind; record: MasterRecord | null; extra?: Record<string, unknown>; onSaved: (saved: MasterRecord) => void | Promise<void>; children?: ComponentChildren }) {
  const { kind, record } = props;
  const [draft, setDraft] = useState<Draft>(() => draftOf(record));
  const [badJson, setBadJson] = useState<string | null>(null);
  const action = useAction();
  const prefix = `${record ? 'edit' : 'new'}-${NOUN[kind]}`;
  const set = (name: keyof Draft) => (e: { currentTarget: HTMLInputElement | HTMLTextAreaElement }) => setDraft({ ...draft, [name]: e.currentTarget.value });
  async function submit(event: Event) {
    event.preventDefault();
    setBadJson(null);
    let metadata: unknown = undefined;
    if (kind === 'assets') {
      try {
        metadata = JSON.parse(draft.metadata || '{}');
      } catch {
        return setBadJson('Metadata must be JSON: an object such as {"model": "EFG 220"}.');
      }
    }
    const body = { ...bodyOf(kind, draft, record, metadata), ...props.extra };
    const saved = await action.run(() =>
      record ? publicApiWrite<{ data: MasterRecord }>('PATCH', `/${kind}/${record.id}`, body) : publicApiWrite<{ data: MasterRecord }>('POST', `/${kind}`, body),
    );
    if (!saved) return;
    if (!record) setDraft(draftOf(null));
    await props.onSaved(saved.data);
  }
  const error = action.error;
  const mine = (name: string) => fieldMessage(error, name);
  const fields = ['external_key', 'name', 'description', 'is_active', 'valid_from', 'valid_to', 'metadata', 'parent_id', 'parent_external_key'];
  return (
    <form class="panel" onSubmit={submit} aria-labelledby={`${prefix}-title`} noValidate>
      <h2 id={`${prefix}-title`}>{record ? `Edit ${NOUN[kind]}` : `New ${NOUN[kind]}`}</h2>
      {!record && (
        <Field id={`${prefix}-key`} label="Key (optional)" error={mine('external_key')}>
          {(aria) => <input {...aria} class="mono" maxLength={255} value={draft.external_key} onInput={set('external_key')} />}
        </Field>
      )}
      <Field id={`${prefix}-name`} label="Name" error={mine('name')}>
        {(aria) => <input {...aria} maxLength={255} value={draft.name} onInput={set('name')} />}
      </Field>
      <Field id={`${prefix}-description`} label="Description (optional)" error={mine('description')}>
        {(aria) => <textarea {...aria} maxLength={4096} rows={2} value={draft.description} onInput={set('description')} />}
      </Field>
      <div class="check">
        <input id={`${prefix}-active`} type="checkbox" checked={draft.is_active} onChange={(e) => setDraft({ ...draft, is_active: e.currentTarget.checked })} />
        <label for={`${prefix}-active`}>Active</label>
      </div>
      <div class="inline-fields">
        <div>
          <Field id={`${prefix}-valid-from`} label="Valid from (optional)" error={mine('valid_from')}>
            {(aria) => <input {...aria} type="datetime-local" value={draft.valid_from} onInput={set('valid_from')} />}
          </Field>
        </div>
        <div>
          <Field id={`${prefix}-valid-to`} label="Valid until (optional)" error={mine('valid_to')}>
            {(aria) => <input {...aria} type="datetime-local" value={draft.valid_to} onInput={set('valid_to')} />}
          </Field>
        </div>
      </div>
      {kind === 'assets' && (
        <Field id={`${prefix}-metadata`} label="Metadata (JSON)" error={badJson ?? mine('metadata')}>
          {(aria) => <textarea {...aria} class="mono" rows={3} value={draft.metadata} onInput={set('metadata')} />}
        </Field>
      )}
      {props.children}
      <Alert error={besidesFields(error, ...fields)} />
      <button type="submit" class="primary" disabled={action.busy}>
        {record ? 'Save' : `Create ${NOUN[kind]}`}
      </button>
    </form>
  );
}

/** A new key for a record (`POST /{kind}/{id}/rename`). */
export function RenameForm({ kind, record, onRenamed }: { kind: Kind; record: MasterRecord; onRenamed: () => Promise<void> }) {
  const [key, setKey] = useState(record.external_key);
  const action = useAction();
  const id = `rename-${NOUN[kind]}-${record.id}`;
  async function submit(event: Event) {
    event.preventDefault();
    if (await action.run(() => publicApiWrite('POST', `/${kind}/${record.id}/rename`, { external_key: key.trim() }).then(() => true))) await onRenamed();
  }
  return (
    <form class="panel" onSubmit={submit} aria-labelledby={`${id}-title`} noValidate>
      <h2 id={`${id}-title`}>Rename the key</h2>
      <Field id={id} label="New key" error={fieldMessage(action.error, 'external_key')}>
        {(aria) => <input {...aria} class="mono" maxLength={255} value={key} onInput={(e) => setKey(e.currentTarget.value)} />}
      </Field>
      <Alert error={besidesFields(action.error, 'external_key')} />
      <button type="submit" class="primary" disabled={action.busy}>
        Rename
      </button>
    </form>
  );
}

/** A record's tags: each detached by a button, a new one attached by type and value. */
export function TagsEditor({ kind, record, onChanged }: { kind: Kind; record: MasterRecord; onChanged: () => Promise<void> }) {
  const [tagType, setTagType] = useState('rfid');
  const [value, setValue] = useState('');
  const action = useAction();
  const base = `/${kind}/${record.id}/tags`;
  async function attach(event: Event) {
    event.preventDefault();
    const done = await action.run(() => publicApiWrite('POST', base, { tag_type: tagType.trim(), value: value.trim() }).then(() => true), `Tag ${value.trim()} is attached.`);
    if (!done) return;
    setValue('');
    await onChanged();
  }
  const detach = (tag: Tag) => action.run(() => publicApiWrite('DELETE', `${base}/${tag.id}`).then(onChanged), `Tag ${tag.value} is detached.`);
  const id = `tag-${NOUN[kind]}-${record.id}`;
  return (
    <form class="panel" onSubmit={attach} aria-labelledby={`${id}-title`} noValidate>
      <h2 id={`${id}-title`}>Tags</h2>
      {(record.tags ?? []).length === 0 ? (
        <p class="hint">No tags.</p>
      ) : (
        <ul class="choices" aria-label="Tags">
          {(record.tags ?? []).map((tag) => (
            <li key={tag.id}>
              <span class="mono">
                {tag.tag_type} {tag.value}
              </span>{' '}
              <button type="button" class="danger" onClick={() => void detach(tag)} aria-label={`Detach ${tag.tag_type} ${tag.value}`}>
                Detach
              </button>
            </li>
          ))}
        </ul>
      )}
      <div class="inline-fields">
        <div>
          <Field id={`${id}-type`} label="Tag type" error={fieldMessage(action.error, 'tag_type')}>
            {(aria) => <input {...aria} class="mono" list="tag-types" maxLength={64} value={tagType} onInput={(e) => setTagType(e.currentTarget.value)} />}
          </Field>
          <datalist id="tag-types">
            <option value="rfid" />
            <option value="ble" />
            <option value="barcode" />
          </datalist>
        </div>
        <div>
          <Field id={`${id}-value`} label="Tag value" error={fieldMessage(action.error, 'value')}>
            {(aria) => <input {...aria} class="mono" maxLength={255} value={value} onInput={(e) => setValue(e.currentTarget.value)} />}
          </Field>
        </div>
      </div>
      {action.notice && <Notice>{action.notice}</Notice>}
      <Alert error={besidesFields(action.error, 'tag_type', 'value')} />
      <button type="submit" class="primary" disabled={action.busy}>
        Attach tag
      </button>
    </form>
  );
}

/** Delete, after a question (docs/api.md, "Deleting"); a deleted record can be restored (RestoreButton). */
export function DeleteButton({ kind, record, onDeleted }: { kind: Kind; record: MasterRecord; onDeleted: () => void }) {
  const [asking, setAsking] = useState(false);
  const action = useAction();
  const noun = NOUN[kind];
  async function remove() {
    setAsking(false);
    if (await action.run(() => publicApiWrite('DELETE', `/${kind}/${record.id}`).then(() => true))) onDeleted();
  }
  return (
    <div class="danger-zone">
      <button type="button" class="danger" onClick={() => setAsking(true)}>
        Delete {noun}
      </button>
      <Alert error={action.error} />
      {asking && (
        <ConfirmDialog title={`Delete this ${noun}?`} confirm={`Delete ${noun}`} onConfirm={() => void remove()} onCancel={() => setAsking(false)}>
          <p>
            <strong>{record.name}</strong> (<span class="mono">{record.external_key}</span>) leaves every list and its tags are detached. Its key is free again. It can be restored later, without its tags.
          </p>
        </ConfirmDialog>
      )}
    </div>
  );
}

/**
 * Restore a soft-deleted record (docs/api.md, "Restoring"): no question (nothing is lost), the
 * API's refusal (a key taken since, a deleted parent) in words beside the button.
 */
export function RestoreButton({ kind, record, onRestored }: { kind: Kind; record: MasterRecord; onRestored: () => void | Promise<void> }) {
  const action = useAction();
  const noun = NOUN[kind];
  async function restore() {
    if (await action.run(() => publicApiWrite('POST', `/${kind}/${record.id}/restore`).then(() => true))) await onRestored();
  }
  return (
    <span class="restore">
      <button type="button" disabled={action.busy} aria-label={`Restore ${noun} ${record.name}`} onClick={() => void restore()}>
        Restore
      </button>
      <Alert error={action.error} />
    </span>
  );
}

export interface TreeLocation {
  id: number;
  name: string;
  external_key: string;
  parent_id: number | null;
}

/** Every location, each under its parent, as options indented by depth: the tree picker. */
function treeOptions(roots: TreeLocation[], children: Map<number, TreeLocation[]>): Array<{ location: TreeLocation; depth: number }> {
  const out: Array<{ location: TreeLocation; depth: number }> = [];
  const walk = (list: TreeLocation[], depth: number) => {
    for (const location of list) {
      out.push({ location, depth });
      walk(children.get(location.id) ?? [], depth + 1);
    }
  };
  walk(roots, 0);
  return out;
}

/**
 * Moves a location under another (or to the root): `PATCH parent_id`. A move into its own subtree
 * is the API's to refuse (409), and its message is shown beside the field.
 */
export function MoveForm(props: { location: TreeLocation; roots: TreeLocation[]; children: Map<number, TreeLocation[]>; onMoved: () => Promise<void> }) {
  const { location } = props;
  const [parent, setParent] = useState(location.parent_id === null ? '' : String(location.parent_id));
  const action = useAction();
  const id = `move-${location.id}`;
  async function submit(event: Event) {
    event.preventDefault();
    const body = { parent_id: parent === '' ? null : Number(parent) };
    if (await action.run(() => publicApiWrite('PATCH', `/locations/${location.id}`, body).then(() => true))) await props.onMoved();
  }
  const error = action.error;
  // A refused move (a cycle: 409) or a refused parent field, beside the picker.
  const beside = fieldMessage(error, 'parent_id') ?? (error instanceof ApiFailure && error.status === 409 ? error.message : null);
  return (
    <form class="panel" onSubmit={submit} aria-labelledby={`${id}-title`} noValidate>
      <h2 id={`${id}-title`}>Move</h2>
      <Field id={id} label="Parent location" error={beside}>
        {(aria) => (
          <select {...aria} value={parent} onChange={(e) => setParent(e.currentTarget.value)}>
            <option value="">None (a top-level location)</option>
            {treeOptions(props.roots, props.children).map(({ location: option, depth }) => (
              <option key={option.id} value={String(option.id)}>
                {`${'\u00a0\u00a0'.repeat(depth)}${option.name} (${option.external_key})`}
              </option>
            ))}
          </select>
        )}
      </Field>
      <Alert error={beside ? null : error} />
      <button type="submit" class="primary" disabled={action.busy}>
        Move
      </button>
    </form>
  );
}
