import { Readable } from 'node:stream';
import { parse as parseCsv } from 'csv-parse';
import ExcelJS from 'exceljs';
import yauzl from 'yauzl';
import { unescapeXlsxText } from '../../shared/export/xlsx-text.js';

/**
 * Reading an import's file (docs/api.md, "Import"): CSV (node-csv's csv-parse) or XLSX (its first
 * sheet, with exceljs' streaming reader), as a header and rows of text cells. What a hostile file
 * gets:
 * - a UTF-8 byte-order mark is dropped, and CRLF, LF and CR line ends may be mixed; quoted cells
 *   may hold line ends;
 * - a CSV that is not UTF-8 text (invalid bytes, a NUL) or not well-formed CSV, a body that
 *   claims XLSX and is no zip or has no worksheet: the file cannot be read (`FileRefused`);
 * - an XLSX is opened only after its zip's central directory has been read (yauzl) and every
 *   entry inflated once, counting the bytes: more than MAX_ENTRIES entries, or more than
 *   MAX_INFLATED_BYTES declared or actually inflated, or more than READ_TIMEOUT_MS, refuses it
 *   (a zip bomb), without holding what it inflates;
 * - a cell longer than MAX_CELL_CHARS is kept as a marker, and that row's error says so.
 */

export type FileFormat = 'csv' | 'xlsx';

export const CSV_MEDIA_TYPE = 'text/csv';
export const XLSX_MEDIA_TYPE = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';

/** What an XLSX may expand to, in all its entries together. */
export const MAX_INFLATED_BYTES = 256 * 1024 * 1024;
const MAX_ENTRIES = 10_000;
/** How long reading a file may take, the zip's check included. */
export const READ_TIMEOUT_MS = 120_000;
/** The longest cell an import reads: longer ones are that row's error. */
export const MAX_CELL_CHARS = 64 * 1024;

/** A cell longer than MAX_CELL_CHARS, as the rows carry it (its text is not kept). */
export const OVERSIZED_CELL = Symbol('oversized cell');
export type Cell = string | typeof OVERSIZED_CELL;

/** The file cannot be read: the message says why (the answer is `400`, or a job's `failed`). */
export class FileRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FileRefused';
  }
}

export interface ReadOptions {
  /** Stop after the header (the POST reads only what it checks at once). */
  headerOnly?: boolean;
  /** Stops the read (a job being stopped). */
  signal?: AbortSignal;
}

export interface ParsedFile {
  header: string[];
  rows: Cell[][];
}

function keep(text: string): Cell {
  return text.length > MAX_CELL_CHARS ? OVERSIZED_CELL : text;
}

/** The file's format, from its declared media type; the bytes must agree. */
export function formatOf(mediaType: string): FileFormat {
  return mediaType === XLSX_MEDIA_TYPE ? 'xlsx' : 'csv';
}

export async function readImportFile(format: FileFormat, bytes: Buffer, options: ReadOptions = {}): Promise<ParsedFile> {
  const deadline = AbortSignal.timeout(READ_TIMEOUT_MS);
  const signal = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
  try {
    return format === 'csv' ? await readCsv(bytes, options.headerOnly ?? false, signal) : await readXlsx(bytes, options.headerOnly ?? false, signal);
  } catch (error) {
    if (deadline.aborted) throw new FileRefused(`The file took longer than ${READ_TIMEOUT_MS / 1000} seconds to read`);
    throw error;
  }
}

// ---- CSV ----------------------------------------------------------------------------------

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

async function readCsv(bytes: Buffer, headerOnly: boolean, signal: AbortSignal): Promise<ParsedFile> {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new FileRefused('The file is neither CSV (UTF-8 text) nor XLSX');
  }
  if (text.includes('\u0000')) throw new FileRefused('The file is neither CSV (UTF-8 text) nor XLSX');
  const parser = Readable.from([text]).pipe(
    parseCsv({
      bom: true,
      record_delimiter: ['\r\n', '\n', '\r'],
      relax_column_count: true,
      skip_empty_lines: true,
      to_line: headerOnly ? 1 : undefined,
    }),
  );
  const records: Cell[][] = [];
  try {
    for await (const record of parser as AsyncIterable<string[]>) {
      if (signal.aborted) throw signal.reason;
      records.push(record.map(keep));
    }
  } catch (error) {
    if (signal.aborted) throw error;
    throw new FileRefused(`The file is not well-formed CSV: ${(error as Error).message}`);
  }
  const [header, ...rows] = records;
  if (!header) throw new FileRefused('The file has no header row');
  return { header: header.map((c) => (c === OVERSIZED_CELL ? '' : c)), rows };
}

