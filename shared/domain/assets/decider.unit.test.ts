import { describe, expect, it } from 'vitest';
import { Conflict, Invalid, NotFound } from '../../../test/support/refusals.js';
import { specFor } from '../../../test/support/decider.js';
import { embeddedTagViews } from '../tags/decider.js';
import { fold } from '../decider.js';
import type { TagAttachedData } from '../tags/events.js';
import { assetDecider, patchStateErrors, type AssetCommand, type AssetPatch, type AssetStreamEvent, type CreateAsset, type UpdateAsset } from './decider.js';
import type { AssetChanges } from './events.js';
import { shuffled } from '../../random.js';

/** given(events).when(command).then(events | error), with no I/O. */

const given = specFor(assetDecider);
const T0 = '2026-01-01T00:00:00.000Z';
const T1 = '2026-01-02T00:00:00.000Z';

const rfid = { tag_type: 'rfid', value: 'E280', is_active: true, valid_from: null, valid_to: null };

const create: CreateAsset = {
  type: 'CreateAsset',
  orgId: 7,
  assetId: 42,
  externalKey: 'ASSET-0001',
  minted: true,
  keyTaken: false,
  name: 'Forklift',
  description: null,
  isActive: true,
  validFrom: null,
  validTo: null,
  metadata: { colour: 'red' },
  tags: [{ tagId: 9, input: rfid, heldBy: null }],
  at: T0,
};

const created: AssetStreamEvent[] = [
  {
    type: 'AssetCreated',
    data: {
      org_id: 7,
      asset_id: 42,
      external_key: 'ASSET-0001',
      minted: true,
      name: 'Forklift',
      description: null,
      is_active: true,
      valid_from: null,
      valid_to: null,
      metadata: { colour: 'red' },
      at: T0,
    },
  },
  {
    type: 'TagAttached',
    data: { org_id: 7, owner_type: 'asset', owner_id: 42, tag_id: 9, tag_type: 'rfid', value: 'E280', is_active: true, valid_from: null, valid_to: null, at: T0 },
  },
];

const update = (patch: AssetPatch): UpdateAsset => ({ type: 'UpdateAsset', assetId: 42, patch, currentLocation: { id: null, external_key: null }, at: T1 });

