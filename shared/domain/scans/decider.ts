import { ConflictError } from '../../errors.js';
import type { EventData, ExpectedRevision, StreamAppend } from '../../event-store/port.js';
import {
  HandheldSubmissionReceived,
  NO_ORG,
  ScanPlacementClosed,
  ScansRecorded,
  locationScansStream,
  unplacedScansStream,
  type HandheldSubmissionReceivedData,
  type ScanSource,
  type ScansRecordedData,
  type UnknownCause,
} from './events.js';
import { encodeReads, readsInExactSpans, tagKey, type RawRead, type TagResolution } from './read-codec.js';

/**
 * The scan decisions, pure like every other capability's decider: the command handlers
 * (commands.ts) read what a decision needs (the tags' resolutions, the location streams' states,
 * an earlier submission, the clock) and append what it returns. What a read places, which stream
 * takes it and what a duplicate submission is are decided here and nowhere else
 * (docs/scan-ingestion.md, "How a read is resolved" and "Handheld submissions", where sending a
 * submission again is safe).
 */

/**
 * Reads from one source taken at one location (resolved and live when the batch was accepted), or
 * at none: then `cause` says why (an unregistered reader, org 0; an unassigned capture point).
 */
export interface ScanBatch {
  orgId: number;
  locationId: number | null;
  source: ScanSource;
  reads: RawRead[];
  cause?: 'unknown_reader' | 'unassigned_capture_point';
}

export interface ScanCounts {
  /** Reads that placed an asset. */
  accepted: number;
  /** Reads that placed nothing (unknown or retired tag, a location's own tag, a deleted location, ...). */
  unknown: number;
}

/** A location's scans stream as a decision needs it: the revision to append at, and whether the location was deleted. */
export interface LocationScansState {
  expectedRevision: ExpectedRevision;
  /** The location was deleted: reads taken there place nothing. */
  closed: boolean;
}

/** The state of a location's scans stream from its last event (none: a stream never written). */
export function locationScansState(last: { type: string; revision: bigint } | undefined): LocationScansState {
  return { expectedRevision: last ? last.revision : 'no_stream', closed: last?.type === ScanPlacementClosed.type };
}

/** The stream a batch's reads go to: its location's scans stream, or the org's unplaced one. */
export function scanStreamOf(batch: ScanBatch): string {
  return batch.locationId === null ? unplacedScansStream(batch.orgId) : locationScansStream(batch.orgId, batch.locationId);
}

/** The location streams the batches need the state of. */
export function locationStreamsOf(batches: readonly ScanBatch[]): string[] {
  return [...new Set(batches.filter((b) => b.locationId !== null).map(scanStreamOf))];
}

/** The distinct tags each org's batches read, to resolve against the tags read model (batches of unknown readers and unassigned points resolve nothing). */
export function tagsToResolve(batches: readonly ScanBatch[]): Map<number, Array<{ tag_type: string; value: string }>> {
  const byOrg = new Map<number, Map<string, { tag_type: string; value: string }>>();
  for (const batch of batches) {
    if (batch.cause) continue;
    const tags = byOrg.get(batch.orgId) ?? new Map<string, { tag_type: string; value: string }>();
    for (const read of batch.reads) tags.set(tagKey(read.tag_type, read.value), { tag_type: read.tag_type, value: read.value });
    byOrg.set(batch.orgId, tags);
  }
  return new Map([...byOrg].map(([orgId, tags]) => [orgId, [...tags.values()]]));
}

export interface RecordScans {
  batches: readonly ScanBatch[];
  /** Per org, each tag key's (tagKey) resolution against the tags read model now. */
  resolutions: ReadonlyMap<number, ReadonlyMap<string, TagResolution>>;
  /** The state of each location stream a batch names (locationStreamsOf). */
  streams: ReadonlyMap<string, LocationScansState>;
  at: string;
}

export interface ScanDecision {
  appends: StreamAppend[];
  counts: ScanCounts;
  unknownByCause: Map<UnknownCause, number>;
}

/**
 * The scan appends of some batches: each read resolved as the command says (the resolution is
 * recorded in the event), one ScansRecorded event per batch (per era, for reads centuries apart:
 * readsInExactSpans). Reads at a location go to its scans stream, expecting the revision the
 * handler read: a location delete appends to that stream too, so a delete and a scan that race
 * cannot both go through, and a batch at a location whose stream is closed is recorded with every
 * read unknown (`unknown_location`). Reads at no location go to the org's unplaced stream, in any
 * order.
 */
export function decideScans(command: RecordScans): ScanDecision {
  const counts: ScanCounts = { accepted: 0, unknown: 0 };
  const unknownByCause = new Map<UnknownCause, number>();
  const byStream = new Map<string, StreamAppend>();
  for (const batch of command.batches) {
    const streamId = scanStreamOf(batch);
    // Stryker disable next-line BooleanLiteral: equivalent, a batch at no location always has its cause, which `resolve` answers before it asks whether the stream is closed
    const stream: LocationScansState = batch.locationId === null ? { expectedRevision: 'any', closed: false } : command.streams.get(streamId)!;
    const resolutions = command.resolutions.get(batch.orgId);
    const resolve = (read: RawRead): TagResolution => {
      if (batch.cause) return { assetId: null, cause: batch.cause };
      if (stream.closed) return { assetId: null, cause: 'unknown_location' };
      return resolutions!.get(tagKey(read.tag_type, read.value))!;
    };
    for (const read of batch.reads) {
      const { assetId, cause } = resolve(read);
      if (assetId !== null) counts.accepted++;
      else {
        counts.unknown++;
        unknownByCause.set(cause!, (unknownByCause.get(cause!) ?? 0) + 1);
      }
    }
    const append = byStream.get(streamId) ?? { streamId, expectedRevision: stream.expectedRevision, events: [] as EventData[] };
    for (const reads of readsInExactSpans(batch.reads)) {
      const { capturePoints, ...encoded } = encodeReads(reads, resolve);
      const source: ScanSource = batch.source.kind === 'reader' ? { ...batch.source, capture_points: capturePoints } : batch.source;
      const data: ScansRecordedData = { org_id: batch.orgId, location_id: batch.locationId, source, ...encoded, at: command.at };
      append.events.push({ type: ScansRecorded.type, data });
    }
    byStream.set(streamId, append);
  }
  return { appends: [...byStream.values()], counts, unknownByCause };
}

