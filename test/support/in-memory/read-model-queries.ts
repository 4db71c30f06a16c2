import { eventsOf } from '../../../shared/event-store/catalogue.js';
import type { EventStore, RecordedEvent } from '../../../shared/event-store/port.js';
import { locationEvents } from '../../../shared/domain/locations/events.js';
import { assetEvents } from '../../../shared/domain/assets/events.js';
import { readerEvents } from '../../../shared/domain/readers/events.js';
import { tagEvents } from '../../../shared/domain/tags/events.js';
import type { AssetLocationRef, ExistingNode, ReadModelQueries, TagLookup } from '../../../shared/domain/read-model-queries.js';
import { matchValue } from '../../../shared/domain/scans/read-codec.js';
import type { SessionTokenState } from '../../../shared/auth/session-token-states.js';
import type { ApiKeyState } from '../../../shared/auth/api-key-states.js';

/**
 * The read models' answers to the write side, folded from the in-memory store's log at each
 * question: as the projections would answer once they caught up (the in-memory checkpoints say
 * they have). Only the questions the handlers' unit tests ask are answered; the others (what
 * scans derive, the API key states) throw, so a test that needs one says so at once.
 */
export class InMemoryReads implements ReadModelQueries {
  constructor(private readonly store: EventStore) {}

  private async log(): Promise<RecordedEvent[]> {
    return this.store.readAll({ maxCount: Number.MAX_SAFE_INTEGER });
  }

  /** Every location of the log as the locations read model keeps it. */
  private async locations(orgId: number) {
    const locations = new Map<number, { externalKey: string; parentId: number | null; deleted: boolean }>();
    for (const e of eventsOf(await this.log(), locationEvents)) {
      if (e.data.org_id !== orgId) continue;
      const id = e.data.location_id;
      if (e.type === 'LocationCreated') locations.set(id, { externalKey: e.data.external_key, parentId: e.data.parent_id, deleted: false });
      else if (e.type === 'LocationMoved') locations.get(id)!.parentId = e.data.parent_id;
      else if (e.type === 'LocationRenamed') locations.get(id)!.externalKey = e.data.external_key;
      else if (e.type === 'LocationDeleted') locations.get(id)!.deleted = true;
    }
    const ancestors = (id: number): number[] => {
      const parent = locations.get(id)!.parentId;
      return parent === null ? [] : [...ancestors(parent), parent];
    };
    return [...locations].map(([id, l]) => ({ id, ...l, ancestors: ancestors(id) }));
  }

  async findExistingLocation(orgId: number, by: { id: number } | { externalKey: string }): Promise<ExistingNode | null> {
    const existing = (await this.locations(orgId)).filter((l) => !l.deleted).sort((a, b) => a.id - b.id);
    const found = existing.find((l) => ('id' in by ? l.id === by.id : l.externalKey === by.externalKey));
    return found ? { id: found.id, externalKey: found.externalKey, ancestors: found.ancestors } : null;
  }

  async countExistingDescendants(orgId: number, locationId: number): Promise<number> {
    return (await this.locations(orgId)).filter((l) => !l.deleted && l.ancestors.includes(locationId)).length;
  }

  async findExternalKey(orgId: number, ownerType: 'asset' | 'location', id: number): Promise<string | null> {
    let key: string | null = null;
    for (const e of await this.log()) {
      const d = e.data as Record<string, unknown>;
      if (d.org_id !== orgId || d[`${ownerType}_id`] !== id) continue;
      if (e.type === (ownerType === 'asset' ? 'AssetCreated' : 'LocationCreated') || e.type === (ownerType === 'asset' ? 'AssetRenamed' : 'LocationRenamed')) {
        key = d.external_key as string;
      }
    }
    return key;
  }

  async lookupTags(orgId: number, tags: ReadonlyArray<{ tag_type: string; value: string }>): Promise<TagLookup[]> {
    type Tag = { tagType: string; value: string; ownerType: 'asset' | 'location'; ownerId: number; usable: boolean; existing: boolean };
    const byId = new Map<number, Tag>();
    const now = Date.now();
    for (const { type, data: d } of eventsOf(await this.log(), tagEvents)) {
      if (d.org_id !== orgId) continue;
      if (type === 'TagAttached') {
        const effective = (d.valid_from === null || Date.parse(d.valid_from) <= now) && (d.valid_to === null || Date.parse(d.valid_to) > now);
        byId.set(d.tag_id, { tagType: d.tag_type, value: d.value, ownerType: d.owner_type, ownerId: d.owner_id, usable: d.is_active && effective, existing: true });
      } else byId.get(d.tag_id)!.existing = false;
    }
    return tags.map((q): TagLookup => {
      const same = [...byId.values()].filter((t) => t.tagType === q.tag_type && matchValue(t.tagType, t.value) === matchValue(q.tag_type, q.value));
      const existing = same.find((t) => t.existing);
      if (existing) return { state: 'existing', ownerType: existing.ownerType, ownerId: existing.ownerId, usable: existing.usable };
      return same.length > 0 ? { state: 'retired' } : { state: 'unknown' };
    });
  }

  async readerOrgs(readerIds: readonly string[]): Promise<Map<string, number>> {
    const orgs = new Map<string, number>();
    for (const e of eventsOf(await this.log(), readerEvents)) {
      if (e.type === 'ReaderRegistered' && readerIds.includes(e.data.reader_id) && !orgs.has(e.data.reader_id)) orgs.set(e.data.reader_id, e.data.org_id);
    }
    return orgs;
  }

  async scanPointLocations(readerIds: readonly string[]): Promise<Map<string, number>> {
    const points = new Map<string, number>();
    for (const e of eventsOf(await this.log(), readerEvents)) {
      if (e.type === 'ScanPointAssigned' && readerIds.includes(e.data.reader_id)) points.set(`${e.data.reader_id}\u0000${e.data.capture_point}`, e.data.location_id);
      else if (e.type === 'ScanPointUnassigned') points.delete(`${e.data.reader_id}\u0000${e.data.capture_point}`);
    }
    return points;
  }

  async findExistingAssetIds(orgId: number, assetIds: readonly number[]): Promise<number[]> {
    const existing = new Set<number>();
    for (const e of eventsOf(await this.log(), assetEvents)) {
      if (e.data.org_id !== orgId) continue;
      if (e.type === 'AssetCreated' || e.type === 'AssetRestored') existing.add(e.data.asset_id);
      else if (e.type === 'AssetDeleted') existing.delete(e.data.asset_id);
    }
    return assetIds.filter((id) => existing.has(id));
  }

  async countExistingAssetsAt(): Promise<number> {
    throw notInMemory('countExistingAssetsAt');
  }

  async currentAssetLocation(): Promise<AssetLocationRef> {
    throw notInMemory('currentAssetLocation');
  }

  async findApiKeyStates(): Promise<Map<string, ApiKeyState>> {
    throw notInMemory('findApiKeyStates');
  }

  async findSessionTokenState(): Promise<SessionTokenState | null> {
    throw notInMemory('findSessionTokenState');
  }
}

function notInMemory(query: string): Error {
  return new Error(`${query}: not in memory (the in-memory reads answer what the handlers' unit tests ask; test this with the read model)`);
}
