import { createHash } from 'node:crypto';
import { Conflict } from '../../../test/support/refusals.js';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { useInMemoryPort } from '../../../test/support/in-memory/port.js';
import { rejectionOf } from '../../../test/support/rejection.js';
import type { ScansRecordedData } from './events.js';
import { decodeReads, type RawRead } from './read-codec.js';
import { DEAD_LETTER_PAYLOAD_MAX_BYTES, keepReaderDeadLetters, recordReaderScans, submitHandheldScans, type HandheldSubmission, type ReaderDeadLetter } from './commands.js';

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
    location: { by: 'external_key', externalKey: 'DOCK' },
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
    expect(await rejectionOf(submitHandheldScans(port(), { ...submission, bodySha256: 'b'.repeat(64) }))).toBeInstanceOf(Conflict);
  });
});

describe('recordReaderScans, other paths', () => {
  it("reads of a reader no org registered: recorded in the unregistered readers' stream (org 0) as unknown_reader, and no tag is looked up", async () => {
    const lookups = vi.spyOn(port().readModels, 'lookupTags');

    const { counts, unknownByCause } = await recordReaderScans(port(), [{ readerId: 'gate-9', reads: [read('E280', { capturePoint: 'antenna-1' })] }]);

    expect(counts).toEqual({ accepted: 0, unknown: 1 });
    expect(unknownByCause).toEqual(new Map([['unknown_reader', 1]]));
    const appended = await port().appended();
    expect(appended.map((e) => [e.streamId, e.type, e.data.org_id, e.data.location_id])).toEqual([['scans-unregistered-readers', 'ScansRecorded', 0, null]]);
    expect(readsOf(appended[0]!)).toEqual([{ value: 'E280', capturePoint: 'antenna-1', assetId: null, cause: 'unknown_reader' }]);
    expect(lookups).not.toHaveBeenCalled();
  });

  it("a detached tag's value is a retired_tag, a location's own tag a location_tag: both recorded at the location, placing nothing", async () => {
    await port().given('asset-1-5', [
      { type: 'TagAttached', data: { org_id: ORG, owner_type: 'asset', owner_id: 5, tag_id: 2, tag_type: 'rfid', value: 'A1', is_active: true, valid_from: null, valid_to: null, at: T0 } },
      { type: 'TagDetached', data: { org_id: ORG, owner_type: 'asset', owner_id: 5, tag_id: 2, tag_type: 'rfid', value: 'A1', reason: 'detached', at: T0 } },
    ]);
    await port().given('location-1-3', [
      { type: 'TagAttached', data: { org_id: ORG, owner_type: 'location', owner_id: 3, tag_id: 3, tag_type: 'rfid', value: 'B2', is_active: true, valid_from: null, valid_to: null, at: T0 } },
    ]);

    const { counts, unknownByCause } = await recordReaderScans(port(), [{ readerId: 'dock-1', reads: [read('A1', { capturePoint: 'antenna-1' }), read('B2', { capturePoint: 'antenna-1' })] }]);

    expect(counts).toEqual({ accepted: 0, unknown: 2 });
    expect(unknownByCause).toEqual(new Map([['retired_tag', 1], ['location_tag', 1]]));
    const appended = await port().appended();
    expect(appended.map((e) => e.streamId)).toEqual(['scans-1-3']);
    expect(readsOf(appended[0]!)).toEqual([
      { value: 'A1', capturePoint: 'antenna-1', assetId: null, cause: 'retired_tag' },
      { value: 'B2', capturePoint: 'antenna-1', assetId: null, cause: 'location_tag' },
    ]);
  });

  it('the location deleted between the decision and the append: the append fails on the scans stream, and the retry records the reads there once, as unknown_location', async () => {
    // The delete closes the location's scans stream just before the scans' append (another writer wins the race).
    port().store.beforeNextAppend(async () => {
      await port().store.appendToStream('scans-1-3', [{ type: 'ScanPlacementClosed', data: { org_id: ORG, location_id: 3, at: T0 } }], 'no_stream');
    });

    const { counts, unknownByCause } = await recordReaderScans(port(), [{ readerId: 'dock-1', reads: [read('E280', { capturePoint: 'antenna-1' })] }]);

    expect(counts).toEqual({ accepted: 0, unknown: 1 });
    expect(unknownByCause).toEqual(new Map([['unknown_location', 1]]));
    const appended = await port().appended();
    expect(appended.map((e) => [e.streamId, e.type])).toEqual([
      ['scans-1-3', 'ScanPlacementClosed'],
      ['scans-1-3', 'ScansRecorded'],
    ]);
    expect(readsOf(appended[1]!)).toEqual([{ value: 'E280', capturePoint: 'antenna-1', assetId: null, cause: 'unknown_location' }]);
    expect(port().checkpoints.waits).toEqual([]);
  });
});