describe('asset decider', () => {
  it('create → AssetCreated then one TagAttached per embedded tag', () => {
    given([]).when(create).then(created);
    const state = fold(assetDecider, created);
    expect(state).toMatchObject({ status: 'existing', id: 42, externalKey: 'ASSET-0001', createdAt: T0, updatedAt: T0, deletedAt: null });
    expect(state.status !== 'absent' && state.tags.map((t) => t.id)).toEqual([9]);
  });

  it('create: a key another asset holds → 409; a tag value twice in the body, or held elsewhere → 409', () => {
    given([])
      .when({ ...create, minted: false, externalKey: 'TAKEN', keyTaken: true })
      .thenThrows(Conflict, (e) => expect(e.message).toBe('external_key "TAKEN" is already in use by another asset'));
    given([])
      .when({ ...create, tags: [create.tags[0]!, { tagId: 10, input: { ...rfid, value: 'e280' }, heldBy: null }] })
      .thenThrows(Conflict, (e) => expect(e.message).toBe('Tag (rfid, "e280") appears more than once in the request'));
    given([])
      .when({ ...create, tags: [{ tagId: 9, input: rfid, heldBy: { ownerType: 'location', ownerId: 3, externalKey: null } }] })
      .thenThrows(Conflict, (e) => expect(e.message).toBe('Tag (rfid, "E280") is already attached to location 3'));
  });

  it('update with equal values (a verbatim view) → no events', () => {
    const state = fold(assetDecider, created);
    if (state.status === 'absent') throw new Error('not created');
    const view = {
      id: state.id,
      external_key: state.externalKey,
      name: state.name,
      description: state.description,
      location_id: null,
      location_external_key: null,
      is_active: state.isActive,
      valid_from: null,
      valid_to: null,
      metadata: state.metadata,
      created_at: state.createdAt,
      updated_at: state.updatedAt,
      deleted_at: state.deletedAt,
      tags: embeddedTagViews(state.tags, new Date(T1)),
    } as unknown as AssetPatch;
    given(created).when(update(view)).then([]);
  });

  it('update with a change → AssetUpdated carrying only the changed fields; state advances updated_at', () => {
    const updated: AssetStreamEvent = { type: 'AssetUpdated', data: { org_id: 7, asset_id: 42, changes: { name: 'Reach truck' }, at: T1 } };
    given(created).when(update({ name: 'Reach truck', description: null, metadata: { colour: 'red' } })).then([updated]);
    expect(fold(assetDecider, [...created, updated])).toMatchObject({ updatedAt: T1 });
  });

  it('update: differing read-only fields → read_only errors in view order; null valid_from when set → invalid_value', () => {
    const withFrom: AssetStreamEvent = { type: 'AssetUpdated', data: { org_id: 7, asset_id: 42, changes: { valid_from: T0 }, at: T0 } };
    given([...created, withFrom])
      .when(update({ tags: [], id: 1, valid_from: null, external_key: 'X' }))
      .thenThrows(Invalid, (e) =>
        expect(e.fields.map((f) => [f.field, f.code])).toEqual([
          ['id', 'read_only'],
          ['external_key', 'read_only'],
          ['valid_from', 'invalid_value'],
          ['tags', 'read_only'],
        ]),
      );
  });

  it('update: valid_to not after valid_from → invalid_value on valid_to', () => {
    given(created).when(update({ valid_from: new Date(T1), valid_to: new Date(T0) })).thenThrows(Invalid);
  });

  it('rename to the same key → no events; to another → AssetRenamed with the previous key; to a taken one → 409', () => {
    given(created).when({ type: 'RenameAsset', assetId: 42, externalKey: 'ASSET-0001', keyTaken: true, at: T1 }).then([]);
    given(created)
      .when({ type: 'RenameAsset', assetId: 42, externalKey: 'NEW', keyTaken: false, at: T1 })
      .then([{ type: 'AssetRenamed', data: { org_id: 7, asset_id: 42, external_key: 'NEW', previous_external_key: 'ASSET-0001', at: T1 } }]);
    given(created).when({ type: 'RenameAsset', assetId: 42, externalKey: 'NEW', keyTaken: true, at: T1 }).thenThrows(Conflict);
  });

  it('delete → retires the existing tags, then AssetDeleted; any command on a deleted asset → not found', () => {
    const deletion: AssetStreamEvent[] = [
      { type: 'TagDetached', data: { org_id: 7, owner_type: 'asset', owner_id: 42, tag_id: 9, tag_type: 'rfid', value: 'E280', reason: 'owner_deleted', at: T1 } },
      { type: 'AssetDeleted', data: { org_id: 7, asset_id: 42, external_key: 'ASSET-0001', at: T1 } },
    ];
    given(created).when({ type: 'DeleteAsset', assetId: 42, at: T1 }).then(deletion);
    const deleted = [...created, ...deletion];
    expect(fold(assetDecider, deleted)).toMatchObject({ tags: [] });
    given(deleted).when({ type: 'DeleteAsset', assetId: 42, at: T1 }).thenThrows(NotFound);
    given(deleted).when({ type: 'RenameAsset', assetId: 42, externalKey: 'X', keyTaken: false, at: T1 }).thenThrows(NotFound);
    given(deleted).when(update({ name: 'x' })).thenThrows(NotFound);
    given([]).when(update({ name: 'x' })).thenThrows(NotFound);
  });
});

// ---- every rule of the decider, exactly -----------------------------------------------------

/** The events a command produces after `events`, compared strictly (an `undefined` key is a difference). */
const decideAfter = (events: readonly AssetStreamEvent[], command: AssetCommand) => assetDecider.decide(command, fold(assetDecider, events));

