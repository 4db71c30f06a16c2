import zlib from 'node:zlib';
import ExcelJS from 'exceljs';

/** Helpers of the import tests (docs/api.md, "Import"): posting files, waiting for jobs, building hostile files. */

export const CSV = 'text/csv';
export const XLSX = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';

export interface ImportBody {
  id: number;
  resource: string;
  status: string;
  dry_run: boolean;
  rows: number;
  created: number;
  updated: number;
  unchanged: number;
  rejected: number;
  errors: Array<{ row: number; field: string; code: string; message: string }>;
  created_at: string;
  finished_at: string | null;
}

export interface Posted {
  status: number;
  body: { data?: ImportBody; error?: { type: string; detail: string; fields?: Array<{ field: string; code: string; message: string }> } };
  headers: Headers;
}

export function importClient(apiUrl: string, token: string) {
  async function post(query: string, body: string | Buffer, contentType: string | null = CSV): Promise<Posted> {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (contentType) headers['content-type'] = contentType;
    const response = await fetch(`${apiUrl}/imports${query}`, { method: 'POST', headers, body: typeof body === 'string' ? body : new Uint8Array(body) });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : {}, headers: response.headers };
  }
  async function get(id: number): Promise<ImportBody> {
    const response = await fetch(`${apiUrl}/imports/${id}`, { headers: { authorization: `Bearer ${token}` } });
    const body = (await response.json()) as { data: ImportBody };
    return body.data;
  }
  /** Polls until the job has finished (or `timeoutMs`). */
  async function finished(id: number, timeoutMs = 60_000): Promise<ImportBody> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const job = await get(id);
      if (job.status === 'succeeded' || job.status === 'failed') return job;
      if (Date.now() > until) throw new Error(`import ${id} still ${job.status} after ${timeoutMs} ms: ${JSON.stringify(job)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  /** Posts and waits for the job; a refusal of the POST throws with its answer. */
  async function run(query: string, body: string | Buffer, contentType: string = CSV): Promise<ImportBody> {
    const posted = await post(query, body, contentType);
    if (posted.status !== 202) throw new Error(`POST /imports${query}: ${posted.status} ${JSON.stringify(posted.body)}`);
    return finished(posted.body.data!.id);
  }
  return { post, get, finished, run };
}

/** An XLSX workbook of these rows (first row the header), written by exceljs. */
export async function xlsxOf(rows: unknown[][]): Promise<Buffer> {
  const workbook = new ExcelJS.Workbook();
  const sheet = workbook.addWorksheet('Sheet1');
  for (const row of rows) sheet.addRow(row);
  return Buffer.from(await workbook.xlsx.writeBuffer());
}

/** An entry of a zip written by `zipOf`, with the lies a test may tell about it. */
export interface ZipPart {
  name: string;
  data: Buffer;
  /** The uncompressed size the central directory declares (the true one unless set). */
  declared?: number;
  /** The uncompressed size the local header declares (`declared` unless set). */
  localDeclared?: number;
  /** Left out of the central directory: only a reader that walks the local headers sees it. */
  hidden?: boolean;
}

/** A zip of these entries (deflated), written by hand so that a test can lie in it: sizes, and entries the central directory does not list. */
export function zipOf(parts: ZipPart[]): Buffer {
  const chunks: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const part of parts) {
    const compressed = zlib.deflateRawSync(part.data);
    const crc = zlib.crc32(part.data);
    const name = Buffer.from(part.name);
    const declared = part.declared ?? part.data.length;
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0, 6);
    local.writeUInt16LE(8, 8);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(compressed.length, 18);
    local.writeUInt32LE(part.localDeclared ?? declared, 22);
    local.writeUInt16LE(name.length, 26);
    chunks.push(local, name, compressed);
    if (!part.hidden) {
      const central = Buffer.alloc(46);
      central.writeUInt32LE(0x02014b50, 0);
      central.writeUInt16LE(20, 4);
      central.writeUInt16LE(20, 6);
      central.writeUInt16LE(8, 10);
      central.writeUInt32LE(crc, 16);
      central.writeUInt32LE(compressed.length, 20);
      central.writeUInt32LE(declared, 24);
      central.writeUInt16LE(name.length, 28);
      central.writeUInt32LE(offset, 42);
      centrals.push(central, name);
    }
    offset += local.length + name.length + compressed.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(centrals.length / 2, 8);
  end.writeUInt16LE(centrals.length / 2, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...chunks, directory, end]);
}
