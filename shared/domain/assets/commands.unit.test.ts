import { describe, expect, it, vi } from 'vitest';
import { DomainRefusal } from '../refusal.js';
import { Conflict, Invalid, NotFound } from '../../../test/support/refusals.js';
import { useInMemoryPort } from '../../../test/support/in-memory/port.js';
import { rejectionOf } from '../../../test/support/rejection.js';
import { READ_ONLY_MESSAGES } from '../patch.js';
import { assetPatchStateErrors, createAsset, deleteAsset, renameAsset, updateAsset } from './commands.js';

/**
 * The asset handlers against the in-memory command port: given events in the store, when the
 * handler runs, then what it appended (and answered). No database: the ids are counters, the
 * reads are folded from the log, the checkpoint waits resolve at once.
 */

const T0 = '2026-01-01T00:00:00.000Z';
const T1 = '2026-01-02T00:00:00.000Z';
const ORG = 1;

const assetCreated = (assetId: number, externalKey: string) => ({
  type: 'AssetCreated',
  data: { org_id: ORG, asset_id: assetId, external_key: externalKey, minted: false, name: 'Forklift', description: null, is_active: true, valid_from: null, valid_to: null, metadata: {}, at: T0 },
});
const claimed = (kind: string, value: string, ownerType: string, ownerId: number) => ({
  type: 'UniqueValueClaimed',
  data: { org_id: ORG, kind, value, owner_type: ownerType, owner_id: ownerId, at: T0 },
});
const released = (kind: string, value: string, ownerType: string, ownerId: number) => ({
  type: 'UniqueValueReleased',
  data: { org_id: ORG, kind, value, owner_type: ownerType, owner_id: ownerId, at: T0 },
});

const port = useInMemoryPort(T0);

describe('createAsset', () => {
  it('without a key: takes the next id and minted key, appends the asset, its key claim and its embedded tags, and waits for the projections', async () => {
    const id = await createAsset(port(), ORG, { name: 'Forklift', tags: [{ tag_type: 'rfid', value: 'e280' }] });

    expect(id).toBe(1);
    expect(await port().appended()).toEqual([
      {
        streamId: 'asset-1-1',
        type: 'AssetCreated',
        data: { org_id: ORG, asset_id: 1, external_key: 'ASSET-0001', minted: true, name: 'Forklift', description: null, is_active: true, valid_from: null, valid_to: null, metadata: {}, at: T0 },
      },
      {
        streamId: 'asset-1-1',
        type: 'TagAttached',
        data: { org_id: ORG, owner_type: 'asset', owner_id: 1, tag_id: 1, tag_type: 'rfid', value: 'e280', is_active: true, valid_from: null, valid_to: null, at: T0 },
      },
      { streamId: 'unique-asset-key-1-ASSET-0001', ...claimed('asset-key', 'ASSET-0001', 'asset', 1) },
      { streamId: 'unique-tag-1-rfid%3AE280', ...claimed('tag', 'rfid:E280', 'asset', 1) },
    ]);
    // Read-your-writes: one wait, for the position of the whole append, naming its streams.
    expect(port().checkpoints.waits).toHaveLength(1);
    expect(port().checkpoints.waits[0]!.position).toEqual(await port().store.headPosition());
    expect(port().checkpoints.waits[0]!.streams.map((s) => s.streamId).sort()).toEqual(['asset-1-1', 'unique-asset-key-1-ASSET-0001', 'unique-tag-1-rfid%3AE280']);
  });

  it('a minted key a caller already took: the claim loses on its revision, the retry reads the holder and takes the next number', async () => {
    await port().given('unique-asset-key-1-ASSET-0001', [claimed('asset-key', 'ASSET-0001', 'asset', 99)]);

    const id = await createAsset(port(), ORG, { name: 'Forklift' });

    // One id for the whole command, two minted numbers; nothing of the lost first attempt is stored.
    expect(id).toBe(1);
    expect(await port().appended()).toEqual([
      { streamId: 'asset-1-1', type: 'AssetCreated', data: expect.objectContaining({ asset_id: 1, external_key: 'ASSET-0002', minted: true }) },
      { streamId: 'unique-asset-key-1-ASSET-0002', ...claimed('asset-key', 'ASSET-0002', 'asset', 1) },
    ]);
  });

  it("a caller's key that another asset holds: 409, and nothing is appended", async () => {
    await port().given('asset-1-5', [assetCreated(5, 'FORK-1')]);
    await port().given('unique-asset-key-1-FORK-1', [claimed('asset-key', 'FORK-1', 'asset', 5)]);

    const error = await rejectionOf(createAsset(port(), ORG, { name: 'Forklift', external_key: 'FORK-1' }));

    expect(error).toBeInstanceOf(Conflict);
    expect(await port().appended()).toEqual([]);
    expect(port().checkpoints.waits).toEqual([]);
  });
});

