import { createRequire } from 'node:module';
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import pg from 'pg';
import copyStreams from 'pg-copy-streams';
import type { ExportColumn } from './columns.js';

/**
 * The CSV export written by Postgres itself (docs/api.md "Export"): a list's own statement wrapped
 * in `COPY (SELECT <cells> FROM (<statement>) AS export_rows) TO STDOUT (FORMAT csv)`, its cells
 * made in SQL exactly as rowCells and csv-stringify make them in the service, so the bytes are the
 * same either way and the service only passes the rows through (pg-copy-streams). Used for the
 * lists whose every column is a plain value of a type whose SQL text is the cell (text, integers,
 * booleans); any other list is written row by row from a cursor.
 *
 * The API: copyCellsSql, inlineParameters, copyStatement, copyCsv, CsvRecordEnds.
 */

/** What node-postgres reports of a statement's output column (its RowDescription). */
export interface FieldOf {
  name: string;
  dataTypeID: number;
}

/** Types whose value reaches the service as the text Postgres writes, and is a text cell (neutralised). */
const TEXT_TYPES = new Set([pg.types.builtins.TEXT, pg.types.builtins.VARCHAR, pg.types.builtins.NUMERIC, pg.types.builtins.UUID]);
/**
 * Types the service reads as a JS number or boolean (int8 too: shared/db/pool.ts parses it),
 * whose cell is the number as `String` writes it, the same text as Postgres' (no exponent for
 * integers), or `true`/`false`.
 */
const PLAIN_TYPES = new Set([pg.types.builtins.INT2, pg.types.builtins.INT4, pg.types.builtins.INT8, pg.types.builtins.BOOL]);

/**
 * Code points a neutralised text cell may begin with (neutraliseFormula's `= + - @ ' \t \r`),
 * tested with `ascii()`, which reads the first character without copying the text.
 */
const FORMULA_CODES = ['=', '+', '-', '@', "'", '\t', '\r'].map((c) => c.charCodeAt(0)).join(', ');

/**
 * The select list of the cells of `columns` over the statement's output `fields`, or null when a
 * column is not a plain value of a type listed above (the export is then written by the service).
 * An empty text is NULL here: COPY writes `""` for an empty string, csv-stringify an empty cell,
 * as it writes a null one.
 */
export function copyCellsSql(columns: readonly ExportColumn[], fields: readonly FieldOf[]): string | null {
  const types = new Map(fields.map((f) => [f.name, f.dataTypeID]));
  const cells: string[] = [];
  for (const column of columns) {
    const type = types.get(column.name);
    if (column.kind !== 'value' || column.path.length !== 1 || type === undefined) return null;
    const value = `export_rows.${pg.escapeIdentifier(column.name)}`;
    if (PLAIN_TYPES.has(type)) cells.push(`${value}::text`);
    else if (TEXT_TYPES.has(type)) {
      const text = `${value}::text`;
      cells.push(`NULLIF(CASE WHEN ascii(${text}) IN (${FORMULA_CODES}) THEN '''' || ${text} ELSE ${text} END, '')`);
    } else return null;
  }
  return cells.join(', ');
}

const { prepareValue } = createRequire(import.meta.url)('pg/lib/utils.js') as { prepareValue(value: unknown): string | Buffer | null | undefined };

/** A bind value as the SQL literal of the text node-postgres would have sent for it. */
function literalOf(value: unknown): string {
  const text = prepareValue(value);
  if (text === null || text === undefined) return 'NULL';
  if (typeof text !== 'string') throw new Error('a binary parameter cannot be written into a COPY statement');
  return pg.escapeLiteral(text);
}

const isIdentifierChar = (c: string | undefined) => c !== undefined && /[A-Za-z0-9_$]/.test(c);

/**
 * `text` with each placeholder `$n` replaced by its value as a quoted literal (COPY takes no bind
 * parameters). An untyped literal takes its type from where it stands, as a bind parameter does.
 * Placeholders are found outside quoted strings (`'…'`, `E'…'`), quoted identifiers, dollar-quoted
 * strings and comments; a placeholder without a value is an error.
 */
