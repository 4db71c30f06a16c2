import type { ComponentChildren } from 'preact';
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { ApiFailure, publicDownload } from './api.js';
import { humanMessage, refusalWords } from './messages.js';

/** Small pieces every page uses. Text is always rendered as text: no HTML from data, ever. */

export function formatTime(value: string | null | undefined): string {
  if (!value) return '—';
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? value : date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

export function messageOf(error: unknown): string {
  // Field errors in words (src/messages.ts): never a pattern or a JSON key.
  if (error instanceof ApiFailure) return error.fields.length > 0 ? error.fields.map(humanMessage).join(' ') : refusalWords(error.message);
  return error instanceof Error ? error.message : String(error);
}

/** The page's title, focused when the page opens so a screen reader announces it. */
export function PageTitle({ children }: { children: ComponentChildren }) {
  const ref = useRef<HTMLHeadingElement>(null);
  // Focus moves to a new page's title as the page appears (a layout effect runs in the same task
  // as the render), never later: a deferred effect could take the focus from a field the person
  // has already started typing in.
  useLayoutEffect(() => {
    ref.current?.focus();
  }, []);
  return (
    <h1 tabIndex={-1} ref={ref}>
      {children}
    </h1>
  );
}

export function Alert({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p class="alert" role="alert">
      {messageOf(error)}
    </p>
  );
}

export function Notice({ children }: { children: ComponentChildren }) {
  return (
    <p class="notice" role="status">
      {children}
    </p>
  );
}

/** A value to copy (a token, a link): shown in a read-only field, with a button that copies it. */
export function CopyField({ label, value, id }: { label: string; value: string; id: string }) {
  const [copied, setCopied] = useState(false);
  const field = useRef<HTMLInputElement>(null);
  async function copy() {
    try {
      await navigator.clipboard.writeText(value);
    } catch {
      // Without clipboard access, select it for Ctrl-C.
      field.current?.select();
    }
    setCopied(true);
  }
  return (
    <div class="copy">
      <label for={id}>{label}</label>
      <div class="copy-row">
        <input id={id} ref={field} readOnly value={value} class="mono" onFocus={(e) => e.currentTarget.select()} />
        <button type="button" onClick={copy}>
          Copy
        </button>
      </div>
      <span role="status" class="hint">
        {copied ? 'Copied.' : ''}
      </span>
    </div>
  );
}

/** A modal question (the browser's <dialog>): focus stays inside it, Escape cancels. */
export function ConfirmDialog(props: { title: string; children: ComponentChildren; confirm: string; onConfirm: () => void; onCancel: () => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  // Closing it when it goes away queues a `close` event that arrives later: by then the next
  // question may be open, and this one's answer must not cancel it.
  const shown = useRef(false);
  useEffect(() => {
    const dialog = ref.current;
    shown.current = true;
    if (dialog && !dialog.open) dialog.showModal();
    return () => {
      shown.current = false;
      dialog?.close();
    };
  }, []);
  const cancel = () => {
    if (shown.current) props.onCancel();
  };
  return (
    <dialog ref={ref} aria-labelledby="confirm-title" onCancel={cancel} onClose={cancel}>
      <h2 id="confirm-title">{props.title}</h2>
      <div>{props.children}</div>
      <div class="actions">
        <button type="button" class="danger" onClick={props.onConfirm}>
          {props.confirm}
        </button>
        <button type="button" onClick={props.onCancel} autoFocus>
          Cancel
        </button>
      </div>
    </dialog>
  );
}

/** A wide table that scrolls sideways on a phone; focusable so the keyboard can scroll it. */
export function TableScroll({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    <div class="table-scroll" tabIndex={0} role="region" aria-label={label}>
      {children}
    </div>
  );
}

export function Pager(props: { offset: number; limit: number; total: number; onPage: (offset: number) => void }) {
  const { offset, limit, total } = props;
  const last = Math.min(offset + limit, total);
  return (
    <nav class="pager" aria-label="Pages">
      <span>{total === 0 ? 'No rows' : `${offset + 1}–${last} of ${total}`}</span>
      <button type="button" disabled={offset === 0} onClick={() => props.onPage(Math.max(0, offset - limit))}>
        Previous
      </button>
      <button type="button" disabled={last >= total} onClick={() => props.onPage(offset + limit)}>
        Next
      </button>
    </nav>
  );
}

/** Whether a refused field (`location.external_key`, `event_types[1]`) is one of `fields` or inside one (`location`, `event_types`). */
function isOneOf(field: string, fields: string[]): boolean {
  return fields.some((name) => field === name || field.startsWith(`${name}.`) || field.startsWith(`${name}[`));
}

/** The server's messages for these fields of a refused form (the error envelope's `fields`), or null. */
export function fieldMessage(error: unknown, ...fields: string[]): string | null {
  if (!(error instanceof ApiFailure)) return null;
  const mine = error.fields.filter((f) => isOneOf(f.field, fields));
  return mine.length > 0 ? mine.map(humanMessage).join(' ') : null;
}

/** A refusal unless every field it names is shown next to its own input (then null). */
export function besidesFields(error: unknown, ...fields: string[]): unknown {
  if (!(error instanceof ApiFailure) || error.fields.length === 0) return error;
  return error.fields.every((f) => isOneOf(f.field, fields)) ? null : error;
}

/** A field's own error message, which its input names with aria-describedby. */
export function FieldError({ id, message }: { id: string; message: string | null }) {
  return (
    <span id={id} class="field-error" role={message ? 'alert' : undefined}>
      {message ?? ''}
    </span>
  );
}

/**
 * Export buttons of a list (docs/console.md "Export"): the whole list, with the filters the page
 * shows, as CSV or XLSX, downloaded with the person's session token.
 */
export function ExportButtons({ path, query = {}, label }: { path: string; query?: Record<string, string | number | undefined>; label: string }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const download = (format: 'csv' | 'xlsx') => {
    setBusy(true);
    setError(null);
    publicDownload(path, query, format).then(
      () => setBusy(false),
      (failure) => {
        setBusy(false);
        setError(failure);
      },
    );
  };
  return (
    <div class="export" role="group" aria-label={`Export ${label}`}>
      <button type="button" disabled={busy} onClick={() => download('csv')}>
        Export CSV
      </button>
      <button type="button" disabled={busy} onClick={() => download('xlsx')}>
        Export XLSX
      </button>
      <Alert error={error} />
    </div>
  );
}
