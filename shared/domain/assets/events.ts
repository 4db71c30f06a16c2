import { z } from 'zod';
import { defineEvent, type EventOf } from '../../event-store/catalogue.js';

/**
 * Asset events, on stream `asset-<org>-<asset id>`. Timestamps are ISO strings from the
 * command's clock, so a replay rebuilds identical rows.
 */

const base = {
  org_id: z.number().int().positive(),
  asset_id: z.number().int().positive(),
  at: z.string(),
};

// Stored opaquely: checked to be an object and passed on as it is. z.record would build a new
// object and silently drop a `__proto__` key.
const metadata = z.custom<Record<string, unknown>>(
  (value) => typeof value === 'object' && value !== null && !Array.isArray(value),
  'metadata must be a JSON object',
);

/** The fields a create sets and an update may change. */
const writable = {
  name: z.string(),
  description: z.string().nullable(),
  is_active: z.boolean(),
  valid_from: z.string().nullable(),
  valid_to: z.string().nullable(),
  metadata,
};

export const AssetCreated = defineEvent(
  'AssetCreated',
  1,
  z.object({
    ...base,
    external_key: z.string().min(1),
    /** The key was auto-minted (absent from the body). */
    minted: z.boolean(),
    ...writable,
  }),
);

/** Only the fields that changed, with their new values. */
export const AssetUpdated = defineEvent(
  'AssetUpdated',
  1,
  z.object({
    ...base,
    changes: z.object(writable).partial(),
  }),
);

export const AssetRenamed = defineEvent(
  'AssetRenamed',
  1,
  z.object({ ...base, external_key: z.string().min(1), previous_external_key: z.string().min(1) }),
);

export const AssetDeleted = defineEvent('AssetDeleted', 1, z.object({ ...base, external_key: z.string().min(1) }));

/**
 * A soft-deleted asset made existing again (docs/api.md, "Restoring"): it claims its external_key
 * again; the tags retired with the delete stay detached.
 */
export const AssetRestored = defineEvent('AssetRestored', 1, z.object({ ...base, external_key: z.string().min(1) }));

export type AssetCreatedData = z.infer<typeof AssetCreated.schema>;
export type AssetUpdatedData = z.infer<typeof AssetUpdated.schema>;
export type AssetRenamedData = z.infer<typeof AssetRenamed.schema>;
export type AssetDeletedData = z.infer<typeof AssetDeleted.schema>;
export type AssetRestoredData = z.infer<typeof AssetRestored.schema>;
export type AssetChanges = AssetUpdatedData['changes'];

export const assetEvents = [AssetCreated, AssetUpdated, AssetRenamed, AssetDeleted, AssetRestored] as const;
export type AssetEvent = EventOf<(typeof assetEvents)[number]>;

export function assetStream(orgId: number, assetId: number): string {
  return `asset-${orgId}-${assetId}`;
}
