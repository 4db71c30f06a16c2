import { setParent, type Tree, type TreeChanges } from '../engine-tree.js';
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
 * - A read counts for every count of its organization whose window [started, closed] (open: no
 *   end) holds its observed time, whenever it arrives, before the start included. It is "in the
 *   zone" or "out" (the tree at the read); an item keeps the latest of each (observed time; a tie:
 *   the first in the log).
 * - A read observed at or after the instant it reached the service (`at` of its event, the clock
 *   of the counts' start and close: the reader's clock is ahead) is an "ahead" read, kept apart:
 *   in its asset's state (with its ancestor chain) until the log's clock passes its observed time,
 *   so that a later start counts it; and, for a count open when it arrives, as a sighting of its
 *   own, so that the close can take it back when it was observed after the close. Every other
 *   read is "settled": its observed time is before every later start and close.
 */

export interface CountWindow {
  locationId: number;
  startedUs: number;
  closedUs: number | null;
}

/** What every segment follows: the tree (location → parent) and the counts, by org. */
export interface SharedState {
  /** org → location → parent (null: a root): the organizations the batch touches only (kept a row per location, projections/engine-tree.ts). */
  tree: Tree;
  counts: Record<string, Record<string, CountWindow>>;
}

/** A read observed ahead of its arrival, kept for the starts to come (docs/design.md "Counts"). */
export interface AheadRead {
  locationId: number;
  observedUs: number;
  readKey: string;
  /** The read's location and its ancestors as the tree stood at the read, nearest first. */
  chain: number[];
  /** Its place in the log (`seqOf`): the first of two sightings at the same instant wins. */
  seq: string;
}

export interface AssetState {
  orgId: number;
  assetId: number;
  position: Position | null;
  deleted: boolean;
  /** The ahead reads not yet passed by the log's clock, in log order (absent: none). */
  ahead?: AheadRead[];
}

export interface Seen {
  locationId: number;
  us: number;
}

/** A sighting with its place in the log. */
export interface Sighting extends Seen {
  seq: string;
}

/**
 * What the reads of a batch saw of one asset for one count: `zone`/`out` every sighting merged
 * (what the item shows while the count is open), `settled` the settled ones merged, `ahead` each
 * ahead sighting of a count still open, in log order (the close keeps those observed by then).
 */
export interface ItemUpdate {
  orgId: number;
  countId: number;
  assetId: number;
  zone: Seen | null;
  out: Seen | null;
  settled: { zone: Sighting | null; out: Sighting | null };
  ahead: Array<Sighting & { zone: boolean }>;
}

export type CountsInput =
  | { type: 'read'; orgId: number; assetId: number; locationId: number; observedUs: number; readKey: string; receivedUs: number; seq: string }
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
export function later<S extends Seen>(a: S | null, b: S | null): S | null {
  if (!a) return b;
  if (!b) return a;
  return b.us > a.us ? b : a;
}

export class CountsEngine {
  /** Whether the counts changed (the shared state's row to write). */
  sharedChanged = false;
  /** The tree's locations the steps changed (their rows to write: projections/engine-tree.ts). */
  readonly treeChanges: TreeChanges = new Map();
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

  private item(orgId: number, countId: number, assetId: number): ItemUpdate {
    const key = itemKey(orgId, countId, assetId);
    let item = this.items.get(key);
    if (!item) {
      item = { orgId, countId, assetId, zone: null, out: null, settled: { zone: null, out: null }, ahead: [] };
      this.items.set(key, item);
    }
    return item;
  }

  /** One sighting of an asset for a count: shown at once; settled, or kept apart while the count is open. */
  private sight(item: ItemUpdate, inZone: boolean, sighting: Sighting, ahead: boolean): void {
    const seen: Seen = { locationId: sighting.locationId, us: sighting.us };
    if (inZone) item.zone = later(item.zone, seen);
    else item.out = later(item.out, seen);
    if (ahead) item.ahead.push({ ...sighting, zone: inZone });
    else if (inZone) item.settled.zone = later(item.settled.zone, sighting);
    else item.settled.out = later(item.settled.out, sighting);
  }

  /** Drops an asset's ahead reads observed before `us`: the log's clock has passed them. */
  private prune(asset: AssetState, us: number): void {
    if (!asset.ahead) return;
    const kept = asset.ahead.filter((read) => read.observedUs >= us);
    if (kept.length === asset.ahead.length) return;
    if (kept.length > 0) asset.ahead = kept;
    else delete asset.ahead;
    this.dirtyAssets.add(assetKey(asset.orgId, asset.assetId));
  }

  /**
   * The step. For a `count_started`, `assets` must hold every asset of the segment and the count's
   * organization that has ahead reads (the caller loads them): their reads observed at or after
   * the start count for it.
   */
  step(input: CountsInput): void {
    switch (input.type) {
      case 'tree':
        setParent(this.shared.tree, this.treeChanges, input.orgId, input.locationId, input.parentId);
        return;
      case 'asset_deleted':
      case 'asset_restored':
        this.asset(input.orgId, input.assetId).deleted = input.type === 'asset_deleted';
        return;
      case 'count_started': {
        (this.shared.counts[input.orgId] ??= {})[input.countId] = { locationId: input.locationId, startedUs: input.startedUs, closedUs: null };
        this.sharedChanged = true;
        for (const asset of this.assets.values()) {
          if (asset.orgId !== input.orgId || !asset.ahead) continue;
          this.prune(asset, input.startedUs);
          for (const read of asset.ahead ?? []) {
            const item = this.item(input.orgId, input.countId, asset.assetId);
            this.sight(item, read.chain.includes(input.locationId), { locationId: read.locationId, us: read.observedUs, seq: read.seq }, true);
          }
        }
        return;
      }
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
        this.prune(asset, input.receivedUs);
        const ahead = input.observedUs >= input.receivedUs;
        let ancestors: number[] | null = null;
        if (ahead) {
          const chain = (ancestors = ancestorsOf(this.shared, input.orgId, input.locationId));
          const chainKey = chain.join();
          const same = (read: AheadRead) => read.readKey === input.readKey && read.chain.join() === chainKey;
          if (!asset.ahead?.some(same)) (asset.ahead ??= []).push({ locationId: input.locationId, observedUs: input.observedUs, readKey: input.readKey, chain, seq: input.seq });
        }
        const counts = this.shared.counts[input.orgId];
        if (!counts) return;
        for (const [id, count] of Object.entries(counts)) {
          if (input.observedUs < count.startedUs || (count.closedUs !== null && input.observedUs > count.closedUs)) continue;
          ancestors ??= ancestorsOf(this.shared, input.orgId, input.locationId);
          const item = this.item(input.orgId, Number(id), input.assetId);
          this.sight(item, ancestors.includes(count.locationId), { locationId: input.locationId, us: input.observedUs, seq: input.seq }, ahead && count.closedUs === null);
        }
        return;
      }
    }
  }
}