/** For a location's soft delete: the revision to close its scans at, read after every scan there is projected. */
export function scanPlacementClosure(orgId: number, locationId: number, expectedRevision: ExpectedRevision, at: string): StreamAppend {
  return {
    streamId: locationScansStream(orgId, locationId),
    expectedRevision,
    events: [{ type: ScanPlacementClosed.type, data: { org_id: orgId, location_id: locationId, at } }],
  };
}

// ---------------------------------------------------------------------------------------------
// Fixed readers (docs/scan-ingestion.md, "Fixed readers over Kafka")

export interface ReaderMessage {
  readerId: string;
  reads: RawRead[];
}

/**
 * The batches of some reader messages: each reader's org (`readers register`; none: org 0,
 * `unknown_reader`), each (reader, capture point) its location (`scan-points assign`; none:
 * `unassigned_capture_point`), one batch per reader and location, reads in message order.
 */
export function readerBatches(messages: readonly ReaderMessage[], orgs: ReadonlyMap<string, number>, points: ReadonlyMap<string, number>): ScanBatch[] {
  const batches = new Map<string, ScanBatch>();
  for (const message of messages) {
    const orgId = orgs.get(message.readerId);
    for (const read of message.reads) {
      const locationId = orgId === undefined ? null : (points.get(`${message.readerId}\u0000${read.capturePoint ?? ''}`) ?? null);
      const cause = orgId === undefined ? 'unknown_reader' : locationId === null ? 'unassigned_capture_point' : undefined;
      // Stryker disable next-line StringLiteral: equivalent, reader ids hold no control character, so no separator but NUL can make two keys collide where NUL does not
      const key = `${message.readerId}\u0000${locationId ?? ''}`;
      let batch = batches.get(key);
      if (!batch) {
        batch = { orgId: orgId ?? NO_ORG, locationId, source: { kind: 'reader', reader_id: message.readerId, capture_points: [] }, reads: [], ...(cause ? { cause } : {}) };
        batches.set(key, batch);
      }
      batch.reads.push(read);
    }
  }
  return [...batches.values()];
}

// ---------------------------------------------------------------------------------------------
// Handheld submissions (docs/scan-ingestion.md, "Handheld submissions")

export interface HandheldAnswer extends ScanCounts {
  duplicate: boolean;
}

/**
 * A submission_id received before: the first answer's counts with `duplicate: true` when the body
 * is the same (SHA-256 of its canonical JSON), a 409 when it is not; null for a first submission.
 */
export function repeatedSubmission(earlier: HandheldSubmissionReceivedData | null, bodySha256: string): HandheldAnswer | null {
  if (!earlier) return null;
  if (earlier.body_sha256 !== bodySha256) throw new ConflictError('submission_id was already used with a different body');
  return { accepted: earlier.accepted, unknown: earlier.unknown, duplicate: true };
}

export interface SubmitHandheld {
  orgId: number;
  submissionId: string;
  deviceId: string;
  /** The live location the submission names (the handler resolved it). */
  locationId: number;
  reads: RawRead[];
  bodySha256: string;
  /** The submission's stream: its stream id, and its record if it was received before. */
  submissionStream: string;
  earlier: HandheldSubmissionReceivedData | null;
  resolutions: ReadonlyMap<number, ReadonlyMap<string, TagResolution>>;
  streams: ReadonlyMap<string, LocationScansState>;
  at: string;
}

/**
 * A handheld submission, once per (org, submission_id): its reads as one batch at its location,
 * and a record of the submission (its body's hash and counts) on a stream that must not exist
 * yet, in one atomic append; a repeat appends nothing (repeatedSubmission).
 */
export function decideHandheld(command: SubmitHandheld): ScanDecision & { answer: HandheldAnswer } {
  const repeat = repeatedSubmission(command.earlier, command.bodySha256);
  if (repeat) return { appends: [], counts: { accepted: repeat.accepted, unknown: repeat.unknown }, unknownByCause: new Map(), answer: repeat };
  const source: ScanSource = { kind: 'handheld', device_id: command.deviceId, submission_id: command.submissionId };
  const decision = decideScans({
    batches: [{ orgId: command.orgId, locationId: command.locationId, source, reads: command.reads }],
    resolutions: command.resolutions,
    streams: command.streams,
    at: command.at,
  });
  const received: HandheldSubmissionReceivedData = {
    org_id: command.orgId,
    submission_id: command.submissionId,
    device_id: command.deviceId,
    body_sha256: command.bodySha256,
    ...decision.counts,
    at: command.at,
  };
  decision.appends.push({ streamId: command.submissionStream, expectedRevision: 'no_stream', events: [{ type: HandheldSubmissionReceived.type, data: received }] });
  return { ...decision, answer: { ...decision.counts, duplicate: false } };
}
