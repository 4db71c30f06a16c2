import { describe, expect, it } from 'vitest';
import { ApiError } from '../../errors.js';
import { apiErrorOf } from '../../http/domain-errors.js';
import { Conflict, Invalid, NotFound } from '../../../test/support/refusals.js';
import { DomainRefusal } from '../refusal.js';
import { specFor } from '../../../test/support/decider.js';
import { fold } from '../decider.js';
import {
  ASSETS_BLOCK_DELETE,
  DESCENDANTS_BLOCK_DELETE,
  locationDecider,
  locationPatchStateErrors,
  type CreateLocation,
  type LocationCommand,
  type LocationStreamEvent,
  type ParentLookup,
  type TreeNode,
  type UpdateLocation,
} from './decider.js';
import type { TagEvent } from '../tags/events.js';
import type { LocationEvent } from './events.js';
import { seededRandom as seeded, shuffled } from '../../random.js';

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

  it('creates under an existing parent', () => {
    given([])
      .when({ ...base, parent: byId(3, { id: 3, ancestors: [1, 2] }) })
      .then([{ type: 'LocationCreated', data: { ...created(7, 'A', 3).data, name: 'A' } }]);
  });

  it('refuses a parent that names no existing location, before a taken key (docs/api.md "POST /locations": fk_not_found names the form sent)', () => {
    given([])
      .when({ ...base, keyTaken: true, parent: { ref: { field: 'parent_external_key', externalKey: 'GONE' }, found: null } })
      .thenThrows(Invalid, (e) => {
        expect(e.fields.map((f) => `${f.field}:${f.code}`)).toEqual(['parent_external_key:fk_not_found']);
        expect(e.fields[0]!.message).toBe('parent_external_key "GONE" does not reference a live location');
      });
  });

  it('refuses a key another location holds (409)', () => {
    given([])
      .when({ ...base, parent: null, keyTaken: true })
      .thenThrows(Conflict, (e) => expect(e.message).toBe('external_key "A" is already used by another location'));
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
      .thenThrows(Conflict, (e) => expect(e.message).toBe('Tag (ble, "b1") is already attached to asset 4 (ASSET-0004)'));
  });

  it('refuses valid_to not after valid_from (docs/api.md "Currently effective")', () => {
    given([])
      .when({ ...base, parent: null, validFrom: new Date(T1), validTo: new Date(T0) })
      .thenThrows(DomainRefusal, (e) => expect((e as DomainRefusal).fields.map((f) => `${f.field}:${f.code}`)).toEqual(['valid_to:invalid_value']));
  });
});

describe('UpdateLocation', () => {
  it('emits only the fields that change, and nothing for a no-op (docs/api.md "Changing a record: PATCH": a no-op keeps updated_at)', () => {
    given([created(5, 'A')]).when({ type: 'UpdateLocation', sent: {}, changes: { name: 'name A', isActive: true }, at: T1 }).then([]);
    given([created(5, 'A')])
      .when({ type: 'UpdateLocation', sent: {}, changes: { name: 'B', description: null }, at: T1 })
      .then([{ type: 'LocationUpdated', data: { org_id: 1, location_id: 5, changes: { name: 'B' }, at: T1 } }]);
  });

  it('refuses null valid_from when it is set, accepts it when it is already null (docs/api.md "Changing a record: PATCH")', () => {
    const withFrom: Created = { ...created(5, 'A'), data: { ...created(5, 'A').data, valid_from: T0 } };
    given([withFrom])
      .when({ type: 'UpdateLocation', sent: {}, changes: { validFrom: null }, at: T1 })
      .thenThrows(DomainRefusal, (e) => expect((e as DomainRefusal).fields[0]!.field).toBe('valid_from'));
    given([created(5, 'A')]).when({ type: 'UpdateLocation', sent: {}, changes: { validFrom: null }, at: T1 }).then([]);
  });

  it('matches timestamps by instant', () => {
    const withTo: Created = { ...created(5, 'A'), data: { ...created(5, 'A').data, valid_to: T1 } };
    given([withTo]).when({ type: 'UpdateLocation', sent: {}, changes: { validTo: new Date('2026-01-02T01:00:00+01:00') }, at: T1 }).then([]);
  });

  it('re-parents, and refuses a cycle naming the location (docs/api.md "Changing a record: PATCH": a cycle → 409)', () => {
    given([created(5, 'A', 1)])
      .when({ type: 'UpdateLocation', sent: {}, changes: {}, parent: byId(9, { id: 9, ancestors: [2] }), at: T1 })
      .then([{ type: 'LocationMoved', data: { org_id: 1, location_id: 5, parent_id: 9, previous_parent_id: 1, at: T1 } }]);
    given([created(5, 'A', 1)])
      .when({ type: 'UpdateLocation', sent: {}, changes: {}, parent: byId(9, { id: 9, ancestors: [1, 5, 8] }), at: T1 })
      .thenThrows(DomainRefusal, (e) => {
        expect(e.kind).toBe('conflict');
        expect(e.message).toContain('location A (id 5) its own ancestor');
      });
    given([created(5, 'A')])
      .when({ type: 'UpdateLocation', sent: {}, changes: {}, parent: byId(5, { id: 5, ancestors: [] }), at: T1 })
      .thenThrows(DomainRefusal, (e) => expect(e.kind).toBe('conflict'));
  });

  it('a move to the current parent is a no-op; detaching a root too', () => {
    given([created(5, 'A', 1)]).when({ type: 'UpdateLocation', sent: {}, changes: {}, parent: byId(1, { id: 1, ancestors: [] }), at: T1 }).then([]);
    given([created(5, 'A')]).when({ type: 'UpdateLocation', sent: {}, changes: {}, parent: null, at: T1 }).then([]);
  });

  it('resolves the parent after the 404: fk_not_found for a missing one, ambiguous_fields when both forms disagree', () => {
    given([created(5, 'A', 1)])
      .when({ type: 'UpdateLocation', sent: {}, changes: {}, parent: byId(9, null), at: T1 })
      .thenThrows(Invalid, (e) => expect(e.fields.map((f) => `${f.field}:${f.code}`)).toEqual(['parent_id:fk_not_found']));
    given([created(5, 'A', 1)])
      .when({ type: 'UpdateLocation', sent: {}, changes: {}, parent: { ref: { field: 'both', id: 9, externalKey: 'B' }, found: { id: 8, ancestors: [] } }, at: T1 })
      .thenThrows(Invalid, (e) => expect(e.fields.map((f) => f.code)).toEqual(['ambiguous_fields', 'ambiguous_fields']));
    given([created(5, 'A', 1)]).when({ type: 'UpdateLocation', sent: {}, changes: {}, parent: byId(1, null), at: T1 }).then([]);
  });

  it('read-only fields: accepted when they match (timestamps by instant, embedded tags), read_only in view order when they differ (docs/api.md "Changing a record: PATCH")', () => {
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
      .thenThrows(Invalid, (e) => {
        expect(e.fields.map((f) => `${f.field}:${f.code}`)).toEqual(['id:read_only', 'external_key:read_only', 'tags:read_only']);
        expect(e.fields[1]!.message).toContain('POST /locations/{id}/rename');
      });
  });

  it('is not found once deleted', () => {
    given([created(5, 'A'), { type: 'LocationDeleted', data: { org_id: 1, location_id: 5, external_key: 'A', at: T1 } }])
      .when({ type: 'UpdateLocation', sent: {}, changes: { name: 'x' }, at: T1 })
      .thenThrows(DomainRefusal, (e) => expect(e.kind).toBe('not_found'));
  });
});

