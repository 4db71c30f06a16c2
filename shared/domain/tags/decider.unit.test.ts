import { describe, expect, it } from 'vitest';
import { specFor } from '../../../test/support/decider.js';
import { ConflictError, NotFoundError } from '../../errors.js';
import { tagDecider, tagReservationValue, type TagOwnerEvent } from './decider.js';

const given = specFor(tagDecider);
const owner = { orgId: 1, ownerType: 'location' as const, ownerId: 5 };
const at = '2026-01-01T00:00:00.000Z';

const locationCreated: TagOwnerEvent = {
  type: 'LocationCreated',
  data: { org_id: 1, location_id: 5, external_key: 'L5', name: 'L5', description: null, parent_id: null, is_active: true, valid_from: null, valid_to: null, at },
};
const attached: TagOwnerEvent = {
  type: 'TagAttached',
  data: { org_id: 1, owner_type: 'location', owner_id: 5, tag_id: 3, tag_type: 'ble', value: 'b1', is_active: true, valid_from: null, valid_to: null, at },
};
const detached: TagOwnerEvent = {
  type: 'TagDetached',
  data: { org_id: 1, owner_type: 'location', owner_id: 5, tag_id: 3, tag_type: 'ble', value: 'b1', reason: 'detached', at },
};
const ble = { tag_type: 'ble', value: 'b1', is_active: true, valid_from: null, valid_to: null };

describe('tag decider', () => {
  it('rfid reservation values are case-insensitive; other types keep their case', () => {
    expect(tagReservationValue('rfid', 'e280ab')).toBe(tagReservationValue('rfid', 'E280AB'));
    expect(tagReservationValue('barcode', 'ab')).not.toBe(tagReservationValue('barcode', 'AB'));
    expect(tagReservationValue('rfid', 'X')).not.toBe(tagReservationValue('ble', 'X'));
  });

  it('given a live owner, when a free value is attached, then TagAttached with the id the handler drew', () => {
    given([locationCreated]).when({ type: 'AttachTag', owner, tag: { tagId: 3, input: ble, heldBy: null }, at }).then([attached]);
  });

  it('a value held elsewhere in the org → 409 naming where it is attached', () => {
    given([locationCreated])
      .when({ type: 'AttachTag', owner, tag: { tagId: 3, input: ble, heldBy: { ownerType: 'asset', ownerId: 12, externalKey: 'ASSET-0012' } }, at })
      .thenThrows(ConflictError, (e) => expect(e.detail).toBe('Tag (ble, "b1") is already attached to asset 12 (ASSET-0012)'));
  });

  it('given an attached tag, when detached, then TagDetached and the tag leaves the state', () => {
    expect(tagDecider.evolve(tagDecider.initialState, attached).tags).toEqual([
      { id: 3, tag_type: 'ble', value: 'b1', is_active: true, valid_from: null, valid_to: null, created_at: at },
    ]);
    given([locationCreated, attached]).when({ type: 'DetachTag', owner, tagId: 3, at }).then([detached]);
    given([locationCreated, attached, detached]).when({ type: 'DetachTag', owner, tagId: 3, at }).thenThrows(NotFoundError);
  });

  it('detaching a tag the owner does not hold → not found', () => {
    given([locationCreated]).when({ type: 'DetachTag', owner, tagId: 3, at }).thenThrows(NotFoundError);
  });

  it('a missing or deleted owner → not found, naming it', () => {
    given([]).when({ type: 'DetachTag', owner, tagId: 3, at }).thenThrows(NotFoundError, (e) => expect(e.detail).toBe('Location 5 not found'));
    const deleted: TagOwnerEvent = { type: 'LocationDeleted', data: { org_id: 1, location_id: 5, external_key: 'L5', at } };
    given([locationCreated, deleted]).when({ type: 'AttachTag', owner, tag: { tagId: 4, input: ble, heldBy: null }, at }).thenThrows(NotFoundError);
  });
});
