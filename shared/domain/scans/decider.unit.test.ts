import { describe, expect, it } from 'vitest';
import { Conflict, Invalid } from '../../../test/support/refusals.js';
import { DomainRefusal } from '../refusal.js';
import { seededRandom, shuffled } from '../../random.js';
import {
  handheldAnswer,
  handheldDecider,
  handheldUnknownByCause,
  locationStreamsOf,
  readerBatches,
  scanStreamOf,
  tagsToResolve,
  type ScanBatch,
  type SubmissionState,
  type SubmitHandheld,
} from './decider.js';
import { handheldAppends, locationScansState, scanAppends, scanPlacementClosure, type LocationScansState, type ScansAtStreams } from './commands.js';
import { locationScansStream, unplacedScansStream, type HandheldSubmissionReceivedData, type ScansRecordedData } from './events.js';
import { decodeReads, tagKey, type RawRead, type TagResolution } from './read-codec.js';

/**
 * The scans deciders (batches, resolutions, a stream's state and the clock in; events out) and the
 * runner's pure part that appends them at the revisions it read. No I/O.
 */

const AT = '2026-05-25T14:40:00.000Z';
const T = 1_779_720_000_000_000; // microseconds
const read = (value: string, dt = 0, extra: Partial<RawRead> = {}): RawRead => ({ tag_type: 'rfid', value, observedUs: T + dt, rssi: null, ...extra });
const placed = (assetId: number): TagResolution => ({ assetId, cause: null });
const unknownTag: TagResolution = { assetId: null, cause: 'unknown_tag' };
const open = (revision: bigint | 'no_stream' = 4n): LocationScansState => ({ expectedRevision: revision, closed: false });
const handheldSource = { kind: 'handheld' as const, device_id: 'hh-1', submission_id: 's-1' };

function resolutionsOf(org: number, entries: Array<[string, TagResolution]>): Map<number, Map<string, TagResolution>> {
  return new Map([[org, new Map(entries.map(([value, r]) => [tagKey('rfid', value), r]))]]);
}

function command(batches: ScanBatch[], resolutions: ScansAtStreams['resolutions'], streams: Array<[string, LocationScansState]> = []): ScansAtStreams {
  return { batches, resolutions, streams: new Map(streams), at: AT };
}

describe('the state of a location\'s scans stream', () => {
  it('no event: never written, open; its last event: its revision, closed only after ScanPlacementClosed', () => {
    expect(locationScansState(undefined)).toStrictEqual({ expectedRevision: 'no_stream', closed: false });
    expect(locationScansState({ type: 'ScansRecorded', revision: 7n })).toStrictEqual({ expectedRevision: 7n, closed: false });
    expect(locationScansState({ type: 'ScanPlacementClosed', revision: 8n })).toStrictEqual({ expectedRevision: 8n, closed: true });
  });

  it('a batch goes to its location\'s stream, or to the org\'s unplaced stream; only location streams are read', () => {
    const atLocation: ScanBatch = { orgId: 3, locationId: 10, source: handheldSource, reads: [read('A')] };
    const nowhere: ScanBatch = { orgId: 3, locationId: null, source: handheldSource, reads: [read('A')], cause: 'unassigned_capture_point' };
    expect(scanStreamOf(atLocation)).toBe(locationScansStream(3, 10));
    expect(scanStreamOf(nowhere)).toBe(unplacedScansStream(3));
    expect(locationStreamsOf([atLocation, nowhere, atLocation])).toStrictEqual([locationScansStream(3, 10)]);
  });

  it('the tags to resolve: distinct per org (RFID case-insensitively), none for batches that place nothing by cause', () => {
    const batches: ScanBatch[] = [
      { orgId: 3, locationId: 10, source: handheldSource, reads: [read('e1'), read('E1'), read('E2'), { ...read('E1'), tag_type: 'barcode' }] },
      { orgId: 4, locationId: 11, source: handheldSource, reads: [read('E1')] },
      { orgId: 0, locationId: null, source: { kind: 'reader', reader_id: 'r', capture_points: [] }, reads: [read('E9')], cause: 'unknown_reader' },
    ];
    expect(tagsToResolve(batches)).toStrictEqual(
      new Map([
        [3, [{ tag_type: 'rfid', value: 'E1' }, { tag_type: 'rfid', value: 'E2' }, { tag_type: 'barcode', value: 'E1' }]],
        [4, [{ tag_type: 'rfid', value: 'E1' }]],
      ]),
    );
  });
});

