import { z } from 'zod';
import type { EventData, EventStore, ExpectedRevision, StreamAppend } from '../event-store/port.js';
import { defineEvent } from '../event-store/catalogue.js';

/**
 * Uniqueness that spans aggregates (an external_key per org and resource type, a tag's
 * (tag_type, value) per org) is kept by a reservation stream per unique value. Claiming appends
 * `UniqueValueClaimed` with the revision that was read, atomically with the owner's own event;
 * of two concurrent claims exactly one append succeeds. Releasing (delete, rename, detach)
 * appends `UniqueValueReleased`, after which the value can be claimed again.
 */
const reservationData = z.object({
  org_id: z.number().int().positive(),
  kind: z.string().min(1),
  value: z.string().min(1),
  owner_type: z.string().min(1),
  owner_id: z.number().int().positive(),
  at: z.string(),
});

export const UniqueValueClaimed = defineEvent('UniqueValueClaimed', 1, reservationData);
export const UniqueValueReleased = defineEvent('UniqueValueReleased', 1, reservationData);
export const reservationEvents = [UniqueValueClaimed, UniqueValueReleased];

export type ReservationKind = 'asset-key' | 'location-key' | 'tag';

export interface Reservation {
  streamId: string;
  kind: ReservationKind;
  orgId: number;
  value: string;
  /** Revision to expect when appending to the stream next. */
  expectedRevision: ExpectedRevision;
  /** Who holds it now, or null when free. */
  holder: { ownerType: string; ownerId: number } | null;
}

/** Stream id of a unique value. Values are encoded so any character is safe in a stream name. */
export function reservationStream(kind: ReservationKind, orgId: number, value: string): string {
  return `unique-${kind}-${orgId}-${encodeStreamPart(value)}`;
}

/**
 * encodeURIComponent, made total. Request text is well-formed Unicode (the pipeline refuses lone
 * surrogates), but a lone surrogate must not make this throw (URIError) wherever a value comes
 * from: it becomes `%uD800`, a form encodeURIComponent never produces, so names stay distinct.
 */
function encodeStreamPart(value: string): string {
  if (value.isWellFormed()) return encodeURIComponent(value);
  return value
    .split(/([\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF])/)
    .map((part, i) => (i % 2 === 1 ? `%u${part.charCodeAt(0).toString(16).toUpperCase()}` : encodeURIComponent(part)))
    .join('');
}

export async function readReservation(store: EventStore, kind: ReservationKind, orgId: number, value: string): Promise<Reservation> {
  const streamId = reservationStream(kind, orgId, value);
  const [last] = await store.readStream(streamId, { direction: 'backwards', maxCount: 1 });
  const holder =
    last && last.type === UniqueValueClaimed.type
      ? { ownerType: String(last.data.owner_type), ownerId: Number(last.data.owner_id) }
      : null;
  return { streamId, kind, orgId, value, expectedRevision: last ? last.revision : 'no_stream', holder };
}

/**
 * A value assumed never claimed, without reading its stream: a command's first attempt claims a
 * create's key, or a tag's value, with `no_stream`. When the stream does exist (the value is held,
 * or was released), that append fails as a concurrent modification and the retry reads the stream
 * (readReservation), so the common case costs no read.
 */
export function assumeFreshReservation(kind: ReservationKind, orgId: number, value: string): Reservation {
  return { streamId: reservationStream(kind, orgId, value), kind, orgId, value, expectedRevision: 'no_stream', holder: null };
}

/** The reservation of a value a command claims: assumed fresh on the first attempt, read on a retry. */
export function createReservation(store: EventStore, attempt: number, kind: ReservationKind, orgId: number, value: string): Promise<Reservation> {
  return attempt === 1 ? Promise.resolve(assumeFreshReservation(kind, orgId, value)) : readReservation(store, kind, orgId, value);
}

function reservationEvent(type: string, r: Reservation, owner: { ownerType: string; ownerId: number }, at: string): EventData {
  return {
    type,
    data: { org_id: r.orgId, kind: r.kind, value: r.value, owner_type: owner.ownerType, owner_id: owner.ownerId, at },
  };
}

/** The append that claims a free value (the caller has checked `holder === null`). */
export function claim(r: Reservation, owner: { ownerType: string; ownerId: number }, at: string): StreamAppend {
  return { streamId: r.streamId, expectedRevision: r.expectedRevision, events: [reservationEvent(UniqueValueClaimed.type, r, owner, at)] };
}

/**
 * The append that releases a value its owner holds. `any` is safe here: only the holder ever
 * releases, and the holder's own stream revision guards against a double release.
 */
export function release(
  kind: ReservationKind,
  orgId: number,
  value: string,
  owner: { ownerType: string; ownerId: number },
  at: string,
): StreamAppend {
  const r: Reservation = { streamId: reservationStream(kind, orgId, value), kind, orgId, value, expectedRevision: 'any', holder: null };
  return { streamId: r.streamId, expectedRevision: 'any', events: [reservationEvent(UniqueValueReleased.type, r, owner, at)] };
}
