import { createHash } from 'node:crypto';
import type { CommandPort } from '../port.js';
import { ValidationFailed, fieldErrors } from '../../errors.js';
import { executeCommand } from '../command.js';
import {
  decideHandheld,
  decideScans,
  locationScansState,
  locationStreamsOf,
  readerBatches,
  repeatedSubmission,
  tagsToResolve,
  type HandheldAnswer,
  type LocationScansState,
  type ReaderMessage,
  type RecordScans,
  type ScanBatch,
  type ScanCounts,
} from './decider.js';
import { locationScansStream, type HandheldSubmissionReceivedData, type UnknownCause } from './events.js';
import { tagKey, type RawRead } from './reads.js';
import { locationOfTag, resolveTag } from './resolve.js';

/** Scans draw no ids and sign nothing: what their handlers need of the command port. */
export type ScanPort = Pick<CommandPort, 'store' | 'checkpoints' | 'reads'>;

/**
 * The scan command handlers: each reads what its decision needs (decider.ts), decides, and
 * appends, with the retry and wait rules of every command (executeCommand).
 */

async function readLocationScans(ctx: ScanPort, streamId: string): Promise<LocationScansState> {
  const [last] = await ctx.store.readStream(streamId, { direction: 'backwards', maxCount: 1 });
  return locationScansState(last);
}

/**
 * Reads what the scan decision of some batches needs (decideScans): each org's tags resolved
 * against the tags read model now, and the state of each location stream the batches name.
 */
async function scanDecisionInputs(ctx: ScanPort, batches: readonly ScanBatch[]): Promise<Pick<RecordScans, 'resolutions' | 'streams'>> {
  const [streams, resolutions] = await Promise.all([
    Promise.all(locationStreamsOf(batches).map(async (streamId) => [streamId, await readLocationScans(ctx, streamId)] as const)),
    Promise.all(
      [...tagsToResolve(batches)].map(async ([orgId, tags]) => {
        const found = await ctx.reads.lookupTags(orgId, tags);
        return [orgId, new Map(tags.map((tag, i) => [tagKey(tag.tag_type, tag.value), resolveTag(found[i]!)]))] as const;
      }),
    ),
  ]);
  return { streams: new Map(streams), resolutions: new Map(resolutions) };
}

// ---------------------------------------------------------------------------------------------
// Fixed readers (docs/scan-ingestion.md, "Fixed readers over Kafka")

/**
 * Records the reads of some reader messages: each reader resolves its org (`readers register`),
 * each (reader, capture point) its location (`scan-points assign`); reads of unregistered readers
 * and unassigned capture points are recorded too, as placing nothing. One atomic append for all;
 * a lost race (a location deleted meanwhile) decides again. The answer does not wait for the
 * projections: the caller commits its offsets once this returns.
 */
export async function recordReaderScans(ctx: ScanPort, messages: readonly ReaderMessage[]): Promise<{ counts: ScanCounts; unknownByCause: Map<UnknownCause, number> }> {
  const readerIds = [...new Set(messages.map((m) => m.readerId))];
  const { result } = await executeCommand(
    ctx,
    async () => {
      const [orgs, points] = await Promise.all([ctx.reads.readerOrgs(readerIds), ctx.reads.scanPointLocations(readerIds)]);
      const batches = readerBatches(messages, orgs, points);
      const { appends, counts, unknownByCause } = decideScans({ batches, ...(await scanDecisionInputs(ctx, batches)), at: new Date().toISOString() });
      return { appends, result: { counts, unknownByCause } };
    },
    { project: async () => undefined },
  );
  return result;
}

// ---------------------------------------------------------------------------------------------
// Handheld submissions (docs/scan-ingestion.md, "Handheld submissions")

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
async function resolveLocation(ctx: ScanPort, orgId: number, ref: LocationRef): Promise<number> {
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
export async function submitHandheldScans(ctx: ScanPort, submission: HandheldSubmission): Promise<HandheldOutcome> {
  const streamId = submissionStream(submission.orgId, submission.submissionId);
  const earlier = async (): Promise<HandheldSubmissionReceivedData | null> => {
    const [last] = await ctx.store.readStream(streamId, { direction: 'backwards', maxCount: 1 });
    return last ? (last.data as HandheldSubmissionReceivedData) : null;
  };
  const first = repeatedSubmission(await earlier(), submission.bodySha256);
  if (first) return { answer: first, unknownByCause: new Map() };
  const locationId = await resolveLocation(ctx, submission.orgId, submission.location);
  const { result } = await executeCommand(
    ctx,
    async (attempt) => {
      const batches: ScanBatch[] = [{ orgId: submission.orgId, locationId, source: { kind: 'handheld', device_id: submission.deviceId, submission_id: submission.submissionId }, reads: submission.reads }];
      const { appends, answer, unknownByCause } = decideHandheld({
        ...submission,
        locationId,
        submissionStream: streamId,
        // A first attempt has just seen no earlier submission; a retry (a lost race) looks again.
        earlier: attempt > 1 ? await earlier() : null,
        ...(await scanDecisionInputs(ctx, batches)),
        at: new Date().toISOString(),
      });
      return { appends, result: { answer, unknownByCause } };
    },
    { serializeOn: locationScansStream(submission.orgId, locationId), visibleWithinMs: 5_000 },
  );
  return result;
}
