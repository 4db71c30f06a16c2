import { beforeEach, describe, expect, it, vi } from 'vitest';
import { DomainRefusal } from '../refusal.js';
import { Conflict, Invalid, NotFound } from '../../../test/support/refusals.js';
import { useInMemoryPort } from '../../../test/support/in-memory/port.js';
import { rejectionOf } from '../../../test/support/rejection.js';
import { READ_ONLY_MESSAGES } from '../patch.js';
import { createLocation, deleteLocation, locationPatchStateErrorsOf, renameLocation, updateLocation, type CreateInput } from './commands.js';

/**
 * The location handlers against the in-memory command port: the tree decisions read the existing
 * locations (folded from the log), take part in the per-org tree stream, and append atomically.
 */

const T0 = '2026-01-01T00:00:00.000Z';
const ORG = 1;

const locationCreated = (id: number, externalKey: string, parentId: number | null) => ({
  type: 'LocationCreated',
  data: { org_id: ORG, location_id: id, external_key: externalKey, name: externalKey, description: null, parent_id: parentId, is_active: true, valid_from: null, valid_to: null, at: T0 },
});
const treeChanged = (id: number, change: string, parentId: number | null) => ({
  type: 'LocationTreeChanged',
  data: { org_id: ORG, location_id: id, change, parent_id: parentId, at: T0 },
});

const input = (overrides: Partial<CreateInput>): CreateInput => ({
  name: 'Bay 1',
  description: null,
  parent: null,
  isActive: true,
  validFrom: null,
  validTo: null,
  tags: [],
  ...overrides,
});

const port = useInMemoryPort(T0);

beforeEach(async () => {
  port().ids.startAt('location_ids', 10);
});

/** A warehouse (1) with an aisle (2) under it, as the commands would have written them. */
async function givenTree(): Promise<void> {
  await port().given('location-1-1', [locationCreated(1, 'WH', null)]);
  await port().given('location-1-2', [locationCreated(2, 'AISLE', 1)]);
  await port().given('location-tree-1', [treeChanged(2, 'created', 1)]);
}

describe('createLocation', () => {
  it('under a parent named by its key: the location, its key claim and the tree change with the revision it read', async () => {
    await givenTree();

    const id = await createLocation(port(), ORG, input({ externalKey: 'BAY-1', parent: { field: 'parent_external_key', externalKey: 'AISLE' } }));

    expect(id).toBe(10);
    expect(await port().appended()).toEqual([
      { streamId: 'location-1-10', type: 'LocationCreated', data: { ...locationCreated(10, 'BAY-1', 2).data, name: 'Bay 1' } },
      { streamId: 'location-tree-1', type: 'LocationTreeChanged', data: treeChanged(10, 'created', 2).data },
      { streamId: 'unique-location-key-1-BAY-1', type: 'UniqueValueClaimed', data: { org_id: ORG, kind: 'location-key', value: 'BAY-1', owner_type: 'location', owner_id: 10, at: T0 } },
    ]);
    expect((await port().store.readStream('location-tree-1')).map((e) => e.revision)).toEqual([0n, 1n]);
  });

  it('under a parent that is not an existing location: 400 naming the field, and no id is claimed', async () => {
    const error = await rejectionOf(createLocation(port(), ORG, input({ parent: { field: 'parent_id', id: 7 } })));

    expect(error).toBeInstanceOf(Invalid);
    expect(JSON.stringify(error)).toContain('parent_id 7 does not reference a live location');
    expect(await port().appended()).toEqual([]);
  });
});

