import { beforeEach, describe, expect, it } from 'vitest';
import { useInMemoryPort } from '../../../test/support/in-memory/port.js';
import { rejectionOf } from '../../../test/support/rejection.js';
import { ConflictError } from '../../errors.js';
import type { ScansRecordedData } from './events.js';
import { decodeReads, type RawRead } from './read-codec.js';
import { recordReaderScans, submitHandheldScans, type HandheldSubmission } from './commands.js';

/**
 * The scan handlers against the in-memory command port: each read resolved against the tags
 * (folded from the log), each reader's org and capture point from its stream's events.
 */

const T0 = '2026-01-01T00:00:00.000Z';
const US = Date.parse(T0) * 1000;
const ORG = 1;
const read = (value: string, extra: Partial<RawRead> = {}): RawRead => ({ tag_type: 'rfid', value, observedUs: US, rssi: null, ...extra });

const port = useInMemoryPort(T0);

beforeEach(async () => {
  // A dock (location 3) with a forklift (asset 5) tagged E280, and a reader whose antenna-1 is at the dock.
  await port().given('location-1-3', [
    {
      type: 'LocationCreated',
      data: { org_id: ORG, location_id: 3, external_key: 'DOCK', name: 'Dock', description: null, parent_id: null, is_active: true, valid_from: null, valid_to: null, at: T0 },
    },
  ]);
  await port().given('asset-1-5', [
    {
      type: 'AssetCreated',
      data: { org_id: ORG, asset_id: 5, external_key: 'FORK-1', minted: false, name: 'Forklift', description: null, is_active: true, valid_from: null, valid_to: null, metadata: {}, at: T0 },
    },
    { type: 'TagAttached', data: { org_id: ORG, owner_type: 'asset', owner_id: 5, tag_id: 1, tag_type: 'rfid', value: 'E280', is_active: true, valid_from: null, valid_to: null, at: T0 } },
  ]);
  await port().given('reader-dock-1', [
    { type: 'ReaderRegistered', data: { org_id: ORG, reader_id: 'dock-1', at: T0 } },
    { type: 'ScanPointAssigned', data: { org_id: ORG, reader_id: 'dock-1', capture_point: 'antenna-1', location_id: 3, at: T0 } },
  ]);
});

function readsOf(event: { data: Record<string, unknown> }) {
  return decodeReads(event.data as unknown as ScansRecordedData).map((r) => ({ value: r.value, capturePoint: r.capturePoint, assetId: r.assetId, cause: r.cause }));
}

describe('recordReaderScans', () => {
  it("places a reader's reads at its capture point's location, resolved to the asset whose tag they read; the rest as unplaced, with the cause", async () => {
    const { counts, unknownByCause } = await recordReaderScans(port(), [
      { readerId: 'dock-1', reads: [read('e280', { capturePoint: 'antenna-1' }), read('FFFF', { capturePoint: 'antenna-1' }), read('E280', { capturePoint: 'antenna-9' })] },
    ]);

    expect(counts).toEqual({ accepted: 1, unknown: 2 });
    expect(unknownByCause).toEqual(new Map([['unknown_tag', 1], ['unassigned_capture_point', 1]]));
    const appended = await port().appended();
    expect(appended.map((e) => [e.streamId, e.type])).toEqual([
      ['scans-1-3', 'ScansRecorded'],
      ['scans-1-unplaced', 'ScansRecorded'],
    ]);
    expect(readsOf(appended[0]!)).toEqual([
      { value: 'e280', capturePoint: 'antenna-1', assetId: 5, cause: null },
      { value: 'FFFF', capturePoint: 'antenna-1', assetId: null, cause: 'unknown_tag' },
    ]);
    // The answer does not wait for the projections: the consumer commits its offsets at once.
    expect(port().checkpoints.waits).toEqual([]);
  });
});

describe('submitHandheldScans', () => {
  const submission: HandheldSubmission = {
    orgId: ORG,
    submissionId: 's-1',
    deviceId: 'hh-1',
    location: { external_key: 'DOCK' },
    reads: [read('E280')],
    bodySha256: 'a'.repeat(64),
  };

  it('records the reads at the location and the submission once; the same submission again answers the first counts as a duplicate', async () => {
    const first = await submitHandheldScans(port(), submission);
    expect(first.answer).toEqual({ accepted: 1, unknown: 0, duplicate: false });
    const appended = await port().appended();
    expect(appended.map((e) => [e.streamId.replace(/[0-9a-f]{64}$/, '<sha256>'), e.type])).toEqual([
      ['scans-1-3', 'ScansRecorded'],
      ['submission-1-<sha256>', 'HandheldSubmissionReceived'],
    ]);
    expect(readsOf(appended[0]!)).toEqual([{ value: 'E280', capturePoint: null, assetId: 5, cause: null }]);
    expect(appended[1]!.data).toMatchObject({ submission_id: 's-1', device_id: 'hh-1', body_sha256: 'a'.repeat(64), accepted: 1, unknown: 0 });

    const again = await submitHandheldScans(port(), submission);
    expect(again.answer).toEqual({ accepted: 1, unknown: 0, duplicate: true });
    expect(await port().appended()).toHaveLength(2);
  });

  it('the same submission id with another body: 409', async () => {
    await submitHandheldScans(port(), submission);
    expect(await rejectionOf(submitHandheldScans(port(), { ...submission, bodySha256: 'b'.repeat(64) }))).toBeInstanceOf(ConflictError);
  });
});