// ---- XLSX ---------------------------------------------------------------------------------

function openZip(bytes: Buffer): Promise<yauzl.ZipFile> {
  return new Promise((resolve, reject) => {
    yauzl.fromBuffer(bytes, { lazyEntries: true, validateEntrySizes: true, decodeStrings: true, strictFileNames: false }, (error, zip) => {
      if (error || !zip) reject(new FileRefused('The file is neither CSV nor XLSX (not a zip)'));
      else resolve(zip);
    });
  });
}

/**
 * The zip bomb check: every entry of the central directory, by declared size and then by the bytes
 * it actually inflates to (counted, then thrown away), within the limits above.
 */
export async function checkZip(bytes: Buffer, signal: AbortSignal): Promise<void> {
  const zip = await openZip(bytes);
  let declared = 0;
  let inflated = 0;
  let entries = 0;
  const tooLarge = () => new FileRefused(`The XLSX expands past ${MAX_INFLATED_BYTES / 1024 / 1024} MiB`);
  try {
    await new Promise<void>((resolve, reject) => {
      const fail = (error: unknown) => {
        zip.close();
        reject(error instanceof FileRefused ? error : signal.aborted ? signal.reason : new FileRefused(`The XLSX cannot be read: ${(error as Error).message}`));
      };
      signal.addEventListener('abort', () => fail(signal.reason), { once: true });
      zip.on('error', fail);
      zip.on('end', resolve);
      zip.on('entry', (entry: yauzl.Entry) => {
        if (++entries > MAX_ENTRIES) return fail(new FileRefused(`The XLSX has more than ${MAX_ENTRIES} entries`));
        declared += entry.uncompressedSize;
        if (declared > MAX_INFLATED_BYTES) return fail(tooLarge());
        if (entry.fileName.endsWith('/')) return zip.readEntry();
        zip.openReadStream(entry, (error, stream) => {
          if (error || !stream) return fail(error ?? new Error('no stream'));
          stream.on('data', (chunk: Buffer) => {
            inflated += chunk.length;
            if (inflated > MAX_INFLATED_BYTES) {
              stream.destroy();
              fail(tooLarge());
            }
          });
          stream.on('error', fail);
          stream.on('end', () => zip.readEntry());
        });
      });
      zip.readEntry();
    });
  } finally {
    zip.close();
  }
}

/** A cell's value as text: what the sheet shows for numbers, booleans, dates, rich text and formulas (their result). */
function cellText(value: ExcelJS.CellValue): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return unescapeXlsxText(value);
  if (typeof value === 'number') return String(value);
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'object') {
    if ('richText' in value) return unescapeXlsxText(value.richText.map((r) => r.text).join(''));
    if ('text' in value && typeof value.text === 'string') return unescapeXlsxText(value.text);
    if ('result' in value) return cellText((value.result ?? null) as ExcelJS.CellValue);
    if ('error' in value) return String(value.error);
  }
  return '';
}

async function readXlsx(bytes: Buffer, headerOnly: boolean, signal: AbortSignal): Promise<ParsedFile> {
  if (bytes.length < 4 || bytes.readUInt32LE(0) !== 0x04034b50) throw new FileRefused('The file is neither CSV nor XLSX (not a zip)');
  await checkZip(bytes, signal);
  const input = Readable.from([bytes]);
  const reader = new ExcelJS.stream.xlsx.WorkbookReader(input, { worksheets: 'emit', sharedStrings: 'cache', hyperlinks: 'ignore', styles: 'ignore', entries: 'ignore' });
  const records: Cell[][] = [];
  try {
    for await (const sheet of reader) {
      for await (const row of sheet as unknown as AsyncIterable<ExcelJS.Row>) {
        if (signal.aborted) throw signal.reason;
        // row.values is 1-based and sparse; rows skipped in the sheet are blank rows, left out like CSV's.
        const values = (row.values as ExcelJS.CellValue[]).slice(1);
        const cells = Array.from({ length: values.length }, (_, i) => keep(cellText(values[i])));
        if (cells.every((c) => c === '')) continue;
        records.push(cells);
        if (headerOnly) break;
      }
      break;
    }
  } catch (error) {
    if (signal.aborted || error instanceof FileRefused) throw error;
    throw new FileRefused(`The XLSX cannot be read: ${(error as Error).message}`);
  } finally {
    input.destroy();
  }
  const [header, ...rows] = records;
  if (!header) throw new FileRefused('The XLSX has no worksheet with a header row');
  return { header: header.map((c) => (c === OVERSIZED_CELL ? '' : c)), rows };
}