describe('updateLocation', () => {
  it('a re-parent under its own descendant: 409, nothing appended', async () => {
    await givenTree();

    const error = await rejectionOf(updateLocation(port(), ORG, 1, { changes: {}, parent: { field: 'parent_id', id: 2 }, sent: { parent_id: 2 } }));

    expect(error).toBeInstanceOf(Conflict);
    expect((error as DomainRefusal).message).toBe('Re-parenting under location 2 would make location WH (id 1) its own ancestor');
    expect(await port().appended()).toEqual([]);
  });

  it('a no-op appends nothing, and still waits until the read model shows the whole location stream', async () => {
    await givenTree();
    const [locationEvent] = await port().store.readStream('location-1-1');

    await updateLocation(port(), ORG, 1, { changes: {}, sent: {} });

    expect(await port().appended()).toEqual([]);
    expect(port().checkpoints.waits).toEqual([{ position: locationEvent!.position, streams: [{ streamId: 'location-1-1', projections: ['in-memory'] }] }]);
  });

  it('a re-parent to the root: LocationMoved, and the tree change', async () => {
    await givenTree();

    await updateLocation(port(), ORG, 2, { changes: {}, parent: null, sent: { parent_id: null } });

    expect(await port().appended()).toEqual([
      { streamId: 'location-1-2', type: 'LocationMoved', data: { org_id: ORG, location_id: 2, parent_id: null, previous_parent_id: 1, at: T0 } },
      { streamId: 'location-tree-1', type: 'LocationTreeChanged', data: treeChanged(2, 'moved', null).data },
    ]);
  });
});

describe('deleteLocation', () => {
  it('a location with an existing descendant: 409', async () => {
    await givenTree();

    const error = await rejectionOf(deleteLocation(port(), ORG, 1));

    expect(error).toBeInstanceOf(Conflict);
    expect(await port().appended()).toEqual([]);
  });

  it('a leaf with no assets placed at it: deleted, its key released, the tree changed and its scans closed, in one append', async () => {
    await givenTree();
    // Where assets are is derived from scans by the read model: the test tells it.
    const placed = vi.spyOn(port().readModels, 'countExistingAssetsAt').mockResolvedValue(0);

    await deleteLocation(port(), ORG, 2);

    expect(placed).toHaveBeenCalledWith(ORG, 2);
    expect(await port().appended()).toEqual([
      { streamId: 'location-1-2', type: 'LocationDeleted', data: { org_id: ORG, location_id: 2, external_key: 'AISLE', at: T0 } },
      { streamId: 'location-tree-1', type: 'LocationTreeChanged', data: treeChanged(2, 'deleted', 1).data },
      { streamId: 'scans-1-2', type: 'ScanPlacementClosed', data: { org_id: ORG, location_id: 2, at: T0 } },
      { streamId: 'unique-location-key-1-AISLE', type: 'UniqueValueReleased', data: { org_id: ORG, kind: 'location-key', value: 'AISLE', owner_type: 'location', owner_id: 2, at: T0 } },
    ]);
  });

  it('a leaf with an asset placed at it: 409', async () => {
    await givenTree();
    vi.spyOn(port().readModels, 'countExistingAssetsAt').mockResolvedValue(1);

    expect(await rejectionOf(deleteLocation(port(), ORG, 2))).toBeInstanceOf(Conflict);
    expect(await port().appended()).toEqual([]);
  });
});

