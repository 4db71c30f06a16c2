import { describe, expect, it } from 'vitest';
import { specFor } from '../../../test/support/decider.js';
import { ConflictError, NotFoundError, ValidationFailed } from '../../errors.js';
import { fold } from '../decider.js';
import { assetDecider, type AssetPatch, type AssetStreamEvent, type CreateAsset, type UpdateAsset } from './decider.js';

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
    expect(state).toMatchObject({ status: 'live', id: 42, external_key: 'ASSET-0001', created_at: T0, updated_at: T0, deleted_at: null });
    expect(state.status !== 'absent' && state.tags.map((t) => t.id)).toEqual([9]);
  });

  it('create: a key another asset holds → 409; a tag value twice in the body, or held elsewhere → 409', () => {
    given([])
      .when({ ...create, minted: false, externalKey: 'TAKEN', keyTaken: true })
      .thenThrows(ConflictError, (e) => expect(e.detail).toBe('external_key "TAKEN" is already in use by another asset'));
    given([])
      .when({ ...create, tags: [create.tags[0]!, { tagId: 10, input: { ...rfid, value: 'e280' }, heldBy: null }] })
      .thenThrows(ConflictError, (e) => expect(e.detail).toBe('Tag (rfid, "e280") appears more than once in the request'));
    given([])
      .when({ ...create, tags: [{ tagId: 9, input: rfid, heldBy: { ownerType: 'location', ownerId: 3, externalKey: null } }] })
      .thenThrows(ConflictError, (e) => expect(e.detail).toBe('Tag (rfid, "E280") is already attached to location 3'));
  });

  it('update with equal values (a verbatim view) → no events', () => {
    const state = fold(assetDecider, created);
    const view = { ...state, location_id: null, location_external_key: null, valid_from: null, valid_to: null } as unknown as AssetPatch;
    given(created).when(update(view)).then([]);
  });

  it('update with a change → AssetUpdated carrying only the changed fields; state advances updated_at', () => {
    const updated: AssetStreamEvent = { type: 'AssetUpdated', data: { org_id: 7, asset_id: 42, changes: { name: 'Reach truck' }, at: T1 } };
    given(created).when(update({ name: 'Reach truck', description: null, metadata: { colour: 'red' } })).then([updated]);
    expect(fold(assetDecider, [...created, updated])).toMatchObject({ updated_at: T1 });
  });

  it('update: differing read-only fields → read_only errors in view order; null valid_from when set → invalid_value', () => {
    const withFrom: AssetStreamEvent = { type: 'AssetUpdated', data: { org_id: 7, asset_id: 42, changes: { valid_from: T0 }, at: T0 } };
    given([...created, withFrom])
      .when(update({ tags: [], id: 1, valid_from: null, external_key: 'X' }))
      .thenThrows(ValidationFailed, (e) =>
        expect(e.fields.map((f) => [f.field, f.code])).toEqual([
          ['id', 'read_only'],
          ['external_key', 'read_only'],
          ['valid_from', 'invalid_value'],
          ['tags', 'read_only'],
        ]),
      );
  });

  it('update: valid_to not after valid_from → invalid_value on valid_to', () => {
    given(created).when(update({ valid_from: new Date(T1), valid_to: new Date(T0) })).thenThrows(ValidationFailed);
  });

  it('rename to the same key → no events; to another → AssetRenamed with the previous key; to a taken one → 409', () => {
    given(created).when({ type: 'RenameAsset', assetId: 42, externalKey: 'ASSET-0001', keyTaken: true, at: T1 }).then([]);
    given(created)
      .when({ type: 'RenameAsset', assetId: 42, externalKey: 'NEW', keyTaken: false, at: T1 })
      .then([{ type: 'AssetRenamed', data: { org_id: 7, asset_id: 42, external_key: 'NEW', previous_external_key: 'ASSET-0001', at: T1 } }]);
    given(created).when({ type: 'RenameAsset', assetId: 42, externalKey: 'NEW', keyTaken: true, at: T1 }).thenThrows(ConflictError);
  });

  it('delete → retires the live tags, then AssetDeleted; any command on a deleted asset → not found', () => {
    const deletion: AssetStreamEvent[] = [
      { type: 'TagDetached', data: { org_id: 7, owner_type: 'asset', owner_id: 42, tag_id: 9, tag_type: 'rfid', value: 'E280', reason: 'owner_deleted', at: T1 } },
      { type: 'AssetDeleted', data: { org_id: 7, asset_id: 42, external_key: 'ASSET-0001', at: T1 } },
    ];
    given(created).when({ type: 'DeleteAsset', assetId: 42, at: T1 }).then(deletion);
    const deleted = [...created, ...deletion];
    expect(fold(assetDecider, deleted)).toMatchObject({ tags: [] });
    given(deleted).when({ type: 'DeleteAsset', assetId: 42, at: T1 }).thenThrows(NotFoundError);
    given(deleted).when({ type: 'RenameAsset', assetId: 42, externalKey: 'X', keyTaken: false, at: T1 }).thenThrows(NotFoundError);
    given(deleted).when(update({ name: 'x' })).thenThrows(NotFoundError);
    given([]).when(update({ name: 'x' })).thenThrows(NotFoundError);
  });
});