describe('scanAppends: the scans decider per stream, at the revision read', () => {
  it('given an open location, when reads of known and unknown tags arrive, then one event at its revision, counts and causes', () => {
    const batch: ScanBatch = { orgId: 3, locationId: 10, source: handheldSource, reads: [read('E1', 0, { rssi: -56 }), read('E2', 5), read('E1', 9)] };
    const decision = scanAppends(command([batch], resolutionsOf(3, [['E1', placed(7)], ['E2', unknownTag]]), [[locationScansStream(3, 10), open(4n)]]));
    expect(decision.counts).toStrictEqual({ accepted: 2, unknown: 1 });
    expect(decision.unknownByCause).toStrictEqual(new Map([['unknown_tag', 1]]));
    expect(decision.appends).toStrictEqual([
      {
        streamId: locationScansStream(3, 10),
        expectedRevision: 4n,
        events: [
          {
            type: 'ScansRecorded',
            data: { org_id: 3, location_id: 10, source: handheldSource, tags: [['rfid', 'E1', 7, null], ['rfid', 'E2', null, 'unknown_tag']], base_us: T, reads: '0,0,-56;1,5;0,9', at: AT },
          },
        ],
      },
    ]);
  });

  it('given a closed location (deleted), then every read is recorded as placing nothing: unknown_location', () => {
    const batch: ScanBatch = { orgId: 3, locationId: 10, source: handheldSource, reads: [read('E1'), read('E2')] };
    const decision = scanAppends(command([batch], resolutionsOf(3, [['E1', placed(7)], ['E2', placed(8)]]), [[locationScansStream(3, 10), { expectedRevision: 9n, closed: true }]]));
    expect(decision.counts).toStrictEqual({ accepted: 0, unknown: 2 });
    expect(decision.unknownByCause).toStrictEqual(new Map([['unknown_location', 2]]));
    const data = decision.appends[0]!.events[0]!.data as ScansRecordedData;
    expect(decision.appends[0]!.expectedRevision).toBe(9n);
    expect(data.tags).toStrictEqual([
      ['rfid', 'E1', null, 'unknown_location'],
      ['rfid', 'E2', null, 'unknown_location'],
    ]);
  });

  it('batches without a location place nothing by their cause, go to the unplaced stream at any revision, and keep their capture points', () => {
    const unknownReader: ScanBatch = { orgId: 0, locationId: null, source: { kind: 'reader', reader_id: 'r9', capture_points: [] }, reads: [read('E1', 0, { capturePoint: 'p1' }), read('E1', 1, { capturePoint: 'p2' })], cause: 'unknown_reader' };
    const unassigned: ScanBatch = { orgId: 3, locationId: null, source: { kind: 'reader', reader_id: 'r1', capture_points: [] }, reads: [read('E1', 0, { capturePoint: 'p3' })], cause: 'unassigned_capture_point' };
    const decision = scanAppends(command([unknownReader, unassigned], new Map()));
    expect(decision.counts).toStrictEqual({ accepted: 0, unknown: 3 });
    expect(decision.unknownByCause).toStrictEqual(new Map([['unknown_reader', 2], ['unassigned_capture_point', 1]]));
    expect(decision.appends.map((a) => [a.streamId, a.expectedRevision])).toStrictEqual([
      [unplacedScansStream(0), 'any'],
      [unplacedScansStream(3), 'any'],
    ]);
    expect((decision.appends[0]!.events[0]!.data as ScansRecordedData).source).toStrictEqual({ kind: 'reader', reader_id: 'r9', capture_points: ['p1', 'p2'] });
    expect((decision.appends[0]!.events[0]!.data as ScansRecordedData).reads).toBe('0,0,,0;0,1,,1');
  });

  it('two batches at one location are two events on one append; at two locations, two appends', () => {
    const streams: Array<[string, LocationScansState]> = [
      [locationScansStream(3, 10), open(1n)],
      [locationScansStream(3, 11), open('no_stream')],
    ];
    const resolutions = resolutionsOf(3, [['E1', placed(7)]]);
    const a: ScanBatch = { orgId: 3, locationId: 10, source: { kind: 'reader', reader_id: 'r1', capture_points: [] }, reads: [read('E1')] };
    const b: ScanBatch = { orgId: 3, locationId: 10, source: { kind: 'reader', reader_id: 'r2', capture_points: [] }, reads: [read('E1', 1)] };
    const c: ScanBatch = { orgId: 3, locationId: 11, source: { kind: 'reader', reader_id: 'r1', capture_points: [] }, reads: [read('E1', 2)] };
    const decision = scanAppends(command([a, b, c], resolutions, streams));
    expect(decision.appends.map((x) => [x.streamId, x.expectedRevision, x.events.length])).toStrictEqual([
      [locationScansStream(3, 10), 1n, 2],
      [locationScansStream(3, 11), 'no_stream', 1],
    ]);
    expect(decision.counts).toStrictEqual({ accepted: 3, unknown: 0 });
  });

  it('reads centuries apart in one batch become one event per era, every read once, each decoding to its own time', () => {
    const far = 2 ** 53 * 3;
    const batch: ScanBatch = { orgId: 3, locationId: 10, source: handheldSource, reads: [read('E1', -far), read('E1', 0), read('E1', 1), read('E1', far)] };
    const decision = scanAppends(command([batch], resolutionsOf(3, [['E1', placed(7)]]), [[locationScansStream(3, 10), open()]]));
    const events = decision.appends[0]!.events;
    expect(events).toHaveLength(3);
    const decoded = events.flatMap((e) => decodeReads(e.data as ScansRecordedData).map((r) => r.observedUs));
    expect(decoded.sort((x, y) => x - y)).toStrictEqual([T - far, T, T + 1, T + far]);
    expect(decision.counts).toStrictEqual({ accepted: 4, unknown: 0 });
  });

  it('counts add up to the reads, and the same reads in any order decide the same reads, over many random batches', () => {
    const random = seededRandom(26);
    for (let round = 0; round < 200; round++) {
      const values = ['E1', 'E2', 'E3', 'E4'];
      const resolutions = resolutionsOf(3, values.map((v, i) => [v, i % 2 === 0 ? placed(i + 1) : unknownTag] as [string, TagResolution]));
      const reads = Array.from({ length: 1 + Math.floor(random() * 20) }, (_, i) => read(values[Math.floor(random() * values.length)]!, i * 1000));
      const closed = random() < 0.3;
      const decide = (rs: RawRead[]) =>
        scanAppends(command([{ orgId: 3, locationId: 10, source: handheldSource, reads: rs }], resolutions, [[locationScansStream(3, 10), { expectedRevision: 2n, closed }]]));
      const one = decide(reads);
      const other = decide(shuffled(reads, random));
      expect(one.counts.accepted + one.counts.unknown).toBe(reads.length);
      expect(other.counts).toStrictEqual(one.counts);
      expect(other.unknownByCause).toStrictEqual(one.unknownByCause);
      const keys = (d: typeof one) => d.appends.flatMap((a) => a.events.flatMap((e) => decodeReads(e.data as ScansRecordedData).map((r) => `${r.readKey}:${r.assetId}:${r.cause}`))).sort();
      expect(keys(other)).toStrictEqual(keys(one));
      if (closed) expect(one.counts.accepted).toBe(0);
    }
  });
});