describe('submitHandheldScans, a lost race', () => {
  const submission: HandheldSubmission = {
    orgId: ORG,
    submissionId: 's-1',
    deviceId: 'hh-1',
    location: { by: 'external_key', externalKey: 'DOCK' },
    reads: [read('E280')],
    bodySha256: 'a'.repeat(64),
  };
  const streamsOf = (events: Array<{ streamId: string; type: string }>) => events.map((e) => [e.streamId.replace(/[0-9a-f]{64}$/, '<sha256>'), e.type]);

  it("a reader's scans at the same location appended first: the append fails on the location's revision, the retry records the submission once", async () => {
    // Another writer (a fixed reader's batch at the dock) appends to scans-1-3 just before the submission's append.
    port().store.beforeNextAppend(async () => {
      await recordReaderScans(port(), [{ readerId: 'dock-1', reads: [read('E280', { capturePoint: 'antenna-1' })] }]);
    });
    const appendsTried = vi.spyOn(port().store, 'appendToStreams');

    const { answer } = await submitHandheldScans(port(), submission);

    expect(answer).toEqual({ accepted: 1, unknown: 0, duplicate: false });
    // The submission's two appends (the lost one and its retry) and the reader's in between.
    expect(appendsTried).toHaveBeenCalledTimes(3);
    const appended = await port().appended();
    expect(streamsOf(appended)).toEqual([
      ['scans-1-3', 'ScansRecorded'],
      ['scans-1-3', 'ScansRecorded'],
      ['submission-1-<sha256>', 'HandheldSubmissionReceived'],
    ]);
    expect(appended[1]!.data.source).toEqual({ kind: 'handheld', device_id: 'hh-1', submission_id: 's-1' });
    expect((await port().store.readStream('scans-1-3')).map((e) => e.revision)).toEqual([0n, 1n]);
    // One wait, for the retry's append.
    expect(port().checkpoints.waits).toHaveLength(1);
    expect(port().checkpoints.waits[0]!.position).toEqual(await port().store.headPosition());
  });

  it('the same submission recorded by a concurrent request first: the retry finds it and answers its counts as a duplicate, appending nothing more', async () => {
    // The same request, sent twice at once: the other one's identical decision lands first.
    port().store.beforeNextAppend(async (appends) => {
      await port().store.appendToStreams(appends.map((a) => ({ ...a, events: a.events.map((e) => ({ type: e.type, data: e.data })) })));
    });

    const { answer } = await submitHandheldScans(port(), submission);

    expect(answer).toEqual({ accepted: 1, unknown: 0, duplicate: true });
    expect(streamsOf(await port().appended())).toEqual([
      ['scans-1-3', 'ScansRecorded'],
      ['submission-1-<sha256>', 'HandheldSubmissionReceived'],
    ]);
    // Answered once the other request's append is visible, as that request is.
    expect(port().checkpoints.waits).toHaveLength(1);
    expect(port().checkpoints.waits[0]!.position).toEqual(await port().store.headPosition());
  });
});

