import { createHash } from 'node:crypto';
import type { CommandPort } from '../port.js';
import { ValidationFailed, fieldErrors } from '../../errors.js';
import { executeCommand } from '../command.js';
import { outsideCommandContext } from '../../event-store/command-context.js';
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
import { deadLetterStream, locationScansStream, ReaderMessageDeadLettered, type HandheldSubmissionReceivedData, type ReaderMessageDeadLetteredData, type UnknownCause } from './events.js';
import { tagKey, type RawRead } from './read-codec.js';
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
  // Scans are no commands: their events carry no actor, whoever runs the consumer (docs/design.md, "Who did it: actor and request id").
  const { result } = await outsideCommandContext(() => executeCommand(
    ctx,
    async () => {
      const [orgs, points] = await Promise.all([ctx.reads.readerOrgs(readerIds), ctx.reads.scanPointLocations(readerIds)]);
      const batches = readerBatches(messages, orgs, points);
      const { appends, counts, unknownByCause } = decideScans({ batches, ...(await scanDecisionInputs(ctx, batches)), at: new Date().toISOString() });
      return { appends, result: { counts, unknownByCause } };
    },
    { noWait: true },
  ));
  return result;
}

/** A reader message refused by the parser (parseReaderMessage), as received over MQTT. */
export interface ReaderDeadLetter {
  topic: string;
  payload: Buffer;
  reason: string;
  receivedAt: Date;
}

/** What a dead letter keeps of its payload, at most. */
export const DEAD_LETTER_PAYLOAD_MAX_BYTES = 1024 * 1024;

/**
 * Text Postgres can keep in a JSON document: no NUL, no lone UTF-16 surrogate (both can come out
 * of JSON.parse of a refused payload, in its reader id or, through a key, in the parser's reason).
 */
function storableText(text: string): string {
  return text.replace(/\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
}

/** The reader id a refused payload names, when it is a JSON object naming one as a string. */
function readerIdOf(payload: Buffer): string | null {
  try {
    const value: unknown = JSON.parse(payload.toString('utf8'));
    if (!value || typeof value !== 'object' || Array.isArray(value)) return null;
    const { reader_id: readerId, rfidReaderName } = value as Record<string, unknown>;
    const id = typeof readerId === 'string' ? readerId : typeof rfidReaderName === 'string' ? rfidReaderName : null;
    return id && id.length <= 255 ? storableText(id) : null;
  } catch {
    return null;
  }
}

/** A UUID made of the first 16 bytes of a SHA-256 (version 8, "custom"). */
function uuidOf(hash: Buffer): string {
  const b = Buffer.from(hash.subarray(0, 16));
  b[6] = (b[6]! & 0x0f) | 0x80;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/**
 * Keeps reader messages that are not JSON or match neither shape (MQTT keeps nothing once a
 * message is acknowledged): one ReaderMessageDeadLettered event each, in the message's own
 * stream, with an event id derived from its topic and payload, so the same message delivered
 * again (a crash before its acknowledgement) is kept once. One atomic append for all; the org is
 * that of the reader the payload names, when it names a registered one. Does not wait for the
 * projections. Answers how many distinct messages it kept.
 */
export async function keepReaderDeadLetters(ctx: ScanPort, letters: readonly ReaderDeadLetter[]): Promise<number> {
  if (letters.length === 0) return 0;
  const readerIds = letters.map((l) => readerIdOf(l.payload));
  const known = [...new Set(readerIds.filter((id): id is string => id !== null))];
  const orgs = known.length > 0 ? await ctx.reads.readerOrgs(known) : new Map<string, number>();
  const appends = new Map<string, { streamId: string; events: Array<{ id: string; type: string; data: ReaderMessageDeadLetteredData }>; expectedRevision: 'any' }>();
  for (const [i, letter] of letters.entries()) {
    const hash = createHash('sha256').update(letter.topic).update('\u0000').update(letter.payload).digest();
    const streamId = deadLetterStream(hash.toString('hex'));
    if (appends.has(streamId)) continue;
    const kept = letter.payload.subarray(0, DEAD_LETTER_PAYLOAD_MAX_BYTES);
    const text = kept.toString('utf8');
    const utf8 = !text.includes('\u0000') && !text.includes('\uFFFD') && Buffer.from(text, 'utf8').equals(kept);
    const readerId = readerIds[i]!;
    const data: ReaderMessageDeadLetteredData = {
      transport: 'mqtt',
      topic: letter.topic,
      reason: storableText(letter.reason),
      reader_id: readerId,
      org_id: readerId === null ? null : (orgs.get(readerId) ?? null),
      payload: utf8 ? text : kept.toString('base64'),
      payload_encoding: utf8 ? 'utf8' : 'base64',
      payload_bytes: letter.payload.length,
      received_at: letter.receivedAt.toISOString(),
    };
    appends.set(streamId, { streamId, events: [{ id: uuidOf(hash), type: ReaderMessageDeadLettered.type, data }], expectedRevision: 'any' });
  }
  await outsideCommandContext(() => executeCommand(ctx, async () => ({ appends: [...appends.values()], result: undefined }), { noWait: true }));
  return appends.size;
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
  // A handheld submission is scans, not a command: its events carry no actor, though it comes over HTTP.
  const { result } = await outsideCommandContext(() => executeCommand(
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
  ));
  return result;
}