export function inlineParameters(text: string, values: readonly unknown[]): string {
  let out = '';
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i]!;
    const next = text[i + 1];
    let end: number;
    if (c === "'") {
      const escapes = (text[i - 1] === 'E' || text[i - 1] === 'e') && !isIdentifierChar(text[i - 2]);
      end = i + 1;
      for (;;) {
        if (end >= n) throw new Error('unterminated string in an export statement');
        if (escapes && text[end] === '\\') end += 2;
        else if (text[end] === "'" && text[end + 1] === "'") end += 2;
        else if (text[end] === "'") break;
        else end++;
      }
      end++;
    } else if (c === '"') {
      end = text.indexOf('"', i + 1);
      if (end < 0) throw new Error('unterminated identifier in an export statement');
      end++;
    } else if (c === '-' && next === '-') {
      end = text.indexOf('\n', i);
      if (end < 0) end = n;
    } else if (c === '/' && next === '*') {
      end = text.indexOf('*/', i + 2);
      if (end < 0) throw new Error('unterminated comment in an export statement');
      end += 2;
    } else if (c === '$' && !isIdentifierChar(text[i - 1])) {
      const placeholder = /^\$(\d+)/.exec(text.slice(i, i + 12));
      if (placeholder) {
        const index = Number(placeholder[1]) - 1;
        if (index < 0 || index >= values.length) throw new Error(`no value for ${placeholder[0]} in an export statement`);
        out += literalOf(values[index]);
        i += placeholder[0].length;
        continue;
      }
      const tag = /^\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$/.exec(text.slice(i));
      if (!tag) {
        out += c;
        i++;
        continue;
      }
      end = text.indexOf(tag[0], i + tag[0].length);
      if (end < 0) throw new Error('unterminated dollar-quoted string in an export statement');
      end += tag[0].length;
    } else {
      out += c;
      i++;
      continue;
    }
    out += text.slice(i, end);
    i = end;
  }
  return out;
}

/** The COPY of a list's statement as CSV cells (copyCellsSql), without a header. */
export function copyStatement(query: pg.QueryConfig, cells: string): string {
  return `COPY (SELECT ${cells} FROM (${inlineParameters(query.text, query.values ?? [])}) AS export_rows) TO STDOUT (FORMAT csv)`;
}

const LF = 0x0a;
const QUOTE = 0x22;
const CRLF = Buffer.from('\r\n');

/**
 * COPY's CSV with CRLF record ends (COPY ends a record with LF alone), after `header`. COPY quotes
 * every cell that holds a quote or a line end, so a LF outside quotes ends a record and a LF
 * inside them is the cell's own; a `""` inside a quoted cell leaves and re-enters the quotes.
 */
export class CsvRecordEnds extends Transform {
  private quoted = false;
  private header: Buffer | null;
  /** The bytes of COPY's CSV taken in so far. */
  bytes = 0;

  constructor(header: string) {
    super({ highWaterMark: 64 * 1024 });
    this.header = Buffer.from(header);
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.bytes += chunk.length;
    const parts: Buffer[] = [];
    if (this.header) {
      parts.push(this.header);
      this.header = null;
    }
    let from = 0;
    let at = 0;
    let quote = chunk.indexOf(QUOTE);
    while (at < chunk.length) {
      if (this.quoted) {
        if (quote < 0) break;
        this.quoted = false;
        at = quote + 1;
        quote = chunk.indexOf(QUOTE, at);
        continue;
      }
      const lf = chunk.indexOf(LF, at);
      if (quote >= 0 && (lf < 0 || quote < lf)) {
        this.quoted = true;
        at = quote + 1;
        quote = chunk.indexOf(QUOTE, at);
        continue;
      }
      if (lf < 0) break;
      parts.push(chunk.subarray(from, lf), CRLF);
      from = at = lf + 1;
    }
    parts.push(chunk.subarray(from));
    done(null, Buffer.concat(parts));
  }

  override _flush(done: TransformCallback): void {
    done(null, this.header ?? undefined);
  }
}

/**
 * Runs the COPY `statement` on `client` and answers its CSV with CRLF record ends after `header`.
 * pg-copy-streams reads the connection only as fast as `body` is read (backpressure down to
 * Postgres, which then waits on its socket). `copied` tells whether the COPY ran to its end; when
 * `body` ends before (its reader went), the connection must be discarded, the one way to stop a
 * COPY under way (Postgres ends the statement when it next writes). A COPY that fails destroys
 * `body` with its error.
 */
export function copyCsv(client: pg.ClientBase, statement: string, header: string): { body: Readable; copied: () => boolean; bytes: () => number } {
  const query = copyStreams.to(statement);
  // node-postgres' read timeout (query_timeout) would cut a long download, and fail the stream
  // again after it ended: the transaction's statement_timeout bounds the COPY instead.
  (query as unknown as { query_timeout: number }).query_timeout = 2 ** 31 - 1;
  const copy = client.query(query);
  const body = new CsvRecordEnds(header);
  let copied = false;
  copy.once('end', () => {
    copied = true;
  });
  copy.on('error', (error) => body.destroy(error));
  copy.pipe(body);
  return { body, copied: () => copied, bytes: () => body.bytes };
}
