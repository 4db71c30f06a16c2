import { PassThrough, Readable, finished } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import Negotiator from 'negotiator';
import Cursor from 'pg-cursor';
import type pg from 'pg';
import { stringify } from 'csv-stringify/sync';
import ExcelJS from 'exceljs';
import { exportColumns, rowCells, type Cell, type ExportColumn, type JsonSchema } from '../export/columns.js';
import { copyCellsSql, copyCsv, copyStatement, inlineParameters } from '../export/copy.js';
import { escapeXlsxText } from '../export/xlsx-text.js';

/**
 * A list as a file (docs/api.md "Export"): when a list route declares an export and the request's
 * `Accept` prefers CSV or XLSX, the pipeline answers the whole list, streamed from a database
 * cursor over the list's own SQL without paging, in one read-only REPEATABLE READ transaction (one
 * snapshot, however long the download). The reply is written as the cursor is read, a batch at a
 * time and only when the client has taken the previous one (backpressure), so memory stays the same
 * whatever the list's size. A client that hangs up closes the cursor, ends the transaction and
 * gives the connection back to the pool.
 */

export const EXPORT_MEDIA_TYPES = {
  csv: 'text/csv',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
} as const;

export type ExportFormat = keyof typeof EXPORT_MEDIA_TYPES;

const CONTENT_TYPES: Record<ExportFormat, string> = {
  csv: 'text/csv; charset=utf-8',
  xlsx: EXPORT_MEDIA_TYPES.xlsx,
};

/** Rows read from the cursor at a time: what the service holds of a list at once. */
export const EXPORT_BATCH_ROWS = 1000;

/** How long one export may take, and how long it may wait on a client that reads nothing. */
const EXPORT_STATEMENT_TIMEOUT = '1h';
const EXPORT_IDLE_TIMEOUT = '5min';
/** The same wait on a client during a COPY, which Postgres cannot time out while it waits to write. */
const EXPORT_IDLE_MS = 5 * 60_000;

const OFFERED = ['application/json', EXPORT_MEDIA_TYPES.csv, EXPORT_MEDIA_TYPES.xlsx];

/** The file `Accept` asks for, or null for JSON (no Accept, `*\/*`, JSON preferred or nothing offered matches). */
export function exportFormatOf(accept: string | undefined): ExportFormat | null {
  if (!accept) return null;
  const chosen = new Negotiator({ headers: { accept } }).mediaType(OFFERED);
  if (chosen === EXPORT_MEDIA_TYPES.csv) return 'csv';
  if (chosen === EXPORT_MEDIA_TYPES.xlsx) return 'xlsx';
  return null;
}

/** The query parameters an export does not read (docs/api.md "Export": never an error). */
export const EXPORT_UNREAD_QUERY = ['limit', 'offset'] as const;

/** `<resource>`: the path's last segment that is not an id (`/assets/{asset_id}/history` → `history`). */
export function exportResourceOf(path: string): string {
  const segments = path.split('/').filter((s) => s !== '' && !s.startsWith('{') && !s.startsWith(':'));
  return segments.at(-1) ?? 'export';
}

/** `<resource>-<YYYYMMDDTHHMMSSZ>.<csv|xlsx>`, at `now` in UTC. */
export function exportFileName(resource: string, format: ExportFormat, now: Date): string {
  const stamp = now.toISOString().replace(/\.\d{3}Z$/, 'Z').replace(/[-:]/g, '');
  return `${resource}-${stamp}.${format}`;
}

/**
 * The columns of a list route's item, from the list envelope schema its 200 declares
 * (`properties.data.items`); a route whose 200 is not a list cannot declare an export.
 */
export function listItemColumns(listSchema: JsonSchema | undefined, route: string): ExportColumn[] {
  const data = (listSchema?.properties as Record<string, JsonSchema> | undefined)?.data;
  const item = data?.type === 'array' ? (data.items as JsonSchema | undefined) : undefined;
  if (!item) throw new Error(`${route} declares an export but its 200 is not a list envelope`);
  return exportColumns(item);
}

/** What a list route's export declaration gives: the statement of the whole list. */
export interface ExportSource {
  /** The list's own SQL, filters and sort, without LIMIT/OFFSET. */
  query: pg.QueryConfig;
  /** Turns a row of that SQL into the item, when its columns are not already the item's fields. */
  item?(row: Record<string, unknown>): Record<string, unknown>;
}