describe('reader batches', () => {
  it('one batch per reader and location, reads in message order; unknown readers and unassigned points by cause', () => {
    const orgs = new Map([['r1', 3]]);
    const points = new Map([
      ['r1\u0000p1', 10],
      ['r1\u0000p2', 10],
      ['r1\u0000p3', 11],
    ]);
    const batches = readerBatches(
      [
        { readerId: 'r1', reads: [read('E1', 0, { capturePoint: 'p1' }), read('E2', 1, { capturePoint: 'p3' }), read('E3', 2, { capturePoint: 'p9' })] },
        { readerId: 'r2', reads: [read('E4', 3, { capturePoint: 'p1' })] },
        { readerId: 'r1', reads: [read('E5', 4, { capturePoint: 'p2' })] },
      ],
      orgs,
      points,
    );
    const reader = (id: string) => ({ kind: 'reader', reader_id: id, capture_points: [] });
    expect(batches).toStrictEqual([
      { orgId: 3, locationId: 10, source: reader('r1'), reads: [read('E1', 0, { capturePoint: 'p1' }), read('E5', 4, { capturePoint: 'p2' })] },
      { orgId: 3, locationId: 11, source: reader('r1'), reads: [read('E2', 1, { capturePoint: 'p3' })] },
      { orgId: 3, locationId: null, source: reader('r1'), reads: [read('E3', 2, { capturePoint: 'p9' })], cause: 'unassigned_capture_point' },
      { orgId: 0, locationId: null, source: reader('r2'), reads: [read('E4', 3, { capturePoint: 'p1' })], cause: 'unknown_reader' },
    ]);
  });

  it('an unregistered reader places nothing, even where a point of its id is still assigned', () => {
    const batches = readerBatches([{ readerId: 'r7', reads: [read('E1', 0, { capturePoint: 'p1' })] }], new Map(), new Map([['r7\u0000p1', 10]]));
    expect(batches.map((b) => [b.orgId, b.locationId, b.cause])).toStrictEqual([[0, null, 'unknown_reader']]);
  });

  it('a read without a capture point is looked up under the empty one', () => {
    const batches = readerBatches([{ readerId: 'r1', reads: [read('E1')] }], new Map([['r1', 3]]), new Map([['r1\u0000', 12]]));
    expect(batches.map((b) => [b.locationId, b.cause])).toStrictEqual([[12, undefined]]);
  });
});

