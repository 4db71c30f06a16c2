import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { Pager, TableScroll } from './ui.js';

/**
 * The shape every page shares (docs/console.md, "How a page is built"): what it loads
 * (`useLoad`), what a person does on it (`useAction`) and the tables it shows (`DataTable`).
 */

export interface Load<T> {
  /** The newest answer; kept while a reload is under way, so the page does not flicker. */
  data: T | null;
  error: unknown;
  loading: boolean;
  /** Reads again; resolves once the new answer (or its error) is on the page. */
  reload: () => Promise<void>;
}

/**
 * Reads `fetcher()` when the page opens and again whenever `deps` change; an answer that comes
 * after a newer request was made is dropped (a quick change of filters shows the last one's rows).
 */
export function useLoad<T>(fetcher: () => Promise<T>, deps: unknown[]): Load<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const latest = useRef(0);
  const fetcherRef = useRef(fetcher);
  fetcherRef.current = fetcher;
  const reload = useCallback(async () => {
    const request = ++latest.current;
    setLoading(true);
    setError(null);
    try {
      const next = await fetcherRef.current();
      if (request === latest.current) setData(() => next);
    } catch (failure) {
      if (request === latest.current) setError(failure);
    } finally {
      if (request === latest.current) setLoading(false);
    }
  }, []);
  useEffect(() => {
    void reload();
    // A change of page (unmount) makes any answer still on its way stale.
    return () => {
      latest.current++;
    };
  }, deps);
  return { data, error, loading, reload };
}

export interface Action {
  /** Runs `fn`; on success shows `notice` (text, or made from the answer); a failure becomes `error`. Resolves to the answer, or undefined after a failure. */
  run: <R>(fn: () => Promise<R>, notice?: string | ((result: R) => string | null) | null) => Promise<R | undefined>;
  busy: boolean;
  error: unknown;
  notice: string | null;
  /** Forgets the last error and notice (a new question, a refresh). */
  clear: () => void;
  /** A refusal found before anything is sent (two passwords that differ, a date that is none). */
  fail: (error: unknown) => void;
}

/** What a person does on a page: one thing at a time, its refusal or its notice after success. */
export function useAction(): Action {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const clear = useCallback(() => {
    setError(null);
    setNotice(null);
  }, []);
  const run = useCallback(async <R,>(fn: () => Promise<R>, done?: string | ((result: R) => string | null) | null): Promise<R | undefined> => {
    setError(null);
    setNotice(null);
    setBusy(true);
    try {
      const result = await fn();
      const text = typeof done === 'function' ? done(result) : done;
      if (text) setNotice(text);
      return result;
    } catch (failure) {
      setError(failure);
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { run, busy, error, notice, clear, fail: setError };
}

export interface Column<T> {
  /** The header's text; a column of buttons has a header read only by screen readers. */
  header: string;
  hiddenHeader?: boolean;
  cell: (row: T) => ComponentChildren;
  /** The cell's class (`mono`, `row-actions`…). */
  class?: string | ((row: T) => string | undefined);
}

export interface DataTableProps<T> {
  /** The scrolling region's name, which a screen reader announces. */
  label: string;
  columns: Array<Column<T>>;
  /** null while the first answer is on its way. */
  rows: T[] | null;
  rowKey: (row: T) => string | number;
  /** Attributes of a row (`data-…` for tests and scripts, a class). */
  rowProps?: (row: T) => Record<string, string | undefined>;
  /** Shown instead of the table when there is no row; without it an empty table is shown. */
  empty?: ComponentChildren;
  /** The table's class (`wide`, `live`, `stack` for cards on a phone). */
  tableClass?: string;
  pager?: { offset: number; limit: number; total: number; onPage: (offset: number) => void };
}

/** A table in its own scrolling region: a header row, a row per item, the empty text, a pager. */
export function DataTable<T>(props: DataTableProps<T>) {
  const { rows, columns } = props;
  if (rows === null) return <p role="status">Loading…</p>;
  const cellClass = (column: Column<T>, row: T) => (typeof column.class === 'function' ? column.class(row) : column.class);
  return (
    <>
      {rows.length === 0 && props.empty !== undefined ? (
        <p>{props.empty}</p>
      ) : (
        <TableScroll label={props.label}>
          <table class={props.tableClass}>
            <thead>
              <tr>
                {columns.map((column) => (
                  <th scope="col" key={column.header}>
                    {column.hiddenHeader ? <span class="visually-hidden">{column.header}</span> : column.header}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {rows.map((row) => (
                <tr key={props.rowKey(row)} {...props.rowProps?.(row)}>
                  {columns.map((column) => (
                    <td key={column.header} class={cellClass(column, row)} data-label={column.hiddenHeader ? undefined : column.header}>
                      {column.cell(row)}
                    </td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </TableScroll>
      )}
      {props.pager && <Pager {...props.pager} />}
    </>
  );
}