describe('RenameLocation', () => {
  it('renames, and a same-value rename is a no-op (docs/api.md "Renaming: a new external_key")', () => {
    given([created(5, 'A')])
      .when({ type: 'RenameLocation', externalKey: 'B', keyTaken: false, at: T1 })
      .then([{ type: 'LocationRenamed', data: { org_id: 1, location_id: 5, external_key: 'B', previous_external_key: 'A', at: T1 } }]);
    given([created(5, 'A')]).when({ type: 'RenameLocation', externalKey: 'A', keyTaken: true, at: T1 }).then([]);
  });

  it('refuses a key another location holds (docs/api.md "Renaming: a new external_key")', () => {
    given([created(5, 'A')]).when({ type: 'RenameLocation', externalKey: 'B', keyTaken: true, at: T1 }).thenThrows(Conflict);
  });
});

describe('DeleteLocation', () => {
  it('checks descendants before placed assets (docs/api.md "Deleting")', () => {
    given([created(5, 'A')])
      .when({ type: 'DeleteLocation', existingDescendants: 1, existingAssets: 1, at: T1 })
      .thenThrows(DomainRefusal, (e) => expect(e.message).toBe(DESCENDANTS_BLOCK_DELETE));
    given([created(5, 'A')])
      .when({ type: 'DeleteLocation', existingDescendants: 0, existingAssets: 2, at: T1 })
      .thenThrows(DomainRefusal, (e) => expect(e.message).toBe(ASSETS_BLOCK_DELETE));
  });

  it('deletes a leaf; a second delete is not found', () => {
    const deleted: LocationEvent = { type: 'LocationDeleted', data: { org_id: 1, location_id: 5, external_key: 'A', at: T1 } };
    given([created(5, 'A')]).when({ type: 'DeleteLocation', existingDescendants: 0, existingAssets: 0, at: T1 }).then([deleted]);
    given([created(5, 'A'), deleted])
      .when({ type: 'DeleteLocation', existingDescendants: 0, existingAssets: 0, at: T1 })
      .thenThrows(DomainRefusal, (e) => expect(e.kind).toBe('not_found'));
  });

  it('retires the existing tags before the delete (their values are freed with it)', () => {
    given([created(5, 'A'), tagAttached])
      .when({ type: 'DeleteLocation', existingDescendants: 0, existingAssets: 0, at: T1 })
      .then([
        { type: 'TagDetached', data: { org_id: 1, owner_type: 'location', owner_id: 5, tag_id: 3, tag_type: 'ble', value: 'b1', reason: 'owner_deleted', at: T1 } },
        { type: 'LocationDeleted', data: { org_id: 1, location_id: 5, external_key: 'A', at: T1 } },
      ]);
  });
});

