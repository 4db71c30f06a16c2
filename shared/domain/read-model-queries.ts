import type { ApiKeyStates } from '../auth/api-key-states.js';
import type { SessionTokenStates } from '../auth/session-token-states.js';

/**
 * What the write side needs to know from the read models, as narrow queries. Decisions that span
 * aggregates (a location's existing descendants, the assets placed at it, an asset's current
 * location for accept-if-matches) read projected state; the domain names what it needs here and
 * the read models answer it (`projections/*`), so `shared/` never imports a projection. The
 * service wiring puts one implementation in the context; it also answers the API key and session
 * token states the authenticator reads (auth/api-key-states.ts, auth/session-token-states.ts).
 */

/** An existing location of the org as a tree node (its ancestor ids, root first). */
export interface ExistingNode {
  id: number;
  externalKey: string;
  ancestors: number[];
}

/** The scan-data pair as an asset's view shows it. */
export interface AssetLocationRef {
  id: number | null;
  external_key: string | null;
}

export interface ReadModelQueries extends TrackingQueries, ApiKeyStates, SessionTokenStates {
  findExistingLocation(orgId: number, by: { id: number } | { externalKey: string }): Promise<ExistingNode | null>;
  /** Existing descendants (any depth), whatever their effectiveness. */
  countExistingDescendants(orgId: number, locationId: number): Promise<number>;
  /** Existing assets whose current (scan-derived) location is this one. */
  countExistingAssetsAt(orgId: number, locationId: number): Promise<number>;
  currentAssetLocation(orgId: number, assetId: number): Promise<AssetLocationRef>;
  /** Those of `assetIds` that are existing assets of the org. */
  findExistingAssetIds(orgId: number, assetIds: readonly number[]): Promise<number[]>;
  /** The external key of an existing or deleted asset or location, for messages; null when unknown. */
  findExternalKey(orgId: number, ownerType: 'asset' | 'location', id: number): Promise<string | null>;
}

/** What the tags read model knows of a (tag_type, value) in an org (RFID values case-insensitively). */
export type TagLookup =
  | { state: 'unknown' }
  /** Only detached or retired tags have had this value. */
  | { state: 'retired' }
  /** An existing tag holds it; `usable` when it is active and currently effective. */
  | { state: 'existing'; ownerType: 'asset' | 'location'; ownerId: number; usable: boolean };

export interface TrackingQueries {
  /** One lookup per tag, in order. */
  lookupTags(orgId: number, tags: ReadonlyArray<{ tag_type: string; value: string }>): Promise<TagLookup[]>;
  /** The org of each registered reader among these. */
  readerOrgs(readerIds: readonly string[]): Promise<Map<string, number>>;
  /** The location of each assigned scan point of these readers, by `<reader>\u0000<capture point>`. */
  scanPointLocations(readerIds: readonly string[]): Promise<Map<string, number>>;
}
