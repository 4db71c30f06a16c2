import { beforeEach, describe, expect, it, vi } from 'vitest';
import { DomainRefusal } from '../refusal.js';
import { Conflict, NotFound } from '../../../test/support/refusals.js';
import { useInMemoryPort } from '../../../test/support/in-memory/port.js';
import { rejectionOf } from '../../../test/support/rejection.js';
import { attachTag, detachTag, readTagsToAttach, requireExistingTagOwner } from './commands.js';

/** The tag handlers against the in-memory command port(). */

const T0 = '2026-01-01T00:00:00.000Z';
const ORG = 1;
const ASSET = { orgId: ORG, ownerType: 'asset' as const, ownerId: 5 };

const assetCreated = (assetId: number, externalKey: string) => ({
  type: 'AssetCreated',
  data: { org_id: ORG, asset_id: assetId, external_key: externalKey, minted: false, name: 'Forklift', description: null, is_active: true, valid_from: null, valid_to: null, metadata: {}, at: T0 },
});
const tagAttached = (ownerId: number, tagId: number, value: string) => ({
  type: 'TagAttached',
  data: { org_id: ORG, owner_type: 'asset', owner_id: ownerId, tag_id: tagId, tag_type: 'rfid', value, is_active: true, valid_from: null, valid_to: null, at: T0 },
});
const tagClaimed = (value: string, ownerId: number) => ({
  type: 'UniqueValueClaimed',
  data: { org_id: ORG, kind: 'tag', value, owner_type: 'asset', owner_id: ownerId, at: T0 },
});

const port = useInMemoryPort(T0);

beforeEach(async () => {
  port().ids.startAt('tag_ids', 20);
  await port().given('asset-1-5', [assetCreated(5, 'FORK-1')]);
});

describe('attachTag', () => {
  it('attaches the tag to its owner and claims its value (RFID upper-cased in the claim only); answers the new id', async () => {
    const id = await attachTag(port(), ASSET, { tag_type: 'rfid', value: 'e280a1' });

    expect(id).toBe(20);
    expect(await port().appended()).toEqual([
      { streamId: 'asset-1-5', type: 'TagAttached', data: tagAttached(5, 20, 'e280a1').data },
      { streamId: 'unique-tag-1-rfid%3AE280A1', ...tagClaimed('rfid:E280A1', 5) },
    ]);
  });

  it('a value another asset holds: the first claim fails on its revision, the retry reads the holder: 409 naming it', async () => {
    await port().given('asset-1-6', [assetCreated(6, 'CRANE'), tagAttached(6, 3, 'E280A1')]);
    await port().given('unique-tag-1-rfid%3AE280A1', [tagClaimed('rfid:E280A1', 6)]);

    const error = await rejectionOf(attachTag(port(), ASSET, { tag_type: 'rfid', value: 'e280a1' }));

    expect(error).toBeInstanceOf(Conflict);
    expect((error as DomainRefusal).message).toBe('Tag (rfid, "e280a1") is already attached to asset 6 (CRANE)');
    expect(await port().appended()).toEqual([]);
  });

  it('an owner that does not exist: 404', async () => {
    const error = await rejectionOf(attachTag(port(), { ...ASSET, ownerId: 99 }, { tag_type: 'barcode', value: 'B-1' }));
    expect(error).toBeInstanceOf(NotFound);
    expect(await port().appended()).toEqual([]);
  });
});

describe('detachTag', () => {
  it('detaches the tag and releases its value', async () => {
    await port().given('asset-1-5', [tagAttached(5, 3, 'e280a1')]);

    await detachTag(port(), ASSET, 3);

    expect(await port().appended()).toEqual([
      {
        streamId: 'asset-1-5',
        type: 'TagDetached',
        data: { org_id: ORG, owner_type: 'asset', owner_id: 5, tag_id: 3, tag_type: 'rfid', value: 'e280a1', reason: 'detached', at: T0 },
      },
      { streamId: 'unique-tag-1-rfid%3AE280A1', type: 'UniqueValueReleased', data: tagClaimed('rfid:E280A1', 5).data },
    ]);
  });
});

