import { fieldErrors, type FieldError } from '../../errors.js';
import type { Decider } from '../decider.js';
import { refuse } from '../refusal.js';
import {
  HandheldSubmissionReceived,
  NO_ORG,
  ScanPlacementClosed,
  ScanPlacementReopened,
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
 * The scan decisions, in the shape of every other capability's decider (decider.ts): the command
 * runners (commands.ts) read what a decision needs (the tags' resolutions, the scans stream's
 * state, an earlier submission, the clock), decide, and append the events at the revisions they
 * read. What a read places, which stream takes it and what a duplicate submission is are decided
 * here and nowhere else (docs/scan-ingestion.md, "How a read is resolved" and "Handheld
 * submissions", where sending a submission again is safe).
 */

/**
 * Reads from one source taken at one location (resolved and existing when the batch was accepted), or
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

// ---------------------------------------------------------------------------------------------
// A scans stream: a location's (or an org's unplaced reads)

/**
 * A scans stream as a decision needs it: whether its location was deleted (its last event closes
 * it). The state is that of the stream's last event, so a runner folds that event alone.
 */
export interface ScanStreamState {
  /** The location was deleted: reads taken there place nothing. */
  closed: boolean;
}

/** Reads for one scans stream: every batch goes to that stream (scanStreamOf). */
export interface RecordScans {
  batches: readonly ScanBatch[];
  /** Per org, each tag key's (tagKey) resolution against the tags read model now. */
  resolutions: ReadonlyMap<number, ReadonlyMap<string, TagResolution>>;
  at: string;
}

export type ScanStreamEvent =
  | { type: typeof ScansRecorded.type; data: ScansRecordedData }
  | { type: typeof ScanPlacementClosed.type; data: { org_id: number; location_id: number; at: string } }
  /** A restored location's stream, open again: any last event but a closure is open. */
  | { type: typeof ScanPlacementReopened.type; data: { org_id: number; location_id: number; at: string } };

/** What a read of a batch places at a stream in this state: nothing by the batch's cause, nothing at a closed location, else its tag's resolution. */
function resolverOf(batch: ScanBatch, state: ScanStreamState, resolutions: RecordScans['resolutions']): (read: RawRead) => TagResolution {
  const resolved = resolutions.get(batch.orgId);
  return (read) => {
    if (batch.cause) return { assetId: null, cause: batch.cause };
    if (state.closed) return { assetId: null, cause: 'unknown_location' };
    return resolved!.get(tagKey(read.tag_type, read.value))!;
  };
}

/**
 * The events of some batches at one scans stream: each read resolved as the command says (the
 * resolution is recorded in the event), one ScansRecorded per batch (per era, for reads centuries
 * apart: readsInExactSpans). At a closed stream every read is recorded as placing nothing
 * (`unknown_location`).
 */
function decideScans(command: RecordScans, state: ScanStreamState): Array<Extract<ScanStreamEvent, { type: 'ScansRecorded' }>> {
  const events: Array<Extract<ScanStreamEvent, { type: 'ScansRecorded' }>> = [];
  for (const batch of command.batches) {
    const resolve = resolverOf(batch, state, command.resolutions);
    for (const reads of readsInExactSpans(batch.reads)) {
      const { capturePoints, ...encoded } = encodeReads(reads, resolve);
      const source: ScanSource = batch.source.kind === 'reader' ? { ...batch.source, capture_points: capturePoints } : batch.source;
      events.push({ type: 'ScansRecorded', data: { org_id: batch.orgId, location_id: batch.locationId, source, ...encoded, at: command.at } });
    }
  }
  return events;
}

export const scanStreamDecider: Decider<ScanStreamState, RecordScans, ScanStreamEvent> = {
  initialState: { closed: false },
  evolve: (_state, event) => ({ closed: event.type === ScanPlacementClosed.type }),
  decide: decideScans,
};

/** How many reads of the batches place an asset and how many place nothing, by cause, at a stream in this state: what `decide` records. */
export function scanCounts(command: RecordScans, state: ScanStreamState): { counts: ScanCounts; unknownByCause: Map<UnknownCause, number> } {
  const counts: ScanCounts = { accepted: 0, unknown: 0 };
  const unknownByCause = new Map<UnknownCause, number>();
  for (const batch of command.batches) {
    const resolve = resolverOf(batch, state, command.resolutions);
    for (const read of batch.reads) {
      const { assetId, cause } = resolve(read);
      if (assetId !== null) counts.accepted++;
      else {
        counts.unknown++;
        unknownByCause.set(cause!, (unknownByCause.get(cause!) ?? 0) + 1);
      }
    }
  }
  return { counts, unknownByCause };
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

/** How a submission names its location: exactly one form (decoded once, by the body's schema). */
export type LocationRef =
  | { by: 'id'; id: number }
  | { by: 'external_key'; externalKey: string }
  | { by: 'tag'; tag: { tag_type: string; value: string } };

/** The location a submission names, and the existing one the handler found for it (none: null). */
export interface LocationLookup {
  ref: LocationRef;
  locationId: number | null;
}

export interface HandheldAnswer extends ScanCounts {
  duplicate: boolean;
}

/** A submission's stream: the record of its first receipt, if any. */
export interface SubmissionState {
  received: HandheldSubmissionReceivedData | null;
}

export interface SubmitHandheld {
  orgId: number;
  submissionId: string;
  deviceId: string;
  /** Null when the handler did not look it up: a submission received before is answered from its record. */
  location: LocationLookup | null;
  reads: RawRead[];
  bodySha256: string;
  resolutions: RecordScans['resolutions'];
  /** The state of the location's scans stream. */
  scans: ScanStreamState;
  at: string;
}

export type HandheldEvent = Extract<ScanStreamEvent, { type: 'ScansRecorded' }> | { type: typeof HandheldSubmissionReceived.type; data: HandheldSubmissionReceivedData };

/**
 * A submission_id received before: the first answer's counts with `duplicate: true` when the body
 * is the same (SHA-256 of its canonical JSON), a 409 when it is not; null for a first submission.
 */
function repeatedSubmission(earlier: HandheldSubmissionReceivedData | null, bodySha256: string): HandheldAnswer | null {
  if (!earlier) return null;
  if (earlier.body_sha256 !== bodySha256) throw refuse.conflict('submission_id was already used with a different body');
  return { accepted: earlier.accepted, unknown: earlier.unknown, duplicate: true };
}

/** The field error of a location that names no existing location, in the form the submission used. */
function locationNotFound(ref: LocationRef): FieldError {
  switch (ref.by) {
    case 'tag':
      return fieldErrors.fkNotFound('location.tag', 'location.tag is not the tag of an existing location');
    case 'id':
      return fieldErrors.fkNotFound('location.id');
    case 'external_key':
      return fieldErrors.fkNotFound('location.external_key');
  }
}

/** The reads of a first submission, as one batch at its location. */
function handheldScans(command: SubmitHandheld, locationId: number): RecordScans {
  const source: ScanSource = { kind: 'handheld', device_id: command.deviceId, submission_id: command.submissionId };
  return { batches: [{ orgId: command.orgId, locationId, source, reads: command.reads }], resolutions: command.resolutions, at: command.at };
}

/**
 * A handheld submission, once per (org, submission_id): its reads as one batch at its location
 * (on that location's scans stream), and the record of the submission (its body's hash and
 * counts) on its own stream; a repeat decides nothing (its answer is the record's), another body
 * under the same id is a conflict, and a location that names no existing location is its field error.
 */
function decideHandheld(command: SubmitHandheld, state: SubmissionState): HandheldEvent[] {
  if (repeatedSubmission(state.received, command.bodySha256)) return [];
  const locationId = command.location?.locationId ?? null;
  if (locationId === null) throw refuse.invalid([locationNotFound(command.location!.ref)]);
  const scans = handheldScans(command, locationId);
  const { counts } = scanCounts(scans, command.scans);
  const received: HandheldSubmissionReceivedData = {
    org_id: command.orgId,
    submission_id: command.submissionId,
    device_id: command.deviceId,
    body_sha256: command.bodySha256,
    ...counts,
    at: command.at,
  };
  return [...decideScans(scans, command.scans), { type: 'HandheldSubmissionReceived', data: received }];
}

export const handheldDecider: Decider<SubmissionState, SubmitHandheld, HandheldEvent> = {
  initialState: { received: null },
  evolve: (state, event) => (event.type === 'HandheldSubmissionReceived' ? { received: event.data } : state),
  decide: decideHandheld,
};

/** The answer of a decided submission: the new record's counts, or (nothing decided) the first record's, as a duplicate. */
export function handheldAnswer(state: SubmissionState, events: readonly HandheldEvent[]): HandheldAnswer {
  const record = events.find((e) => e.type === 'HandheldSubmissionReceived')?.data ?? state.received!;
  return { accepted: record.accepted, unknown: record.unknown, duplicate: events.length === 0 };
}

/**
 * What each read of a first submission placed, in the order sent (the asset, or nothing and why),
 * as its events record it; null for a repeat, which decided nothing (the console shows it,
 * docs/web-app.md "Scanning in the console").
 */
export function handheldReadResolutions(command: SubmitHandheld, events: readonly HandheldEvent[]): TagResolution[] | null {
  if (events.length === 0 || command.location?.locationId == null) return null;
  const scans = handheldScans(command, command.location.locationId);
  const resolve = resolverOf(scans.batches[0]!, command.scans, scans.resolutions);
  return command.reads.map((read) => resolve(read));
}

/** What a first submission's reads placed nothing for, by cause (for the metrics). */
export function handheldUnknownByCause(command: SubmitHandheld, events: readonly HandheldEvent[]): Map<UnknownCause, number> {
  if (events.length === 0 || command.location?.locationId == null) return new Map();
  return scanCounts(handheldScans(command, command.location.locationId), command.scans).unknownByCause;
}
