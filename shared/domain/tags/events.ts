import { z } from 'zod';
import { defineEvent, type EventOf } from '../../event-store/catalogue.js';

/**
 * Tag events live on their owner's stream (`asset-<org>-<id>` or `location-<org>-<id>`), so a
 * tag change is ordered with the owner's own changes and guarded by the owner's revision.
 * Uniqueness of (tag_type, value) across owners is kept by a `tag` reservation claimed in the
 * same atomic append.
 */
export const OWNER_TYPES = ['asset', 'location'] as const;
export type OwnerType = (typeof OWNER_TYPES)[number];

/** Which tag, on which owner: the fields both events carry. */
const tagOnOwner = {
  org_id: z.number().int().positive(),
  owner_type: z.enum(OWNER_TYPES),
  owner_id: z.number().int().positive(),
  tag_id: z.number().int().positive(),
  tag_type: z.string().min(1),
  value: z.string().min(1),
};

export const TagAttached = defineEvent(
  'TagAttached',
  1,
  z.object({
    ...tagOnOwner,
    is_active: z.boolean(),
    valid_from: z.string().nullable(),
    valid_to: z.string().nullable(),
    at: z.string(),
  }),
);

export const TagDetached = defineEvent(
  'TagDetached',
  1,
  z.object({
    ...tagOnOwner,
    /** `detached` by DELETE .../tags/{id}; `owner_deleted` when its owner was soft-deleted. */
    reason: z.enum(['detached', 'owner_deleted']),
    at: z.string(),
  }),
);

export type TagAttachedData = z.infer<typeof TagAttached.schema>;
export type TagDetachedData = z.infer<typeof TagDetached.schema>;

export const tagEvents = [TagAttached, TagDetached] as const;
export type TagEvent = EventOf<(typeof tagEvents)[number]>;