// ---- every rule of the decider, exactly -----------------------------------------------------

const T2 = '2026-01-03T00:00:00.000Z';

const decideAfter = (events: readonly LocationStreamEvent[], command: LocationCommand) => locationDecider.decide(command, fold(locationDecider, events));
const update = (fields: Partial<UpdateLocation>): UpdateLocation => ({ type: 'UpdateLocation', sent: {}, changes: {}, at: T1, ...fields });
const updatedEvent = (changes: Extract<LocationEvent, { type: 'LocationUpdated' }>['data']['changes']): LocationEvent => ({
  type: 'LocationUpdated',
  data: { org_id: 1, location_id: 5, changes, at: T1 },
});
const moved = (parentId: number | null, previous: number | null): LocationEvent => ({
  type: 'LocationMoved',
  data: { org_id: 1, location_id: 5, parent_id: parentId, previous_parent_id: previous, at: T1 },
});
const withData = (data: Partial<Created['data']>): Created => ({ ...created(5, 'A'), data: { ...created(5, 'A').data, ...data } });
const byKey = (externalKey: string, found: TreeNode | null): ParentLookup => ({ ref: { field: 'parent_external_key', externalKey }, found });
const byBoth = (id: number, externalKey: string, found: TreeNode | null): ParentLookup => ({ ref: { field: 'both', id, externalKey }, found });
const tagOn5 = (tagId: number, extra: Partial<Extract<TagEvent, { type: 'TagAttached' }>['data']> = {}): TagEvent => ({
  type: 'TagAttached',
  data: { ...(tagAttached.data as Extract<TagEvent, { type: 'TagAttached' }>['data']), tag_id: tagId, value: `v${tagId}`, ...extra },
});
const untag5 = (tagId: number): TagEvent => ({
  type: 'TagDetached',
  data: { org_id: 1, owner_type: 'location', owner_id: 5, tag_id: tagId, tag_type: 'ble', value: `v${tagId}`, reason: 'detached', at: T1 },
});
const AMBIGUOUS = [
  { field: 'parent_id', code: 'ambiguous_fields', message: 'Supply only one of parent_id or parent_external_key' },
  { field: 'parent_external_key', code: 'ambiguous_fields', message: 'Supply only one of parent_id or parent_external_key' },
];

describe('location evolve', () => {
  it('events of a stream without its creation leave it absent', () => {
    const orphans: LocationStreamEvent[] = [
      updatedEvent({ name: 'x' }),
      moved(2, null),
      { type: 'LocationRenamed', data: { org_id: 1, location_id: 5, external_key: 'B', previous_external_key: 'A', at: T1 } },
      { type: 'LocationDeleted', data: { org_id: 1, location_id: 5, external_key: 'A', at: T1 } },
      tagAttached,
      untag5(3),
    ];
    for (const event of orphans) expect(fold(locationDecider, [event])).toStrictEqual({ status: 'absent' });
  });

  const existing = {
    status: 'existing',
    id: 5,
    orgId: 1,
    externalKey: 'A',
    name: 'name A',
    description: null,
    parentId: 1,
    isActive: true,
    validFrom: null,
    validTo: null,
    createdAt: T0,
    updatedAt: T0,
    deletedAt: null,
    tags: [],
  };

  it('create, then each change, folds into the record (an update changes only the fields it carries)', () => {
    const start = [created(5, 'A', 1)];
    expect(fold(locationDecider, start)).toStrictEqual(existing);
    const after = (event: LocationStreamEvent) => fold(locationDecider, [...start, event]);
    expect(after(updatedEvent({ name: 'B' }))).toStrictEqual({ ...existing, name: 'B', updatedAt: T1 });
    expect(after(updatedEvent({ description: 'd' }))).toStrictEqual({ ...existing, description: 'd', updatedAt: T1 });
    expect(after(updatedEvent({ is_active: false }))).toStrictEqual({ ...existing, isActive: false, updatedAt: T1 });
    expect(after(updatedEvent({ valid_from: T0 }))).toStrictEqual({ ...existing, validFrom: T0, updatedAt: T1 });
    expect(after(updatedEvent({ valid_to: T2 }))).toStrictEqual({ ...existing, validTo: T2, updatedAt: T1 });
    expect(after(updatedEvent({}))).toStrictEqual({ ...existing, updatedAt: T1 });
    expect(fold(locationDecider, [withData({ description: 'd', parent_id: 1 }), updatedEvent({ description: null })])).toStrictEqual({ ...existing, updatedAt: T1 });
    expect(after(moved(9, 1))).toStrictEqual({ ...existing, parentId: 9, updatedAt: T1 });
    expect(after(moved(null, 1))).toStrictEqual({ ...existing, parentId: null, updatedAt: T1 });
    expect(after({ type: 'LocationRenamed', data: { org_id: 1, location_id: 5, external_key: 'B', previous_external_key: 'A', at: T1 } })).toStrictEqual({
      ...existing,
      externalKey: 'B',
      updatedAt: T1,
    });
    expect(after({ type: 'LocationDeleted', data: { org_id: 1, location_id: 5, external_key: 'A', at: T2 } })).toMatchObject({
      status: 'deleted',
      deletedAt: T2,
      externalKey: 'A',
    });
  });

  it('existing tags stay in attach order whatever is detached, in many orders', () => {
    const ids = [1, 2, 3, 4, 5, 6, 7, 8];
    for (let seed = 1; seed <= 50; seed++) {
      const gone = shuffled(ids, seed).slice(0, seed % ids.length);
      const state = fold(locationDecider, [created(5, 'A'), ...ids.map((id) => tagOn5(id)), ...gone.map(untag5)]);
      expect(state.status !== 'absent' && state.tags.map((t) => t.id)).toEqual(ids.filter((id) => !gone.includes(id)));
    }
  });
});

