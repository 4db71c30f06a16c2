import { describe, expect, it } from 'vitest';
import { Conflict, NotFound } from '../../../test/support/refusals.js';
import { specFor } from '../../../test/support/decider.js';
import { fold } from '../decider.js';
import {
  attachTags,
  embeddedTagViews,
  evolveTags,
  ownerNotFound,
  tagDecider,
  tagReservationValue,
  type TagHolder,
  type TagOwnerEvent,
  type TagState,
} from './decider.js';
import { shuffled } from '../../random.js';

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

  it('given an existing owner, when a free value is attached, then TagAttached with the id the handler drew', () => {
    given([locationCreated]).when({ type: 'AttachTag', owner, tag: { tagId: 3, input: ble, heldBy: null }, at }).then([attached]);
  });

  it('a value held elsewhere in the org → 409 naming where it is attached', () => {
    given([locationCreated])
      .when({ type: 'AttachTag', owner, tag: { tagId: 3, input: ble, heldBy: { ownerType: 'asset', ownerId: 12, externalKey: 'ASSET-0012' } }, at })
      .thenThrows(Conflict, (e) => expect(e.message).toBe('Tag (ble, "b1") is already attached to asset 12 (ASSET-0012)'));
  });

  it('given an attached tag, when detached, then TagDetached and the tag leaves the state', () => {
    expect(tagDecider.evolve(tagDecider.initialState, attached).tags).toEqual([
      { id: 3, tagType: 'ble', value: 'b1', isActive: true, validFrom: null, validTo: null, createdAt: at },
    ]);
    given([locationCreated, attached]).when({ type: 'DetachTag', owner, tagId: 3, at }).then([detached]);
    given([locationCreated, attached, detached]).when({ type: 'DetachTag', owner, tagId: 3, at }).thenThrows(NotFound);
  });

  it('detaching a tag the owner does not hold → not found', () => {
    given([locationCreated]).when({ type: 'DetachTag', owner, tagId: 3, at }).thenThrows(NotFound);
  });

  it('a missing or deleted owner → not found, naming it', () => {
    given([]).when({ type: 'DetachTag', owner, tagId: 3, at }).thenThrows(NotFound, (e) => expect(e.message).toBe('Location 5 not found'));
    const deleted: TagOwnerEvent = { type: 'LocationDeleted', data: { org_id: 1, location_id: 5, external_key: 'L5', at } };
    given([locationCreated, deleted]).when({ type: 'AttachTag', owner, tag: { tagId: 4, input: ble, heldBy: null }, at }).thenThrows(NotFound);
  });
});

// ---- every rule of the decider, exactly -----------------------------------------------------

const T1 = '2026-01-02T00:00:00.000Z';
const T2 = '2026-01-03T00:00:00.000Z';
const assetOwner = { orgId: 1, ownerType: 'asset' as const, ownerId: 12 };
const assetCreated: TagOwnerEvent = {
  type: 'AssetCreated',
  data: {
    org_id: 1,
    asset_id: 12,
    external_key: 'A12',
    minted: false,
    name: 'a',
    description: null,
    is_active: true,
    valid_from: null,
    valid_to: null,
    metadata: {},
    at,
  },
};
const attach = (tagId: number, extra: Partial<TagState> = {}): TagOwnerEvent => ({
  type: 'TagAttached',
  data: { org_id: 1, owner_type: 'asset', owner_id: 12, tag_id: tagId, tag_type: 'ble', value: `v${tagId}`, is_active: true, valid_from: null, valid_to: null, at, ...extra },
});
const detach = (tagId: number): TagOwnerEvent => ({
  type: 'TagDetached',
  data: { org_id: 1, owner_type: 'asset', owner_id: 12, tag_id: tagId, tag_type: 'ble', value: `v${tagId}`, reason: 'detached', at },
});
const tagState = (id: number, extra: Partial<TagState> = {}): TagState => ({
  id,
  tagType: 'ble',
  value: `v${id}`,
  isActive: true,
  validFrom: null,
  validTo: null,
  createdAt: at,
  ...extra,
});

describe('tag evolve', () => {
  it('a stream without events: absent, no tags', () => {
    expect(fold(tagDecider, [])).toStrictEqual({ status: 'absent', tags: [] });
  });

  it('the owner exists after its creation (asset or location), deleted after its deletion; its other events change nothing', () => {
    expect(fold(tagDecider, [assetCreated])).toStrictEqual({ status: 'existing', tags: [] });
    expect(fold(tagDecider, [locationCreated])).toStrictEqual({ status: 'existing', tags: [] });
    expect(fold(tagDecider, [assetCreated, attach(1), { type: 'AssetDeleted', data: { org_id: 1, asset_id: 12, external_key: 'A12', at } }])).toStrictEqual({
      status: 'deleted',
      tags: [tagState(1)],
    });
    const others: TagOwnerEvent[] = [
      { type: 'AssetUpdated', data: { org_id: 1, asset_id: 12, changes: { name: 'b' }, at } },
      { type: 'AssetRenamed', data: { org_id: 1, asset_id: 12, external_key: 'B', previous_external_key: 'A12', at } },
      { type: 'LocationMoved', data: { org_id: 1, location_id: 5, parent_id: null, previous_parent_id: 2, at } },
    ];
    for (const event of others) expect(fold(tagDecider, [assetCreated, attach(1), event])).toStrictEqual({ status: 'existing', tags: [tagState(1)] });
  });

  it('detaching keeps the other tags, in attach order, in many orders', () => {
    const ids = [1, 2, 3, 4, 5, 6, 7];
    for (let seed = 1; seed <= 40; seed++) {
      const attached = shuffled(ids, seed);
      const gone = shuffled(ids, seed + 500).slice(0, seed % ids.length);
      const tags = [...attached.map((id) => attach(id)), ...gone.map(detach)].reduce(
        (state, event) => evolveTags(state, event as Extract<TagOwnerEvent, { type: 'TagAttached' | 'TagDetached' }>),
        [] as TagState[],
      );
      expect(tags).toStrictEqual(attached.filter((id) => !gone.includes(id)).map((id) => tagState(id)));
    }
  });
});

