import type { ApiKeyStates } from '../auth/api-key-states.js';
import type { SessionTokenStates } from '../auth/session-token-states.js';

/**
 * What the write side needs to know from the read models, as narrow queries. Decisions that span
 * aggregates (a location's live descendants, the assets placed at it, an asset's current
 * location for accept-if-matches) read projected state; the domain names what it needs here and
 * the read models answer it (`projections/*`), so `shared/` never imports a projection. The
 * service wiring puts one implementation in the context; it also answers the API key and session
 * token states the authenticator reads (auth/api-key-states.ts, auth/session-token-states.ts).
 */

/** A live location of the org as a tree node (its ancestor ids, root first). */
export interface LiveNode {
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
  findLiveLocation(orgId: number, by: { id: number } | { externalKey: string }): Promise<LiveNode | null>;
  /** Live descendants (any depth), whatever their effectiveness. */
  countLiveDescendants(orgId: number, locationId: number): Promise<number>;
  /** Live assets whose current (scan-derived) location is this one. */
  countLiveAssetsAt(orgId: number, locationId: number): Promise<number>;
  currentAssetLocation(orgId: number, assetId: number): Promise<AssetLocationRef>;
  /** The external key of a live or deleted asset or location, for messages; null when unknown. */
  findExternalKey(orgId: number, ownerType: 'asset' | 'location', id: number): Promise<string | null>;
}

/** What the tags read model knows of a (tag_type, value) in an org (RFID values case-insensitively). */
export type TagLookup =
  | { state: 'unknown' }
  /** Only detached or retired tags have had this value. */
  | { state: 'retired' }
  /** A live tag holds it; `usable` when it is active and currently effective. */
  | { state: 'live'; ownerType: 'asset' | 'location'; ownerId: number; usable: boolean };

export interface TrackingQueries {
  /** One lookup per tag, in order. */
  lookupTags(orgId: number, tags: ReadonlyArray<{ tag_type: string; value: string }>): Promise<TagLookup[]>;
  /** The org of each registered reader among these. */
  readerOrgs(readerIds: readonly string[]): Promise<Map<string, number>>;
  /** The location of each assigned scan point of these readers, by `<reader>\u0000<capture point>`. */
  scanPointLocations(readerIds: readonly string[]): Promise<Map<string, number>>;
}