describe('CreateLocation, exactly', () => {
  const base: CreateLocation = {
    type: 'CreateLocation',
    orgId: 1,
    locationId: 7,
    externalKey: 'A',
    keyTaken: false,
    name: 'A',
    description: 'd',
    parent: null,
    isActive: false,
    validFrom: new Date(T0),
    validTo: new Date(T1),
    tags: [],
    at: T2,
  };
  const createdData = {
    org_id: 1,
    location_id: 7,
    external_key: 'A',
    name: 'A',
    description: 'd',
    parent_id: null,
    is_active: false,
    valid_from: T0,
    valid_to: T1,
    at: T2,
  };

  it('carries every field of the command; the parent by either form', () => {
    expect(decideAfter([], base)).toStrictEqual([{ type: 'LocationCreated', data: createdData }]);
    expect(decideAfter([], { ...base, parent: byKey('P', { id: 3, ancestors: [] }) })).toStrictEqual([
      { type: 'LocationCreated', data: { ...createdData, parent_id: 3 } },
    ]);
    expect(decideAfter([], { ...base, parent: byId(4, { id: 4, ancestors: [3] }) })).toStrictEqual([
      { type: 'LocationCreated', data: { ...createdData, parent_id: 4 } },
    ]);
  });

  it('refusals in the order the contract reports them: exists, parent, key, window, tags (every combination)', () => {
    const ble = { tag_type: 'ble', value: 'b1', is_active: true, valid_from: null, valid_to: null };
    const faults: { name: string; apply(c: CreateLocation): CreateLocation; check(e: unknown): void }[] = [
      {
        name: 'exists',
        apply: (c) => c,
        check: (e) => {
          expect(e).toBeInstanceOf(Conflict);
          expect((e as DomainRefusal).message).toBe('Location 7 already exists');
        },
      },
      {
        name: 'parent',
        apply: (c) => ({ ...c, parent: byId(3, null) }),
        check: (e) =>
          expect((e as DomainRefusal).fields).toStrictEqual([
            { field: 'parent_id', code: 'fk_not_found', message: 'parent_id 3 does not reference a live location' },
          ]),
      },
      {
        name: 'key',
        apply: (c) => ({ ...c, keyTaken: true }),
        check: (e) => {
          expect(e).toBeInstanceOf(Conflict);
          expect((e as DomainRefusal).message).toBe('external_key "A" is already used by another location');
        },
      },
      {
        name: 'window',
        apply: (c) => ({ ...c, validFrom: new Date(T1), validTo: new Date(T1) }),
        check: (e) =>
          expect((e as DomainRefusal).fields).toStrictEqual([{ field: 'valid_to', code: 'invalid_value', message: 'valid_to must be later than valid_from' }]),
      },
      {
        name: 'tags',
        apply: (c) => ({ ...c, tags: [{ tagId: 1, input: ble, heldBy: null }, { tagId: 2, input: ble, heldBy: null }] }),
        check: (e) => expect((e as DomainRefusal).message).toBe('Tag (ble, "b1") appears more than once in the request'),
      },
    ];
    for (let mask = 1; mask < 1 << faults.length; mask++) {
      const present = faults.filter((_, i) => mask & (1 << i));
      const command = present.reduce((c, f) => f.apply(c), base);
      const history = present[0]!.name === 'exists' ? [created(7, 'A')] : [];
      let thrown: unknown = null;
      try {
        decideAfter(history, command);
      } catch (error) {
        thrown = error;
      }
      present[0]!.check(thrown);
    }
  });

  it('a deleted location is not created again', () => {
    given([created(7, 'A'), { type: 'LocationDeleted', data: { org_id: 1, location_id: 7, external_key: 'A', at: T1 } }])
      .when(base)
      .thenThrows(Conflict, (e) => expect(e.message).toBe('Location 7 already exists'));
  });

  it('embedded tags follow the creation in request order, in many orders', () => {
    const requests = [1, 2, 3, 4, 5].map((tagId) => ({ tagId, input: { tag_type: 'barcode', value: `c${tagId}`, is_active: true, valid_from: null, valid_to: null }, heldBy: null }));
    for (let seed = 1; seed <= 20; seed++) {
      const order = shuffled(requests, seed);
      const events = decideAfter([], { ...base, tags: order });
      expect(events.map((e) => (e.type === 'TagAttached' ? e.data.tag_id : e.type))).toEqual(['LocationCreated', ...order.map((r) => r.tagId)]);
    }
  });
});

