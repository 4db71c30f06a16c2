import type { EventData, ExpectedRevision, StreamAppend } from '../../event-store/port.js';
import { ConflictError } from '../../errors.js';
import type { ServiceContext } from '../../context.js';
import { fold as foldAsset } from '../assets/decider.js';
import { assetStream } from '../assets/events.js';
import { nextId } from '../ids.js';
import { claim, readReservation, release } from '../reservations.js';
import { decideRetireTags, evolveTags, tagAttachedEvent, tagReservationValue, type TagInput, type TagOwnerRef, type TagState } from './decider.js';
import type { OwnerType } from './events.js';
import type { TagBody } from './schema.js';

/**
 * The I/O around the tag decider, shared by the tag routes and by the asset and location create
 * and delete commands (which attach embedded tags and retire tags in the same atomic append).
 */

export function ownerStream(owner: TagOwnerRef): string {
  return owner.ownerType === 'asset' ? assetStream(owner.orgId, owner.ownerId) : `location-${owner.orgId}-${owner.ownerId}`;
}

export interface TagOwnerState {
  streamId: string;
  expectedRevision: ExpectedRevision;
  live: boolean;
  tags: TagState[];
}

// Location lifecycle events, by name: the location slice owns them.
const LOCATION_CREATED = 'LocationCreated';
const LOCATION_DELETED = 'LocationDeleted';

/** Reads the owner's stream afresh: null when it does not exist (in this org). */
export async function loadTagOwner(ctx: ServiceContext, owner: TagOwnerRef): Promise<TagOwnerState | null> {
  const streamId = ownerStream(owner);
  const events = await ctx.store.readStream(streamId);
  if (events.length === 0) return null;
  const revision = events[events.length - 1]!.revision;
  if (owner.ownerType === 'asset') {
    const state = foldAsset(events);
    if (!state) return null;
    return { streamId, expectedRevision: revision, live: state.deleted_at === null, tags: state.tags };
  }
  let live = false;
  let tags: TagState[] = [];
  for (const event of events) {
    if (event.type === LOCATION_CREATED) live = true;
    else if (event.type === LOCATION_DELETED) live = false;
    else tags = evolveTags(tags, event);
  }
  return { streamId, expectedRevision: revision, live, tags };
}

export function tagInput(body: TagBody): TagInput {
  return {
    tag_type: body.tag_type,
    value: body.value,
    is_active: body.is_active ?? true,
    valid_from: body.valid_from ?? null,
    valid_to: body.valid_to ?? null,
  };
}

/** `asset 12 (ASSET-0012)` for a 409 detail; the key from the read model when it is there. */
async function describeOwner(ctx: ServiceContext, orgId: number, ownerType: OwnerType, ownerId: number): Promise<string> {
  const key = await ctx.reads.findExternalKey(orgId, ownerType, ownerId).catch(() => null);
  return `${ownerType} ${ownerId}${key ? ` (${key})` : ''}`;
}

export interface PreparedTags {
  /** Events for the owner's stream. */
  events: EventData[];
  /** Reservation claims to append atomically with them. */
  claims: StreamAppend[];
  tagIds: number[];
}

/**
 * Everything needed to attach `tags` to an owner: a fresh tag id each, the TagAttached events
 * and the `tag` reservation claims. A (tag_type, value) already held anywhere in the org, or
 * twice in the same request, is a 409 naming where it is attached. Call inside an
 * executeCommand attempt so a lost race re-reads the reservations.
 */
export async function prepareTagAttachments(ctx: ServiceContext, owner: TagOwnerRef, tags: readonly TagBody[], at: string): Promise<PreparedTags> {
  const inputs = tags.map(tagInput);
  const seen = new Set<string>();
  const reservations = [];
  for (const input of inputs) {
    const value = tagReservationValue(input.tag_type, input.value);
    if (seen.has(value)) {
      throw new ConflictError(`Tag (${input.tag_type}, "${input.value}") appears more than once in the request`);
    }
    seen.add(value);
    const reservation = await readReservation(ctx.store, 'tag', owner.orgId, value);
    if (reservation.holder) {
      const where = await describeOwner(ctx, owner.orgId, reservation.holder.ownerType as OwnerType, reservation.holder.ownerId);
      throw new ConflictError(`Tag (${input.tag_type}, "${input.value}") is already attached to ${where}`);
    }
    reservations.push(reservation);
  }
  const tagIds: number[] = [];
  for (let i = 0; i < inputs.length; i++) tagIds.push(await nextId(ctx.pool, 'tag_ids'));
  const holder = { ownerType: owner.ownerType, ownerId: owner.ownerId };
  return {
    events: inputs.map((input, i) => tagAttachedEvent(owner, tagIds[i]!, input, at)),
    claims: reservations.map((r) => claim(r, holder, at)),
    tagIds,
  };
}

/** Releases of the `tag` reservations of detached or retired tags. */
export function tagReleases(owner: TagOwnerRef, tags: readonly TagState[], at: string): StreamAppend[] {
  const holder = { ownerType: owner.ownerType, ownerId: owner.ownerId };
  return tags.map((t) => release('tag', owner.orgId, tagReservationValue(t.tag_type, t.value), holder, at));
}

/**
 * For an owner's soft delete: TagDetached events (reason `owner_deleted`) for its stream and
 * the reservation releases, so the values can be attached elsewhere afterwards.
 */
export function retireTags(owner: TagOwnerRef, tags: readonly TagState[], at: string): { events: EventData[]; releases: StreamAppend[] } {
  return { events: decideRetireTags(owner, tags, at), releases: tagReleases(owner, tags, at) };
}
