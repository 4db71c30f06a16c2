import type pg from 'pg';
import { inTransaction } from '../../shared/db/pool.js';
import { newUlid } from '../../shared/ulid.js';
import { ScansRecorded, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import { decodeReads } from '../../shared/domain/scans/read-codec.js';
import type { RecordedEvent } from '../../shared/event-store/port.js';
import type { Projection } from '../../shared/projection/projection.js';
import { followPosition, type Change, type Position } from '../../projections/tracking/current-location.js';
import { QUEUE_INSERTED } from './queue.js';
import type { WebhookEventType } from './schema.js';

/**
 * The webhooks role's subscriber of the log (docs/design.md "Webhooks"): it follows the scan
 * events with a checkpoint of its own, as the projector follows them, and turns each change of an
 * asset's current location into deliveries, in the same transaction as its checkpoint.
 *
 * The current location is the tracking read model's rule (projections/tracking/current-location.ts),
 * followed per asset in log order from a position kept here: the location of the latest read by
 * (observed time, log order), a read counted once by its key. A read later than the current one
 * that names another location is a move; the first read ever is a first sighting; a late read
 * changes nothing. Only the keys of the reads at the current instant are kept: a read that comes
 * again can only tie with the current one, never pass it.
 */

export type WebhookSource = { kind: 'handheld'; device_id: string } | { kind: 'fixed'; reader_id: string; capture_point: string | null };

interface AssetRead {
  orgId: number;
  assetId: number;
  locationId: number;
  observedUs: number;
  readKey: string;
  source: WebhookSource;
  recordedAt: Date;
}


/** An event derived for the endpoints of an org (those subscribed to its type), or for one endpoint. */
export interface DerivedEvent {
  orgId: number;
  assetId: number;
  type: WebhookEventType;
  data: Record<string, unknown>;
  /** When the log recorded what caused it: endpoints created later do not get it. */
  recordedAt: Date;
  endpointId?: number;
}

function assetReads(events: readonly RecordedEvent[]): AssetRead[] {
  const reads: AssetRead[] = [];
  for (const event of events) {
    if (event.type !== ScansRecorded.type) continue;
    const data = event.data as ScansRecordedData;
    if (data.location_id === null || data.org_id === 0) continue;
    for (const read of decodeReads(data)) {
      if (read.assetId === null) continue;
      const source: WebhookSource =
        data.source.kind === 'handheld'
          ? { kind: 'handheld', device_id: data.source.device_id }
          : { kind: 'fixed', reader_id: data.source.reader_id, capture_point: read.capturePoint ?? null };
      reads.push({ orgId: data.org_id, assetId: read.assetId, locationId: data.location_id, observedUs: read.observedUs, readKey: read.readKey, source, recordedAt: event.recordedAt });
    }
  }
  return reads;
}

const iso = (us: number) => new Date(Math.floor(us / 1000)).toISOString();

async function loadPositions(tx: pg.PoolClient, assets: Array<[number, number]>): Promise<Map<string, Position>> {
  const { rows } = await tx.query<{ org_id: number; asset_id: number; location_id: number; last_seen_us: string; last_read_keys: string[] }>(
    `SELECT p.org_id, p.asset_id, p.location_id, p.last_seen_us::text AS last_seen_us, p.last_read_keys
       FROM unnest($1::int[], $2::int[]) AS t(org_id, asset_id)
       JOIN service.webhook_asset_positions p ON p.org_id = t.org_id AND p.asset_id = t.asset_id
      ORDER BY p.org_id, p.asset_id
        FOR UPDATE OF p`,
    [assets.map((a) => a[0]), assets.map((a) => a[1])],
  );
  return new Map(rows.map((r) => [`${r.org_id}/${r.asset_id}`, { locationId: r.location_id, lastSeenUs: Number(r.last_seen_us), keys: r.last_read_keys }]));
}

/** Asset and location external keys (the read models'), for the events' bodies: one statement for both. */
export async function externalKeys(
  tx: pg.PoolClient,
  assets: Array<[number, number]>,
  locations: Array<[number, number]>,
): Promise<{ asset: (orgId: number, id: number) => string | null; location: (orgId: number, id: number) => string | null }> {
  const assetKeys = new Map<string, string>();
  const locationKeys = new Map<string, string>();
  if (assets.length > 0 || locations.length > 0) {
    const { rows } = await tx.query<{ location: boolean; org_id: number; id: number; external_key: string }>(
      `SELECT false AS location, r.org_id, r.id, r.external_key FROM unnest($1::int[], $2::int[]) AS t(org_id, id) JOIN read_model.assets r ON r.org_id = t.org_id AND r.id = t.id
       UNION ALL
       SELECT true, r.org_id, r.id, r.external_key FROM unnest($3::int[], $4::int[]) AS t(org_id, id) JOIN read_model.locations r ON r.org_id = t.org_id AND r.id = t.id`,
      [assets.map((i) => i[0]), assets.map((i) => i[1]), locations.map((i) => i[0]), locations.map((i) => i[1])],
    );
    for (const r of rows) (r.location ? locationKeys : assetKeys).set(`${r.org_id}/${r.id}`, r.external_key);
  }
  return {
    asset: (orgId, id) => assetKeys.get(`${orgId}/${id}`) ?? null,
    location: (orgId, id) => locationKeys.get(`${orgId}/${id}`) ?? null,
  };
}

/**
 * Queues the events for the endpoints that want them: one delivery per (endpoint, event), in the
 * events' order (the deliveries' ids keep it), each event with one webhook-id and one body.
 */
export async function enqueue(tx: pg.PoolClient, events: DerivedEvent[]): Promise<number> {
  if (events.length === 0) return 0;
  const now = new Date().toISOString();
  const ids = events.map(() => `msg_${newUlid()}`);
  const bodies = events.map((e) => JSON.stringify({ type: e.type, timestamp: now, data: e.data }));
  const { rows } = await tx.query<{ n: number }>(
    `WITH inserted AS (
     INSERT INTO service.webhook_deliveries (endpoint_id, org_id, asset_id, webhook_id, event_type, body)
     SELECT e.id, v.org_id, v.asset_id, v.webhook_id, v.event_type, v.body
       FROM unnest($1::int[], $2::int[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::int[])
            WITH ORDINALITY AS v(org_id, asset_id, webhook_id, event_type, body, recorded_at, endpoint_id, n)
       JOIN service.webhook_endpoints e
         ON e.org_id = v.org_id AND e.is_active AND v.event_type = ANY (e.event_types) AND e.created_at <= v.recorded_at
        AND (v.endpoint_id IS NULL OR e.id = v.endpoint_id)
      ORDER BY v.n, e.id
     RETURNING id, endpoint_id, asset_id, next_attempt_at),
     ${QUEUE_INSERTED}
     SELECT count(*)::int AS n FROM inserted`,
    [
      events.map((e) => e.orgId),
      events.map((e) => e.assetId),
      ids,
      events.map((e) => e.type),
      bodies,
      events.map((e) => e.recordedAt.toISOString()),
      events.map((e) => e.endpointId ?? null),
    ],
  );
  return rows[0]!.n;
}

/** A silence announced to an endpoint (asset.not_seen), ended by the asset's next read with asset.seen_again. */
interface Silence {
  endpointId: number;
  lastSeenUs: number;
}

type ExternalKeys = Awaited<ReturnType<typeof externalKeys>>;

/** The reads of each asset, in log order, by `org/asset`. */
function readsByAsset(reads: AssetRead[]): Map<string, AssetRead[]> {
  const byAsset = new Map<string, AssetRead[]>();
  for (const read of reads) {
    const key = `${read.orgId}/${read.assetId}`;
    const list = byAsset.get(key);
    if (list) list.push(read);
    else byAsset.set(key, [read]);
  }
  return byAsset;
}

/** Takes the silences announced for these assets (to be put back when no read ends them), by `org/asset`. */
async function takeSilences(tx: pg.PoolClient, assets: Array<[number, number]>): Promise<Map<string, Silence[]>> {
  const silences = await tx.query<{ endpoint_id: number; org_id: number; asset_id: number; last_seen_us: string }>(
    `DELETE FROM service.webhook_silences s USING unnest($1::int[], $2::int[]) AS t(org_id, asset_id)
      WHERE s.org_id = t.org_id AND s.asset_id = t.asset_id RETURNING s.endpoint_id, s.org_id, s.asset_id, s.last_seen_us::text AS last_seen_us`,
    [assets.map((a) => a[0]), assets.map((a) => a[1])],
  );
  const silencedBy = new Map<string, Silence[]>();
  for (const s of silences.rows) {
    const key = `${s.org_id}/${s.asset_id}`;
    silencedBy.set(key, [...(silencedBy.get(key) ?? []), { endpointId: s.endpoint_id, lastSeenUs: Number(s.last_seen_us) }]);
  }
  return silencedBy;
}

/** The external keys of the assets, and of the locations their reads and positions name. */
function keysOfReads(tx: pg.PoolClient, reads: AssetRead[], assets: Array<[number, number]>, positions: Map<string, Position>): Promise<ExternalKeys> {
  const locations = new Set<string>();
  for (const read of reads) locations.add(`${read.orgId}/${read.locationId}`);
  for (const [key, p] of positions) locations.add(`${key.split('/')[0]}/${p.locationId}`);
  return externalKeys(
    tx,
    assets,
    [...locations].map((l) => l.split('/').map(Number) as [number, number]),
  );
}

/**
 * The events of one asset's changes, in order: asset.first_seen, asset.moved, and asset.seen_again
 * for each silence that a read at a later instant ends. Returns the silences still pending.
 */
function eventsOfChanges(list: AssetRead[], changes: Change[], silenced: Silence[], keys: ExternalKeys, derived: DerivedEvent[]): Silence[] {
  const { orgId, assetId } = list[0]!;
  let pendingSilences = silenced;
  const base = { asset_id: assetId, asset_external_key: keys.asset(orgId, assetId) };
  for (const change of changes) {
    const read = list[change.index]!;
    const observed = iso(read.observedUs);
    if (change.kind === 'advanced') {
      const ended = pendingSilences.filter((s) => read.observedUs > s.lastSeenUs);
      pendingSilences = pendingSilences.filter((s) => read.observedUs <= s.lastSeenUs);
      for (const s of ended) {
        derived.push({
          orgId,
          assetId,
          type: 'asset.seen_again',
          endpointId: s.endpointId,
          recordedAt: read.recordedAt,
          data: {
            ...base,
            location_id: read.locationId,
            location_external_key: keys.location(orgId, read.locationId),
            observed_at: observed,
            silent_seconds: Math.round((read.observedUs - s.lastSeenUs) / 1e6),
          },
        });
      }
    } else if (change.kind === 'first_seen') {
      derived.push({
        orgId,
        assetId,
        type: 'asset.first_seen',
        recordedAt: read.recordedAt,
        data: { ...base, location_id: read.locationId, location_external_key: keys.location(orgId, read.locationId), observed_at: observed, source: read.source },
      });
    } else {
      derived.push({
        orgId,
        assetId,
        type: 'asset.moved',
        recordedAt: read.recordedAt,
        data: {
          ...base,
          from_location_id: change.from,
          from_location_external_key: keys.location(orgId, change.from!),
          to_location_id: read.locationId,
          to_location_external_key: keys.location(orgId, read.locationId),
          observed_at: observed,
          source: read.source,
        },
      });
    }
  }
  return pendingSilences;
}

/** A late read does not end a silence: puts those of one asset back. */
async function putBackSilences(tx: pg.PoolClient, orgId: number, assetId: number, pending: Silence[]): Promise<void> {
  await tx.query(
    `INSERT INTO service.webhook_silences (endpoint_id, org_id, asset_id, last_seen_us) SELECT unnest($1::int[]), $2, $3, unnest($4::bigint[])`,
    [pending.map((s) => s.endpointId), orgId, assetId, pending.map((s) => s.lastSeenUs)],
  );
}

async function savePositions(tx: pg.PoolClient, upserts: Array<[number, number, Position]>): Promise<void> {
  if (upserts.length === 0) return;
  await tx.query(
    `INSERT INTO service.webhook_asset_positions (org_id, asset_id, location_id, last_seen_us, last_read_keys)
     SELECT t.org_id, t.asset_id, t.location_id, t.last_seen_us, ARRAY(SELECT jsonb_array_elements_text(t.keys)::uuid)
       FROM unnest($1::int[], $2::int[], $3::int[], $4::bigint[], $5::jsonb[]) AS t(org_id, asset_id, location_id, last_seen_us, keys)
     ON CONFLICT (org_id, asset_id) DO UPDATE
       SET location_id = EXCLUDED.location_id, last_seen_us = EXCLUDED.last_seen_us, last_read_keys = EXCLUDED.last_read_keys`,
    [
      upserts.map((u) => u[0]),
      upserts.map((u) => u[1]),
      upserts.map((u) => u[2].locationId),
      upserts.map((u) => u[2].lastSeenUs),
      upserts.map((u) => JSON.stringify(u[2].keys)),
    ],
  );
}

/** The subscriber, in the shape the projector's runtime runs (checkpoint in the same transaction). */
export function movementSubscriber(): Projection {
  return {
    name: 'webhooks',
    eventTypes: [ScansRecorded.type],
    // It writes only the service schema's webhook tables: no read model of its own to rebuild.
    tables: [],
    // Started after scans were archived, it begins with the store's log: deliveries for movements
    // older than the scan retention would be of no use, and no rebuild could give them.
    skipsArchivedEvents: true,
    async apply(events, tx) {
      const reads = assetReads(events);
      if (reads.length === 0) return;
      const byAsset = readsByAsset(reads);
      const assets = [...byAsset.values()].map((list) => [list[0]!.orgId, list[0]!.assetId] as [number, number]);
      const positions = await loadPositions(tx, assets);
      const silencedBy = await takeSilences(tx, assets);
      const keys = await keysOfReads(tx, reads, assets, positions);
      const derived: DerivedEvent[] = [];
      const upserts: Array<[number, number, Position]> = [];
      for (const [key, list] of byAsset) {
        const { orgId, assetId } = list[0]!;
        const { after, changes } = followPosition(positions.get(key) ?? null, list);
        const pending = eventsOfChanges(list, changes, silencedBy.get(key) ?? [], keys, derived);
        if (pending.length > 0) await putBackSilences(tx, orgId, assetId, pending);
        if (after) upserts.push([orgId, assetId, after]);
      }
      await savePositions(tx, upserts);
      await enqueue(tx, derived);
    },
  };
}

/**
 * asset.not_seen: placed assets without a read for an endpoint's not_seen_after_seconds, each
 * announced once per silence (a row of webhook_silences until the next read). One transaction;
 * the positions it announces are locked, so a read applied at the same time either comes first
 * (and the asset is not silent) or ends the silence it finds.
 */
export async function announceSilences(pool: pg.Pool, limit = 1000): Promise<number> {
  return inTransaction(pool, async (client) => {
    await client.query(`SELECT pg_advisory_xact_lock(hashtext('webhooks:silences'))`);
    const { rows } = await client.query<{ endpoint_id: number; org_id: number; asset_id: number; location_id: number; last_seen_us: string; not_seen_after_seconds: number }>(
      `WITH due AS (
         SELECT e.id AS endpoint_id, p.org_id, p.asset_id, p.location_id, p.last_seen_us, e.not_seen_after_seconds
           FROM service.webhook_endpoints e
           JOIN service.webhook_asset_positions p ON p.org_id = e.org_id AND p.last_seen_us < (extract(epoch FROM now()) * 1000000)::bigint - e.not_seen_after_seconds * 1000000::bigint
          WHERE e.is_active AND e.event_types && ARRAY['asset.not_seen', 'asset.seen_again']
            AND NOT EXISTS (SELECT 1 FROM service.webhook_silences s WHERE s.endpoint_id = e.id AND s.asset_id = p.asset_id)
          ORDER BY p.org_id, p.asset_id
          LIMIT $1
            FOR UPDATE OF p),
       announced AS (
         INSERT INTO service.webhook_silences (endpoint_id, org_id, asset_id, last_seen_us)
         SELECT endpoint_id, org_id, asset_id, last_seen_us FROM due
         ON CONFLICT DO NOTHING
         RETURNING endpoint_id, asset_id)
       SELECT d.endpoint_id, d.org_id, d.asset_id, d.location_id, d.last_seen_us::text AS last_seen_us, d.not_seen_after_seconds
         FROM due d JOIN announced a USING (endpoint_id, asset_id)`,
      [limit],
    );
    const keys = await externalKeys(
      client,
      rows.map((r) => [r.org_id, r.asset_id]),
      rows.map((r) => [r.org_id, r.location_id]),
    );
    const now = new Date();
    await enqueue(
      client,
      rows.map((r) => ({
        orgId: r.org_id,
        assetId: r.asset_id,
        type: 'asset.not_seen' as const,
        endpointId: r.endpoint_id,
        recordedAt: now,
        data: {
          asset_id: r.asset_id,
          asset_external_key: keys.asset(r.org_id, r.asset_id),
          location_id: r.location_id,
          location_external_key: keys.location(r.org_id, r.location_id),
          last_seen: iso(Number(r.last_seen_us)),
          not_seen_after_seconds: r.not_seen_after_seconds,
        },
      })),
    );
    return rows.length;
  });
}
