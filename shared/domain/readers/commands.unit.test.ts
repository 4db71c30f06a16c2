import { beforeEach, describe, expect, it } from 'vitest';
import { useInMemoryPort } from '../../../test/support/in-memory/port.js';
import { rejectionOf } from '../../../test/support/rejection.js';
import { ConflictError, ValidationFailed } from '../../errors.js';
import { assignScanPoint, registerReader } from './commands.js';

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
    expect(error).toBeInstanceOf(ConflictError);
    expect((error as ConflictError).detail).toBe('reader dock-1 is already registered to organization 2');
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

  it('assigns a capture point to the live location the key names', async () => {
    const assigned = await assignScanPoint(port(), { orgId: 1, readerId: 'dock-1', capturePoint: 'antenna-1', locationExternalKey: 'DOCK' });

    expect(assigned).toEqual({ reader_id: 'dock-1', capture_point: 'antenna-1', location_id: 3, location_external_key: 'DOCK' });
    expect(await port().appended()).toEqual([
      { streamId: 'reader-dock-1', type: 'ScanPointAssigned', data: { org_id: 1, reader_id: 'dock-1', capture_point: 'antenna-1', location_id: 3, at: T0 } },
    ]);
  });

  it('to a key no live location has: 400, nothing appended', async () => {
    const error = await rejectionOf(assignScanPoint(port(), { orgId: 1, readerId: 'dock-1', capturePoint: 'antenna-1', locationExternalKey: 'NOWHERE' }));
    expect(error).toBeInstanceOf(ValidationFailed);
    expect(await port().appended()).toEqual([]);
  });
});