describe('handheld submissions', () => {
  const earlier = (sha: string, accepted = 2, unknown = 1): HandheldSubmissionReceivedData => ({ org_id: 3, submission_id: 's-1', device_id: 'hh-1', body_sha256: sha, accepted, unknown, at: AT });
  const submit = (overrides: Partial<SubmitHandheld> = {}): SubmitHandheld => ({
    orgId: 3,
    submissionId: 's-1',
    deviceId: 'hh-1',
    location: { ref: { by: 'id', id: 10 }, locationId: 10 },
    reads: [read('E1'), read('E2', 1)],
    bodySha256: 'abc',
    resolutions: resolutionsOf(3, [['E1', placed(7)], ['E2', unknownTag]]),
    scans: { closed: false },
    at: AT,
    ...overrides,
  });
  /** The decision as the runner makes it: the decider's events, appended at the revisions it read (the location's scans stream at 5). */
  const decided = (command: SubmitHandheld, state: SubmissionState = handheldDecider.initialState) => {
    const events = handheldDecider.decide(command, state);
    return {
      appends: handheldAppends(events, { streamId: locationScansStream(3, 10), expectedRevision: 5n }, 'submission-3-x'),
      answer: handheldAnswer(state, events),
      unknownByCause: handheldUnknownByCause(command, events),
    };
  };
  const refusalOf = (decide: () => unknown): unknown => {
    try {
      decide();
    } catch (error) {
      return error;
    }
    return undefined;
  };

  it('given no earlier submission, then the reads at its location and the record of the submission, on a stream that must not exist', () => {
    const decision = decided(submit());
    expect(decision.answer).toStrictEqual({ accepted: 1, unknown: 1, duplicate: false });
    expect(decision.unknownByCause).toStrictEqual(new Map([['unknown_tag', 1]]));
    expect(decision.appends.map((a) => [a.streamId, a.expectedRevision, a.events.map((e) => e.type)])).toStrictEqual([
      [locationScansStream(3, 10), 5n, ['ScansRecorded']],
      ['submission-3-x', 'no_stream', ['HandheldSubmissionReceived']],
    ]);
    expect(decision.appends[1]!.events[0]!.data).toStrictEqual({ org_id: 3, submission_id: 's-1', device_id: 'hh-1', body_sha256: 'abc', accepted: 1, unknown: 1, at: AT });
    expect((decision.appends[0]!.events[0]!.data as ScansRecordedData).source).toStrictEqual(handheldSource);
  });

  it('given the same submission with the same body, then the first answer, duplicate, and nothing appended', () => {
    const decision = decided(submit({ location: null }), { received: earlier('abc', 5, 2) });
    expect(decision.appends).toStrictEqual([]);
    expect(decision.answer).toStrictEqual({ accepted: 5, unknown: 2, duplicate: true });
    expect(decision.unknownByCause).toStrictEqual(new Map());
    expect(handheldDecider.decide(submit({ location: null }), { received: earlier('abc', 5, 2) })).toStrictEqual([]);
  });

  it('given the same submission_id with another body, then 409 conflict', () => {
    for (const location of [null, submit().location]) {
      const thrown = refusalOf(() => handheldDecider.decide(submit({ location }), { received: earlier('other') }));
      expect(thrown).toBeInstanceOf(Conflict);
      expect((thrown as DomainRefusal).message).toBe('submission_id was already used with a different body');
    }
  });

  it('given a first submission whose location names no existing location, then fk_not_found on the form it used', () => {
    for (const [ref, entry] of [
      [{ by: 'id', id: 10 }, { field: 'location.id', code: 'fk_not_found', message: 'location.id does not reference an existing record' }],
      [{ by: 'external_key', externalKey: 'GONE' }, { field: 'location.external_key', code: 'fk_not_found', message: 'location.external_key does not reference an existing record' }],
      [{ by: 'tag', tag: { tag_type: 'barcode', value: 'SHELF-1' } }, { field: 'location.tag', code: 'fk_not_found', message: 'location.tag is not the tag of an existing location' }],
    ] as const) {
      const thrown = refusalOf(() => handheldDecider.decide(submit({ location: { ref, locationId: null } }), handheldDecider.initialState));
      expect(thrown).toBeInstanceOf(Invalid);
      expect((thrown as DomainRefusal).fields).toStrictEqual([entry]);
    }
  });

  it('the record folds into the state a repeat is decided from', () => {
    const [recorded] = handheldAppends(handheldDecider.decide(submit(), handheldDecider.initialState), { streamId: 's', expectedRevision: 0n }, 'x').slice(1);
    const event = recorded!.events[0] as { type: 'HandheldSubmissionReceived'; data: HandheldSubmissionReceivedData };
    expect(handheldDecider.evolve(handheldDecider.initialState, event)).toStrictEqual({ received: event.data });
  });
});

describe('closing a location\'s scans', () => {
  it('a ScanPlacementClosed on its scans stream at the revision read', () => {
    expect(scanPlacementClosure(3, 10, 6n, AT)).toStrictEqual({
      streamId: locationScansStream(3, 10),
      expectedRevision: 6n,
      events: [{ type: 'ScanPlacementClosed', data: { org_id: 3, location_id: 10, at: AT } }],
    });
  });
});