describe('renameLocation', () => {
  const claimed = (value: string, ownerId: number) => ({
    type: 'UniqueValueClaimed',
    data: { org_id: ORG, kind: 'location-key', value, owner_type: 'location', owner_id: ownerId, at: T0 },
  });
  const released = (value: string, ownerId: number) => ({ ...claimed(value, ownerId), type: 'UniqueValueReleased' });

  beforeEach(async () => {
    await givenTree();
    await port().given('unique-location-key-1-WH', [claimed('WH', 1)]);
    await port().given('unique-location-key-1-AISLE', [claimed('AISLE', 2)]);
  });

  it('claims the new key and releases the old one with the rename, in one append, and waits for it', async () => {
    await renameLocation(port(), ORG, 1, 'WAREHOUSE');

    const appended = await port().appended();
    expect(appended).toEqual([
      { streamId: 'location-1-1', type: 'LocationRenamed', data: { org_id: ORG, location_id: 1, external_key: 'WAREHOUSE', previous_external_key: 'WH', at: T0 } },
      { streamId: 'unique-location-key-1-WAREHOUSE', ...claimed('WAREHOUSE', 1) },
      { streamId: 'unique-location-key-1-WH', ...released('WH', 1) },
    ]);
    // One append: one commit, and one wait for its position naming the three streams.
    const log = await port().store.readAll({ maxCount: 100 });
    expect(new Set(log.slice(-3).map((e) => e.position.commit)).size).toBe(1);
    expect(port().checkpoints.waits).toHaveLength(1);
    expect(port().checkpoints.waits[0]!.position).toEqual(await port().store.headPosition());
    expect(port().checkpoints.waits[0]!.streams.map((s) => s.streamId).sort()).toEqual(['location-1-1', 'unique-location-key-1-WAREHOUSE', 'unique-location-key-1-WH']);
  });

  it('a key released before is claimed again, at the revision its reservation stream has', async () => {
    await port().given('unique-location-key-1-DOCK', [claimed('DOCK', 9), released('DOCK', 9)]);

    await renameLocation(port(), ORG, 1, 'DOCK');

    expect((await port().store.readStream('unique-location-key-1-DOCK')).map((e) => [e.revision, e.type, e.data.owner_id])).toEqual([
      [0n, 'UniqueValueClaimed', 9],
      [1n, 'UniqueValueReleased', 9],
      [2n, 'UniqueValueClaimed', 1],
    ]);
  });

  it("a key another location holds: 409 naming it, nothing appended, no wait", async () => {
    const error = await rejectionOf(renameLocation(port(), ORG, 1, 'AISLE'));

    expect(error).toBeInstanceOf(Conflict);
    expect((error as DomainRefusal).message).toBe('external_key "AISLE" is already used by another location');
    expect(await port().appended()).toEqual([]);
    expect(port().checkpoints.waits).toEqual([]);
  });

  it('its own key: a no-op, nothing appended, and still a wait until the read model shows the whole location stream', async () => {
    const [locationEvent] = await port().store.readStream('location-1-1');

    await renameLocation(port(), ORG, 1, 'WH');

    expect(await port().appended()).toEqual([]);
    expect(port().checkpoints.waits).toEqual([{ position: locationEvent!.position, streams: [{ streamId: 'location-1-1', projections: ['in-memory'] }] }]);
  });

  it('a location that does not exist: 404', async () => {
    const error = await rejectionOf(renameLocation(port(), ORG, 7, 'BAY-7'));

    expect(error).toBeInstanceOf(NotFound);
    expect(await port().appended()).toEqual([]);
  });
});

describe('locationPatchStateErrorsOf', () => {
  // The warehouse with a set valid_from, and a tag that expired before T0 (so its view shows no tags).
  beforeEach(async () => {
    await port().given('location-1-1', [
      { ...locationCreated(1, 'WH', null), data: { ...locationCreated(1, 'WH', null).data, valid_from: '2025-06-01T00:00:00.000Z' } },
      {
        type: 'TagAttached',
        data: { org_id: ORG, owner_type: 'location', owner_id: 1, tag_id: 4, tag_type: 'barcode', value: 'L-1', is_active: true, valid_from: null, valid_to: '2025-12-31T00:00:00.000Z', at: T0 },
      },
    ]);
  });

  it("each read-only field that differs from the location's state, then a null valid_from over a set one (the route orders them with the schema's errors)", async () => {
    const errors = await locationPatchStateErrorsOf(port(), ORG, 1, { name: 7, valid_from: null, updated_at: '2025-01-01T00:00:00Z', external_key: 'WH-2', id: 2 });

    expect(errors).toEqual([
      { field: 'id', code: 'read_only', message: READ_ONLY_MESSAGES.serverManaged('id') },
      { field: 'external_key', code: 'read_only', message: READ_ONLY_MESSAGES.externalKey('locations') },
      { field: 'updated_at', code: 'read_only', message: READ_ONLY_MESSAGES.serverManaged('updated_at') },
      { field: 'valid_from', code: 'invalid_value', message: 'valid_from must not be null' },
    ]);
    expect(await port().appended()).toEqual([]);
  });

  it('read-only fields sent as they stand now are no errors: timestamps by instant, and the tags as the view shows them at this moment (the expired one not among them)', async () => {
    const errors = await locationPatchStateErrorsOf(port(), ORG, 1, { name: 7, id: 1, external_key: 'WH', created_at: '2026-01-01T02:00:00+02:00', deleted_at: null, tags: [] });

    expect(errors).toEqual([]);
  });

  it('a location that does not exist: no state errors (the 404 comes from the route)', async () => {
    expect(await locationPatchStateErrorsOf(port(), ORG, 7, { id: 1, valid_from: null })).toEqual([]);
  });
});