describe('UpdateLocation, field by field', () => {
  type Changes = UpdateLocation['changes'];
  const cases: [string, Created, Changes, Extract<LocationEvent, { type: 'LocationUpdated' }>['data']['changes'] | null][] = [
    ['name changed', created(5, 'A'), { name: 'B' }, { name: 'B' }],
    ['name equal', created(5, 'A'), { name: 'name A' }, null],
    ['description set', created(5, 'A'), { description: 'd' }, { description: 'd' }],
    ['description cleared', withData({ description: 'd' }), { description: null }, { description: null }],
    ['description equal', withData({ description: 'd' }), { description: 'd' }, null],
    ['is_active turned off', created(5, 'A'), { isActive: false }, { is_active: false }],
    ['is_active turned on', withData({ is_active: false }), { isActive: true }, { is_active: true }],
    ['is_active equal', created(5, 'A'), { isActive: true }, null],
    ['valid_from set', created(5, 'A'), { validFrom: new Date(T0) }, { valid_from: T0 }],
    ['valid_from moved', withData({ valid_from: T0 }), { validFrom: new Date(T1) }, { valid_from: T1 }],
    ['valid_from, same instant', withData({ valid_from: T0 }), { validFrom: new Date('2026-01-01T01:00:00+01:00') }, null],
    ['valid_from null while null', created(5, 'A'), { validFrom: null }, null],
    ['valid_to set', created(5, 'A'), { validTo: new Date(T1) }, { valid_to: T1 }],
    ['valid_to cleared', withData({ valid_to: T1 }), { validTo: null }, { valid_to: null }],
    ['valid_to moved', withData({ valid_to: T1 }), { validTo: new Date(T2) }, { valid_to: T2 }],
    ['valid_to, same instant', withData({ valid_to: T1 }), { validTo: new Date('2026-01-01T19:00:00-05:00') }, null],
    ['nothing', created(5, 'A'), {}, null],
  ];
  for (const [name, history, changes, expected] of cases) {
    it(`${name} → ${expected ? 'LocationUpdated with exactly that change' : 'no events'}`, () => {
      expect(decideAfter([history], update({ changes }))).toStrictEqual(expected ? [updatedEvent(expected)] : []);
    });
  }

  it('null valid_from when set → invalid_value, whatever else changes', () => {
    given([withData({ valid_from: T0 })])
      .when(update({ changes: { validFrom: null, name: 'B' } }))
      .thenThrows(Invalid, (e) => expect(e.fields).toStrictEqual([{ field: 'valid_from', code: 'invalid_value', message: 'valid_from must not be null' }]));
  });

  it('the window is checked on the merged values when the PATCH changes it', () => {
    const refused = (history: Created, changes: Changes) =>
      given([history])
        .when(update({ changes }))
        .thenThrows(Invalid, (e) =>
          expect(e.fields).toStrictEqual([{ field: 'valid_to', code: 'invalid_value', message: 'valid_to must be later than valid_from' }]),
        );
    refused(withData({ valid_from: T1 }), { validTo: new Date(T0) });
    refused(withData({ valid_from: T1 }), { validTo: new Date(T1) });
    refused(withData({ valid_to: T1 }), { validFrom: new Date(T2) });
    refused(created(5, 'A'), { validFrom: new Date(T1), validTo: new Date(T0) });
    expect(decideAfter([withData({ valid_from: T0 })], update({ changes: { validTo: new Date(T1) } }))).toStrictEqual([updatedEvent({ valid_to: T1 })]);
    expect(decideAfter([withData({ valid_to: T2 })], update({ changes: { validFrom: new Date(T1) } }))).toStrictEqual([updatedEvent({ valid_from: T1 })]);
    expect(decideAfter([withData({ valid_from: T1, valid_to: T2 })], update({ changes: { validTo: null } }))).toStrictEqual([updatedEvent({ valid_to: null })]);
  });

  it('a PATCH that leaves the window as it is is not refused for the stored window (a verbatim round trip succeeds)', () => {
    const inverted = withData({ valid_from: T2, valid_to: T1 });
    expect(decideAfter([inverted], update({ changes: { name: 'B', validFrom: new Date(T2), validTo: new Date(T1) } }))).toStrictEqual([updatedEvent({ name: 'B' })]);
  });

  it('a change and a move → LocationUpdated, then LocationMoved', () => {
    expect(decideAfter([created(5, 'A', 1)], update({ changes: { name: 'B' }, parent: byKey('P', { id: 2, ancestors: [] }) }))).toStrictEqual([
      updatedEvent({ name: 'B' }),
      moved(2, 1),
    ]);
  });

  it('a location that does not exist → 404', () => {
    given([]).when(update({})).thenThrows(NotFound, (e) => expect(e.message).toBe('Location not found'));
  });
});

