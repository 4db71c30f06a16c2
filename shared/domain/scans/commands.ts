import { createHash } from 'node:crypto';
import type { ServiceContext } from '../../context.js';
import { ConflictError, ValidationFailed, fieldErrors } from '../../errors.js';
import type { EventData, ExpectedRevision, StreamAppend } from '../../event-store/port.js';
import { executeCommand } from '../command.js';
import {
  HandheldSubmissionReceived,
  ScanPlacementClosed,
  ScansRecorded,
  NO_ORG,
  locationScansStream,
  unplacedScansStream,
  type HandheldSubmissionReceivedData,
  type ScanSource,
  type ScansRecordedData,
  type UnknownCause,
} from './events.js';
import { encodeReads, readsInExactSpans, tagKey, type RawRead, type TagResolution } from './reads.js';
import { locationOfTag, resolveTag } from './resolve.js';

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

interface StreamState {
  expectedRevision: ExpectedRevision;
  /** The location was deleted: reads taken there place nothing. */
  closed: boolean;
}

async function readLocationScans(ctx: ServiceContext, streamId: string): Promise<StreamState> {
  const [last] = await ctx.store.readStream(streamId, { direction: 'backwards', maxCount: 1 });
  return { expectedRevision: last ? last.revision : 'no_stream', closed: last?.type === ScanPlacementClosed.type };
}

function streamOf(batch: ScanBatch): string {
  return batch.locationId === null ? unplacedScansStream(batch.orgId) : locationScansStream(batch.orgId, batch.locationId);
}

/**
 * Decides the scan appends of some batches: each batch's reads resolved against the tags read
 * model now (the resolution is recorded in the event), one ScansRecorded event per batch. Reads at
 * a location go to its scans stream, expecting the revision read here: a location delete appends
 * to that stream too, so a delete and a scan that race cannot both go through, and a batch at a
 * location whose stream is closed is recorded with every read unknown (`unknown_location`). Reads
 * at no location go to the org's unplaced stream, in any order.
 */
