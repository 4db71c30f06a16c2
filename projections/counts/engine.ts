import { followPosition, type Position } from '../tracking/current-location.js';

/**
 * The counts subscriber's step, pure (docs/design.md "Counts"): the state of one segment and one
 * event in, the state and the items it changed out. No SQL, no clock: the only times it knows are
 * the log's (a count's start and close as recorded, the observed times of reads), so a rebuild
 * takes every step again the same way.
 *
 * - A zone is a count's location and its descendants, as the tree stands at that point of the log
 *   (at the start event for the expected set, at each read for that read).
 * - An asset's current location is the report's rule, followed with `followPosition`
 *   (projections/tracking/current-location.ts): a late read does not move it, a read delivered
 *   again counts once. Expected: the assets (not deleted) whose current location is in the zone
 *   where the start event is in the log.
 * - A read counts for every count of its organization followed so far whose window
 *   [started, closed] (open: no end) holds its observed time, whenever it arrives. It is "in the
 *   zone" or "out"; an item keeps the latest of each (observed time; a tie: the first in the log).
 */

export interface CountWindow {
  locationId: number;
  startedUs: number;
  closedUs: number | null;
}

/** What every segment follows: the tree (location → parent) and the counts, by org. */
export interface SharedState {
  tree: Record<string, Record<string, number | null>>;
  counts: Record<string, Record<string, CountWindow>>;
}

export interface AssetState {
  orgId: number;
  assetId: number;
  position: Position | null;
  deleted: boolean;
}

export interface Seen {
  locationId: number;
  us: number;
}

/** What the reads of a batch saw of one asset for one count. */
export interface ItemUpdate {
  orgId: number;
  countId: number;
  assetId: number;
  zone: Seen | null;
  out: Seen | null;
}

export type CountsInput =
  | { type: 'read'; orgId: number; assetId: number; locationId: number; observedUs: number; readKey: string }
  | { type: 'tree'; orgId: number; locationId: number; parentId: number | null }
  | { type: 'asset_deleted' | 'asset_restored'; orgId: number; assetId: number }
  | { type: 'count_started'; orgId: number; countId: number; locationId: number; startedUs: number }
  | { type: 'count_closed'; orgId: number; countId: number; closedUs: number };

export const assetKey = (orgId: number, assetId: number) => `${orgId}/${assetId}`;
const itemKey = (orgId: number, countId: number, assetId: number) => `${orgId}/${countId}/${assetId}`;

export function emptyShared(): SharedState {
  return { tree: {}, counts: {} };
}

/** A location and its ancestors, nearest first, as the tree stands (a location not in it: itself). */
export function ancestorsOf(shared: SharedState, orgId: number, locationId: number): number[] {
  const tree = shared.tree[orgId] ?? {};
  const chain: number[] = [];
  for (let at: number | null | undefined = locationId; at != null && !chain.includes(at); at = tree[at]) chain.push(at);
  return chain;
}

/** The zone of a location: it and its descendants, as the tree stands. */
export function zoneOf(shared: SharedState, orgId: number, locationId: number): number[] {
  const tree = shared.tree[orgId] ?? {};
  const zone = new Set<number>([locationId]);
  for (const id of Object.keys(tree)) if (ancestorsOf(shared, orgId, Number(id)).includes(locationId)) zone.add(Number(id));
  return [...zone];
}

/** The later of two sightings: a strictly later observed time replaces; a tie keeps the first. */
export function later(a: Seen | null, b: Seen | null): Seen | null {
  if (!a) return b;
  if (!b) return a;
  return b.us > a.us ? b : a;
}

export class CountsEngine {
  sharedChanged = false;
  readonly dirtyAssets = new Set<string>();
  readonly items = new Map<string, ItemUpdate>();

  constructor(
    readonly shared: SharedState,
    readonly assets: Map<string, AssetState>,
  ) {}

  private asset(orgId: number, assetId: number): AssetState {
    const key = assetKey(orgId, assetId);
    let asset = this.assets.get(key);
    if (!asset) {
      asset = { orgId, assetId, position: null, deleted: false };
      this.assets.set(key, asset);
    }
    this.dirtyAssets.add(key);
    return asset;
  }

  step(input: CountsInput): void {
    switch (input.type) {
      case 'tree':
        (this.shared.tree[input.orgId] ??= {})[input.locationId] = input.parentId;
        this.sharedChanged = true;
        return;
      case 'asset_deleted':
      case 'asset_restored':
        this.asset(input.orgId, input.assetId).deleted = input.type === 'asset_deleted';
        return;
      case 'count_started':
        (this.shared.counts[input.orgId] ??= {})[input.countId] = { locationId: input.locationId, startedUs: input.startedUs, closedUs: null };
        this.sharedChanged = true;
        return;
      case 'count_closed': {
        const count = this.shared.counts[input.orgId]?.[input.countId];
        if (count && count.closedUs === null) {
          count.closedUs = input.closedUs;
          this.sharedChanged = true;
        }
        return;
      }
      case 'read': {
        const asset = this.asset(input.orgId, input.assetId);
        asset.position = followPosition(asset.position, [input]).after;
        const counts = this.shared.counts[input.orgId];
        if (!counts) return;
        let ancestors: number[] | null = null;
        for (const [id, count] of Object.entries(counts)) {
          if (input.observedUs < count.startedUs || (count.closedUs !== null && input.observedUs > count.closedUs)) continue;
          ancestors ??= ancestorsOf(this.shared, input.orgId, input.locationId);
          const seen: Seen = { locationId: input.locationId, us: input.observedUs };
          const key = itemKey(input.orgId, Number(id), input.assetId);
          const item = this.items.get(key) ?? { orgId: input.orgId, countId: Number(id), assetId: input.assetId, zone: null, out: null };
          if (ancestors.includes(count.locationId)) item.zone = later(item.zone, seen);
          else item.out = later(item.out, seen);
          this.items.set(key, item);
        }
        return;
      }
    }
  }
}