describe('updateAsset', () => {
  it('a change: appends AssetUpdated with only the fields that differ, and waits for it naming the asset stream', async () => {
    await port().given('asset-1-5', [assetCreated(5, 'FORK-1')]);
    vi.setSystemTime(new Date(T1));

    await updateAsset(port(), ORG, 5, { name: 'Reach truck', description: null, is_active: true, metadata: { shift: 'night' } });

    expect(await port().appended()).toEqual([
      { streamId: 'asset-1-5', type: 'AssetUpdated', data: { org_id: ORG, asset_id: 5, changes: { name: 'Reach truck', metadata: { shift: 'night' } }, at: T1 } },
    ]);
    expect(port().checkpoints.waits).toHaveLength(1);
    expect(port().checkpoints.waits[0]!.position).toEqual(await port().store.headPosition());
    expect(port().checkpoints.waits[0]!.streams.map((s) => s.streamId)).toEqual(['asset-1-5']);
  });

  it("read-only location fields are compared with the read model's current location: the same one is accepted silently", async () => {
    await port().given('asset-1-5', [assetCreated(5, 'FORK-1')]);
    const located = vi.spyOn(port().readModels, 'currentAssetLocation').mockResolvedValue({ id: 3, external_key: 'DOCK' });

    await updateAsset(port(), ORG, 5, { name: 'Reach truck', location_id: 3, location_external_key: 'DOCK' });

    expect(located).toHaveBeenCalledWith(ORG, 5);
    expect(await port().appended()).toEqual([
      { streamId: 'asset-1-5', type: 'AssetUpdated', data: { org_id: ORG, asset_id: 5, changes: { name: 'Reach truck' }, at: T0 } },
    ]);
  });

  it('a no-op appends nothing, and still waits until the read model shows the whole append of the asset stream', async () => {
    await port().given('asset-1-5', [assetCreated(5, 'FORK-1')]);
    // A later append of another stream: the wait is for the asset's, not for the head of the log.
    await port().given('asset-1-6', [assetCreated(6, 'FORK-2')]);
    const [assetEvent] = await port().store.readStream('asset-1-5');

    await updateAsset(port(), ORG, 5, { name: 'Forklift', valid_to: null, metadata: {} });

    expect(await port().appended()).toEqual([]);
    expect(port().checkpoints.waits).toEqual([{ position: assetEvent!.position, streams: [{ streamId: 'asset-1-5', projections: ['in-memory'] }] }]);
  });

  it('a read-only field that differs from the current one: 400 naming the field and the write path, nothing appended, no wait', async () => {
    await port().given('asset-1-5', [assetCreated(5, 'FORK-1')]);
    vi.spyOn(port().readModels, 'currentAssetLocation').mockResolvedValue({ id: 3, external_key: 'DOCK' });

    const error = await rejectionOf(updateAsset(port(), ORG, 5, { name: 'Reach truck', location_id: 4 }));

    expect(error).toBeInstanceOf(Invalid);
    expect((error as DomainRefusal).fields).toEqual([{ field: 'location_id', code: 'read_only', message: READ_ONLY_MESSAGES.location('location_id') }]);
    expect(await port().appended()).toEqual([]);
    expect(port().checkpoints.waits).toEqual([]);
  });

  it('an asset that was deleted: 404, nothing appended, no wait', async () => {
    await port().given('asset-1-5', [assetCreated(5, 'FORK-1'), { type: 'AssetDeleted', data: { org_id: ORG, asset_id: 5, external_key: 'FORK-1', at: T0 } }]);

    const error = await rejectionOf(updateAsset(port(), ORG, 5, { name: 'Reach truck' }));

    expect(error).toBeInstanceOf(NotFound);
    expect((error as DomainRefusal).message).toBe('Asset 5 not found');
    expect(await port().appended()).toEqual([]);
    expect(port().checkpoints.waits).toEqual([]);
  });
});