const T2 = '2026-01-03T00:00:00.000Z';
const assetCreated = created[0]!;
/** The asset as created, with its window (valid_from, valid_to) set as given. */
const createdWith = (data: Partial<Extract<AssetStreamEvent, { type: 'AssetCreated' }>['data']>): AssetStreamEvent[] => [
  { type: 'AssetCreated', data: { ...(assetCreated.data as Extract<AssetStreamEvent, { type: 'AssetCreated' }>['data']), ...data } },
];
const updated = (changes: AssetChanges, at = T1): AssetStreamEvent => ({ type: 'AssetUpdated', data: { org_id: 7, asset_id: 42, changes, at } });
const tagAttached = (tagId: number, extra: Partial<TagAttachedData> = {}): AssetStreamEvent => ({
  type: 'TagAttached',
  data: { org_id: 7, owner_type: 'asset', owner_id: 42, tag_id: tagId, tag_type: 'ble', value: `v${tagId}`, is_active: true, valid_from: null, valid_to: null, at: T0, ...extra },
});
const tagDetached = (tagId: number): AssetStreamEvent => ({
  type: 'TagDetached',
  data: { org_id: 7, owner_type: 'asset', owner_id: 42, tag_id: tagId, tag_type: 'ble', value: `v${tagId}`, reason: 'detached', at: T1 },
});
const noLocation = { id: null, external_key: null };

describe('asset evolve', () => {
  it('events of a stream without its creation leave it absent', () => {
    const orphans: AssetStreamEvent[] = [
      updated({ name: 'x' }),
      { type: 'AssetRenamed', data: { org_id: 7, asset_id: 42, external_key: 'B', previous_external_key: 'A', at: T1 } },
      { type: 'AssetDeleted', data: { org_id: 7, asset_id: 42, external_key: 'A', at: T1 } },
      tagAttached(1),
      tagDetached(1),
    ];
    for (const event of orphans) expect(fold(assetDecider, [event])).toStrictEqual({ status: 'absent' });
  });

  it('create, update, rename and delete fold into the record the view shows', () => {
    const existing = fold(assetDecider, created);
    expect(existing).toStrictEqual({
      status: 'existing',
      id: 42,
      orgId: 7,
      externalKey: 'ASSET-0001',
      name: 'Forklift',
      description: null,
      isActive: true,
      validFrom: null,
      validTo: null,
      metadata: { colour: 'red' },
      createdAt: T0,
      updatedAt: T0,
      deletedAt: null,
      tags: [{ id: 9, tagType: 'rfid', value: 'E280', isActive: true, validFrom: null, validTo: null, createdAt: T0 }],
    });
    const later = fold(assetDecider, [
      ...created,
      updated({ description: 'd', valid_to: T2 }, T1),
      { type: 'AssetRenamed', data: { org_id: 7, asset_id: 42, external_key: 'B', previous_external_key: 'ASSET-0001', at: T2 } },
    ]);
    expect(later).toStrictEqual({ ...existing, description: 'd', validTo: T2, externalKey: 'B', updatedAt: T2 });
    const deleted = fold(assetDecider, [...created, { type: 'AssetDeleted', data: { org_id: 7, asset_id: 42, external_key: 'ASSET-0001', at: T2 } }]);
    expect(deleted).toStrictEqual({ ...existing, status: 'deleted', deletedAt: T2, updatedAt: T2 });
  });

  it('existing tags stay in attach order whatever is detached, in many orders', () => {
    const ids = [1, 2, 3, 4, 5, 6, 7, 8];
    for (let seed = 1; seed <= 50; seed++) {
      const detachedIds = shuffled(ids, seed).slice(0, seed % ids.length);
      const events = [...createdWith({}), ...ids.map((id) => tagAttached(id)), ...detachedIds.map(tagDetached)];
      const state = fold(assetDecider, events);
      expect(state.status !== 'absent' && state.tags.map((t) => t.id)).toEqual(ids.filter((id) => !detachedIds.includes(id)));
    }
  });
});

