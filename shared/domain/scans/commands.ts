import { createHash } from 'node:crypto';
import type { CommandPort } from '../port.js';
import { executeCommand, waitUntilVisible } from '../command.js';
import { outsideCommandContext } from '../../event-store/command-context.js';
import { groupCommitStore, type GroupCommitStore } from '../../event-store/group-commit.js';
import {
  handheldAnswer,
  handheldDecider,
  handheldReadResolutions,
  handheldUnknownByCause,
  locationStreamsOf,
  readerBatches,
  scanCounts,
  scanStreamDecider,
  scanStreamOf,
  tagsToResolve,
  type HandheldAnswer,
  type HandheldEvent,
  type LocationLookup,
  type LocationRef,
  type ReaderMessage,
  type RecordScans,
  type ScanBatch,
  type ScanCounts,
  type ScanStreamState,
  type SubmissionState,
} from './decider.js';
import { deadLetterStream, HandheldSubmissionReceived, locationScansStream, ReaderMessageDeadLettered, ScansRecorded, ScanPlacementClosed, ScanPlacementReopened, type ReaderMessageDeadLetteredData, type UnknownCause } from './events.js';
import type { EventData, EventStore, ExpectedRevision, Position, StreamAppend } from '../../event-store/port.js';
import { tagKey, type RawRead, type TagResolution } from './read-codec.js';
import { locationOfTag, resolveTag } from './resolve.js';

/** Scans draw no ids and sign nothing: what their handlers need of the command port. */
export type ScanPort = Pick<CommandPort, 'store' | 'checkpoints' | 'readModels'>;

/**
 * The scan command handlers: each reads what its decision needs (decider.ts), decides, and
 * appends, with the retry and wait rules of every command (executeCommand).
 */

/**
 * A location's scans stream as the runner reads it: its decider state and the revision to append
 * at. The state is that of the stream's last event (ScanStreamState), so only that event is read.
 */
export interface LocationScansState extends ScanStreamState {
  expectedRevision: ExpectedRevision;
}

/** The state of a location's scans stream from its last event (none: a stream never written). */
export function locationScansState(last: { type: string; revision: bigint } | undefined): LocationScansState {
  const state = last ? scanStreamDecider.evolve(scanStreamDecider.initialState, last as never) : scanStreamDecider.initialState;
  return { expectedRevision: last ? last.revision : 'no_stream', ...state };
}

async function readLocationScans(ctx: ScanPort, streamId: string): Promise<LocationScansState> {
  const [last] = await ctx.store.readStream(streamId, { direction: 'backwards', maxCount: 1 });
  return locationScansState(last);
}

/** Scans at some streams, with the state the runner read of each location stream. */
export interface ScansAtStreams extends Omit<RecordScans, 'batches'> {
  batches: readonly ScanBatch[];
  /** The state of each location stream a batch names (locationStreamsOf). */
  streams: ReadonlyMap<string, LocationScansState>;
}

export interface ScanDecision {
  appends: StreamAppend[];
  counts: ScanCounts;
  unknownByCause: Map<UnknownCause, number>;
}

/**
 * The appends of some batches: the scans decider's events for each stream, appended at the
 * revision the runner read. A location delete appends to that stream too, so a delete and a scan
 * that race cannot both go through. Reads at no location go to the org's unplaced stream, at any
 * revision. Streams in the order their first batch comes.
 */
export function scanAppends(command: ScansAtStreams): ScanDecision {
  const byStream = new Map<string, ScanBatch[]>();
  for (const batch of command.batches) byStream.set(scanStreamOf(batch), [...(byStream.get(scanStreamOf(batch)) ?? []), batch]);
  const counts: ScanCounts = { accepted: 0, unknown: 0 };
  const unknownByCause = new Map<UnknownCause, number>();
  const appends: StreamAppend[] = [];
  for (const [streamId, batches] of byStream) {
    // Stryker disable next-line BooleanLiteral: equivalent, a batch at no location always has its cause, which is answered before whether the stream is closed
    const stream: LocationScansState = batches[0]!.locationId === null ? { expectedRevision: 'any', closed: false } : command.streams.get(streamId)!;
    const decided: RecordScans = { batches, resolutions: command.resolutions, at: command.at };
    const tally = scanCounts(decided, stream);
    counts.accepted += tally.counts.accepted;
    counts.unknown += tally.counts.unknown;
    for (const [cause, n] of tally.unknownByCause) unknownByCause.set(cause, (unknownByCause.get(cause) ?? 0) + n);
    appends.push({ streamId, expectedRevision: stream.expectedRevision, events: scanStreamDecider.decide(decided, stream) as EventData[] });
  }
  return { appends, counts, unknownByCause };
}

