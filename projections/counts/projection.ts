import type pg from 'pg';
import { AssetDeleted, AssetRestored } from '../../shared/domain/assets/events.js';
import { CountClosed, CountStarted } from '../../shared/domain/counts/events.js';
import { LocationCreated, LocationMoved, LocationRestored } from '../../shared/domain/locations/events.js';
import { ScansRecorded, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import { decodeReads } from '../../shared/domain/scans/read-codec.js';
import type { RecordedEvent } from '../../shared/event-store/port.js';
import type { Projection } from '../../shared/projection/projection.js';
import { segmentOfKey } from '../../shared/projection/segments.js';
import { CountsEngine, assetKey, emptyShared, zoneOf, type AssetState, type CountsInput, type SharedState } from './engine.js';

/**
 * The `counts` projection, the counts subscriber (docs/design.md "Counts"): the log's events turned
 * into the step's inputs (./engine.ts), the step's state loaded and saved around each batch, the
 * items it changed written. Split into segments by asset: every segment follows the tree and the
 * counts; a read, an asset's delete or restore go to the segment of its asset (`org/asset`). A
 * start writes the expected items of the segment's assets at once (one statement over the
 * segment's positions); the counts' own rows are written by segment 0.
 */

interface Segment {
  index: number;
  count: number;
}

const TREE_TYPES: readonly string[] = [LocationCreated.type, LocationMoved.type, LocationRestored.type];

const inSegment = (segment: Segment, orgId: number, assetId: number) => segmentOfKey(assetKey(orgId, assetId), segment.count) === segment.index;
const usOf = (rfc3339: string) => Date.parse(rfc3339) * 1000;

type Data = Record<string, unknown>;

/** The step's inputs of one event for one segment, in order (a ScansRecorded gives one per read of the segment's assets). */
export function inputsOf(event: RecordedEvent, segment: Segment): CountsInput[] {
  const d = event.data as Data;
  switch (event.type) {
    case ScansRecorded.type: {
      const data = event.data as unknown as ScansRecordedData;
      if (data.location_id === null || data.org_id === 0) return [];
      const inputs: CountsInput[] = [];
      for (const read of decodeReads(data)) {
        if (read.assetId === null || !inSegment(segment, data.org_id, read.assetId)) continue;
        inputs.push({ type: 'read', orgId: data.org_id, assetId: read.assetId, locationId: data.location_id, observedUs: read.observedUs, readKey: read.readKey });
      }
      return inputs;
    }
    case LocationCreated.type:
    case LocationMoved.type:
    case LocationRestored.type:
      return [{ type: 'tree', orgId: d.org_id as number, locationId: d.location_id as number, parentId: (d.parent_id as number | null) ?? null }];
    case AssetDeleted.type:
    case AssetRestored.type:
      if (!inSegment(segment, d.org_id as number, d.asset_id as number)) return [];
      return [{ type: event.type === AssetDeleted.type ? 'asset_deleted' : 'asset_restored', orgId: d.org_id as number, assetId: d.asset_id as number }];
    case CountStarted.type: {
      // Count events are decoded with their schema: one that does not fit throws, and its stream is set aside.
      const c = CountStarted.schema.parse(event.data);
      return [{ type: 'count_started', orgId: c.org_id, countId: c.count_id, locationId: c.location_id, startedUs: usOf(c.at) }];
    }
    case CountClosed.type: {
      const c = CountClosed.schema.parse(event.data);
      return [{ type: 'count_closed', orgId: c.org_id, countId: c.count_id, closedUs: usOf(c.at) }];
    }
    default:
      return [];
  }
}

async function load(tx: pg.PoolClient, segment: Segment, inputs: CountsInput[]): Promise<CountsEngine> {
  const { rows: sharedRows } = await tx.query<{ state: SharedState }>('SELECT state FROM counts_engine_segments WHERE segment = $1', [segment.index]);
  const named = new Map<string, [number, number]>();
  for (const input of inputs) if ('assetId' in input) named.set(assetKey(input.orgId, input.assetId), [input.orgId, input.assetId]);
  const assets = new Map<string, AssetState>();
  if (named.size > 0) {
    const { rows } = await tx.query<{ org_id: number; asset_id: number; position: AssetState['position']; deleted: boolean }>(
      `SELECT org_id, asset_id, position, deleted FROM counts_engine_assets WHERE (org_id, asset_id) IN (SELECT * FROM unnest($1::int[], $2::int[]))`,
      [[...named.values()].map((n) => n[0]), [...named.values()].map((n) => n[1])],
    );
    for (const r of rows) assets.set(assetKey(r.org_id, r.asset_id), { orgId: r.org_id, assetId: r.asset_id, position: r.position, deleted: r.deleted });
  }
  return new CountsEngine(sharedRows[0]?.state ?? emptyShared(), assets);
}

/** The assets the step changed (their positions first: a start reads them). */
async function saveAssets(tx: pg.PoolClient, segment: Segment, engine: CountsEngine): Promise<void> {
  const assets = [...engine.dirtyAssets].map((key) => engine.assets.get(key)!);
  engine.dirtyAssets.clear();
  if (assets.length === 0) return;
  await tx.query(
    `INSERT INTO counts_engine_assets (org_id, asset_id, segment, position, location_id, deleted)
     SELECT * FROM unnest($1::int[], $2::int[], $3::int[], $4::jsonb[], $5::int[], $6::boolean[])
     ON CONFLICT (org_id, asset_id) DO UPDATE SET position = EXCLUDED.position, location_id = EXCLUDED.location_id, deleted = EXCLUDED.deleted`,
    [
      assets.map((a) => a.orgId),
      assets.map((a) => a.assetId),
      assets.map(() => segment.index),
      assets.map((a) => (a.position ? JSON.stringify(a.position) : null)),
      assets.map((a) => a.position?.locationId ?? null),
      assets.map((a) => a.deleted),
    ],
  );
}

const FROM_US = (param: string) => `(timestamptz 'epoch' + ${param} * interval '1 microsecond')`;
/** An item's sighting merged: a strictly later one replaces, a tie keeps the one already there (first in the log). */
const MERGE = (side: 'zone' | 'out') => `
  ${side}_location_id = CASE WHEN t.${side}_us IS NOT NULL AND (count_items.${side}_seen_at IS NULL OR ${FROM_US(`t.${side}_us`)} > count_items.${side}_seen_at)
                          THEN t.${side}_loc ELSE count_items.${side}_location_id END,
  ${side}_seen_at = CASE WHEN t.${side}_us IS NOT NULL AND (count_items.${side}_seen_at IS NULL OR ${FROM_US(`t.${side}_us`)} > count_items.${side}_seen_at)
                          THEN ${FROM_US(`t.${side}_us`)} ELSE count_items.${side}_seen_at END`;

/**
 * The items the batch's reads changed: a read in the zone adds the asset (unexpected) when it is
 * not an item yet; a read outside it changes only an item there is (an asset neither expected nor
 * seen in the zone is none).
 */
async function saveItems(tx: pg.PoolClient, engine: CountsEngine): Promise<void> {
  const items = [...engine.items.values()];
  if (items.length === 0) return;
  const columns = [
    items.map((i) => i.orgId),
    items.map((i) => i.countId),
    items.map((i) => i.assetId),
    items.map((i) => i.zone?.locationId ?? null),
    items.map((i) => i.zone?.us ?? null),
    items.map((i) => i.out?.locationId ?? null),
    items.map((i) => i.out?.us ?? null),
  ];
  const T = `unnest($1::int[], $2::int[], $3::int[], $4::int[], $5::bigint[], $6::int[], $7::bigint[]) AS t(org_id, count_id, asset_id, zone_loc, zone_us, out_loc, out_us)`;
  await tx.query(
    `INSERT INTO count_items (org_id, count_id, asset_id, expected)
     SELECT t.org_id, t.count_id, t.asset_id, false FROM ${T} WHERE t.zone_us IS NOT NULL
     ON CONFLICT (org_id, count_id, asset_id) DO NOTHING`,
    columns,
  );
  await tx.query(
    `UPDATE count_items SET ${MERGE('zone')}, ${MERGE('out')}
       FROM ${T}
      WHERE count_items.org_id = t.org_id AND count_items.count_id = t.count_id AND count_items.asset_id = t.asset_id`,
    columns,
  );
}

export const countsProjection: Projection = {
  name: 'counts',
  eventTypes: [ScansRecorded.type, ...TREE_TYPES, AssetDeleted.type, AssetRestored.type, CountStarted.type, CountClosed.type],
  tables: ['counts', 'count_items', 'counts_engine_segments', 'counts_engine_assets'],
  // Each segment's copy of the tree and the counts, and its assets' positions: the result is `counts` and `count_items`.
  segmentStateTables: ['counts_engine_segments', 'counts_engine_assets'],
  splittable: true,
  async apply(events, tx, options) {
    const segment = options?.segment ?? { index: 0, count: 1 };
    const batch = events.map((event) => ({ event, inputs: inputsOf(event, segment) })).filter((b) => b.inputs.length > 0);
    if (batch.length === 0) return;
    const engine = await load(
      tx,
      segment,
      batch.flatMap((b) => b.inputs),
    );
    for (const { event, inputs } of batch) {
      for (const input of inputs) {
        engine.step(input);
        if (input.type === 'count_started') {
          // Expected: the segment's assets whose current location is in the zone here in the log.
          await saveAssets(tx, segment, engine);
          await tx.query(
            `INSERT INTO count_items (org_id, count_id, asset_id, expected)
             SELECT org_id, $2, asset_id, true FROM counts_engine_assets
              WHERE org_id = $1 AND segment = $3 AND NOT deleted AND location_id = ANY ($4::int[])
             ON CONFLICT (org_id, count_id, asset_id) DO NOTHING`,
            [input.orgId, input.countId, segment.index, zoneOf(engine.shared, input.orgId, input.locationId)],
          );
          if (segment.index === 0) {
            const c = CountStarted.schema.parse(event.data);
            await tx.query(
              `INSERT INTO counts (org_id, count_id, name, location_id, started_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (org_id, count_id) DO NOTHING`,
              [c.org_id, c.count_id, c.name, c.location_id, c.at],
            );
          }
        }
        if (input.type === 'count_closed' && segment.index === 0) {
          await tx.query('UPDATE counts SET closed_at = $3 WHERE org_id = $1 AND count_id = $2 AND closed_at IS NULL', [input.orgId, input.countId, CountClosed.schema.parse(event.data).at]);
        }
      }
    }
    await saveAssets(tx, segment, engine);
    await saveItems(tx, engine);
    if (engine.sharedChanged) {
      await tx.query(`INSERT INTO counts_engine_segments (segment, state) VALUES ($1, $2::jsonb) ON CONFLICT (segment) DO UPDATE SET state = EXCLUDED.state`, [
        segment.index,
        JSON.stringify(engine.shared),
      ]);
    }
  },
};