describe('CreateAsset, exactly', () => {
  it('a stream that already has the asset (existing or deleted) → 409 naming it', () => {
    const deleted: AssetStreamEvent = { type: 'AssetDeleted', data: { org_id: 7, asset_id: 42, external_key: 'ASSET-0001', at: T1 } };
    for (const history of [created, [...created, deleted]]) {
      given(history)
        .when(create)
        .thenThrows(Conflict, (e) => expect(e.message).toBe('Asset 42 already exists'));
    }
  });

  it('carries every field of the command; the window as ISO timestamps; no tags → only AssetCreated', () => {
    const events = decideAfter([], {
      ...create,
      externalKey: 'MINE',
      minted: false,
      description: 'd',
      isActive: false,
      validFrom: new Date('2026-01-01T01:00:00+01:00'),
      validTo: new Date(T2),
      metadata: {},
      tags: [],
    });
    expect(events).toStrictEqual([
      {
        type: 'AssetCreated',
        data: {
          org_id: 7,
          asset_id: 42,
          external_key: 'MINE',
          minted: false,
          name: 'Forklift',
          description: 'd',
          is_active: false,
          valid_from: T0,
          valid_to: T2,
          metadata: {},
          at: T0,
        },
      },
    ]);
  });

  it('embedded tags are attached in the order of the request, in many orders', () => {
    const requests = [1, 2, 3, 4, 5, 6].map((id) => ({ tagId: id, input: { ...rfid, value: `E${id}` }, heldBy: null }));
    for (let seed = 1; seed <= 30; seed++) {
      const order = shuffled(requests, seed);
      const events = decideAfter([], { ...create, tags: order });
      expect(events.slice(1).map((e) => e.type === 'TagAttached' && e.data.tag_id)).toEqual(order.map((r) => r.tagId));
    }
  });
});

describe('UpdateAsset, field by field', () => {
  /** [what the stream holds, the patch, the changes it makes (null: none)] */
  const cases: [string, AssetStreamEvent[], AssetPatch, AssetChanges | null][] = [
    ['name changed', created, { name: 'Reach truck' }, { name: 'Reach truck' }],
    ['name equal', created, { name: 'Forklift' }, null],
    ['description set', created, { description: 'd' }, { description: 'd' }],
    ['description cleared', createdWith({ description: 'd' }), { description: null }, { description: null }],
    ['description equal', createdWith({ description: 'd' }), { description: 'd' }, null],
    ['is_active turned off', created, { is_active: false }, { is_active: false }],
    ['is_active equal', created, { is_active: true }, null],
    ['valid_from set', created, { valid_from: new Date(T1) }, { valid_from: T1 }],
    ['valid_from set to the epoch', created, { valid_from: new Date(0) }, { valid_from: '1970-01-01T00:00:00.000Z' }],
    ['valid_from moved', createdWith({ valid_from: T0 }), { valid_from: new Date(T1) }, { valid_from: T1 }],
    ['valid_from, same instant', createdWith({ valid_from: T0 }), { valid_from: new Date('2026-01-01T01:00:00+01:00') }, null],
    ['valid_from null while null', created, { valid_from: null }, null],
    ['valid_to set', created, { valid_to: new Date(T1) }, { valid_to: T1 }],
    ['valid_to set to the epoch', created, { valid_to: new Date(0) }, { valid_to: '1970-01-01T00:00:00.000Z' }],
    ['valid_to cleared', createdWith({ valid_to: T1 }), { valid_to: null }, { valid_to: null }],
    ['valid_to moved', createdWith({ valid_to: T1 }), { valid_to: new Date(T2) }, { valid_to: T2 }],
    ['valid_to, same instant', createdWith({ valid_to: T1 }), { valid_to: new Date('2026-01-01T19:00:00-05:00') }, null],
    ['valid_to null while null', created, { valid_to: null }, null],
    ['metadata replaced whole', created, { metadata: { size: 'L' } }, { metadata: { size: 'L' } }],
    ['metadata cleared', created, { metadata: {} }, { metadata: {} }],
    ['metadata equal', createdWith({ metadata: { a: 1, b: [1, 2] } }), { metadata: { b: [1, 2], a: 1 } }, null],
    ['empty body', created, {}, null],
  ];

  for (const [name, history, patch, changes] of cases) {
    it(`${name} → ${changes ? 'AssetUpdated with exactly that change' : 'no events'}`, () => {
      expect(decideAfter(history, update(patch))).toStrictEqual(changes ? [updated(changes)] : []);
    });
  }

  it('several changes → one AssetUpdated with each, whatever the body order', () => {
    const patch: AssetPatch = { name: 'N', description: 'D', is_active: false, valid_to: new Date(T2), metadata: { m: 1 } };
    for (let seed = 1; seed <= 20; seed++) {
      const body = Object.fromEntries(shuffled(Object.entries(patch), seed)) as AssetPatch;
      expect(decideAfter(created, update(body))).toStrictEqual([
        updated({ name: 'N', description: 'D', is_active: false, valid_to: T2, metadata: { m: 1 } }),
      ]);
    }
  });

  it('the window is checked on the merged values: valid_to later than valid_from, stored or sent', () => {
    const refused = (history: AssetStreamEvent[], patch: AssetPatch) =>
      given(history)
        .when(update(patch))
        .thenThrows(Invalid, (e) => {
          expect(e.fields).toStrictEqual([{ field: 'valid_to', code: 'invalid_value', message: 'valid_to must be later than valid_from' }]);
          expect(e.message).toBe('valid_to must be later than valid_from');
        });
    refused(createdWith({ valid_from: T1 }), { valid_to: new Date(T0) });
    refused(createdWith({ valid_from: T1 }), { valid_to: new Date(T1) });
    refused(createdWith({ valid_to: T1 }), { valid_from: new Date(T2) });
    refused(created, { valid_from: new Date(T1), valid_to: new Date(T0) });
    expect(decideAfter(createdWith({ valid_from: T0 }), update({ valid_to: new Date(T1) }))).toStrictEqual([updated({ valid_to: T1 })]);
    expect(decideAfter(createdWith({ valid_to: T2 }), update({ valid_from: new Date(T1) }))).toStrictEqual([updated({ valid_from: T1 })]);
    expect(decideAfter(createdWith({ valid_from: T1, valid_to: T2 }), update({ valid_to: null }))).toStrictEqual([updated({ valid_to: null })]);
  });

  it('an asset that does not exist → 404 naming it', () => {
    given([]).when(update({})).thenThrows(NotFound, (e) => expect(e.message).toBe('Asset 42 not found'));
  });
});

