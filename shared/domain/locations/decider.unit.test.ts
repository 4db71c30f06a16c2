import { describe, expect, it } from 'vitest';
import { specFor } from '../../../test/support/decider.js';
import { ApiError, ValidationFailed } from '../../errors.js';
import { ASSETS_BLOCK_DELETE, DESCENDANTS_BLOCK_DELETE, locationDecider } from './decider.js';
import type { LocationEvent } from './events.js';

const given = specFor(locationDecider);

const T0 = '2026-01-01T00:00:00.000Z';
const T1 = '2026-01-02T00:00:00.000Z';

type Created = Extract<LocationEvent, { type: 'LocationCreated' }>;

function created(id: number, key: string, parentId: number | null = null): Created {
  return {
    type: 'LocationCreated',
    data: {
      org_id: 1,
      location_id: id,
      external_key: key,
      name: `name ${key}`,
      description: null,
      parent_id: parentId,
      is_active: true,
      valid_from: null,
      valid_to: null,
      at: T0,
    },
  };
}

describe('CreateLocation', () => {
  const base = {
    type: 'CreateLocation' as const,
    orgId: 1,
    locationId: 7,
    externalKey: 'A',
    name: 'A',
    description: null,
    isActive: true,
    validFrom: null,
    validTo: null,
    at: T0,
  };

  it('creates under a live parent', () => {
    given([])
      .when({ ...base, parent: { id: 3, ancestors: [1, 2] } })
      .then([{ type: 'LocationCreated', data: { ...created(7, 'A', 3).data, name: 'A' } }]);
  });

  it('refuses valid_to not after valid_from (DECISIONS: Validity window)', () => {
    given([])
      .when({ ...base, parent: null, validFrom: T1, validTo: T0 })
      .thenThrows(ApiError, (e) => expect((e as ValidationFailed).fields.map((f) => `${f.field}:${f.code}`)).toEqual(['valid_to:invalid_value']));
  });
});

describe('UpdateLocation', () => {
  it('emits only the fields that change, and nothing for a no-op (spec: PATCH rule 4, no-op keeps updated_at)', () => {
    given([created(5, 'A')]).when({ type: 'UpdateLocation', changes: { name: 'name A', isActive: true }, at: T1 }).then([]);
    given([created(5, 'A')])
      .when({ type: 'UpdateLocation', changes: { name: 'B', description: null }, at: T1 })
      .then([{ type: 'LocationUpdated', data: { org_id: 1, location_id: 5, changes: { name: 'B' }, at: T1 } }]);
  });

  it('refuses null valid_from when it is set, accepts it when it is already null (DECISIONS: equal values)', () => {
    const withFrom: Created = { ...created(5, 'A'), data: { ...created(5, 'A').data, valid_from: T0 } };
    given([withFrom])
      .when({ type: 'UpdateLocation', changes: { validFrom: null }, at: T1 })
      .thenThrows(ApiError, (e) => expect((e as ValidationFailed).fields[0]!.field).toBe('valid_from'));
    given([created(5, 'A')]).when({ type: 'UpdateLocation', changes: { validFrom: null }, at: T1 }).then([]);
  });

  it('matches timestamps by instant', () => {
    const withTo: Created = { ...created(5, 'A'), data: { ...created(5, 'A').data, valid_to: T1 } };
    given([withTo]).when({ type: 'UpdateLocation', changes: { validTo: '2026-01-02T01:00:00+01:00' }, at: T1 }).then([]);
  });

  it('re-parents, and refuses a cycle naming the location (DECISIONS: cycle → 409)', () => {
    given([created(5, 'A', 1)])
      .when({ type: 'UpdateLocation', changes: {}, move: { parent: { id: 9, ancestors: [2] } }, at: T1 })
      .then([{ type: 'LocationMoved', data: { org_id: 1, location_id: 5, parent_id: 9, previous_parent_id: 1, at: T1 } }]);
    given([created(5, 'A', 1)])
      .when({ type: 'UpdateLocation', changes: {}, move: { parent: { id: 9, ancestors: [1, 5, 8] } }, at: T1 })
      .thenThrows(ApiError, (e) => {
        expect(e.type).toBe('conflict');
        expect(e.detail).toContain('location A (id 5) its own ancestor');
      });
    given([created(5, 'A')])
      .when({ type: 'UpdateLocation', changes: {}, move: { parent: { id: 5, ancestors: [] } }, at: T1 })
      .thenThrows(ApiError, (e) => expect(e.type).toBe('conflict'));
  });

  it('a move to the current parent is a no-op; detaching a root too', () => {
    given([created(5, 'A', 1)]).when({ type: 'UpdateLocation', changes: {}, move: { parent: { id: 1, ancestors: [] } }, at: T1 }).then([]);
    given([created(5, 'A')]).when({ type: 'UpdateLocation', changes: {}, move: { parent: null }, at: T1 }).then([]);
  });

  it('is not found once deleted', () => {
    given([created(5, 'A'), { type: 'LocationDeleted', data: { org_id: 1, location_id: 5, external_key: 'A', at: T1 } }])
      .when({ type: 'UpdateLocation', changes: { name: 'x' }, at: T1 })
      .thenThrows(ApiError, (e) => expect(e.type).toBe('not_found'));
  });
});

describe('RenameLocation', () => {
  it('renames, and a same-value rename is a no-op (spec: Rename rules 3)', () => {
    given([created(5, 'A')])
      .when({ type: 'RenameLocation', externalKey: 'B', at: T1 })
      .then([{ type: 'LocationRenamed', data: { org_id: 1, location_id: 5, external_key: 'B', previous_external_key: 'A', at: T1 } }]);
    given([created(5, 'A')]).when({ type: 'RenameLocation', externalKey: 'A', at: T1 }).then([]);
  });
});

describe('DeleteLocation', () => {
  it('checks descendants before placed assets (spec: States and transitions)', () => {
    given([created(5, 'A')])
      .when({ type: 'DeleteLocation', liveDescendants: 1, liveAssets: 1, at: T1 })
      .thenThrows(ApiError, (e) => expect(e.detail).toBe(DESCENDANTS_BLOCK_DELETE));
    given([created(5, 'A')])
      .when({ type: 'DeleteLocation', liveDescendants: 0, liveAssets: 2, at: T1 })
      .thenThrows(ApiError, (e) => expect(e.detail).toBe(ASSETS_BLOCK_DELETE));
  });

  it('deletes a leaf; a second delete is not found', () => {
    const deleted: LocationEvent = { type: 'LocationDeleted', data: { org_id: 1, location_id: 5, external_key: 'A', at: T1 } };
    given([created(5, 'A')]).when({ type: 'DeleteLocation', liveDescendants: 0, liveAssets: 0, at: T1 }).then([deleted]);
    given([created(5, 'A'), deleted])
      .when({ type: 'DeleteLocation', liveDescendants: 0, liveAssets: 0, at: T1 })
      .thenThrows(ApiError, (e) => expect(e.type).toBe('not_found'));
  });
});