describe('keepReaderDeadLetters', () => {
  const RECEIVED = new Date('2026-01-01T00:00:05.000Z');
  const letter = (payload: Buffer, reason = 'not JSON'): ReaderDeadLetter => ({ topic: 'readers/dock-1', payload, reason, receivedAt: RECEIVED });
  const streamOf = (topic: string, payload: Buffer) => `scan-dead-letter-${createHash('sha256').update(topic).update('\u0000').update(payload).digest('hex')}`;

  it("keeps each refused message once in its own stream, with the registered reader's org it names, its payload as text or base64; answers how many it kept, without waiting", async () => {
    const json = Buffer.from('{"reader_id":"dock-1","reads":"oops"}');
    const binary = Buffer.from([0xff, 0x00, 0xfe]);
    const named = Buffer.from('{"rfidReaderName":"gate-9"}');

    const kept = await keepReaderDeadLetters(port(), [
      letter(json, 'reads: expected an array'),
      letter(binary),
      // Delivered twice in one batch: the first delivery is the one kept.
      { ...letter(json, 'reads: expected an array'), receivedAt: new Date('2026-01-01T00:00:09.000Z') },
      letter(named, 'no tags'),
    ]);

    expect(kept).toBe(3);
    const appended = await port().appended();
    const common = { transport: 'mqtt', topic: 'readers/dock-1', received_at: RECEIVED.toISOString() };
    expect(appended).toEqual([
      {
        streamId: streamOf('readers/dock-1', json),
        type: 'ReaderMessageDeadLettered',
        data: { ...common, reason: 'reads: expected an array', reader_id: 'dock-1', org_id: ORG, payload: json.toString(), payload_encoding: 'utf8', payload_bytes: json.length },
      },
      {
        streamId: streamOf('readers/dock-1', binary),
        type: 'ReaderMessageDeadLettered',
        data: { ...common, reason: 'not JSON', reader_id: null, org_id: null, payload: binary.toString('base64'), payload_encoding: 'base64', payload_bytes: 3 },
      },
      {
        streamId: streamOf('readers/dock-1', named),
        type: 'ReaderMessageDeadLettered',
        data: { ...common, reason: 'no tags', reader_id: 'gate-9', org_id: null, payload: named.toString(), payload_encoding: 'utf8', payload_bytes: named.length },
      },
    ].sort((a, b) => (a.streamId < b.streamId ? -1 : 1)));
    // The reader consumers acknowledge at once: no read-your-writes wait.
    expect(port().checkpoints.waits).toEqual([]);
  });

  it('the same message delivered again (a crash before its acknowledgement) is kept once: its event id comes from its topic and payload', async () => {
    const payload = Buffer.from('not json');
    await keepReaderDeadLetters(port(), [letter(payload)]);

    expect(await keepReaderDeadLetters(port(), [letter(payload)])).toBe(1);

    expect(await port().appended()).toHaveLength(1);
    expect(await port().store.readStream(streamOf('readers/dock-1', payload))).toHaveLength(1);
  });

  it('text Postgres cannot keep (NUL, a lone surrogate) is replaced in the reader id and the reason; a payload over the limit is cut, its size kept', async () => {
    const payload = Buffer.from(`{"reader_id":"dock\\u0000-1","pad":"${'x'.repeat(DEAD_LETTER_PAYLOAD_MAX_BYTES)}"}`);

    await keepReaderDeadLetters(port(), [letter(payload, 'key "\uD800" is not allowed')]);

    const [event] = await port().appended();
    expect(event!.data).toMatchObject({
      reader_id: 'dock\uFFFD-1',
      org_id: null,
      reason: 'key "\uFFFD" is not allowed',
      payload: payload.subarray(0, DEAD_LETTER_PAYLOAD_MAX_BYTES).toString(),
      payload_encoding: 'utf8',
      payload_bytes: payload.length,
    });
  });

  it('letters that name no reader do not ask the readers read model', async () => {
    const orgs = vi.spyOn(port().readModels, 'readerOrgs');

    expect(await keepReaderDeadLetters(port(), [letter(Buffer.from('[1,2]')), letter(Buffer.from('{"reader_id":7}'))])).toBe(2);

    expect(orgs).not.toHaveBeenCalled();
    expect((await port().appended()).map((e) => [e.data.reader_id, e.data.org_id])).toEqual([
      [null, null],
      [null, null],
    ]);
  });
});