describe('requireExistingTagOwner', () => {
  it('an existing owner passes', async () => {
    await expect(requireExistingTagOwner(port(), ASSET)).resolves.toBeUndefined();
  });

  it("a deleted owner, an owner that never existed, and one of another org: 404 naming the owner", async () => {
    await port().given('asset-1-5', [{ type: 'AssetDeleted', data: { org_id: ORG, asset_id: 5, external_key: 'FORK-1', at: T0 } }]);

    expect(await rejectionOf(requireExistingTagOwner(port(), ASSET))).toMatchObject({ kind: 'not_found', message: 'Asset 5 not found' });
    expect(await rejectionOf(requireExistingTagOwner(port(), { orgId: ORG, ownerType: 'location', ownerId: 9 }))).toMatchObject({ kind: 'not_found', message: 'Location 9 not found' });
    await port().given('asset-2-6', [{ ...assetCreated(6, 'FORK-1'), data: { ...assetCreated(6, 'FORK-1').data, org_id: 2 } }]);
    expect(await rejectionOf(requireExistingTagOwner(port(), { ...ASSET, ownerId: 6 }))).toMatchObject({ kind: 'not_found', message: 'Asset 6 not found' });
  });

  it("a location's stream is read for a location owner", async () => {
    await port().given('location-1-9', [
      {
        type: 'LocationCreated',
        data: { org_id: ORG, location_id: 9, external_key: 'DOCK', name: 'Dock', description: null, parent_id: null, is_active: true, valid_from: null, valid_to: null, at: T0 },
      },
    ]);

    await expect(requireExistingTagOwner(port(), { orgId: ORG, ownerType: 'location', ownerId: 9 })).resolves.toBeUndefined();
  });
});

describe('readTagsToAttach', () => {
  it('on a first attempt: one id per tag from one draw, and each distinct value assumed free without reading its reservation', async () => {
    const reads = vi.spyOn(port().store, 'readStream');
    const draws = vi.spyOn(port().ids, 'nextIds');

    const tags = await readTagsToAttach(port(), ORG, [{ tag_type: 'rfid', value: 'e280' }, { tag_type: 'barcode', value: 'B-1', is_active: false }, { tag_type: 'rfid', value: 'E280' }], 1);

    expect(draws).toHaveBeenCalledTimes(1);
    expect(reads).not.toHaveBeenCalled();
    expect(tags.requests.map((r) => [r.tagId, r.input.tag_type, r.input.value, r.input.is_active, r.heldBy])).toEqual([
      [20, 'rfid', 'e280', true, null],
      [21, 'barcode', 'B-1', false, null],
      [22, 'rfid', 'E280', true, null],
    ]);
    expect(tags.reservations.map((r) => [r.streamId, r.expectedRevision, r.holder])).toEqual([
      ['unique-tag-1-rfid%3AE280', 'no_stream', null],
      ['unique-tag-1-barcode%3AB-1', 'no_stream', null],
      ['unique-tag-1-rfid%3AE280', 'no_stream', null],
    ]);
    // The same value twice in one request shares one reservation (the decider refuses it as a duplicate).
    expect(tags.reservations[2]).toBe(tags.reservations[0]);
  });

  it("on a retry: each distinct value's reservation read once, with its holder and the holder's key for the 409", async () => {
    await port().given('asset-1-6', [assetCreated(6, 'CRANE'), tagAttached(6, 3, 'E280A1')]);
    await port().given('unique-tag-1-rfid%3AE280A1', [tagClaimed('rfid:E280A1', 6)]);
    await port().given('unique-tag-1-barcode%3AB-1', [tagClaimed('barcode:B-1', 7), { ...tagClaimed('barcode:B-1', 7), type: 'UniqueValueReleased' }]);
    const reads = vi.spyOn(port().store, 'readStream');

    const tags = await readTagsToAttach(port(), ORG, [{ tag_type: 'rfid', value: 'e280a1' }, { tag_type: 'barcode', value: 'B-1' }, { tag_type: 'rfid', value: 'E280A1' }], 2);

    expect(reads.mock.calls.map(([streamId]) => streamId).sort()).toEqual(['unique-tag-1-barcode%3AB-1', 'unique-tag-1-rfid%3AE280A1']);
    expect(tags.requests.map((r) => r.heldBy)).toEqual([{ ownerType: 'asset', ownerId: 6, externalKey: 'CRANE' }, null, { ownerType: 'asset', ownerId: 6, externalKey: 'CRANE' }]);
    expect(tags.reservations.map((r) => r.expectedRevision)).toEqual([0n, 1n, 0n]);
  });
});
