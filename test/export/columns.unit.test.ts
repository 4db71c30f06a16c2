import fc from 'fast-check';
import { parse } from 'csv-parse/sync';
import { stringify } from 'csv-stringify/sync';
import { describe, expect, it } from 'vitest';
import {
  assetColumns,
  exportColumns,
  formatTagsCell,
  locationColumns,
  neutraliseFormula,
  parseTagsCell,
  restoreFormula,
  rowCells,
} from '../../shared/export/columns.js';

/** The column layout and the formula rule of an export (docs/api.md "Export"). */

describe('the formula rule', () => {
  it.each(['=1+2', '+1', '-1', '@SUM(A1)', "'quoted", '\tx', '\rx'])('neutralises %j with one leading quote', (text) => {
    expect(neutraliseFormula(text)).toBe(`'${text}`);
    expect(restoreFormula(neutraliseFormula(text))).toBe(text);
  });

  it.each(['', 'plain', ' =1', 'a=b', '1-2', '\nx'])('leaves %j as it is', (text) => {
    expect(neutraliseFormula(text)).toBe(text);
  });

  it('restores every string: neutralise, CSV (RFC 4180, CRLF), parse, restore gives the input back', () => {
    fc.assert(
      fc.property(fc.array(fc.array(fc.string({ unit: 'binary' }), { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 5 }), (rows) => {
        const width = rows[0]!.length;
        const table = rows.map((row) => Array.from({ length: width }, (_, i) => row[i] ?? ''));
        const csv = stringify(
          table.map((row) => row.map(neutraliseFormula)),
          { record_delimiter: '\r\n', quoted_empty: false },
        );
        const back = parse(csv, { record_delimiter: '\r\n', relax_column_count: false, bom: false }) as string[][];
        expect(back.map((row) => row.map(restoreFormula))).toEqual(table);
      }),
      { numRuns: 500 },
    );
  });
});

describe('the tags cell', () => {
  it('is type:value joined by |, with \\ and | escaped in values', () => {
    expect(formatTagsCell([])).toBe('');
    expect(formatTagsCell([{ tag_type: 'rfid', value: 'E200' }, { tag_type: 'barcode', value: 'a|b\\c:d' }])).toBe('rfid:E200|barcode:a\\|b\\\\c:d');
  });

  it('reads back what it wrote, for any values', () => {
    const tag = fc.record({ tag_type: fc.constantFrom('rfid', 'ble', 'barcode'), value: fc.string({ minLength: 1, unit: 'binary' }) });
    fc.assert(
      fc.property(fc.array(tag, { maxLength: 6 }), (tags) => {
        expect(parseTagsCell(formatTagsCell(tags))).toEqual({ tags });
      }),
      { numRuns: 500 },
    );
  });

  it.each(['rfid', ':x', 'rfid:', 'rfid:a|', 'rfid:a\\b', 'rfid:a\\'])('refuses %j with a message', (cell) => {
    const parsed = parseTagsCell(cell);
    expect(parsed).toHaveProperty('error');
    expect((parsed as { error: string }).error).toMatch(/^tags: /);
  });
});

describe('the columns', () => {
  it('of an asset and a location are their views, metadata and tags one column each', () => {
    expect(assetColumns).toEqual([
      'id',
      'external_key',
      'name',
      'description',
      'location_id',
      'location_external_key',
      'is_active',
      'valid_from',
      'valid_to',
      'metadata',
      'created_at',
      'updated_at',
      'deleted_at',
      'tags',
    ]);
    expect(locationColumns).toEqual([
      'id',
      'external_key',
      'name',
      'description',
      'parent_id',
      'parent_external_key',
      'is_active',
      'valid_from',
      'valid_to',
      'created_at',
      'updated_at',
      'deleted_at',
      'tags',
    ]);
  });

  it('flatten a fixed object with a dot, keep free keys and arrays as JSON, in schema order', () => {
    const schema = {
      type: 'object',
      properties: {
        id: { type: 'integer' },
        actor: { type: 'object', properties: { type: { type: 'string' }, id: { type: ['string', 'null'] } }, additionalProperties: false },
        changes: { anyOf: [{ type: 'object', additionalProperties: {} }, { type: 'null' }] },
        kinds: { type: 'array', items: { type: 'string' } },
        tags: { type: 'array', items: { type: 'object', properties: { tag_type: {}, value: {} } } },
        flag: { type: 'boolean' },
      },
    };
    const columns = exportColumns(schema);
    expect(columns.map((c) => c.name)).toEqual(['id', 'actor.type', 'actor.id', 'changes', 'kinds', 'tags', 'flag']);
    const item = {
      id: 7,
      actor: { type: '=cmd', id: null },
      changes: { name: { from: 'a', to: 'b' } },
      kinds: ['x'],
      tags: [{ tag_type: 'rfid', value: 'E2', id: 1 }],
      flag: false,
    };
    expect(rowCells(columns, item)).toEqual([7, "'=cmd", null, '{"name":{"from":"a","to":"b"}}', '["x"]', 'rfid:E2', false]);
    expect(rowCells(columns, { id: 1, actor: null, changes: null, kinds: [], tags: [], flag: true })).toEqual([1, null, null, null, '[]', '', true]);
  });
});
