import { z } from 'zod';
import { defineEvent } from '../../event-store/catalogue.js';
import { isMicrosOfRange } from '../../time.js';

/**
 * Scan events. Reads are resolved when they are ingested (tag → asset, capture point →
 * location) and the resolution is recorded here, so a replay gives the same answers after tags
 * have moved. To keep the log small, one event carries every read of one ingest batch at one
 * location, compactly (`reads`, see read-codec.ts), rather than an event of some 300 bytes per read.
 *
 * Streams: `scans-<org>-<location>` holds the scans placed at (or attempted at) a location, and
 * the location's closure when it is deleted. Every scan append expects that stream's revision,
 * and a location delete appends `ScanPlacementClosed` to it with the revision it checked placed
 * assets against: of a delete and a scan that race, exactly one wins. A restore appends
 * `ScanPlacementReopened` to it, with the revision it read: reads placed there count again.
 */

export const UNKNOWN_CAUSES = ['unknown_tag', 'retired_tag', 'location_tag', 'unknown_location', 'unknown_reader', 'unassigned_capture_point'] as const;
export type UnknownCause = (typeof UNKNOWN_CAUSES)[number];

const handheldSource = z.object({
  kind: z.literal('handheld'),
  device_id: z.string().min(1),
  submission_id: z.string().min(1),
});
const readerSource = z.object({
  kind: z.literal('reader'),
  reader_id: z.string().min(1),
  /** Capture points the reads name, by index. */
  capture_points: z.array(z.string()),
});

/**
 * A tag as read, and what it resolved to when ingested: `asset_id` for a read that placed an
 * asset, else `cause` says why it placed nothing.
 */
const resolvedTag = z.tuple([
  z.string().min(1), // tag_type
  z.string().min(1), // value, as read
  z.number().int().positive().nullable(), // asset_id
  z.enum(UNKNOWN_CAUSES).nullable(), // cause
]);

/** `<tag>,<delta>[,<rssi>][,<point>]` entries separated by `;` (read-codec.ts). */
const COMPACT_READS = /^[0-9a-z,.;+-]+$/;

export const ScansRecorded = defineEvent(
  'ScansRecorded',
  1,
  z.object({
    /** 0 for reads of a reader that no organization has registered. */
    org_id: z.number().int().nonnegative(),
    /** Where the reads were taken; null when it could not be resolved (see the causes). */
    location_id: z.number().int().positive().nullable(),
    source: z.discriminatedUnion('kind', [handheldSource, readerSource]),
    tags: z.array(resolvedTag).min(1),
    /**
     * Microseconds since the Unix epoch; each read's time is an offset from it. A whole number of
     * the time range: past 2^53 (before 1685, after 2255) not every microsecond is a double, so
     * the bound is the range's, not the safe integers'.
     */
    base_us: z.number().refine(isMicrosOfRange, 'microseconds since the epoch, of the time range'),
    reads: z.string().min(1).regex(COMPACT_READS),
    at: z.string(),
  }),
);

export const ScanPlacementClosed = defineEvent(
  'ScanPlacementClosed',
  1,
  z.object({ org_id: z.number().int().positive(), location_id: z.number().int().positive(), at: z.string() }),
);

/** A restored location's scans stream opened again (docs/api.md, "Restoring"): its reads place again. */
export const ScanPlacementReopened = defineEvent(
  'ScanPlacementReopened',
  1,
  z.object({ org_id: z.number().int().positive(), location_id: z.number().int().positive(), at: z.string() }),
);

/** A handheld submission, once per (org, submission_id): what makes a resubmission a duplicate. */
export const HandheldSubmissionReceived = defineEvent(
  'HandheldSubmissionReceived',
  1,
  z.object({
    org_id: z.number().int().positive(),
    submission_id: z.string().min(1),
    device_id: z.string().min(1),
    /** SHA-256 of the body as sent (canonical JSON): the same id with another body is a conflict. */
    body_sha256: z.string().regex(/^[0-9a-f]{64}$/),
    accepted: z.number().int().nonnegative(),
    unknown: z.number().int().nonnegative(),
    at: z.string(),
  }),
);

/**
 * A fixed-reader message received over MQTT that is not JSON or matches neither shape: kept, as
 * the broker keeps nothing once it is acknowledged. Its stream (`scan-dead-letter-<hash>`) is the
 * message's own, named by the SHA-256 of its topic and payload, so a redelivery of the same
 * message (a crash before its acknowledgement) is kept once.
 */
export const ReaderMessageDeadLettered = defineEvent(
  'ReaderMessageDeadLettered',
  1,
  z.object({
    transport: z.literal('mqtt'),
    topic: z.string(),
    /** One line: why it was refused (the same reasons as Kafka's `x-dlq-reason`). */
    reason: z.string().min(1),
    /** The reader id the payload names, when it names one as a string; else null. */
    reader_id: z.string().nullable(),
    /** The org that registered that reader when the message arrived; null for none. */
    org_id: z.number().int().positive().nullable(),
    /** The payload, as UTF-8 text when it is that (and holds no NUL), else base64. */
    payload: z.string(),
    payload_encoding: z.enum(['utf8', 'base64']),
    /** The payload's size in bytes; more than kept when it was cut at DEAD_LETTER_PAYLOAD_MAX_BYTES. */
    payload_bytes: z.number().int().nonnegative(),
    received_at: z.string(),
  }),
);

export type ScansRecordedData = z.infer<typeof ScansRecorded.schema>;
export type ScanPlacementClosedData = z.infer<typeof ScanPlacementClosed.schema>;
export type HandheldSubmissionReceivedData = z.infer<typeof HandheldSubmissionReceived.schema>;
export type ReaderMessageDeadLetteredData = z.infer<typeof ReaderMessageDeadLettered.schema>;
export type ScanSource = ScansRecordedData['source'];

export const scanEvents = [ScansRecorded, ScanPlacementClosed, ScanPlacementReopened, HandheldSubmissionReceived, ReaderMessageDeadLettered];

export function locationScansStream(orgId: number, locationId: number): string {
  return `scans-${orgId}-${locationId}`;
}

/** Reads that could be tied to no location: an unassigned capture point's, an unknown reader's (org 0). */
export function unplacedScansStream(orgId: number): string {
  return orgId === 0 ? 'scans-unregistered-readers' : `scans-${orgId}-unplaced`;
}

/** The org of reads whose reader no organization has registered. */
export const NO_ORG = 0;

/** The stream of one dead-lettered reader message (ReaderMessageDeadLettered): `hash` names the message. */
export function deadLetterStream(hash: string): string {
  return `scan-dead-letter-${hash}`;
}
