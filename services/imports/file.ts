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
 * - an XLSX is opened only after its zip has been checked (checkZip: central directory and local
 *   headers read with yauzl, every entry inflated once counting the bytes, without holding them):
 *   too many entries, too many bytes declared or actually inflated, shared strings too large, an
 *   entry compressed too densely, or headers that disagree refuse it (a zip bomb);
 * - the read of either format ends at READ_TIMEOUT_MS, even inside one huge row: exceljs is fed in
 *   small chunks that stop at the deadline, and every wait for its next row is raced against it;
 * - a cell longer than MAX_CELL_CHARS is kept as a marker, and that row's error says so.
 */

export type FileFormat = 'csv' | 'xlsx';

export const CSV_MEDIA_TYPE = 'text/csv';
export const XLSX_MEDIA_TYPE = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';

/** What an XLSX may expand to, in all its entries together. */
export const MAX_INFLATED_BYTES = 256 * 1024 * 1024;
export const MAX_ENTRIES = 10_000;
/** What an XLSX's shared strings may expand to: exceljs holds them all in memory. */
export const MAX_SHARED_STRINGS_BYTES = 64 * 1024 * 1024;
/** The most an entry past RATIO_FLOOR may be compressed (inflated to compressed bytes). */
export const MAX_RATIO = 500;
const RATIO_FLOOR = 1024 * 1024;
/** The chunks exceljs is fed: the read stops within one of them once its deadline has passed. */
const FEED_BYTES = 64 * 1024;
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
  /** How long the read may take (READ_TIMEOUT_MS unless a test says otherwise). */
  timeoutMs?: number;
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
  const timeoutMs = options.timeoutMs ?? READ_TIMEOUT_MS;
  const deadline = AbortSignal.timeout(timeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
  try {
    return format === 'csv' ? await readCsv(bytes, options.headerOnly ?? false, signal) : await readXlsx(bytes, options.headerOnly ?? false, signal);
  } catch (error) {
    if (deadline.aborted) throw new FileRefused(`The file took longer than ${timeoutMs / 1000} seconds to read`);
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

const LOCAL_HEADER = 0x04034b50;
const DATA_DESCRIPTOR = 0x08074b50;
const SIZES_FOLLOW = 0x08;

/**
 * The local header of `entry` agrees with the central directory, and ends where the next entry
 * begins (`next`): exceljs' reader (unzipper) walks the local headers from the first byte and
 * never reads the central directory, so the entries it sees must be exactly those checked here.
 * A local header may leave the sizes to a data descriptor after the data (flag bit 3): unzipper
 * then looks for the descriptor's signature, so its first occurrence must be where the data ends.
 * Returns where the entry ends.
 */
function checkLocalHeader(bytes: Buffer, entry: yauzl.Entry): number {
  const disagree = () => new FileRefused(`The XLSX cannot be read: the zip's local header of ${entry.fileName} disagrees with its central directory`);
  const at = entry.relativeOffsetOfLocalHeader;
  if (at + 30 > bytes.length || bytes.readUInt32LE(at) !== LOCAL_HEADER) throw disagree();
  const flags = bytes.readUInt16LE(at + 6);
  const method = bytes.readUInt16LE(at + 8);
  const compressed = bytes.readUInt32LE(at + 18);
  const uncompressed = bytes.readUInt32LE(at + 22);
  const nameLength = bytes.readUInt16LE(at + 26);
  const extraLength = bytes.readUInt16LE(at + 28);
  if (method !== entry.compressionMethod) throw disagree();
  if (!bytes.subarray(at + 30, at + 30 + nameLength).equals(entry.fileNameRaw)) throw disagree();
  const dataStart = at + 30 + nameLength + extraLength;
  let end = dataStart + entry.compressedSize;
  const deferred = (flags & SIZES_FOLLOW) !== 0 && compressed === 0;
  if (!deferred && (compressed !== entry.compressedSize || uncompressed !== entry.uncompressedSize)) throw disagree();
  if (flags & SIZES_FOLLOW) {
    // unzipper ends the data at the first descriptor signature after it starts.
    if (deferred && bytes.indexOf(Buffer.from([0x50, 0x4b, 0x07, 0x08]), dataStart) !== end) throw disagree();
    if (end + 16 > bytes.length || bytes.readUInt32LE(end) !== DATA_DESCRIPTOR) {
      if (deferred) throw disagree();
    } else {
      if (bytes.readUInt32LE(end + 8) !== entry.compressedSize || bytes.readUInt32LE(end + 12) !== entry.uncompressedSize) throw disagree();
      end += 16;
    }
  }
  if (end > bytes.length) throw disagree();
  return end;
}

/**
 * The zip bomb check, before exceljs reads a byte: every entry of the central directory, by the
 * sizes it declares there and in its local header, then by the bytes it actually inflates to
 * (counted, then thrown away; the count stops at the limit):
 * - at most MAX_ENTRIES entries, together at most MAX_INFLATED_BYTES;
 * - the shared strings (which exceljs holds in memory) at most MAX_SHARED_STRINGS_BYTES;
 * - no entry past 1 MiB compressed more than MAX_RATIO to 1 (deflate's best is about 1,030);
 * - the entries tile the file from its first byte to the central directory, so that exceljs'
 *   reader, which walks the local headers, reads exactly what was counted. An archive inside the
 *   archive is never opened (exceljs ignores embedded files), so nesting cannot expand.
 */
export async function checkZip(bytes: Buffer, signal: AbortSignal): Promise<void> {
  const zip = await openZip(bytes);
  // Where the central directory starts (yauzl's cursor before the first entry is read).
  const centralDirectory = (zip as unknown as { readEntryCursor: number }).readEntryCursor;
  let declared = 0;
  let inflated = 0;
  let entries = 0;
  let next = 0;
  const tooLarge = () => new FileRefused(`The XLSX expands past ${MAX_INFLATED_BYTES / 1024 / 1024} MiB`);
  const tooDense = (name: string) => new FileRefused(`The XLSX is a zip bomb: ${name} is compressed more than ${MAX_RATIO} to 1`);
  const sharedTooLarge = () => new FileRefused(`The XLSX's shared strings expand past ${MAX_SHARED_STRINGS_BYTES / 1024 / 1024} MiB`);
  try {
    await new Promise<void>((resolve, reject) => {
      const fail = (error: unknown) => {
        zip.close();
        reject(error instanceof FileRefused ? error : signal.aborted ? signal.reason : new FileRefused(`The XLSX cannot be read: ${(error as Error).message}`));
      };
      if (signal.aborted) return fail(signal.reason);
      // The count the end of the central directory declares, before any entry is read.
      if (zip.entryCount > MAX_ENTRIES) return fail(new FileRefused(`The XLSX has more than ${MAX_ENTRIES} entries`));
      signal.addEventListener('abort', () => fail(signal.reason), { once: true });
      zip.on('error', fail);
      zip.on('end', () => {
        if (next !== centralDirectory) return fail(new FileRefused('The XLSX cannot be read: its zip holds bytes outside its entries'));
        resolve();
      });
      zip.on('entry', (entry: yauzl.Entry) => {
        try {
          if (++entries > MAX_ENTRIES) throw new FileRefused(`The XLSX has more than ${MAX_ENTRIES} entries`);
          declared += entry.uncompressedSize;
          if (declared > MAX_INFLATED_BYTES) throw tooLarge();
          const shared = entry.fileName.toLowerCase() === 'xl/sharedstrings.xml';
          if (shared && entry.uncompressedSize > MAX_SHARED_STRINGS_BYTES) throw sharedTooLarge();
          if (entry.uncompressedSize > RATIO_FLOOR && entry.uncompressedSize > MAX_RATIO * entry.compressedSize) throw tooDense(entry.fileName);
          if (entry.relativeOffsetOfLocalHeader !== next) throw new FileRefused('The XLSX cannot be read: its zip holds bytes outside its entries');
          next = checkLocalHeader(bytes, entry);
          if (entry.fileName.endsWith('/')) return zip.readEntry();
          let mine = 0;
          zip.openReadStream(entry, (error, stream) => {
            if (error || !stream) return fail(error ?? new Error('no stream'));
            stream.on('data', (chunk: Buffer) => {
              inflated += chunk.length;
              mine += chunk.length;
              const refusal =
                inflated > MAX_INFLATED_BYTES ? tooLarge()
                : shared && mine > MAX_SHARED_STRINGS_BYTES ? sharedTooLarge()
                : mine > RATIO_FLOOR && mine > MAX_RATIO * entry.compressedSize ? tooDense(entry.fileName)
                : null;
              if (refusal) {
                stream.destroy();
                fail(refusal);
              }
            });
            stream.on('error', fail);
            stream.on('end', () => zip.readEntry());
          });
        } catch (error) {
          fail(error);
        }
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

/** The bytes as a stream of small chunks that stops when `signal` aborts (so that exceljs stops with it). */
function chunksOf(bytes: Buffer, signal: AbortSignal): Readable {
  return Readable.from(
    (function* () {
      for (let at = 0; at < bytes.length && !signal.aborted; at += FEED_BYTES) yield bytes.subarray(at, at + FEED_BYTES);
    })(),
  );
}

/** Waits for `step`, or rejects as soon as `signal` aborts: the deadline holds inside a huge row. */
function within<T>(step: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', abort, { once: true });
    step.then(
      (value) => {
        signal.removeEventListener('abort', abort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', abort);
        reject(error as Error);
      },
    );
  });
}

async function readXlsx(bytes: Buffer, headerOnly: boolean, signal: AbortSignal): Promise<ParsedFile> {
  if (bytes.length < 4 || bytes.readUInt32LE(0) !== LOCAL_HEADER) throw new FileRefused('The file is neither CSV nor XLSX (not a zip)');
  await checkZip(bytes, signal);
  // Its own signal, so that the input stops feeding exceljs when the read ends for any reason.
  const stop = new AbortController();
  const stopped = AbortSignal.any([signal, stop.signal]);
  const input = chunksOf(bytes, stopped);
  const reader = new ExcelJS.stream.xlsx.WorkbookReader(input, { worksheets: 'emit', sharedStrings: 'cache', hyperlinks: 'ignore', styles: 'ignore', entries: 'ignore' });
  const records: Cell[][] = [];
  const sheets = (reader as unknown as AsyncIterable<ExcelJS.stream.xlsx.WorksheetReader>)[Symbol.asyncIterator]();
  try {
    const sheet = await within(sheets.next(), signal);
    if (!sheet.done) {
      const rows = (sheet.value as unknown as AsyncIterable<ExcelJS.Row>)[Symbol.asyncIterator]();
      for (;;) {
        const next = await within(rows.next(), signal);
        if (next.done) break;
        const row = next.value;
        // row.values is 1-based and sparse; rows skipped in the sheet are blank rows, left out like CSV's.
        const values = (row.values as ExcelJS.CellValue[]).slice(1);
        const cells = Array.from({ length: values.length }, (_, i) => keep(cellText(values[i])));
        if (cells.every((c) => c === '')) continue;
        records.push(cells);
        if (headerOnly) break;
      }
    }
  } catch (error) {
    if (signal.aborted || error instanceof FileRefused) throw error;
    throw new FileRefused(`The XLSX cannot be read: ${(error as Error).message}`);
  } finally {
    stop.abort();
    input.destroy();
    // exceljs' own work ends with its input; its late rejection (if any) is of no interest.
    void sheets.return?.().catch(() => undefined);
  }
  const [header, ...rows] = records;
  if (!header) throw new FileRefused('The XLSX has no worksheet with a header row');
  return { header: header.map((c) => (c === OVERSIZED_CELL ? '' : c)), rows };
}