describe('UpdateLocation: the parent (docs/api.md "Changing a record: PATCH")', () => {
  it('either form re-parents; both forms naming one location re-parent once; null detaches to the root', () => {
    expect(decideAfter([created(5, 'A', 1)], update({ parent: byKey('P', { id: 2, ancestors: [] }) }))).toStrictEqual([moved(2, 1)]);
    expect(decideAfter([created(5, 'A', 1)], update({ parent: byBoth(2, 'P', { id: 2, ancestors: [] }) }))).toStrictEqual([moved(2, 1)]);
    expect(decideAfter([created(5, 'A')], update({ parent: byId(2, { id: 2, ancestors: [] }) }))).toStrictEqual([moved(2, null)]);
    expect(decideAfter([created(5, 'A', 1)], update({ parent: null }))).toStrictEqual([moved(null, 1)]);
  });

  it('the current parent, by any form, is no move', () => {
    expect(decideAfter([created(5, 'A', 1)], update({ parent: byKey('P', { id: 1, ancestors: [] }) }))).toStrictEqual([]);
    expect(decideAfter([created(5, 'A', 1)], update({ parent: byBoth(1, 'P', { id: 1, ancestors: [] }) }))).toStrictEqual([]);
  });

  it('both forms that do not name one existing location → ambiguous_fields, also when the id is the current parent', () => {
    for (const found of [{ id: 8, ancestors: [] }, null]) {
      for (const id of [1, 2]) {
        given([created(5, 'A', 1)])
          .when(update({ parent: byBoth(id, 'P', found) }))
          .thenThrows(Invalid, (e) => expect(e.fields).toStrictEqual(AMBIGUOUS));
      }
    }
  });

  it('a parent that names no existing location → fk_not_found naming the form sent', () => {
    given([created(5, 'A', 1)])
      .when(update({ parent: byKey('GONE', null) }))
      .thenThrows(Invalid, (e) =>
        expect(e.fields).toStrictEqual([{ field: 'parent_external_key', code: 'fk_not_found', message: 'parent_external_key "GONE" does not reference a live location' }]),
      );
    given([created(5, 'A', 1)])
      .when(update({ parent: byId(9, null) }))
      .thenThrows(Invalid, (e) =>
        expect(e.fields).toStrictEqual([{ field: 'parent_id', code: 'fk_not_found', message: 'parent_id 9 does not reference a live location' }]),
      );
  });

  it('in random trees, a move is refused exactly when the new parent is the location or one of its descendants', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const random = seeded(seed);
      const size = 3 + Math.floor(random() * 6);
      const parentOf = new Map<number, number | null>();
      for (let id = 1; id <= size; id++) parentOf.set(id, id === 1 || random() < 0.2 ? null : 1 + Math.floor(random() * (id - 1)));
      const ancestors = (id: number): number[] => {
        const parent = parentOf.get(id)!;
        return parent === null ? [] : [...ancestors(parent), parent];
      };
      for (let id = 1; id <= size; id++) {
        const history = [{ ...created(id, `K${id}`, parentOf.get(id)!), data: { ...created(id, `K${id}`, parentOf.get(id)!).data, at: T0 } }];
        for (let target = 1; target <= size; target++) {
          const lookup = random() < 0.5 ? byId(target, { id: target, ancestors: ancestors(target) }) : byKey(`K${target}`, { id: target, ancestors: ancestors(target) });
          const command = update({ parent: lookup });
          if (target === parentOf.get(id)) {
            expect(decideAfter(history, command)).toStrictEqual([]);
          } else if (target === id || ancestors(target).includes(id)) {
            given(history)
              .when(command)
              .thenThrows(Conflict, (e) =>
                expect(e.message).toBe(`Re-parenting under location ${target} would make location K${id} (id ${id}) its own ancestor`),
              );
          } else {
            expect(decideAfter(history, command)).toStrictEqual([
              { type: 'LocationMoved', data: { org_id: 1, location_id: id, parent_id: target, previous_parent_id: parentOf.get(id)!, at: T1 } },
            ]);
          }
        }
      }
    }
  });

  it('every field error at once, in view order (read_only, the parent unless a read-only field differs, valid_from null, the window); a cycle only without them (every combination)', () => {
    // Field faults, in view order of their fields: id, parent_id, valid_from, valid_to.
    const fieldFaults: { apply(c: UpdateLocation): UpdateLocation; entry: string }[] = [
      { apply: (c) => ({ ...c, sent: { id: 6 } }), entry: 'id:read_only' },
      { apply: (c) => ({ ...c, parent: byId(9, null) }), entry: 'parent_id:fk_not_found' },
      { apply: (c) => ({ ...c, changes: { ...c.changes, validFrom: null } }), entry: 'valid_from:invalid_value' },
      { apply: (c) => ({ ...c, changes: { ...c.changes, validTo: new Date(T0) } }), entry: 'valid_to:invalid_value' },
    ];
    const cycle = (c: UpdateLocation): UpdateLocation => ({ ...c, parent: c.parent ?? byId(8, { id: 8, ancestors: [5] }) });
    const history = [withData({ valid_from: T1, parent_id: 1 })];
    for (let mask = 1; mask < 1 << (fieldFaults.length + 1); mask++) {
      const present = fieldFaults.filter((_, i) => mask & (1 << i));
      let command = present.reduce((c, f) => f.apply(c), update({}));
      if (mask & (1 << fieldFaults.length)) command = cycle(command);
      let thrown: unknown = null;
      try {
        decideAfter(history, command);
      } catch (error) {
        thrown = error;
      }
      if (present.length === 0) {
        expect(thrown, `faults ${mask}`).toBeInstanceOf(Conflict);
        continue;
      }
      expect(thrown, `faults ${mask}`).toBeInstanceOf(Invalid);
      // The parent is checked after the accept-if-matches step: not when a read-only field differs.
      const expected = present.map((f) => f.entry).filter((entry, _, all) => entry !== 'parent_id:fk_not_found' || !all.includes('id:read_only'));
      expect((thrown as DomainRefusal).fields.map((f) => `${f.field}:${f.code}`), `faults ${mask}`).toEqual(expected);
    }
  });
});

