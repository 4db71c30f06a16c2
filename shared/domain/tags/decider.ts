import type { EventData } from '../../event-store/port.js';
import { NotFoundError } from '../../errors.js';
import { TagAttached, TagDetached, type OwnerType, type TagAttachedData, type TagDetachedData } from './events.js';

/** A live tag as its owner's stream knows it (detached tags drop out of the state). */
export interface TagState {
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

/** Folds one event of the owner's stream into its live tags; other event types pass through. */
export function evolveTags(tags: readonly TagState[], event: { type: string; data: unknown }): TagState[] {
  if (event.type === TagAttached.type) {
    const d = event.data as TagAttachedData;
    return [
      ...tags,
      { id: d.tag_id, tag_type: d.tag_type, value: d.value, is_active: d.is_active, valid_from: d.valid_from, valid_to: d.valid_to, created_at: d.at },
    ];
  }
  if (event.type === TagDetached.type) {
    const d = event.data as TagDetachedData;
    return tags.filter((t) => t.id !== d.tag_id);
  }
  return [...tags];
}

/**
 * The value a tag claims in the `tag` reservation kind: `<tag_type>:<value>`. RFID values are
 * upper-cased here (the stored value keeps the caller's case) because ingest matches EPCs
 * case-insensitively: `e280...` and `E280...` are the same physical tag and must not both exist.
 */
export function tagReservationValue(tagType: string, value: string): string {
  return `${tagType}:${tagType === 'rfid' ? value.toUpperCase() : value}`;
}

export function tagAttachedEvent(owner: TagOwnerRef, tagId: number, input: TagInput, at: string): EventData {
  const data: TagAttachedData = {
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
  };
  return { type: TagAttached.type, data };
}

export function tagDetachedEvent(owner: TagOwnerRef, tag: TagState, reason: TagDetachedData['reason'], at: string): EventData {
  const data: TagDetachedData = {
    org_id: owner.orgId,
    owner_type: owner.ownerType,
    owner_id: owner.ownerId,
    tag_id: tag.id,
    tag_type: tag.tag_type,
    value: tag.value,
    reason,
    at,
  };
  return { type: TagDetached.type, data };
}

/** DELETE .../tags/{tag_id}: the tag must be live on this owner (another owner's or org's tag is a 404). */
export function decideDetachTag(owner: TagOwnerRef, tags: readonly TagState[], tagId: number, at: string): { events: EventData[]; tag: TagState } {
  const tag = tags.find((t) => t.id === tagId);
  if (!tag) throw new NotFoundError(`Tag ${tagId} is not attached to ${owner.ownerType} ${owner.ownerId}`);
  return { events: [tagDetachedEvent(owner, tag, 'detached', at)], tag };
}

/** Retiring every live tag when the owner is soft-deleted. */
export function decideRetireTags(owner: TagOwnerRef, tags: readonly TagState[], at: string): EventData[] {
  return tags.map((t) => tagDetachedEvent(owner, t, 'owner_deleted', at));
}
