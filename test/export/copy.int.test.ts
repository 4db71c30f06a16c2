import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import fc from 'fast-check';
import pg from 'pg';
import copyStreams from 'pg-copy-streams';
import { stringify } from 'csv-stringify/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import '../../shared/db/pool.js';
import { exportColumns, rowCells } from '../../shared/export/columns.js';
import { CsvRecordEnds, copyCellsSql, copyCsv, copyStatement, inlineParameters } from '../../shared/export/copy.js';
import { CSV_OPTIONS } from '../../shared/http/export.js';

/**
 * The CSV that Postgres writes (shared/export/copy.ts) is, byte for byte, the CSV the service
 * writes row by row (rowCells and csv-stringify), against a real Postgres, for random rows
 * (docs/api.md "Export": RFC 4180, CRLF, formula-looking text neutralised, null an empty cell).
 */

let db: pg.Client;

beforeAll(async () => {
  db = new pg.Client({ connectionString: inject('postgresAdminUrl') });
  await db.connect();
});

afterAll(async () => {
  await db?.end();
});

/** An item schema of one column of each kind a COPY writes. */
const ITEM = {
  type: 'object',
  properties: {
    id: { type: 'integer' },
    name: { type: 'string' },
    note: { anyOf: [{ type: 'string' }, { type: 'null' }] },
    big: { type: 'integer' },
    is_active: { type: 'boolean' },
    amount: { type: 'string' },
  },
};
const COLUMNS = exportColumns(ITEM);

/** Rows as one statement with bind parameters (arrays), in their order. */
const STATEMENT = `SELECT id, name, note, big, is_active, amount FROM unnest($1::int[], $2::text[], $3::text[], $4::bigint[], $5::bool[], $6::numeric[])
  WITH ORDINALITY AS r(id, name, note, big, is_active, amount, n) WHERE $7::text = 'all' ORDER BY n`;

interface Row {
  id: number;
  name: string;
  note: string | null;
  big: number;
  is_active: boolean;
  amount: string;
}

const text = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.tuple(fc.constantFrom('=', '+', '-', '@', "'", '\t', '\r', '\n', '"', ',', '\\', '$1', "''", ' '), fc.string({ maxLength: 6 })).map(([a, b]) => a + b),
  fc.constantFrom('', '"', '""', '\r\n', '\n', 'a,b', '=1+2', '\\.', 'ünïcødé ✓'),
).map((s) => s.replace(/\u0000/g, ''));

const row: fc.Arbitrary<Row> = fc.record({
  id: fc.integer({ min: -2147483648, max: 2147483647 }),
  name: text,
  note: fc.option(text),
  big: fc.integer({ min: -(2 ** 53 - 1), max: 2 ** 53 - 1 }).map((n) => n),
  is_active: fc.boolean(),
  amount: fc.tuple(fc.integer({ min: -1_000_000, max: 1_000_000 }), fc.integer({ min: 0, max: 99 })).map(([a, b]) => `${a}.${b}`),
});

const valuesOf = (rows: Row[]) => [
  rows.map((r) => r.id),
  rows.map((r) => r.name),
  rows.map((r) => r.note),
  rows.map((r) => r.big),
  rows.map((r) => r.is_active),
  rows.map((r) => r.amount),
  'all',
];

/** The CSV the service writes: the statement's rows through rowCells and csv-stringify. */
async function serviceCsv(query: pg.QueryConfig): Promise<string> {
  const { rows } = await db.query<Record<string, unknown>>(query);
  return stringify([COLUMNS.map((c) => c.name)], CSV_OPTIONS) + (rows.length > 0 ? stringify(rows.map((r) => rowCells(COLUMNS, r)), CSV_OPTIONS) : '');
}

/** The CSV Postgres writes: the COPY of the statement's cells, through CsvRecordEnds. */
async function copiedCsv(query: pg.QueryConfig): Promise<string> {
  const described = await db.query({ text: `SELECT * FROM (${inlineParameters(query.text, query.values ?? [])}) AS export_rows LIMIT 0`, rowMode: 'array' });
  const cells = copyCellsSql(COLUMNS, described.fields);
  expect(cells).not.toBeNull();
  const chunks: Buffer[] = [];
  await pipeline(
    db.query(copyStreams.to(copyStatement(query, cells!))),
    new CsvRecordEnds(stringify([COLUMNS.map((c) => c.name)], CSV_OPTIONS)),
    async (source: AsyncIterable<Buffer>) => {
      for await (const chunk of source) chunks.push(chunk);
    },
  );
  return Buffer.concat(chunks).toString('utf8');
}

describe('the CSV written by COPY', () => {
  it('is the service\'s CSV, byte for byte, for random rows and values', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(row, { maxLength: 25 }), async (rows) => {
        const query = { text: STATEMENT, values: valuesOf(rows) };
        expect(await copiedCsv(query)).toBe(await serviceCsv(query));
      }),
      { numRuns: 150 },
    );
  }, 120_000);

  it('is the header alone for no rows, and numbers keep their sign unquoted', async () => {
    expect(await copiedCsv({ text: STATEMENT, values: valuesOf([]) })).toBe('id,name,note,big,is_active,amount\r\n');
    const csv = await copiedCsv({ text: STATEMENT, values: valuesOf([{ id: -5, name: '-5', note: null, big: -7, is_active: false, amount: '-1.5' }]) });
    expect(csv).toBe("id,name,note,big,is_active,amount\r\n-5,'-5,,-7,false,'-1.5\r\n");
    // A lone line end is quoted as a CRLF is (RFC 4180), and kept as it is.
    const breaks = await copiedCsv({ text: STATEMENT, values: valuesOf([{ id: 1, name: 'a\nb', note: '\rc', big: 2, is_active: true, amount: '0' }]) });
    expect(breaks).toBe('id,name,note,big,is_active,amount\r\n1,"a\nb",' + `"'\rc"` + ',2,true,0\r\n');
  });

  it('is not used for a column it cannot write as the service does (a timestamp, JSON, a float, a nested field)', async () => {
    for (const sql of ['SELECT now() AS name', `SELECT '{}'::jsonb AS name`, 'SELECT 0.5::float8 AS name']) {
      const described = await db.query({ text: `${sql} LIMIT 0`, rowMode: 'array' });
      expect(copyCellsSql(exportColumns({ type: 'object', properties: { name: { type: 'string' } } }), described.fields), sql).toBeNull();
    }
    const described = await db.query({ text: `SELECT 'x' AS name LIMIT 0`, rowMode: 'array' });
    expect(copyCellsSql(exportColumns({ type: 'object', properties: { name: { type: 'object', properties: { a: { type: 'string' } }, additionalProperties: false } } }), described.fields)).toBeNull();
    expect(copyCellsSql(exportColumns({ type: 'object', properties: { other: { type: 'string' } } }), described.fields)).toBeNull();
  });
});