export async function decideScanAppends(
  ctx: ServiceContext,
  batches: readonly ScanBatch[],
  at: string,
): Promise<{ appends: StreamAppend[]; counts: ScanCounts; unknownByCause: Map<UnknownCause, number> }> {
  const streams = new Map<string, Promise<StreamState>>();
  for (const batch of batches) {
    const streamId = streamOf(batch);
    if (batch.locationId !== null && !streams.has(streamId)) streams.set(streamId, readLocationScans(ctx, streamId));
  }
  const byOrg = new Map<number, Map<string, { tag_type: string; value: string }>>();
  for (const batch of batches) {
    if (batch.cause) continue;
    const tags = byOrg.get(batch.orgId) ?? new Map<string, { tag_type: string; value: string }>();
    for (const read of batch.reads) tags.set(tagKey(read.tag_type, read.value), { tag_type: read.tag_type, value: read.value });
    byOrg.set(batch.orgId, tags);
  }
  const lookups = new Map<number, Map<string, TagResolution>>();
  await Promise.all(
    [...byOrg].map(async ([orgId, tags]) => {
      const list = [...tags.values()];
      const found = await ctx.reads.lookupTags(orgId, list);
      lookups.set(orgId, new Map(list.map((tag, i) => [tagKey(tag.tag_type, tag.value), resolveTag(found[i]!)])));
    }),
  );

  const counts: ScanCounts = { accepted: 0, unknown: 0 };
  const unknownByCause = new Map<UnknownCause, number>();
  const byStream = new Map<string, StreamAppend>();
  for (const batch of batches) {
    const streamId = streamOf(batch);
    const stream = batch.locationId === null ? { expectedRevision: 'any' as const, closed: false } : await streams.get(streamId)!;
    const resolutions = lookups.get(batch.orgId);
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
      const data: ScansRecordedData = { org_id: batch.orgId, location_id: batch.locationId, source, ...encoded, at };
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
// Fixed readers (INTERFACES.md "Fixed readers")

export interface ReaderMessage {
  readerId: string;
  reads: RawRead[];
}

/**
 * Records the reads of some reader messages: each reader resolves its org (`readers register`),
 * each (reader, capture point) its location (`scan-points assign`); reads of unregistered readers
 * and unassigned capture points are recorded too, as placing nothing. One atomic append for all;
 * a lost race (a location deleted meanwhile) decides again. The answer does not wait for the
 * projections: the caller commits its offsets once this returns.
 */
export async function recordReaderScans(ctx: ServiceContext, messages: readonly ReaderMessage[]): Promise<{ counts: ScanCounts; unknownByCause: Map<UnknownCause, number> }> {
  const readerIds = [...new Set(messages.map((m) => m.readerId))];
  const { result } = await executeCommand(
    ctx,
    async () => {
      const [orgs, points] = await Promise.all([ctx.reads.readerOrgs(readerIds), ctx.reads.scanPointLocations(readerIds)]);
      const batches = new Map<string, ScanBatch>();
      for (const message of messages) {
        const orgId = orgs.get(message.readerId);
        for (const read of message.reads) {
          const locationId = orgId === undefined ? null : (points.get(`${message.readerId}\u0000${read.capturePoint ?? ''}`) ?? null);
          const cause = orgId === undefined ? 'unknown_reader' : locationId === null ? 'unassigned_capture_point' : undefined;
          const key = `${message.readerId}\u0000${locationId ?? ''}`;
          let batch = batches.get(key);
          if (!batch) {
            batch = { orgId: orgId ?? NO_ORG, locationId, source: { kind: 'reader', reader_id: message.readerId, capture_points: [] }, reads: [], ...(cause ? { cause } : {}) };
            batches.set(key, batch);
          }
          batch.reads.push(read);
        }
      }
      const { appends, counts, unknownByCause } = await decideScanAppends(ctx, [...batches.values()], new Date().toISOString());
      return { appends, result: { counts, unknownByCause } };
    },
    { project: async () => undefined },
  );
  return result;
}

// ---------------------------------------------------------------------------------------------
// Handheld submissions (INTERFACES.md, DECISIONS.md "Scans")

export type LocationRef = { id: number } | { external_key: string } | { tag: { tag_type: string; value: string } };

export interface HandheldSubmission {
  orgId: number;
  submissionId: string;
  deviceId: string;
  location: LocationRef;
  reads: RawRead[];
  /** SHA-256 of the body as sent (canonicalBodyHash). */
  bodySha256: string;
}

export interface HandheldAnswer extends ScanCounts {
  duplicate: boolean;
}

/** What a first (not duplicate) submission recorded, for the metrics. */
export interface HandheldOutcome {
  answer: HandheldAnswer;
  unknownByCause: Map<UnknownCause, number>;
}

function submissionStream(orgId: number, submissionId: string): string {
  return `submission-${orgId}-${createHash('sha256').update(submissionId).digest('hex')}`;
}

/** The body's identity for idempotency: SHA-256 of its JSON with object keys sorted. */
export function canonicalBodyHash(body: unknown): string {
  const canonical = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(canonical);
    if (value && typeof value === 'object') {
      return Object.fromEntries(Object.keys(value).sort().map((k) => [k, canonical((value as Record<string, unknown>)[k])]));
    }
    return value;
  };
  return createHash('sha256').update(JSON.stringify(canonical(body))).digest('hex');
}

/** The location the submission names, live now, or the field error of the form it used. */
async function resolveLocation(ctx: ServiceContext, orgId: number, ref: LocationRef): Promise<number> {
  if ('tag' in ref) {
    const [lookup] = await ctx.reads.lookupTags(orgId, [ref.tag]);
    const id = locationOfTag(lookup!);
    if (id !== null && (await ctx.reads.findLiveLocation(orgId, { id }))) return id;
    throw new ValidationFailed([fieldErrors.fkNotFound('location.tag', 'location.tag is not the tag of an existing location')]);
  }
  const node = await ctx.reads.findLiveLocation(orgId, 'id' in ref ? { id: ref.id } : { externalKey: ref.external_key });
  if (node) return node.id;
  const field = 'id' in ref ? 'location.id' : 'location.external_key';
  throw new ValidationFailed([fieldErrors.fkNotFound(field)]);
}

/**
 * Records a handheld submission once per (org, submission_id): its reads resolved and appended
 * with a record of the submission in one atomic append. The same id again answers the first
 * answer's counts with `duplicate: true` (with another body, a 409), also after a restart and
 * when the two race.
 */
export async function submitHandheldScans(ctx: ServiceContext, submission: HandheldSubmission): Promise<HandheldOutcome> {
  const streamId = submissionStream(submission.orgId, submission.submissionId);
  const earlier = async (): Promise<HandheldAnswer | null> => {
    const [last] = await ctx.store.readStream(streamId, { direction: 'backwards', maxCount: 1 });
    if (!last) return null;
    const data = last.data as HandheldSubmissionReceivedData;
    if (data.body_sha256 !== submission.bodySha256) throw new ConflictError('submission_id was already used with a different body');
    return { accepted: data.accepted, unknown: data.unknown, duplicate: true };
  };
  const first = await earlier();
  if (first) return { answer: first, unknownByCause: new Map() };
  const locationId = await resolveLocation(ctx, submission.orgId, submission.location);
  const source: ScanSource = { kind: 'handheld', device_id: submission.deviceId, submission_id: submission.submissionId };
  const { result } = await executeCommand(
    ctx,
    async (attempt) => {
      if (attempt > 1) {
        const repeat = await earlier();
        if (repeat) return { appends: [], result: { answer: repeat, unknownByCause: new Map() } };
      }
      const at = new Date().toISOString();
      const { appends, counts, unknownByCause } = await decideScanAppends(ctx, [{ orgId: submission.orgId, locationId, source, reads: submission.reads }], at);
      const received: HandheldSubmissionReceivedData = {
        org_id: submission.orgId,
        submission_id: submission.submissionId,
        device_id: submission.deviceId,
        body_sha256: submission.bodySha256,
        ...counts,
        at,
      };
      appends.push({ streamId, expectedRevision: 'no_stream', events: [{ type: HandheldSubmissionReceived.type, data: received }] });
      return { appends, result: { answer: { ...counts, duplicate: false }, unknownByCause } };
    },
    { serializeOn: locationScansStream(submission.orgId, locationId), visibleWithinMs: 5_000 },
  );
  return result;
}
