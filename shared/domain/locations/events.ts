import { z } from 'zod';
import { defineEvent, type EventOf } from '../../event-store/catalogue.js';

/**
 * Events of the location slice. Every timestamp is an ISO string taken from the command's clock,
 * so a replay rebuilds identical rows. A location's own events go to `location-<org>-<id>`; every
 * change of the tree's shape (a create under a parent, a re-parent, a delete) also appends a
 * `LocationTreeChanged` to `location-tree-<org>`, which serialises tree decisions per org.
 */

const id = z.number().int().positive();
const isoTimestamp = z.string().min(1);

export const LocationCreated = defineEvent(
  'LocationCreated',
  1,
  z.object({
    org_id: id,
    location_id: id,
    external_key: z.string().min(1),
    name: z.string().min(1),
    description: z.string().nullable(),
    parent_id: id.nullable(),
    is_active: z.boolean(),
    valid_from: isoTimestamp.nullable(),
    valid_to: isoTimestamp.nullable(),
    at: isoTimestamp,
  }),
);

/** Only the fields that changed are present. */
export const LocationUpdated = defineEvent(
  'LocationUpdated',
  1,
  z.object({
    org_id: id,
    location_id: id,
    changes: z.object({
      name: z.string().min(1).optional(),
      description: z.string().nullable().optional(),
      is_active: z.boolean().optional(),
      valid_from: isoTimestamp.nullable().optional(),
      valid_to: isoTimestamp.nullable().optional(),
    }),
    at: isoTimestamp,
  }),
);

export const LocationMoved = defineEvent(
  'LocationMoved',
  1,
  z.object({
    org_id: id,
    location_id: id,
    parent_id: id.nullable(),
    previous_parent_id: id.nullable(),
    at: isoTimestamp,
  }),
);

export const LocationRenamed = defineEvent(
  'LocationRenamed',
  1,
  z.object({
    org_id: id,
    location_id: id,
    external_key: z.string().min(1),
    previous_external_key: z.string().min(1),
    at: isoTimestamp,
  }),
);

export const LocationDeleted = defineEvent(
  'LocationDeleted',
  1,
  z.object({ org_id: id, location_id: id, external_key: z.string().min(1), at: isoTimestamp }),
);

/**
 * A soft-deleted location made existing again (docs/api.md, "Restoring"), under the parent it had:
 * it claims its external_key again and its scans place again; the tags retired with the delete
 * stay detached.
 */
export const LocationRestored = defineEvent(
  'LocationRestored',
  1,
  z.object({ org_id: id, location_id: id, external_key: z.string().min(1), parent_id: id.nullable(), at: isoTimestamp }),
);

/** On the per-org tree stream only; no projection needs it, its revision is the lock. */
export const LocationTreeChanged = defineEvent(
  'LocationTreeChanged',
  1,
  z.object({
    org_id: id,
    location_id: id,
    change: z.enum(['created', 'moved', 'deleted', 'restored']),
    parent_id: id.nullable(),
    at: isoTimestamp,
  }),
);

/** The events of a location's own stream (its tags' events share the stream: tags/events.ts). */
export const locationEvents = [LocationCreated, LocationUpdated, LocationMoved, LocationRenamed, LocationDeleted, LocationRestored] as const;
export const locationTreeEvents = [LocationTreeChanged] as const;

export type LocationCreatedData = z.infer<typeof LocationCreated.schema>;
export type LocationUpdatedData = z.infer<typeof LocationUpdated.schema>;
export type LocationMovedData = z.infer<typeof LocationMoved.schema>;
export type LocationRenamedData = z.infer<typeof LocationRenamed.schema>;
export type LocationDeletedData = z.infer<typeof LocationDeleted.schema>;
export type LocationRestoredData = z.infer<typeof LocationRestored.schema>;
export type LocationTreeChangedData = z.infer<typeof LocationTreeChanged.schema>;

export type LocationEvent = EventOf<(typeof locationEvents)[number]>;

export function locationStream(orgId: number, locationId: number): string {
  return `location-${orgId}-${locationId}`;
}

export function locationTreeStream(orgId: number): string {
  return `location-tree-${orgId}`;
}