// States are folded inside the tests, never while the file is collected: a decider mutant that
// breaks a fold at collection time would fail the file without failing a test, and Stryker counts
// that as a survivor.
describe('UpdateAsset: read-only fields (docs/api.md "Changing a record: PATCH")', () => {
  const here = { id: 3, external_key: 'DOCK-3' };
  /** The read-only fields of the view as they are at T1 (inactive and future tags are not shown). */
  const current = {
    id: 42,
    external_key: 'ASSET-0001',
    location_id: 3,
    location_external_key: 'DOCK-3',
    created_at: T0,
    updated_at: T0,
    deleted_at: null,
    tags: [{ id: 9, tag_type: 'rfid', value: 'E280', is_active: true, valid_from: null, valid_to: null, created_at: T0 }],
  };
  const differing = {
    id: 43,
    external_key: 'OTHER',
    location_id: 4,
    location_external_key: 'DOCK-4',
    created_at: T1,
    updated_at: T1,
    deleted_at: T1,
    tags: [],
  };
  const messages: Record<string, string> = {
    id: 'id is server-managed; submit the current value or omit it (use DELETE to soft-delete)',
    external_key: 'external_key cannot be changed through PATCH; use POST /assets/{id}/rename',
    location_id:
      'location_id is collected through scan-event ingestion (fixed-reader pipeline or handheld UI submission) and is not directly settable',
    location_external_key:
      'location_external_key is collected through scan-event ingestion (fixed-reader pipeline or handheld UI submission) and is not directly settable',
    created_at: 'created_at is server-managed; submit the current value or omit it (use DELETE to soft-delete)',
    updated_at: 'updated_at is server-managed; submit the current value or omit it (use DELETE to soft-delete)',
    deleted_at: 'deleted_at is server-managed; submit the current value or omit it (use DELETE to soft-delete)',
    tags: 'tags cannot be changed through PATCH; use the /assets/{id}/tags sub-resource endpoints',
  };
  const history = [...created, tagAttached(11, { is_active: false }), tagAttached(12, { valid_from: T2 })];
  const withLocation = (patch: AssetPatch): UpdateAsset => ({ ...update(patch), currentLocation: here });

  it('the current values are accepted (timestamps by instant; only active, effective tags in view)', () => {
    expect(decideAfter(history, withLocation({ ...current, created_at: '2026-01-01T01:00:00+01:00' }))).toStrictEqual([]);
    expect(patchStateErrors(current, fold(assetDecider, history), here, T1)).toStrictEqual([]);
  });

  it('each differing field → read_only naming its write path, in view order, whatever the body order', () => {
    const fields = Object.keys(differing);
    for (let seed = 1; seed <= 30; seed++) {
      const sent = shuffled(fields, seed).slice(0, 1 + (seed % fields.length));
      const body = Object.fromEntries(sent.map((f) => [f, differing[f as keyof typeof differing]]));
      given(history)
        .when(withLocation({ ...body, name: 'changed too' }))
        .thenThrows(Invalid, (e) =>
          expect(e.fields).toStrictEqual(fields.filter((f) => sent.includes(f)).map((f) => ({ field: f, code: 'read_only', message: messages[f] }))),
        );
    }
  });

  it('with the other field errors, in view order: valid_from null when set, then the window on valid_to', () => {
    given(createdWith({ valid_from: T1 }))
      .when(update({ tags: [{ id: 9 }], valid_to: new Date(T0), valid_from: null, id: 1 }))
      .thenThrows(Invalid, (e) => {
        expect(e.fields).toStrictEqual([
          { field: 'id', code: 'read_only', message: messages.id },
          { field: 'valid_from', code: 'invalid_value', message: 'valid_from must not be null' },
          { field: 'valid_to', code: 'invalid_value', message: 'valid_to must be later than valid_from' },
          { field: 'tags', code: 'read_only', message: messages.tags },
        ]);
        expect(e.message).toBe(`${messages.id} (and 3 more validation errors)`);
      });
  });

  it('patchStateErrors (a raw body the schema refused): only for an existing asset; valid_from null only refused when set', () => {
    const deleted = fold(assetDecider, [...created, { type: 'AssetDeleted', data: { org_id: 7, asset_id: 42, external_key: 'ASSET-0001', at: T1 } }]);
    expect(patchStateErrors(differing, deleted, noLocation, T1)).toStrictEqual([]);
    expect(patchStateErrors(differing, assetDecider.initialState, noLocation, T1)).toStrictEqual([]);
    const withFrom = fold(assetDecider, createdWith({ valid_from: T0 }));
    expect(patchStateErrors({ valid_from: null }, withFrom, noLocation, T1)).toStrictEqual([
      { field: 'valid_from', code: 'invalid_value', message: 'valid_from must not be null' },
    ]);
    expect(patchStateErrors({}, withFrom, noLocation, T1)).toStrictEqual([]);
    expect(patchStateErrors({ valid_from: T0 }, withFrom, noLocation, T1)).toStrictEqual([]);
    expect(patchStateErrors({ valid_from: null }, fold(assetDecider, created), noLocation, T1)).toStrictEqual([]);
  });
});