export interface ExportRequest {
  request: FastifyRequest;
  reply: FastifyReply;
  format: ExportFormat;
  /** The route's path, for the file's name. */
  path: string;
  columns: readonly ExportColumn[];
  pool: pg.Pool;
  /**
   * The list's statement, built in the export's transaction (so a 404 or a filter's error is
   * decided in the same snapshot, and answers in JSON before anything is sent).
   */
  source(db: pg.PoolClient): Promise<ExportSource>;
}

/**
 * csv-stringify's options for an export (docs/api.md "Export": RFC 4180, CRLF, `true`/`false`). A
 * cell holding a lone CR or LF is quoted too: csv-stringify, given a record delimiter, would
 * otherwise quote only a CRLF.
 */
export const CSV_OPTIONS = {
  record_delimiter: '\r\n',
  quote_record_delimiter: true,
  cast: { boolean: (value: boolean) => (value ? 'true' : 'false') },
} as const;

/** Ends the export's transaction and gives its connection back: discarded when the connection may be in doubt. */
async function release(client: pg.PoolClient, failed: unknown): Promise<void> {
  if (failed) {
    client.release(failed instanceof Error ? failed : new Error('export failed'));
    return;
  }
  try {
    await client.query('ROLLBACK');
    client.release();
  } catch (error) {
    client.release(error as Error);
  }
}

/**
 * Answers the export: headers, then (except for HEAD) the file. Errors before the first byte
 * (the source's 404, a filter refused) are thrown, for the pipeline to answer in JSON.
 */
export async function answerExport(input: ExportRequest): Promise<void> {
  const { request, reply, format } = input;
  const now = new Date();
  const client = await input.pool.connect();
  // A connection lost mid-download (the server ended, the backend terminated) fails the read,
  // which ends the reply; the client's own error event must not go unheard meanwhile.
  const onClientError = (error: Error) => request.log.warn({ err: error }, 'export connection lost');
  client.on('error', onClientError);
  const done = (failed: unknown) => {
    client.off('error', onClientError);
    return release(client, failed);
  };
  let source: ExportSource;
  let copy: string | null = null;
  try {
    await client.query(
      `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL statement_timeout = '${EXPORT_STATEMENT_TIMEOUT}'; SET LOCAL idle_in_transaction_session_timeout = '${EXPORT_IDLE_TIMEOUT}'`,
    );
    source = await input.source(client);
    if (format === 'csv' && !source.item && request.method !== 'HEAD') copy = await copyOf(client, source.query, input.columns);
  } catch (error) {
    await done(null);
    throw error;
  }
  reply
    .code(200)
    .header('Content-Type', CONTENT_TYPES[format])
    .header('Content-Disposition', `attachment; filename="${exportFileName(exportResourceOf(input.path), format, now)}"`)
    .header('Cache-Control', 'no-store');
  if (request.method === 'HEAD') {
    await done(null);
    reply.send();
    return;
  }
  if (copy !== null) {
    reply.send(copyStream(client, copy, input.columns, request, done));
    return;
  }
  const cursor = new Cursor(source.query.text, source.query.values as unknown[]);
  // node-postgres's read timeout (query_timeout) would cut a long download: the server's
  // statement_timeout, set above for this transaction, bounds it instead.
  (cursor as unknown as { query_timeout: number }).query_timeout = 2 ** 31 - 1;
  client.query(cursor as unknown as pg.QueryConfig);
  const toCells = source.item
    ? (row: Record<string, unknown>) => rowCells(input.columns, source.item!(row))
    : (row: Record<string, unknown>) => rowCells(input.columns, row);
  const body = format === 'csv' ? csvStream(cursor, input.columns, toCells) : xlsxStream(cursor, input.columns, toCells, exportResourceOf(input.path));
  let ended = false;
  finished(body, (error) => {
    if (ended) return;
    ended = true;
    if (error) request.log.info({ err: error }, 'export ended early');
    void done(error && !isPrematureClose(error) ? error : null);
  });
  reply.send(body);
}

/**
 * The COPY statement of the list's CSV (shared/export/copy.ts), or null when a column cannot be
 * made in SQL: its cells over the statement's output columns, which a run of it without rows
 * describes (in the export's transaction, before anything is sent, so a fault is a JSON error).
 */
async function copyOf(client: pg.PoolClient, query: pg.QueryConfig, columns: readonly ExportColumn[]): Promise<string | null> {
  const described = await client.query({ text: `SELECT * FROM (${inlineParameters(query.text, query.values ?? [])}) AS export_rows LIMIT 0`, rowMode: 'array' });
  const cells = copyCellsSql(columns, described.fields);
  return cells === null ? null : copyStatement(query, cells);
}

