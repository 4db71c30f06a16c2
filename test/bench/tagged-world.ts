import type pg from 'pg';
import { assetStream, AssetCreated } from '../../shared/domain/assets/events.js';
import { claim, reservationStream, type ReservationKind } from '../../shared/domain/reservations.js';
import { tagReservationValue } from '../../shared/domain/tags/decider.js';
import { TagAttached } from '../../shared/domain/tags/events.js';
import type { Position, StreamAppend } from '../../shared/event-store/port.js';
import type { ServiceContext } from '../../shared/service-context.js';

/**
 * The master data the tracking benches read against: locations, and assets with one RFID tag
 * each, appended through the store as the commands would write them (with their claims), in
 * batches of 1,000, for the projections to build.
 */

/** An SGTIN-96-like EPC: one company, 16 item references, a serial that looks random (and is unique per index). */
export function epc(index: number): string {
  const item = (0x0b78 + (index % 16)).toString(16).padStart(4, '0');
  const serial = (Math.imul(index + 1, 0x9e3779b1) >>> 0).toString(16).padStart(10, '0');
  return `3034257bf4${item}${serial}`.toUpperCase();
}

async function ids(pool: pg.Pool, sequence: string, count: number): Promise<number[]> {
  const result = await pool.query<{ id: number }>(`SELECT nextval('service.${sequence}')::int AS id FROM generate_series(1, $1)`, [count]);
  return result.rows.map((r) => r.id);
}

export interface TaggedWorldSpec {
  orgId: number;
  locations: number;
  assets: number;
  /** The events' `at`. */
  at: string;
  /** A location's external key and name, by id. */
  location: (id: number) => { externalKey: string; name: string };
  /** An asset's external key and name, by id. */
  asset: (id: number) => { externalKey: string; name: string };
}

export interface TaggedWorld {
  orgId: number;
  assetIds: number[];
  /** The RFID EPC of the asset at the same index. */
  epcs: string[];
  locationIds: number[];
}

/** Appends the org's locations, then its assets (AssetCreated + TagAttached); returns them and the last position. */
export async function seedTaggedWorld(ctx: ServiceContext, spec: TaggedWorldSpec): Promise<{ world: TaggedWorld; last: Position }> {
  const { orgId, at } = spec;
  const claimOf = (kind: ReservationKind, value: string, ownerType: string, ownerId: number): StreamAppend =>
    claim({ streamId: reservationStream(kind, orgId, value), kind, orgId, value, expectedRevision: 'no_stream', holder: null }, { ownerType, ownerId }, at);
  let last: Position | null = null;
  const locationIds = await ids(ctx.pool, 'location_ids', spec.locations);
  for (let start = 0; start < locationIds.length; start += 1000) {
    const appends: StreamAppend[] = [];
    for (const id of locationIds.slice(start, start + 1000)) {
      const { externalKey, name } = spec.location(id);
      appends.push({
        streamId: `location-${orgId}-${id}`,
        expectedRevision: 'no_stream',
        events: [
          {
            type: 'LocationCreated',
            data: { org_id: orgId, location_id: id, external_key: externalKey, name, description: null, parent_id: null, is_active: true, valid_from: null, valid_to: null, at },
          },
        ],
      });
      appends.push(claimOf('location-key', externalKey, 'location', id));
    }
    last = (await ctx.store.appendToStreams(appends)).position;
  }
  const assetIds = await ids(ctx.pool, 'asset_ids', spec.assets);
  const tagIds = await ids(ctx.pool, 'tag_ids', spec.assets);
  const epcs = assetIds.map((_, i) => epc(i));
  for (let start = 0; start < assetIds.length; start += 1000) {
    const appends: StreamAppend[] = [];
    for (let i = start; i < Math.min(start + 1000, assetIds.length); i++) {
      const id = assetIds[i]!;
      const { externalKey, name } = spec.asset(id);
      appends.push({
        streamId: assetStream(orgId, id),
        expectedRevision: 'no_stream',
        events: [
          {
            type: AssetCreated.type,
            data: { org_id: orgId, asset_id: id, external_key: externalKey, minted: false, name, description: null, is_active: true, valid_from: null, valid_to: null, metadata: {}, at },
          },
          {
            type: TagAttached.type,
            data: { org_id: orgId, owner_type: 'asset', owner_id: id, tag_id: tagIds[i]!, tag_type: 'rfid', value: epcs[i]!, is_active: true, valid_from: null, valid_to: null, at },
          },
        ],
      });
      appends.push(claimOf('asset-key', externalKey, 'asset', id));
      appends.push(claimOf('tag', tagReservationValue('rfid', epcs[i]!), 'asset', id));
    }
    last = (await ctx.store.appendToStreams(appends)).position;
  }
  return { world: { orgId, assetIds, epcs, locationIds }, last: last! };
}
