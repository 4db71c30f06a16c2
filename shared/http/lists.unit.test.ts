import { describe, expect, it } from 'vitest';
import { ValidationFailed } from '../errors.js';
import { containsPattern, orderBy } from '../db/list-sql.js';
import { refuseAmbiguous } from './lists.js';
import { readOnlyErrors, sameInstant, sameJson } from '../domain/patch.js';

describe('list helpers', () => {
  it('q: %, _ and \\ match themselves', () => {
    expect(containsPattern('50%_a\\b')).toBe('%50\\%\\_a\\\\b%');
  });

  it('sort: the requested order, or the default, always ending with id ascending', () => {
    const columns = { name: 'a.name', external_key: 'a.external_key' };
    expect(orderBy([{ field: 'name', descending: true }], [{ field: 'external_key', descending: false }], columns, 'a.id')).toBe('a.name DESC, a.id ASC');
    expect(orderBy(undefined, [{ field: 'external_key', descending: false }], columns, 'a.id')).toBe('a.external_key ASC, a.id ASC');
  });

  it('both forms of a pair → ambiguous_fields, one entry per parameter', () => {
    expect(() => refuseAmbiguous({ location_id: 1 }, 'location_id', 'location_external_key')).not.toThrow();
    try {
      refuseAmbiguous({ location_id: 1, location_external_key: 'x' }, 'location_id', 'location_external_key');
      expect.unreachable();
    } catch (error) {
      expect((error as ValidationFailed).fields.map((f) => [f.field, f.code])).toEqual([
        ['location_id', 'ambiguous_fields'],
        ['location_external_key', 'ambiguous_fields'],
      ]);
    }
  });
});

describe('PATCH helpers', () => {
  it('timestamps match by instant; JSON by structure, not key order', () => {
    expect(sameInstant('2026-01-01T00:00:00.000Z', '2026-01-01T02:00:00+02:00')).toBe(true);
    expect(sameInstant('2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.001Z')).toBe(false);
    expect(sameInstant(null, null)).toBe(true);
    expect(sameInstant('2026-01-01T00:00:00.000Z', 'yesterday')).toBe(false);
    expect(sameJson({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 })).toBe(true);
    expect(sameJson({ a: 1 }, { a: 1, b: undefined })).toBe(false);
  });

  it('accept-if-matches drops equal values and flags differing ones', () => {
    const current = { id: 4, created_at: '2026-01-01T00:00:00.000Z' };
    expect(readOnlyErrors('assets', { id: 4, created_at: '2026-01-01T00:00:00Z' }, current)).toEqual([]);
    expect(readOnlyErrors('assets', { id: 5 }, current).map((e) => [e.field, e.code])).toEqual([['id', 'read_only']]);
  });
});
