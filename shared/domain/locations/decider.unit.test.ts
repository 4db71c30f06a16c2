import { describe, expect, it } from 'vitest';
import { specFor } from '../../../test/support/decider.js';
import { ApiError, ConflictError, ValidationFailed } from '../../errors.js';
import { ASSETS_BLOCK_DELETE, DESCENDANTS_BLOCK_DELETE, locationDecider, type ParentLookup, type TreeNode } from './decider.js';
import type { TagEvent } from '../tags/events.js';
import type { LocationEvent } from './events.js';

const given = specFor(locationDecider);

const T0 = '2026-01-01T00:00:00.000Z';
const T1 = '2026-01-02T00:00:00.000Z';

type Created = Extract<LocationEvent, { type: 'LocationCreated' }>;

const tagAttached: TagEvent = {
  type: 'TagAttached',
  data: { org_id: 1, owner_type: 'location', owner_id: 5, tag_id: 3, tag_type: 'ble', value: 'b1', is_active: true, valid_from: null, valid_to: null, at: T0 },
};

/** A parent named by id, and what the lookup found for it. */
function byId(id: number, found: TreeNode | null): ParentLookup {
  return { ref: { field: 'parent_id', id }, found };
}

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
    keyTaken: false,
    tags: [],
    at: T0,
  };

  it('creates under a live parent', () => {
    given([])
      .when({ ...base, parent: byId(3, { id: 3, ancestors: [1, 2] }) })
      .then([{ type: 'LocationCreated', data: { ...created(7, 'A', 3).data, name: 'A' } }]);
  });

  it('refuses a parent that names no live location, before a taken key (spec: fk_not_found names the form sent)', () => {
    given([])
      .when({ ...base, keyTaken: true, parent: { ref: { field: 'parent_external_key', externalKey: 'GONE' }, found: null } })
      .thenThrows(ValidationFailed, (e) => {
        expect(e.fields.map((f) => `${f.field}:${f.code}`)).toEqual(['parent_external_key:fk_not_found']);
        expect(e.fields[0]!.message).toBe('parent_external_key "GONE" does not reference a live location');
      });
  });

  it('refuses a key another location holds (409)', () => {
    given([])
      .when({ ...base, parent: null, keyTaken: true })
      .thenThrows(ConflictError, (e) => expect(e.detail).toBe('external_key "A" is already used by another location'));
  });

  it('attaches embedded tags after the creation, on its own stream; a value held elsewhere is a 409 naming where', () => {
    const tag = { tag_type: 'ble', value: 'b1', is_active: true, valid_from: null, valid_to: null };
    given([])
      .when({ ...base, parent: null, tags: [{ tagId: 11, input: tag, heldBy: null }] })
      .then([
        { type: 'LocationCreated', data: { ...created(7, 'A').data, name: 'A' } },
        { type: 'TagAttached', data: { org_id: 1, owner_type: 'location', owner_id: 7, tag_id: 11, tag_type: 'ble', value: 'b1', is_active: true, valid_from: null, valid_to: null, at: T0 } },
      ]);
    given([])
      .when({ ...base, parent: null, tags: [{ tagId: 11, input: tag, heldBy: { ownerType: 'asset', ownerId: 4, externalKey: 'ASSET-0004' } }] })
      .thenThrows(ConflictError, (e) => expect(e.detail).toBe('Tag (ble, "b1") is already attached to asset 4 (ASSET-0004)'));
  });

  it('refuses valid_to not after valid_from (DECISIONS: Validity window)', () => {
    given([])
      .when({ ...base, parent: null, validFrom: T1, validTo: T0 })
      .thenThrows(ApiError, (e) => expect((e as ValidationFailed).fields.map((f) => `${f.field}:${f.code}`)).toEqual(['valid_to:invalid_value']));
  });
});

