import { DomainRefusal, refuse } from '../refusal.js';
import type { Decider } from '../decider.js';
import { isEffective } from '../fields.js';
import type { AssetEvent } from '../assets/events.js';
import type { LocationEvent } from '../locations/events.js';
import type { OwnerType, TagDetachedData, TagEvent } from './events.js';

/**
 * Tags live on their owner's stream (an asset's or a location's), so they are decided with the
 * owner: the asset and location deciders attach embedded tags on create (`attachTags`) and retire
 * the existing ones on delete (`retireTags`), and the tag sub-resource's own decider below attaches
 * and detaches on an existing owner. Who holds a (tag_type, value) elsewhere in the org is a fact of
 * another stream (its reservation): the command handler reads it and passes it in on the command.
 */

/** An existing tag as its owner's stream knows it (detached tags drop out of the state). */
/** An existing tag of an owner, as the owner's state keeps it. */
export interface TagState {
  id: number;
  tagType: string;
  value: string;
  isActive: boolean;
  validFrom: string | null;
  validTo: string | null;
  createdAt: string;
}

/** A tag as an owner's view embeds it (the read-only `tags` a PATCH may repeat). */
export interface EmbeddedTagView {
  id: number;
  tag_type: string;
  value: string;
  is_active: boolean;
  valid_from: string | null;
  valid_to: string | null;
  created_at: string;
}

export interface TagInput {
  tag_type: string;
  value: string;
  is_active: boolean;
  valid_from: Date | null;
  valid_to: Date | null;
}

export interface TagOwnerRef {
  orgId: number;
  ownerType: OwnerType;
  ownerId: number;
}

/** Who holds a tag value now, as its reservation says, with the holder's key for the message. */
export interface TagHolder {
  ownerType: string;
  ownerId: number;
  externalKey: string | null;
}

/** A tag to attach, with what the handler read for it: a fresh id, and the value's current holder. */
export interface TagRequest {
  tagId: number;
  input: TagInput;
  heldBy: TagHolder | null;
}

/** Folds a tag event of the owner's stream into its existing tags, in attach order. */
export function evolveTags(tags: readonly TagState[], event: TagEvent): TagState[] {
  switch (event.type) {
    case 'TagAttached': {
      const d = event.data;
      return [
        ...tags,
        { id: d.tag_id, tagType: d.tag_type, value: d.value, isActive: d.is_active, validFrom: d.valid_from, validTo: d.valid_to, createdAt: d.at },
      ];
    }
    case 'TagDetached':
      return tags.filter((t) => t.id !== event.data.tag_id);
  }
}

/**
 * The value a tag claims in the `tag` reservation kind: `<tag_type>:<value>`. RFID values are
 * upper-cased here (the stored value keeps the caller's case) because ingest matches EPCs
 * case-insensitively: `e280...` and `E280...` are the same physical tag and must not both exist.
 */
export function tagReservationValue(tagType: string, value: string): string {
  return `${tagType}:${tagType === 'rfid' ? value.toUpperCase() : value}`;
}

/** The embedded `tags` of an owner's view: active, currently effective, in creation order. */
export function embeddedTagViews(tags: readonly TagState[], now: Date): EmbeddedTagView[] {
  return tags
    .filter((t) => t.isActive && isEffective(t.validFrom ? new Date(t.validFrom) : null, t.validTo ? new Date(t.validTo) : null, now))
    .map((t) => ({ id: t.id, tag_type: t.tagType, value: t.value, is_active: t.isActive, valid_from: t.validFrom, valid_to: t.validTo, created_at: t.createdAt }));
}

function describeHolder(holder: TagHolder): string {
  return `${holder.ownerType} ${holder.ownerId}${holder.externalKey ? ` (${holder.externalKey})` : ''}`;
}

/**
 * TagAttached for each request, in order. A (tag_type, value) named twice in the request, or
 * already held anywhere in the org, is a 409 naming where it is attached (the first such tag).
 */