describe('RenameAsset and DeleteAsset, exactly', () => {
  it('a taken key → 409 naming it; an asset that does not exist → 404 naming it', () => {
    given(created)
      .when({ type: 'RenameAsset', assetId: 42, externalKey: 'NEW', keyTaken: true, at: T1 })
      .thenThrows(Conflict, (e) => expect(e.message).toBe('external_key "NEW" is already in use by another asset'));
    given([])
      .when({ type: 'RenameAsset', assetId: 42, externalKey: 'NEW', keyTaken: false, at: T1 })
      .thenThrows(NotFound, (e) => expect(e.message).toBe('Asset 42 not found'));
    given([])
      .when({ type: 'DeleteAsset', assetId: 42, at: T1 })
      .thenThrows(NotFound, (e) => expect(e.message).toBe('Asset 42 not found'));
  });

  it('a rename after a rename names the key it replaces', () => {
    const renamed: AssetStreamEvent = { type: 'AssetRenamed', data: { org_id: 7, asset_id: 42, external_key: 'B', previous_external_key: 'ASSET-0001', at: T1 } };
    expect(decideAfter([...created, renamed], { type: 'RenameAsset', assetId: 42, externalKey: 'C', keyTaken: false, at: T2 })).toStrictEqual([
      { type: 'AssetRenamed', data: { org_id: 7, asset_id: 42, external_key: 'C', previous_external_key: 'B', at: T2 } },
    ]);
    expect(decideAfter([...created, renamed], { type: 'RenameAsset', assetId: 42, externalKey: 'B', keyTaken: true, at: T2 })).toStrictEqual([]);
  });

  it('delete retires exactly the existing tags, in attach order, then deletes (with the current key), in many orders', () => {
    const ids = [21, 22, 23, 24, 25, 26];
    for (let seed = 1; seed <= 30; seed++) {
      const attachOrder = shuffled(ids, seed);
      const gone = shuffled(ids, seed + 1000).slice(0, seed % 4);
      const history = [...createdWith({}), ...attachOrder.map((id) => tagAttached(id)), ...gone.map(tagDetached)];
      expect(decideAfter(history, { type: 'DeleteAsset', assetId: 42, at: T2 })).toStrictEqual([
        ...attachOrder
          .filter((id) => !gone.includes(id))
          .map((id) => ({
            type: 'TagDetached',
            data: { org_id: 7, owner_type: 'asset', owner_id: 42, tag_id: id, tag_type: 'ble', value: `v${id}`, reason: 'owner_deleted', at: T2 },
          })),
        { type: 'AssetDeleted', data: { org_id: 7, asset_id: 42, external_key: 'ASSET-0001', at: T2 } },
      ]);
    }
  });
});