describe('renameAsset', () => {
  it('claims the new key and releases the old one with the rename, atomically', async () => {
    await port().given('asset-1-5', [assetCreated(5, 'FORK-1')]);
    await port().given('unique-asset-key-1-FORK-1', [claimed('asset-key', 'FORK-1', 'asset', 5)]);

    await renameAsset(port(), ORG, 5, 'FORK-2');

    expect(await port().appended()).toEqual([
      { streamId: 'asset-1-5', type: 'AssetRenamed', data: { org_id: ORG, asset_id: 5, external_key: 'FORK-2', previous_external_key: 'FORK-1', at: T0 } },
      { streamId: 'unique-asset-key-1-FORK-1', ...released('asset-key', 'FORK-1', 'asset', 5) },
      { streamId: 'unique-asset-key-1-FORK-2', ...claimed('asset-key', 'FORK-2', 'asset', 5) },
    ]);
  });

  it('loses a race to another writer of the asset, then decides again from the newer stream (executeCommand retries)', async () => {
    await port().given('asset-1-5', [assetCreated(5, 'FORK-1')]);
    await port().given('unique-asset-key-1-FORK-1', [claimed('asset-key', 'FORK-1', 'asset', 5)]);
    // Between this command's read and its append, another request renames the asset to FORK-9.
    let reads = 0;
    const readStream = port().store.readStream.bind(port().store);
    vi.spyOn(port().store, 'readStream').mockImplementation((streamId, options) => {
      if (streamId === 'asset-1-5') reads++;
      return readStream(streamId, options);
    });
    port().store.beforeNextAppend(async () => {
      await port().store.appendToStreams([
        { streamId: 'asset-1-5', expectedRevision: 0n, events: [{ type: 'AssetRenamed', data: { org_id: ORG, asset_id: 5, external_key: 'FORK-9', previous_external_key: 'FORK-1', at: T0 } }] },
        { streamId: 'unique-asset-key-1-FORK-1', expectedRevision: 'any', events: [released('asset-key', 'FORK-1', 'asset', 5)] },
        { streamId: 'unique-asset-key-1-FORK-9', expectedRevision: 'no_stream', events: [claimed('asset-key', 'FORK-9', 'asset', 5)] },
      ]);
    });

    await renameAsset(port(), ORG, 5, 'FORK-2');

    // Two attempts: the second renames from FORK-9, the key the other writer gave it.
    expect(reads).toBe(2);
    const appended = await port().appended();
    expect(appended.slice(3)).toEqual([
      { streamId: 'asset-1-5', type: 'AssetRenamed', data: { org_id: ORG, asset_id: 5, external_key: 'FORK-2', previous_external_key: 'FORK-9', at: T0 } },
      { streamId: 'unique-asset-key-1-FORK-2', ...claimed('asset-key', 'FORK-2', 'asset', 5) },
      { streamId: 'unique-asset-key-1-FORK-9', ...released('asset-key', 'FORK-9', 'asset', 5) },
    ]);
    expect((await port().store.readStream('asset-1-5')).map((e) => e.revision)).toEqual([0n, 1n, 2n]);
  });
});

