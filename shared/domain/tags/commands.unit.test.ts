import { beforeEach, describe, expect, it } from 'vitest';
import { useInMemoryPort } from '../../../test/support/in-memory/port.js';
import { rejectionOf } from '../../../test/support/rejection.js';
import { ConflictError, NotFoundError } from '../../errors.js';
import { attachTag, detachTag } from './commands.js';

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

    expect(error).toBeInstanceOf(ConflictError);
    expect((error as ConflictError).detail).toBe('Tag (rfid, "e280a1") is already attached to asset 6 (CRANE)');
    expect(await port().appended()).toEqual([]);
  });

  it('an owner that does not exist: 404', async () => {
    const error = await rejectionOf(attachTag(port(), { ...ASSET, ownerId: 99 }, { tag_type: 'barcode', value: 'B-1' }));
    expect(error).toBeInstanceOf(NotFoundError);
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