export function attachTags(owner: TagOwnerRef, requests: readonly TagRequest[], at: string): TagEvent[] {
  const seen = new Set<string>();
  for (const { input, heldBy } of requests) {
    const value = tagReservationValue(input.tag_type, input.value);
    if (seen.has(value)) throw refuse.conflict(`Tag (${input.tag_type}, "${input.value}") appears more than once in the request`);
    seen.add(value);
    if (heldBy) throw refuse.conflict(`Tag (${input.tag_type}, "${input.value}") is already attached to ${describeHolder(heldBy)}`);
  }
  return requests.map(({ tagId, input }) => ({
    type: 'TagAttached',
    data: {
      org_id: owner.orgId,
      owner_type: owner.ownerType,
      owner_id: owner.ownerId,
      tag_id: tagId,
      tag_type: input.tag_type,
      value: input.value,
      is_active: input.is_active,
      valid_from: input.valid_from ? input.valid_from.toISOString() : null,
      valid_to: input.valid_to ? input.valid_to.toISOString() : null,
      at,
    },
  }));
}

function detached(owner: TagOwnerRef, tag: TagState, reason: TagDetachedData['reason'], at: string): TagEvent {
  return {
    type: 'TagDetached',
    data: {
      org_id: owner.orgId,
      owner_type: owner.ownerType,
      owner_id: owner.ownerId,
      tag_id: tag.id,
      tag_type: tag.tagType,
      value: tag.value,
      reason,
      at,
    },
  };
}

/** When the owner is soft-deleted: every existing tag is detached (reason `owner_deleted`), freeing its value. */
export function retireTags(owner: TagOwnerRef, tags: readonly TagState[], at: string): TagEvent[] {
  return tags.map((t) => detached(owner, t, 'owner_deleted', at));
}

// ---- the tag sub-resource: attach and detach on an existing owner --------------------------------

/** What the tag sub-resource needs of an owner's stream: does the owner exist, and its existing tags. */
export interface TagOwnerState {
  status: 'absent' | 'existing' | 'deleted';
  tags: TagState[];
}

/** An owner's stream: its own lifecycle events and its tags' events. */
export type TagOwnerEvent = AssetEvent | LocationEvent | TagEvent;

export interface AttachTag {
  type: 'AttachTag';
  owner: TagOwnerRef;
  tag: TagRequest;
  at: string;
}

export interface DetachTag {
  type: 'DetachTag';
  owner: TagOwnerRef;
  tagId: number;
  at: string;
}

export type TagCommand = AttachTag | DetachTag;

export const initialState: TagOwnerState = { status: 'absent', tags: [] };

export function evolve(state: TagOwnerState, event: TagOwnerEvent): TagOwnerState {
  switch (event.type) {
    case 'AssetCreated':
    case 'LocationCreated':
    case 'AssetRestored':
    case 'LocationRestored':
      return { ...state, status: 'existing' };
    case 'AssetDeleted':
    case 'LocationDeleted':
      return { ...state, status: 'deleted' };
    case 'TagAttached':
    case 'TagDetached':
      return { ...state, tags: evolveTags(state.tags, event) };
    default:
      return state;
  }
}

/** A missing, soft-deleted or other-org owner: `Asset 12 not found`. */
export function ownerNotFound(owner: TagOwnerRef): DomainRefusal {
  return refuse.notFound(`${owner.ownerType === 'asset' ? 'Asset' : 'Location'} ${owner.ownerId} not found`);
}

export function decide(command: TagCommand, state: TagOwnerState): TagEvent[] {
  if (state.status !== 'existing') throw ownerNotFound(command.owner);
  switch (command.type) {
    case 'AttachTag':
      return attachTags(command.owner, [command.tag], command.at);
    case 'DetachTag': {
      // Another owner's (or org's) tag is not attached to this one: a 404 like a missing tag.
      const tag = state.tags.find((t) => t.id === command.tagId);
      if (!tag) throw refuse.notFound(`Tag ${command.tagId} is not attached to ${command.owner.ownerType} ${command.owner.ownerId}`);
      return [detached(command.owner, tag, 'detached', command.at)];
    }
  }
}

export const tagDecider: Decider<TagOwnerState, TagCommand, TagOwnerEvent> = { initialState, evolve, decide };