describe('deleteAsset', () => {
  it('deletes the asset, detaches its existing tags, and releases its key and tag values in the same append', async () => {
    await port().given('asset-1-5', [
      assetCreated(5, 'FORK-1'),
      { type: 'TagAttached', data: { org_id: ORG, owner_type: 'asset', owner_id: 5, tag_id: 3, tag_type: 'barcode', value: 'B-1', is_active: true, valid_from: null, valid_to: null, at: T0 } },
    ]);

    await deleteAsset(port(), ORG, 5);

    expect(await port().appended()).toEqual([
      {
        streamId: 'asset-1-5',
        type: 'TagDetached',
        data: { org_id: ORG, owner_type: 'asset', owner_id: 5, tag_id: 3, tag_type: 'barcode', value: 'B-1', reason: 'owner_deleted', at: T0 },
      },
      { streamId: 'asset-1-5', type: 'AssetDeleted', data: { org_id: ORG, asset_id: 5, external_key: 'FORK-1', at: T0 } },
      { streamId: 'unique-asset-key-1-FORK-1', ...released('asset-key', 'FORK-1', 'asset', 5) },
      { streamId: 'unique-tag-1-barcode%3AB-1', ...released('tag', 'barcode:B-1', 'asset', 5) },
    ]);
  });

  it('an asset that does not exist: 404, nothing appended', async () => {
    const error = await rejectionOf(deleteAsset(port(), ORG, 5));
    expect(error).toMatchObject({ kind: 'not_found', message: 'Asset 5 not found' });
    expect(await port().appended()).toEqual([]);
  });
});

describe('assetPatchStateErrors', () => {
  // An asset whose valid_from is set (so a null for it is refused), tagged B-1.
  const givenAsset = () =>
    port().given('asset-1-5', [
      { ...assetCreated(5, 'FORK-1'), data: { ...assetCreated(5, 'FORK-1').data, valid_from: '2025-06-01T00:00:00.000Z' } },
      { type: 'TagAttached', data: { org_id: ORG, owner_type: 'asset', owner_id: 5, tag_id: 3, tag_type: 'barcode', value: 'B-1', is_active: true, valid_from: null, valid_to: null, at: T0 } },
    ]);

  it("each read-only field that differs from the asset's state or the read model's location, then a null valid_from over a set one (the route orders them with the schema's errors)", async () => {
    await givenAsset();
    const located = vi.spyOn(port().readModels, 'currentAssetLocation').mockResolvedValue({ id: 3, external_key: 'DOCK' });

    const errors = await assetPatchStateErrors(port(), ORG, 5, {
      name: 7,
      valid_from: null,
      location_external_key: 'YARD',
      created_at: '2025-01-01T00:00:00Z',
      external_key: 'FORK-2',
      tags: [],
    });

    expect(located).toHaveBeenCalledWith(ORG, 5);
    expect(errors).toEqual([
      { field: 'external_key', code: 'read_only', message: READ_ONLY_MESSAGES.externalKey('assets') },
      { field: 'location_external_key', code: 'read_only', message: READ_ONLY_MESSAGES.location('location_external_key') },
      { field: 'created_at', code: 'read_only', message: READ_ONLY_MESSAGES.serverManaged('created_at') },
      { field: 'tags', code: 'read_only', message: READ_ONLY_MESSAGES.tags('assets') },
      { field: 'valid_from', code: 'invalid_value', message: 'valid_from must not be null' },
    ]);
    expect(await port().appended()).toEqual([]);
  });

  it('read-only fields sent as they stand (timestamps by instant, the location as the read model has it) are no errors', async () => {
    await givenAsset();
    vi.spyOn(port().readModels, 'currentAssetLocation').mockResolvedValue({ id: 3, external_key: 'DOCK' });

    const errors = await assetPatchStateErrors(port(), ORG, 5, {
      name: 7,
      id: 5,
      external_key: 'FORK-1',
      location_id: 3,
      created_at: '2026-01-01T01:00:00+01:00',
      deleted_at: null,
      tags: [{ id: 3, tag_type: 'barcode', value: 'B-1', is_active: true, valid_from: null, valid_to: null, created_at: T0 }],
    });

    expect(errors).toEqual([]);
  });

  it('a body without location fields does not ask the read model (the in-memory one would throw)', async () => {
    await givenAsset();

    expect(await assetPatchStateErrors(port(), ORG, 5, { name: 7, id: 6 })).toEqual([
      { field: 'id', code: 'read_only', message: READ_ONLY_MESSAGES.serverManaged('id') },
    ]);
  });

  it('an asset that does not exist: no state errors (the 404 comes from the route)', async () => {
    expect(await assetPatchStateErrors(port(), ORG, 5, { id: 6, valid_from: null })).toEqual([]);
  });
});