describe('tag rules, exactly', () => {
  it('the reservation value is `<type>:<value>`, RFID upper-cased, other types as sent', () => {
    expect(tagReservationValue('rfid', 'e280aB')).toBe('rfid:E280AB');
    expect(tagReservationValue('ble', 'aB')).toBe('ble:aB');
    expect(tagReservationValue('barcode', 'x y')).toBe('barcode:x y');
  });

  it('the embedded tags: active ones effective at the given time, in attach order', () => {
    const tags = [
      tagState(1),
      tagState(2, { isActive: false }),
      tagState(3, { validFrom: T1 }),
      tagState(4, { validFrom: T2 }),
      tagState(5, { validTo: T1 }),
      tagState(6, { validTo: T2 }),
      tagState(7, { validFrom: at, validTo: T2, isActive: false }),
    ];
    expect(embeddedTagViews(tags, new Date(T1)).map((t) => t.id)).toEqual([1, 3, 6]);
    expect(embeddedTagViews(tags, new Date(at)).map((t) => t.id)).toEqual([1, 5, 6]);
  });

  it('attach: TagAttached with the owner, the request and the window as ISO timestamps', () => {
    const input = { tag_type: 'rfid', value: 'e1', is_active: false, valid_from: new Date('2026-01-02T01:00:00+01:00'), valid_to: new Date(T2) };
    given([assetCreated])
      .when({ type: 'AttachTag', owner: assetOwner, tag: { tagId: 30, input, heldBy: null }, at: T1 })
      .then([
        {
          type: 'TagAttached',
          data: { org_id: 1, owner_type: 'asset', owner_id: 12, tag_id: 30, tag_type: 'rfid', value: 'e1', is_active: false, valid_from: '2026-01-02T00:00:00.000Z', valid_to: T2, at: T1 },
        },
      ]);
  });

  it('attach: a value held elsewhere → 409 naming the holder (with its key when known); RFID case does not make another tag', () => {
    const held = (heldBy: TagHolder, detail: string) =>
      given([assetCreated])
        .when({ type: 'AttachTag', owner: assetOwner, tag: { tagId: 30, input: ble, heldBy }, at })
        .thenThrows(Conflict, (e) => expect(e.message).toBe(detail));
    held({ ownerType: 'location', ownerId: 4, externalKey: null }, 'Tag (ble, "b1") is already attached to location 4');
    held({ ownerType: 'asset', ownerId: 2, externalKey: 'A2' }, 'Tag (ble, "b1") is already attached to asset 2 (A2)');
    const rfid = (value: string) => ({ tagId: 1, input: { ...ble, tag_type: 'rfid', value }, heldBy: null });
    expect(() => attachTags(assetOwner, [rfid('ab'), { ...rfid('AB'), tagId: 2 }], at)).toThrow('Tag (rfid, "AB") appears more than once in the request');
    expect(attachTags(assetOwner, [rfid('ab'), { ...rfid('ab'), input: { ...ble, value: 'ab' }, tagId: 2 }], at)).toHaveLength(2);
  });

  it('detach: the tag named, not another; a tag not on the owner → 404 naming both', () => {
    given([assetCreated, attach(1), attach(2), attach(3)])
      .when({ type: 'DetachTag', owner: assetOwner, tagId: 2, at: T1 })
      .then([{ type: 'TagDetached', data: { org_id: 1, owner_type: 'asset', owner_id: 12, tag_id: 2, tag_type: 'ble', value: 'v2', reason: 'detached', at: T1 } }]);
    given([assetCreated, attach(1)])
      .when({ type: 'DetachTag', owner: assetOwner, tagId: 2, at: T1 })
      .thenThrows(NotFound, (e) => expect(e.message).toBe('Tag 2 is not attached to asset 12'));
  });

  it('an owner that does not exist → 404 naming it (Asset or Location)', () => {
    given([]).when({ type: 'DetachTag', owner: assetOwner, tagId: 3, at }).thenThrows(NotFound, (e) => expect(e.message).toBe('Asset 12 not found'));
    given([assetCreated, { type: 'AssetDeleted', data: { org_id: 1, asset_id: 12, external_key: 'A12', at } }])
      .when({ type: 'AttachTag', owner: assetOwner, tag: { tagId: 4, input: ble, heldBy: null }, at })
      .thenThrows(NotFound, (e) => expect(e.message).toBe('Asset 12 not found'));
    expect(ownerNotFound(owner).message).toBe('Location 5 not found');
  });
});
