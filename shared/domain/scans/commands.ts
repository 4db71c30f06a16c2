import { createHash } from 'node:crypto';
import type { ServiceContext } from '../../context.js';
import { ConflictError, ValidationFailed, fieldErrors } from '../../errors.js';
import type { EventData, ExpectedRevision, StreamAppend } from '../../event-store/port.js';
import { executeCommand } from '../command.js';
import {
  HandheldSubmissionReceived,
  ScanPlacementClosed,
  ScansRecorded,
  locationScansStream,
  type HandheldSubmissionReceivedData,
  type ScanSource,
  type ScansRecordedData,
  type UnknownCause,
} from './events.js';
import { encodeReads, tagKey, type RawRead, type TagResolution } from './reads.js';
import { locationOfTag, resolveTag } from './resolve.js';

/** Reads taken at one location (resolved and live when the batch was accepted), from one source. */
export interface LocatedBatch {
  orgId: number;
  locationId: number;
  source: ScanSource;
  reads: RawRead[];
}

export interface ScanCounts {
  /** Reads that placed an asset. */
  accepted: number;
  /** Reads that placed nothing (unknown or retired tag, a location's own tag, a deleted location). */
  unknown: number;
}

interface LocationScans {
  expectedRevision: ExpectedRevision;
  /** The location was deleted: reads taken there place nothing. */
  closed: boolean;
}

async function readLocationScans(ctx: ServiceContext, orgId: number, locationId: number): Promise<LocationScans> {
  const [last] = await ctx.store.readStream(locationScansStream(orgId, locationId), { direction: 'backwards', maxCount: 1 });
  return { expectedRevision: last ? last.revision : 'no_stream', closed: last?.type === ScanPlacementClosed.type };
}

/**
 * Decides the scan appends of some batches: each batch's reads resolved against the tags read
 * model now (the resolution is recorded in the event), one ScansRecorded event per batch on its
 * location's scans stream, expecting the revision read here. A location delete appends to that
 * stream too, so a delete and a scan that race cannot both go through; a batch at a location
 * whose stream is closed is recorded with every read unknown (`unknown_location`).
 */
export async function decideScanAppends(
  ctx: ServiceContext,
  batches: readonly LocatedBatch[],
  at: string,
): Promise<{ appends: StreamAppend[]; counts: ScanCounts; unknownByCause: Map<UnknownCause, number> }> {
  const locations = new Map<string, Promise<LocationScans>>();
  const lookups = new Map<number, Map<string, TagResolution>>();
  for (const batch of batches) {
    const stream = locationScansStream(batch.orgId, batch.locationId);
    if (!locations.has(stream)) locations.set(stream, readLocationScans(ctx, batch.orgId, batch.locationId));
  }
  const byOrg = new Map<number, Map<string, { tag_type: string; value: string }>>();
  for (const batch of batches) {
    const tags = byOrg.get(batch.orgId) ?? new Map<string, { tag_type: string; value: string }>();
    for (const read of batch.reads) tags.set(tagKey(read.tag_type, read.value), { tag_type: read.tag_type, value: read.value });
    byOrg.set(batch.orgId, tags);
  }
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
    const streamId = locationScansStream(batch.orgId, batch.locationId);
    const location = await locations.get(streamId)!;
    const resolutions = lookups.get(batch.orgId)!;
    const resolve = (read: RawRead): TagResolution =>
      location.closed ? { assetId: null, cause: 'unknown_location' } : resolutions.get(tagKey(read.tag_type, read.value))!;
    for (const read of batch.reads) {
      const { assetId, cause } = resolve(read);
      if (assetId !== null) counts.accepted++;
      else {
        counts.unknown++;
        unknownByCause.set(cause!, (unknownByCause.get(cause!) ?? 0) + 1);
      }
    }
    const { capturePoints, ...encoded } = encodeReads(batch.reads, resolve);
    const source: ScanSource = batch.source.kind === 'reader' ? { ...batch.source, capture_points: capturePoints } : batch.source;
    const data: ScansRecordedData = { org_id: batch.orgId, location_id: batch.locationId, source, ...encoded, at };
    const append = byStream.get(streamId) ?? { streamId, expectedRevision: location.expectedRevision, events: [] as EventData[] };
    append.events.push({ type: ScansRecorded.type, data });
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