describe('locationPatchStateErrors (a raw body the schema refused)', () => {
  it('only for an existing location: read-only fields that differ, in the body, and valid_from null only over a set one', () => {
    const existing = fold(locationDecider, [withData({ valid_from: T1 })]);
    expect(locationPatchStateErrors({ id: 6, name: '', valid_from: null, external_key: 'B' }, existing, T1).map((f) => `${f.field}:${f.code}: ${f.message}`)).toStrictEqual([
      'id:read_only: id is server-managed; submit the current value or omit it (use DELETE to soft-delete)',
      'external_key:read_only: external_key cannot be changed through PATCH; use POST /locations/{id}/rename',
      'valid_from:invalid_value: valid_from must not be null',
    ]);
    expect(locationPatchStateErrors({ id: 5, valid_from: T0 }, existing, T1)).toStrictEqual([]);
    expect(locationPatchStateErrors({ valid_from: null }, fold(locationDecider, [created(5, 'A')]), T1)).toStrictEqual([]);
    const deleted = fold(locationDecider, [created(5, 'A'), { type: 'LocationDeleted', data: { org_id: 1, location_id: 5, external_key: 'A', at: T1 } }]);
    expect(locationPatchStateErrors({ id: 6, valid_from: null }, deleted, T1)).toStrictEqual([]);
    expect(locationPatchStateErrors({ id: 6 }, locationDecider.initialState, T1)).toStrictEqual([]);
  });
});

describe('UpdateLocation: read-only fields (docs/api.md "Changing a record: PATCH")', () => {
  const history: LocationStreamEvent[] = [created(5, 'A'), tagOn5(3), tagOn5(4, { is_active: false }), tagOn5(6, { valid_to: T1 }), tagOn5(7, { valid_from: T2 })];
  const current = {
    id: 5,
    external_key: 'A',
    created_at: T0,
    updated_at: T0,
    deleted_at: null,
    tags: [{ id: 3, tag_type: 'ble', value: 'v3', is_active: true, valid_from: null, valid_to: null, created_at: T0 }],
  };
  const differing = { id: 6, external_key: 'B', created_at: T1, updated_at: T1, deleted_at: T1, tags: [] };
  const messages: Record<string, string> = {
    id: 'id is server-managed; submit the current value or omit it (use DELETE to soft-delete)',
    external_key: 'external_key cannot be changed through PATCH; use POST /locations/{id}/rename',
    created_at: 'created_at is server-managed; submit the current value or omit it (use DELETE to soft-delete)',
    updated_at: 'updated_at is server-managed; submit the current value or omit it (use DELETE to soft-delete)',
    deleted_at: 'deleted_at is server-managed; submit the current value or omit it (use DELETE to soft-delete)',
    tags: 'tags cannot be changed through PATCH; use the /locations/{id}/tags sub-resource endpoints',
  };

  it('the current values are accepted: only active tags effective at the time of the command are in view', () => {
    expect(decideAfter(history, update({ sent: current, changes: { name: 'B' } }))).toStrictEqual([updatedEvent({ name: 'B' })]);
  });

  it('each differing field → read_only naming its write path, in view order, whatever the body order', () => {
    const fields = Object.keys(differing);
    for (let seed = 1; seed <= 30; seed++) {
      const sent = shuffled(fields, seed).slice(0, 1 + (seed % fields.length));
      const body = Object.fromEntries(sent.map((f) => [f, differing[f as keyof typeof differing]]));
      given(history)
        .when(update({ sent: body, changes: { name: 'B' } }))
        .thenThrows(Invalid, (e) =>
          expect(e.fields).toStrictEqual(fields.filter((f) => sent.includes(f)).map((f) => ({ field: f, code: 'read_only', message: messages[f] }))),
        );
    }
  });
});