/** For a location's restore (docs/api.md, "Restoring"): its scans stream opened again at the revision read. */
export function scanPlacementReopening(orgId: number, locationId: number, expectedRevision: ExpectedRevision, at: string): StreamAppend {
  return {
    streamId: locationScansStream(orgId, locationId),
    expectedRevision,
    events: [{ type: ScanPlacementReopened.type, data: { org_id: orgId, location_id: locationId, at } }],
  };
}

/** For a location's soft delete: the revision to close its scans at, read after every scan there is projected. */
export function scanPlacementClosure(orgId: number, locationId: number, expectedRevision: ExpectedRevision, at: string): StreamAppend {
  return {
    streamId: locationScansStream(orgId, locationId),
    expectedRevision,
    events: [{ type: ScanPlacementClosed.type, data: { org_id: orgId, location_id: locationId, at } }],
  };
}

/**
 * Reads what the scan decision of some batches needs: each org's tags resolved against the tags
 * read model now, and the state of each location stream the batches name.
 */
async function scanDecisionInputs(ctx: ScanPort, batches: readonly ScanBatch[]): Promise<Pick<ScansAtStreams, 'resolutions' | 'streams'>> {
  const [streams, resolutions] = await Promise.all([
    Promise.all(locationStreamsOf(batches).map(async (streamId) => [streamId, await readLocationScans(ctx, streamId)] as const)),
    Promise.all(
      [...tagsToResolve(batches)].map(async ([orgId, tags]) => {
        const found = await ctx.readModels.lookupTags(orgId, tags);
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
      const [orgs, points] = await Promise.all([ctx.readModels.readerOrgs(readerIds), ctx.readModels.scanPointLocations(readerIds)]);
      const batches = readerBatches(messages, orgs, points);
      const { appends, counts, unknownByCause } = scanAppends({ batches, ...(await scanDecisionInputs(ctx, batches)), at: new Date().toISOString() });
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
  const orgs = known.length > 0 ? await ctx.readModels.readerOrgs(known) : new Map<string, number>();
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

export type { LocationRef } from './decider.js';

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
  /** What each read placed, in the order sent, as recorded; null for a repeat (duplicate: true). */
  reads: TagResolution[] | null;
}

/**
 * Who a submission's events name: nobody (a handheld backend's key: scans are no commands), or
 * the person of the command context around the call (the console's Scan page, docs/web-app.md
 * "Scanning in the console"), in their metadata as every command's.
 */
export type HandheldActor = 'none' | 'context';

/** The stream of a submission's record: one per (org, submission_id). */
export function submissionStream(orgId: number, submissionId: string): string {
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

/** The existing location the submission names now, if any: by id, by key, or as the location a shelf label's tag belongs to. */
async function lookupLocation(ctx: ScanPort, orgId: number, ref: LocationRef): Promise<LocationLookup> {
  if (ref.by === 'tag') {
    const [lookup] = await ctx.readModels.lookupTags(orgId, [ref.tag]);
    const id = locationOfTag(lookup!);
    const existing = id !== null && (await ctx.readModels.findExistingLocation(orgId, { id })) !== null;
    return { ref, locationId: existing ? id : null };
  }
  const node = await ctx.readModels.findExistingLocation(orgId, ref.by === 'id' ? { id: ref.id } : { externalKey: ref.externalKey });
  return { ref, locationId: node?.id ?? null };
}

/** A submission's stream: the state its record gives, and where its record is in the log (null before it). */
async function readSubmission(ctx: ScanPort, streamId: string): Promise<{ state: SubmissionState; recordedAt: Position | null }> {
  const [last] = await ctx.store.readStream(streamId, { direction: 'backwards', maxCount: 1 });
  return last ? { state: handheldDecider.evolve(handheldDecider.initialState, last as never), recordedAt: last.position } : { state: handheldDecider.initialState, recordedAt: null };
}

/**
 * A repeat is answered once its first copy's reads are visible, as the first copy is: a handheld
 * that sent again after a lost answer reads where its assets are next, and the first copy may still
 * be on its way through the projections (docs/scan-ingestion.md "Handheld submissions").
 */
async function repeatVisible(ctx: ScanPort, recordedAt: Position): Promise<void> {
  const projections = ctx.checkpoints.consumersOf(HANDHELD_EVENT_TYPES);
  await waitUntilVisible(ctx, await ctx.store.endOfAppend(recordedAt), { projections }, HANDHELD_VISIBLE_WITHIN_MS);
}

/**
 * The appends of a decided submission: its reads on the location's scans stream at the revision
 * the runner read, its record on its own stream, which must not exist yet (so two requests with
 * one submission_id cannot both record it); none for a repeat.
 */
export function handheldAppends(events: readonly HandheldEvent[], scans: { streamId: string; expectedRevision: ExpectedRevision }, submissionStreamId: string): StreamAppend[] {
  const recorded = events.filter((e) => e.type === 'ScansRecorded');
  const record = events.filter((e) => e.type === 'HandheldSubmissionReceived');
  if (record.length === 0) return [];
  return [
    { ...scans, events: recorded },
    { streamId: submissionStreamId, expectedRevision: 'no_stream', events: record },
  ];
}

/**
 * How long a group of handheld submissions' appends waits for the submissions still deciding
 * (group-commit.ts): about one decision's reads on a busy machine, so that submissions in flight
 * together are appended, projected and answered together.
 */
const HANDHELD_LINGER_MS = 5;

/** The process's group commit of handheld submissions over a store (made on first use, then the same one). */
const handheldGroups = new WeakMap<EventStore, GroupCommitStore>();

function handheldGroupCommit(store: EventStore): GroupCommitStore {
  let grouped = handheldGroups.get(store);
  if (!grouped) handheldGroups.set(store, (grouped = groupCommitStore(store, { lingerMs: HANDHELD_LINGER_MS })));
  return grouped;
}

/** How long a submission's answer waits for the projections to show it (it is recorded already): see CommandOptions.visibleWithinMs. */
const HANDHELD_VISIBLE_WITHIN_MS = 5_000;

/** The types a handheld submission appends: the projections that read them show it before it is answered. */
const HANDHELD_EVENT_TYPES = [ScansRecorded.type, HandheldSubmissionReceived.type];

/**
 * Records a handheld submission once per (org, submission_id): its reads resolved and appended
 * with a record of the submission in one atomic append (the record on a stream that must not
 * exist yet). The same id again answers the first answer's counts with `duplicate: true` (with
 * another body, a 409), also after a restart and when the two race: the decider says which.
 */
export async function submitHandheldScans(ctx: ScanPort, submission: HandheldSubmission, options: { actor?: HandheldActor } = {}): Promise<HandheldOutcome> {
  // Submissions in flight together are appended together (group-commit.ts): one transaction, and
  // one batch for each projection that shows them before they are answered. While this one reads
  // what it decides from, the group being formed waits for its append; not while it waits for its
  // location's turn (behind an append of that group).
  const store = handheldGroupCommit(ctx.store);
  const streamId = submissionStream(submission.orgId, submission.submissionId);
  // Both at once: a submission received before is answered from its record, and the location
  // looked up beside it is not used (it may be gone since); a repeat is the rare case.
  const [first, looked] = await Promise.all([readSubmission(ctx, streamId), lookupLocation(ctx, submission.orgId, submission.location)]).finally(store.deciding());
  const location = first.state.received ? null : looked;
  const locationId = location?.locationId ?? null;
  // A handheld backend's submission is scans, not a command: its events carry no actor, though it
  // comes over HTTP. A person's, from the console, carries the person who scanned.
  const around = options.actor === 'context' ? <T>(work: () => T): T => work() : outsideCommandContext;
  const decideSubmission = async (attempt: number) => {
    // A first attempt has just read the submission's stream; a retry (a lost race) reads it again.
    const { state, recordedAt } = attempt > 1 ? await readSubmission(ctx, streamId) : first;
    const scansStream = locationId === null ? null : locationScansStream(submission.orgId, locationId);
    const batch: ScanBatch[] = locationId === null ? [] : [{ orgId: submission.orgId, locationId, source: { kind: 'handheld', device_id: submission.deviceId, submission_id: submission.submissionId }, reads: submission.reads }];
    const inputs = state.received || locationId === null ? { resolutions: new Map(), streams: new Map<string, LocationScansState>() } : await scanDecisionInputs(ctx, batch);
    const scans = (scansStream && inputs.streams.get(scansStream)) || { expectedRevision: 'no_stream' as const, closed: false };
    const command = { ...submission, location, resolutions: inputs.resolutions, scans: { closed: scans.closed }, at: new Date().toISOString() };
    const events = handheldDecider.decide(command, state);
    const appends = scansStream === null ? [] : handheldAppends(events, { streamId: scansStream, expectedRevision: scans.expectedRevision }, streamId);
    const outcome: HandheldOutcome = { answer: handheldAnswer(state, events), unknownByCause: handheldUnknownByCause(command, events), reads: handheldReadResolutions(command, events) };
    return { appends, result: { outcome, recordedAt } };
  };
  const { result: { outcome, recordedAt }, append } = await around(() => executeCommand(
    { ...ctx, store },
    // Deciding, in its location's turn: the group being formed waits for this one's append.
    (attempt) => decideSubmission(attempt).finally(store.deciding()),
    { serializeOn: locationId === null ? undefined : locationScansStream(submission.orgId, locationId), visibleWithinMs: HANDHELD_VISIBLE_WITHIN_MS },
  ));
  if (append === null && recordedAt !== null) await repeatVisible(ctx, recordedAt);
  return outcome;
}