describe('RestoreAsset (docs/api.md, "Restoring")', () => {
  // Created with a tag, deleted (the tag retired with it).
  const deletedAsset: AssetStreamEvent[] = [...created, ...decideAfter(created, { type: 'DeleteAsset', assetId: 42, at: T1 })];
  const restore = (keyTaken = false): AssetCommand => ({ type: 'RestoreAsset', assetId: 42, keyTaken, at: T2 });

  it('a deleted asset with its key free → AssetRestored with that key; existing again, no tags, updated at the restore', () => {
    given(deletedAsset).when(restore()).then([{ type: 'AssetRestored', data: { org_id: 7, asset_id: 42, external_key: 'ASSET-0001', at: T2 } }]);
    const state = fold(assetDecider, [...deletedAsset, ...decideAfter(deletedAsset, restore())]);
    expect(state).toMatchObject({ status: 'existing', deletedAt: null, updatedAt: T2, tags: [] });
  });

  it('an existing asset → nothing (idempotent); none → 404 naming it; a key taken since → 409 naming the key', () => {
    given(created).when(restore()).then([]);
    given(created).when(restore(true)).then([]);
    given([]).when(restore()).thenThrows(NotFound, (e) => expect(e.message).toBe('Asset 42 not found'));
    given(deletedAsset).when(restore(true)).thenThrows(Conflict, (e) => expect(e.message).toBe('external_key "ASSET-0001" is already in use by another asset'));
  });

  it('a restored asset is deleted, renamed and patched again like any existing one', () => {
    const restored = [...deletedAsset, ...decideAfter(deletedAsset, restore())];
    expect(decideAfter(restored, { type: 'DeleteAsset', assetId: 42, at: T2 })).toStrictEqual([{ type: 'AssetDeleted', data: { org_id: 7, asset_id: 42, external_key: 'ASSET-0001', at: T2 } }]);
    expect(decideAfter(restored, { type: 'RenameAsset', assetId: 42, externalKey: 'B', keyTaken: false, at: T2 })).toHaveLength(1);
  });
});