describe('RenameLocation and DeleteLocation, exactly', () => {
  it('a taken key → 409 naming it; a location that does not exist → 404', () => {
    given([created(5, 'A')])
      .when({ type: 'RenameLocation', externalKey: 'B', keyTaken: true, at: T1 })
      .thenThrows(Conflict, (e) => expect(e.message).toBe('external_key "B" is already used by another location'));
    given([]).when({ type: 'RenameLocation', externalKey: 'B', keyTaken: false, at: T1 }).thenThrows(NotFound, (e) => expect(e.message).toBe('Location not found'));
    given([]).when({ type: 'DeleteLocation', existingDescendants: 0, existingAssets: 0, at: T1 }).thenThrows(NotFound, (e) => expect(e.message).toBe('Location not found'));
  });

  it('dependents block the delete with the contract details, descendants first (409 conflict)', () => {
    for (const [descendants, assets, detail] of [
      [1, 0, 'location has descendant locations; reassign or remove them before deleting (cascade is not supported)'],
      [3, 5, 'location has descendant locations; reassign or remove them before deleting (cascade is not supported)'],
      [0, 1, 'location has assets placed at it; move or remove them before deleting (cascade is not supported)'],
    ] as const) {
      given([created(5, 'A')])
        .when({ type: 'DeleteLocation', existingDescendants: descendants, existingAssets: assets, at: T1 })
        .thenThrows(Conflict, (e) => {
          expect(e.message).toBe(detail);
          // The contract's status, through the one mapper of refusals to the wire.
          expect((apiErrorOf(e) as ApiError).status).toBe(409);
        });
    }
  });

  it('delete retires exactly the existing tags, in attach order, then deletes with the current key, in many orders', () => {
    const ids = [21, 22, 23, 24, 25, 26];
    const renamed: LocationEvent = { type: 'LocationRenamed', data: { org_id: 1, location_id: 5, external_key: 'Z', previous_external_key: 'A', at: T0 } };
    for (let seed = 1; seed <= 30; seed++) {
      const attachOrder = shuffled(ids, seed);
      const gone = shuffled(ids, seed + 1000).slice(0, seed % 4);
      const history = [created(5, 'A'), renamed, ...attachOrder.map((id) => tagOn5(id)), ...gone.map(untag5)];
      expect(decideAfter(history, { type: 'DeleteLocation', existingDescendants: 0, existingAssets: 0, at: T2 })).toStrictEqual([
        ...attachOrder
          .filter((id) => !gone.includes(id))
          .map((id) => ({
            type: 'TagDetached',
            data: { org_id: 1, owner_type: 'location', owner_id: 5, tag_id: id, tag_type: 'ble', value: `v${id}`, reason: 'owner_deleted', at: T2 },
          })),
        { type: 'LocationDeleted', data: { org_id: 1, location_id: 5, external_key: 'Z', at: T2 } },
      ]);
    }
  });
});

describe('RestoreLocation (docs/api.md, "Restoring")', () => {
  const T2 = '2026-01-03T00:00:00.000Z';
  const deleted = (id: number, key: string): LocationEvent => ({ type: 'LocationDeleted', data: { org_id: 1, location_id: id, external_key: key, at: T1 } });
  const restore = (over: { parentExists?: boolean; keyTaken?: boolean; parentExternalKey?: string | null } = {}) => ({
    type: 'RestoreLocation' as const,
    parentExists: over.parentExists ?? true,
    parentExternalKey: over.parentExternalKey ?? null,
    keyTaken: over.keyTaken ?? false,
    at: T2,
  });

  it('a deleted location under an existing parent, its key free → LocationRestored under that parent; existing again, no tags', () => {
    const events = [created(6, 'B', 5), tagAttached, deleted(6, 'B')];
    given(events).when(restore()).then([{ type: 'LocationRestored', data: { org_id: 1, location_id: 6, external_key: 'B', parent_id: 5, at: T2 } }]);
    const after = fold(locationDecider, [...events, ...locationDecider.decide(restore(), fold(locationDecider, events))]);
    expect(after).toMatchObject({ status: 'existing', deletedAt: null, updatedAt: T2, parentId: 5 });
  });

  it('a deleted parent → 409 naming it (restore the parent first), checked before the key; a taken key → 409 naming the key', () => {
    given([created(6, 'B', 5), deleted(6, 'B')])
      .when(restore({ parentExists: false, keyTaken: true, parentExternalKey: 'A' }))
      .thenThrows(Conflict, (e) => expect(e.message).toBe('parent location "A" (id 5) is deleted; restore the parent first'));
    given([created(6, 'B', 5), deleted(6, 'B')])
      .when(restore({ parentExists: false }))
      .thenThrows(Conflict, (e) => expect(e.message).toBe('parent location (id 5) is deleted; restore the parent first'));
    given([created(6, 'B', 5), deleted(6, 'B')])
      .when(restore({ keyTaken: true }))
      .thenThrows(Conflict, (e) => expect(e.message).toBe('external_key "B" is already used by another location'));
    // A root has no parent to check.
    given([created(5, 'A'), deleted(5, 'A')]).when(restore({ parentExists: false })).then([{ type: 'LocationRestored', data: { org_id: 1, location_id: 5, external_key: 'A', parent_id: null, at: T2 } }]);
  });

  it('an existing location → nothing (idempotent); none → 404', () => {
    given([created(5, 'A')]).when(restore({ keyTaken: true, parentExists: false })).then([]);
    given([]).when(restore()).thenThrows(NotFound, (e) => expect(e.message).toBe('Location not found'));
  });
});
