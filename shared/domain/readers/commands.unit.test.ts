import { beforeEach, describe, expect, it, vi } from 'vitest';
import { DomainRefusal } from '../refusal.js';
import { Conflict, Invalid, NotFound } from '../../../test/support/refusals.js';
import { useInMemoryPort } from '../../../test/support/in-memory/port.js';
import { rejectionOf } from '../../../test/support/rejection.js';
import { assignScanPoint, registerReader, unassignScanPoint } from './commands.js';

/** The reader handlers against the in-memory command port(). */

const T0 = '2026-01-01T00:00:00.000Z';

const port = useInMemoryPort(T0);

describe('registerReader', () => {
  it('registers a new reader to the org', async () => {
    expect(await registerReader(port(), 1, 'dock-1')).toEqual({ reader_id: 'dock-1', org_id: 1, registered_at: T0 });
    expect(await port().appended()).toEqual([{ streamId: 'reader-dock-1', type: 'ReaderRegistered', data: { org_id: 1, reader_id: 'dock-1', at: T0 } }]);
  });

  it('a reader another org registered first: 409', async () => {
    await port().given('reader-dock-1', [{ type: 'ReaderRegistered', data: { org_id: 2, reader_id: 'dock-1', at: T0 } }]);
    const error = await rejectionOf(registerReader(port(), 1, 'dock-1'));
    expect(error).toBeInstanceOf(Conflict);
    expect((error as DomainRefusal).message).toBe('reader dock-1 is already registered to organization 2');
    expect(await port().appended()).toEqual([]);
  });
});

describe('assignScanPoint', () => {
  beforeEach(async () => {
    await port().given('reader-dock-1', [{ type: 'ReaderRegistered', data: { org_id: 1, reader_id: 'dock-1', at: T0 } }]);
    await port().given('location-1-3', [
      {
        type: 'LocationCreated',
        data: { org_id: 1, location_id: 3, external_key: 'DOCK', name: 'Dock', description: null, parent_id: null, is_active: true, valid_from: null, valid_to: null, at: T0 },
      },
    ]);
  });

  it('assigns a capture point to the existing location the key names', async () => {
    const assigned = await assignScanPoint(port(), { orgId: 1, readerId: 'dock-1', capturePoint: 'antenna-1', locationExternalKey: 'DOCK' });

    expect(assigned).toEqual({ reader_id: 'dock-1', capture_point: 'antenna-1', location_id: 3, location_external_key: 'DOCK' });
    expect(await port().appended()).toEqual([
      { streamId: 'reader-dock-1', type: 'ScanPointAssigned', data: { org_id: 1, reader_id: 'dock-1', capture_point: 'antenna-1', location_id: 3, at: T0 } },
    ]);
  });

  it('to a key no existing location has: 400, nothing appended', async () => {
    const error = await rejectionOf(assignScanPoint(port(), { orgId: 1, readerId: 'dock-1', capturePoint: 'antenna-1', locationExternalKey: 'NOWHERE' }));
    expect(error).toBeInstanceOf(Invalid);
    expect(await port().appended()).toEqual([]);
  });

  it('by location id (the web application): the same event; an id of no existing location of the org is a 400 naming the id', async () => {
    const assigned = await assignScanPoint(port(), { orgId: 1, readerId: 'dock-1', capturePoint: 'antenna-1', locationId: 3 });
    expect(assigned).toEqual({ reader_id: 'dock-1', capture_point: 'antenna-1', location_id: 3, location_external_key: 'DOCK' });
    expect(await port().appended()).toEqual([
      { streamId: 'reader-dock-1', type: 'ScanPointAssigned', data: { org_id: 1, reader_id: 'dock-1', capture_point: 'antenna-1', location_id: 3, at: T0 } },
    ]);
    const error = await rejectionOf(assignScanPoint(port(), { orgId: 1, readerId: 'dock-1', capturePoint: 'antenna-2', locationId: 4 }));
    expect(error).toBeInstanceOf(Invalid);
    expect((error as DomainRefusal).fields[0]!.message).toBe('no live location with id 4 in organization 1');
  });
});

describe('unassignScanPoint', () => {
  beforeEach(async () => {
    await port().given('reader-dock-1', [
      { type: 'ReaderRegistered', data: { org_id: 1, reader_id: 'dock-1', at: T0 } },
      { type: 'ScanPointAssigned', data: { org_id: 1, reader_id: 'dock-1', capture_point: 'antenna-1', location_id: 3, at: T0 } },
    ]);
  });

  it('unassigns an assigned capture point of the reader, and waits for it naming the reader stream', async () => {
    const answer = await unassignScanPoint(port(), { orgId: 1, readerId: 'dock-1', capturePoint: 'antenna-1' });

    expect(answer).toEqual({ reader_id: 'dock-1', capture_point: 'antenna-1' });
    expect(await port().appended()).toEqual([
      { streamId: 'reader-dock-1', type: 'ScanPointUnassigned', data: { org_id: 1, reader_id: 'dock-1', capture_point: 'antenna-1', at: T0 } },
    ]);
    expect(port().checkpoints.waits.map((w) => w.streams.map((s) => s.streamId))).toEqual([['reader-dock-1']]);
    // The reads of that capture point place nothing from now on.
    expect(await port().readModels.scanPointLocations(['dock-1'])).toEqual(new Map());
  });

  it("with the CLI's project option: the CLI makes the change visible itself, told the appended stream, and no checkpoint is waited for", async () => {
    const project = vi.fn(async () => {});

    await unassignScanPoint(port(), { orgId: 1, readerId: 'dock-1', capturePoint: 'antenna-1' }, { project });

    expect(project).toHaveBeenCalledWith(await port().store.headPosition(), [{ streamId: 'reader-dock-1', projections: ['in-memory'] }]);
    expect(port().checkpoints.waits).toEqual([]);
  });

  it('a reader no org registered: 404, nothing appended', async () => {
    const error = await rejectionOf(unassignScanPoint(port(), { orgId: 1, readerId: 'gate-9', capturePoint: 'antenna-1' }));

    expect(error).toBeInstanceOf(NotFound);
    expect((error as DomainRefusal).message).toBe('reader gate-9 is not registered in organization 1');
    expect(await port().appended()).toEqual([]);
    expect(port().checkpoints.waits).toEqual([]);
  });

  it("another org's reader: 404 as if unknown (its points are not this org's to see), nothing appended", async () => {
    const error = await rejectionOf(unassignScanPoint(port(), { orgId: 2, readerId: 'dock-1', capturePoint: 'antenna-1' }));

    expect(error).toBeInstanceOf(NotFound);
    expect((error as DomainRefusal).message).toBe('reader dock-1 is not registered in organization 2');
    expect(await port().appended()).toEqual([]);
  });

  it('a capture point that is not assigned (any more): 404, nothing appended', async () => {
    await port().given('reader-dock-1', [{ type: 'ScanPointUnassigned', data: { org_id: 1, reader_id: 'dock-1', capture_point: 'antenna-1', at: T0 } }]);

    const error = await rejectionOf(unassignScanPoint(port(), { orgId: 1, readerId: 'dock-1', capturePoint: 'antenna-1' }));

    expect(error).toBeInstanceOf(NotFound);
    expect((error as DomainRefusal).message).toBe('capture point antenna-1 of reader dock-1 is not assigned');
    expect(await port().appended()).toEqual([]);
  });
});
