import { describe, expect, it } from 'vitest';
import { MAX_NAMED, columnArrays, planned, prepared, updateChangedColumns } from './prepared.js';

describe('prepared statements', () => {
  it('one name per distinct text, the same on every call; values travel apart', () => {
    const a1 = prepared('SELECT $1::int AS a', [1]);
    const a2 = prepared('SELECT $1::int AS a', [2]);
    const b = prepared('SELECT $1::int AS b', [1]);
    expect(a1.name).toBeDefined();
    expect(a2.name).toBe(a1.name);
    expect(b.name).not.toBe(a1.name);
    expect(a2).toMatchObject({ text: 'SELECT $1::int AS a', values: [2] });
  });

  it(`past ${MAX_NAMED} distinct texts, new ones run unnamed; known ones keep their names`, () => {
    const first = prepared('SELECT 0 AS known').name;
    for (let i = 0; i < MAX_NAMED; i++) prepared(`SELECT ${i} AS filler`);
    expect(prepared('SELECT 1 AS late').name).toBeUndefined();
    expect(prepared('SELECT 0 AS known').name).toBe(first);
  });

  it('planned statements are never named (planned afresh for their values)', () => {
    expect(planned('SELECT $1::text', ['x'])).toEqual({ text: 'SELECT $1::text', values: ['x'] });
  });

  it('columnArrays turns rows into one array per column, in the given order, nulls kept', () => {
    const rows = [
      { id: 1, name: 'a', note: null },
      { id: 2, name: 'b', note: 'x' },
    ];
    expect(columnArrays(rows, (r) => [r.id, r.name, r.note])).toEqual([
      [1, 2],
      ['a', 'b'],
      [null, 'x'],
    ]);
  });

  it('updateChangedColumns sets updated_at and the columns of the changes present, in the columns\' order', () => {
    const columns = { name: 'name', metadata: { column: 'metadata', encode: (v: unknown) => JSON.stringify(v) } };
    const query = updateChangedColumns('assets', 7, '2026-01-01T00:00:00.000Z', { metadata: { a: 1 }, name: 'n' } as { name?: string; metadata?: object }, columns);
    expect(query.text).toBe('UPDATE assets SET updated_at = $2, name = $3, metadata = $4 WHERE id = $1');
    expect(query.values).toEqual([7, '2026-01-01T00:00:00.000Z', 'n', '{"a":1}']);
    expect(updateChangedColumns('assets', 7, 'at', {} as { name?: string; metadata?: object }, columns).text).toBe('UPDATE assets SET updated_at = $2 WHERE id = $1');
  });
});
