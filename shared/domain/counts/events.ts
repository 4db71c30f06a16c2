import { z } from 'zod';
import { defineEvent } from '../../event-store/catalogue.js';

/**
 * Counts of a zone as events (docs/api.md "Counts", docs/design.md "Counts"). Each count has its
 * own stream, `count-<org>-<count id>`: nothing is decided across an organization's counts (no
 * limit, no uniqueness), so a start and a close only race with themselves, and closing one count
 * never waits for another. What a count finds is not an event: it is derived from the log (the
 * reads) by the `counts` subscriber, so a rebuild gives the same items.
 */

const orgId = z.number().int().positive();
const countId = z.number().int().positive();

export const CountStarted = defineEvent(
  'CountStarted',
  1,
  z.object({
    org_id: orgId,
    count_id: countId,
    name: z.string().min(1).nullable(),
    /** The zone: this location and its descendants, as the tree stands where the event is in the log. */
    location_id: z.number().int().positive(),
    /** When the count started (RFC 3339): a read counts when observed at or after it. */
    at: z.string(),
  }),
);

export const CountClosed = defineEvent(
  'CountClosed',
  1,
  z.object({
    org_id: orgId,
    count_id: countId,
    /** When the count was closed (RFC 3339): a read counts when observed at or before it, whenever it arrives. */
    at: z.string(),
  }),
);

export type CountEvent = { type: 'CountStarted'; data: z.output<typeof CountStarted.schema> } | { type: 'CountClosed'; data: z.output<typeof CountClosed.schema> };

export const countEvents = [CountStarted, CountClosed];

export const countStream = (orgId: number, countId: number): string => `count-${orgId}-${countId}`;