describe('UpdateLocation', () => {
  it('emits only the fields that change, and nothing for a no-op (spec: PATCH rule 4, no-op keeps updated_at)', () => {
    given([created(5, 'A')]).when({ type: 'UpdateLocation', sent: {}, changes: { name: 'name A', isActive: true }, at: T1 }).then([]);
    given([created(5, 'A')])
      .when({ type: 'UpdateLocation', sent: {}, changes: { name: 'B', description: null }, at: T1 })
      .then([{ type: 'LocationUpdated', data: { org_id: 1, location_id: 5, changes: { name: 'B' }, at: T1 } }]);
  });

  it('refuses null valid_from when it is set, accepts it when it is already null (DECISIONS: equal values)', () => {
    const withFrom: Created = { ...created(5, 'A'), data: { ...created(5, 'A').data, valid_from: T0 } };
    given([withFrom])
      .when({ type: 'UpdateLocation', sent: {}, changes: { validFrom: null }, at: T1 })
      .thenThrows(ApiError, (e) => expect((e as ValidationFailed).fields[0]!.field).toBe('valid_from'));
    given([created(5, 'A')]).when({ type: 'UpdateLocation', sent: {}, changes: { validFrom: null }, at: T1 }).then([]);
  });

  it('matches timestamps by instant', () => {
    const withTo: Created = { ...created(5, 'A'), data: { ...created(5, 'A').data, valid_to: T1 } };
    given([withTo]).when({ type: 'UpdateLocation', sent: {}, changes: { validTo: '2026-01-02T01:00:00+01:00' }, at: T1 }).then([]);
  });

  it('re-parents, and refuses a cycle naming the location (DECISIONS: cycle → 409)', () => {
    given([created(5, 'A', 1)])
      .when({ type: 'UpdateLocation', sent: {}, changes: {}, parent: byId(9, { id: 9, ancestors: [2] }), at: T1 })
      .then([{ type: 'LocationMoved', data: { org_id: 1, location_id: 5, parent_id: 9, previous_parent_id: 1, at: T1 } }]);
    given([created(5, 'A', 1)])
      .when({ type: 'UpdateLocation', sent: {}, changes: {}, parent: byId(9, { id: 9, ancestors: [1, 5, 8] }), at: T1 })
      .thenThrows(ApiError, (e) => {
        expect(e.type).toBe('conflict');
        expect(e.detail).toContain('location A (id 5) its own ancestor');
      });
    given([created(5, 'A')])
      .when({ type: 'UpdateLocation', sent: {}, changes: {}, parent: byId(5, { id: 5, ancestors: [] }), at: T1 })
      .thenThrows(ApiError, (e) => expect(e.type).toBe('conflict'));
  });

  it('a move to the current parent is a no-op; detaching a root too', () => {
    given([created(5, 'A', 1)]).when({ type: 'UpdateLocation', sent: {}, changes: {}, parent: byId(1, { id: 1, ancestors: [] }), at: T1 }).then([]);
    given([created(5, 'A')]).when({ type: 'UpdateLocation', sent: {}, changes: {}, parent: null, at: T1 }).then([]);
  });

  it('resolves the parent after the 404: fk_not_found for a missing one, ambiguous_fields when both forms disagree', () => {
    given([created(5, 'A', 1)])
      .when({ type: 'UpdateLocation', sent: {}, changes: {}, parent: byId(9, null), at: T1 })
      .thenThrows(ValidationFailed, (e) => expect(e.fields.map((f) => `${f.field}:${f.code}`)).toEqual(['parent_id:fk_not_found']));
    given([created(5, 'A', 1)])
      .when({ type: 'UpdateLocation', sent: {}, changes: {}, parent: { ref: { field: 'both', id: 9, externalKey: 'B' }, found: { id: 8, ancestors: [] } }, at: T1 })
      .thenThrows(ValidationFailed, (e) => expect(e.fields.map((f) => f.code)).toEqual(['ambiguous_fields', 'ambiguous_fields']));
    given([created(5, 'A', 1)]).when({ type: 'UpdateLocation', sent: {}, changes: {}, parent: byId(1, null), at: T1 }).then([]);
  });

  it('read-only fields: accepted when they match (timestamps by instant, embedded tags), read_only in view order when they differ (spec: rule 9)', () => {
    const view = {
      id: 5,
      external_key: 'A',
      created_at: '2026-01-01T01:00:00+01:00',
      updated_at: T0,
      deleted_at: null,
      tags: [{ id: 3, tag_type: 'ble', value: 'b1', is_active: true, valid_from: null, valid_to: null, created_at: T0 }],
    };
    given([created(5, 'A'), tagAttached]).when({ type: 'UpdateLocation', sent: view, changes: {}, at: T1 }).then([]);
    given([created(5, 'A'), tagAttached])
      .when({ type: 'UpdateLocation', sent: { tags: [], external_key: 'B', id: 6, parent_id: 9 }, changes: {}, parent: byId(9, null), at: T1 })
      .thenThrows(ValidationFailed, (e) => {
        expect(e.fields.map((f) => `${f.field}:${f.code}`)).toEqual(['id:read_only', 'external_key:read_only', 'tags:read_only']);
        expect(e.fields[1]!.message).toContain('POST /locations/{id}/rename');
      });
  });

  it('is not found once deleted', () => {
    given([created(5, 'A'), { type: 'LocationDeleted', data: { org_id: 1, location_id: 5, external_key: 'A', at: T1 } }])
      .when({ type: 'UpdateLocation', sent: {}, changes: { name: 'x' }, at: T1 })
      .thenThrows(ApiError, (e) => expect(e.type).toBe('not_found'));
  });
});

describe('RenameLocation', () => {
  it('renames, and a same-value rename is a no-op (spec: Rename rules 3)', () => {
    given([created(5, 'A')])
      .when({ type: 'RenameLocation', externalKey: 'B', keyTaken: false, at: T1 })
      .then([{ type: 'LocationRenamed', data: { org_id: 1, location_id: 5, external_key: 'B', previous_external_key: 'A', at: T1 } }]);
    given([created(5, 'A')]).when({ type: 'RenameLocation', externalKey: 'A', keyTaken: true, at: T1 }).then([]);
  });

  it('refuses a key another location holds (spec: Rename rules 2)', () => {
    given([created(5, 'A')]).when({ type: 'RenameLocation', externalKey: 'B', keyTaken: true, at: T1 }).thenThrows(ConflictError);
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

  it('retires the live tags before the delete (their values are freed with it)', () => {
    given([created(5, 'A'), tagAttached])
      .when({ type: 'DeleteLocation', liveDescendants: 0, liveAssets: 0, at: T1 })
      .then([
        { type: 'TagDetached', data: { org_id: 1, owner_type: 'location', owner_id: 5, tag_id: 3, tag_type: 'ble', value: 'b1', reason: 'owner_deleted', at: T1 } },
        { type: 'LocationDeleted', data: { org_id: 1, location_id: 5, external_key: 'A', at: T1 } },
      ]);
  });
});