/**
 * The CSV as Postgres writes it (COPY … TO STDOUT through pg-copy-streams), its record ends made
 * CRLF, after the header row. pg-copy-streams reads the connection only as fast as the reply takes
 * the data (backpressure down to Postgres, which waits on its socket). A reply that ends before the
 * COPY did (the client hung up) drops the connection, which is the one way to stop a COPY under
 * way: Postgres ends the statement when it next writes. A COPY that fails mid-way (the backend
 * ended, a timeout) destroys the reply, which ends the response without its last chunk.
 */
function copyStream(client: pg.PoolClient, statement: string, columns: readonly ExportColumn[], request: FastifyRequest, done: (failed: unknown) => Promise<void>): Readable {
  const { body, copied } = copyCsv(client, statement, stringify([columns.map((c) => c.name)], CSV_OPTIONS));
  // No byte taken by the client for EXPORT_IDLE_MS (the socket idle): the export ends.
  // (The server sets its keep-alive timeout again once the response has ended.)
  const socket = request.raw.socket;
  const idle = () => body.destroy(new Error('the client read nothing for 5 minutes'));
  socket?.setTimeout(EXPORT_IDLE_MS, idle);
  finished(body, (error) => {
    socket?.off('timeout', idle);
    socket?.setTimeout(0);
    if (error) request.log.info({ err: error }, 'export ended early');
    void done(error || !copied() ? (error ?? new Error('export ended early')) : null);
  });
  return body;
}

const isPrematureClose = (error: unknown) => (error as { code?: string }).code === 'ERR_STREAM_PREMATURE_CLOSE';

/** The CSV: the header row, then each batch of the cursor as one chunk, read when the reply asks for more. */
function csvStream(cursor: Cursor, columns: readonly ExportColumn[], toCells: (row: Record<string, unknown>) => Cell[]): Readable {
  let header = true;
  // One read of the cursor at a time: the stream may ask again before the last batch came.
  let reading = false;
  return new Readable({
    highWaterMark: 64 * 1024,
    read() {
      if (reading) return;
      reading = true;
      const head = header ? stringify([columns.map((c) => c.name)], CSV_OPTIONS) : '';
      header = false;
      cursor.read(EXPORT_BATCH_ROWS, (error, rows) => {
        reading = false;
        if (error) return void this.destroy(error);
        const last = rows.length < EXPORT_BATCH_ROWS;
        this.push(head + (rows.length > 0 ? stringify(rows.map(toCells), CSV_OPTIONS) : ''));
        if (last) this.push(null);
      });
    },
    destroy(error, callback) {
      // A failed read leaves nothing to close (the connection is discarded): end the reply at once.
      if (error) return void callback(error);
      cursor.close(() => callback(null));
    },
  });
}

/**
 * The XLSX: exceljs' streaming writer (rows committed as they come, no shared strings, no styles)
 * into a stream the reply reads; the next batch is read from the cursor once the reply has taken
 * what came before.
 */
function xlsxStream(cursor: Cursor, columns: readonly ExportColumn[], toCells: (row: Record<string, unknown>) => Cell[], sheetName: string): Readable {
  const out = new PassThrough({ highWaterMark: 64 * 1024 });
  const workbook = new ExcelJS.stream.xlsx.WorkbookWriter({ stream: out, useSharedStrings: false, useStyles: false });
  const sheet = workbook.addWorksheet(sheetName.slice(0, 31));
  let closed = false;
  out.once('close', () => {
    closed = true;
  });
  const drained = () => new Promise<void>((resolve) => {
    if (!out.writableNeedDrain || closed) return resolve();
    const done = () => {
      out.off('drain', done);
      out.off('close', done);
      resolve();
    };
    out.on('drain', done);
    out.on('close', done);
  });
  const write = async () => {
    sheet.addRow(columns.map((c) => c.name)).commit();
    for (;;) {
      const rows = await cursor.read(EXPORT_BATCH_ROWS);
      if (closed) return;
      for (const row of rows) sheet.addRow(toCells(row).map((cell) => (typeof cell === 'string' ? escapeXlsxText(cell) : (cell ?? undefined)))).commit();
      if (rows.length < EXPORT_BATCH_ROWS) break;
      await drained();
      if (closed) return;
    }
    sheet.commit();
    await workbook.commit();
  };
  write().then(
    () => cursor.close(),
    (error: unknown) => {
      // A failed read leaves nothing to close (the connection is discarded): end the reply at once.
      out.destroy(error as Error);
    },
  );
  // A reply that ends early (the client hung up) stops the cursor; the write loop sees `closed`.
  out.once('close', () => {
    if (!out.writableFinished) void cursor.close(() => undefined);
  });
  return out;
}