describe('inlineParameters', () => {
  it('gives every value back as Postgres reads the literal, whatever it holds', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.string({ unit: 'binary' }).map((s) => s.replace(/\u0000/g, '')), { minLength: 1, maxLength: 6 }), async (values) => {
        const text = `SELECT ARRAY[${values.map((_, i) => `$${i + 1}::text`).join(', ')}] AS v`;
        const { rows } = await db.query<{ v: string[] }>(inlineParameters(text, values));
        expect(rows[0]!.v).toEqual(values);
      }),
      { numRuns: 100 },
    );
  });

  it('leaves placeholders alone inside strings, identifiers, dollar quotes and comments', async () => {
    const text = `SELECT '$1' AS a, E'\\'$1' AS b, 1 AS "$1", $q$ $1 $q$ AS c, $$ $2 $$ AS d, $1::int AS e -- $1
      , /* $2 */ $2::text AS f, x$1 FROM (SELECT 1 AS x$1) t`;
    const inlined = inlineParameters(text, [7, "it's"]);
    const { rows } = await db.query(inlined);
    expect(rows[0]).toEqual({ a: '$1', b: "'$1", $1: 1, c: ' $1 ', d: ' $2 ', e: 7, f: "it's", x$1: 1 });
    expect(() => inlineParameters('SELECT $3', [1])).toThrow(/\$3/);
    expect(inlineParameters('SELECT $1, $2', [null, [1, 2]])).toBe(`SELECT NULL, '{"1","2"}'`);
  });
});

describe('CsvRecordEnds', () => {
  it('turns record ends into CRLF and keeps line ends inside quoted cells, however the input is split', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(fc.oneof(fc.constantFrom('"', '""', '\n', '\r', ',', '\r\n'), fc.string({ maxLength: 4 })), { minLength: 1, maxLength: 4 }), { maxLength: 8 }),
        fc.array(fc.nat(), { maxLength: 6 }),
        async (records, cuts) => {
          // COPY's form: a cell with a quote or a line end quoted, quotes doubled, LF after each record.
          const cell = (value: string) => (/[",\r\n]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value);
          const lf = Buffer.from(records.map((r) => `${r.map(cell).join(',')}\n`).join(''));
          const crlf = records.map((r) => `${r.map(cell).join(',')}\r\n`).join('');
          const points = [...new Set(cuts.map((c) => (lf.length === 0 ? 0 : c % lf.length)))].sort((a, b) => a - b);
          const pieces = [0, ...points].map((from, i, all) => lf.subarray(from, all[i + 1] ?? lf.length)).filter((p) => p.length > 0);
          const chunks: Buffer[] = [];
          await pipeline(Readable.from(pieces), new CsvRecordEnds('h\r\n'), async (source: AsyncIterable<Buffer>) => {
            for await (const chunk of source) chunks.push(chunk);
          });
          expect(Buffer.concat(chunks).toString()).toBe(`h\r\n${crlf}`);
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('copyCsv', () => {
  const MIB = 1024 * 1024;
  const waitOf = async (pid: number) => (await db.query<{ wait_event: string | null }>('SELECT wait_event FROM pg_stat_activity WHERE pid = $1', [pid])).rows[0]?.wait_event;

  it('reads Postgres only as fast as its reader: a reader that stops leaves the COPY waiting to write, and one that goes ends it', async () => {
    const reader = new pg.Client({ connectionString: inject('postgresAdminUrl') });
    await reader.connect();
    reader.on('error', () => undefined);
    const pid = (reader as unknown as { processID: number }).processID;
    // About 400 MiB of CSV, far more than every buffer between Postgres and the reader.
    const { body, copied, bytes } = copyCsv(reader, `COPY (SELECT i, repeat('x', 200) FROM generate_series(1, 2000000) i) TO STDOUT (FORMAT csv)`, 'i,x\r\n');
    let taken = 0;
    await new Promise<void>((resolve) => {
      body.on('data', (chunk: Buffer) => {
        taken += chunk.length;
        if (taken > MIB) {
          body.pause();
          resolve();
        }
      });
    });
    await expect.poll(() => waitOf(pid), { timeout: 20_000 }).toBe('ClientWrite');
    const held = bytes();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(bytes(), 'nothing more read while the reader waits').toBe(held);
    expect(held).toBeLessThan(16 * MIB);
    expect(await waitOf(pid)).toBe('ClientWrite');
    expect(copied()).toBe(false);
    // The reader goes: the connection is dropped (as the export discards it), and the backend ends.
    body.destroy();
    await reader.end();
    await expect.poll(() => waitOf(pid), { timeout: 20_000 }).toBeUndefined();
  }, 60_000);
});
