import type pg from 'pg';
import { AssetDeleted, AssetRestored } from '../../shared/domain/assets/events.js';
import { CountClosed, CountStarted } from '../../shared/domain/counts/events.js';
import { LocationCreated, LocationMoved, LocationRestored } from '../../shared/domain/locations/events.js';
import { ScansRecorded, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import type { Position, RecordedEvent } from '../../shared/event-store/port.js';
import { loadTrees, saveTreeChanges, walkStartsOf } from '../engine-tree.js';
import { EngineStates, writeSegmentRow } from '../engine-states.js';
import type { Projection } from '../../shared/projection/projection.js';
import { inAssetSegment, segmentReads } from '../segment-reads.js';
import { CountsEngine, assetKey, emptyShared, zoneOf, type AheadRead, type AssetState, type CountsInput, type SharedState, type Sighting } from './engine.js';

/**
 * The `counts` projection, the counts subscriber (docs/design.md "Counts"): the log's events turned
 * into the step's inputs (./engine.ts), the step's state loaded and saved around each batch, the
 * items it changed written. Split into segments by asset: every segment follows the tree and the
 * counts; a read, an asset's delete or restore go to the segment of its asset (`org/asset`). A
 * start writes the expected items of the segment's assets at once (one statement over the
 * segment's positions); the counts' own rows are written by segment 0. Reads observed ahead of
 * their arrival are kept apart (./engine.ts): in the assets' state for the starts to come, and in
 * `count_ahead_sightings` for the open counts, by count, so that a close settles only those.
 */

interface Segment {
  index: number;
  count: number;
}

const TREE_TYPES: readonly string[] = [LocationCreated.type, LocationMoved.type, LocationRestored.type];

const usOf = (rfc3339: string) => Date.parse(rfc3339) * 1000;
/** A log position as one number (decimal text, compared as `numeric` in SQL): log order. */
export const seqOf = (position: Position) => (position.commit * 10n ** 20n + position.prepare).toString();

type Data = Record<string, unknown>;

/** The step's inputs of one event for one segment, in order (a ScansRecorded gives one per read of the segment's assets). */
export function inputsOf(event: RecordedEvent, segment: Segment): CountsInput[] {
  const d = event.data as Data;
  switch (event.type) {
    case ScansRecorded.type: {
      const data = event.data as unknown as ScansRecordedData;
      if (data.location_id === null || data.org_id === 0) return [];
      const inputs: CountsInput[] = [];
      // `at`: when the reads reached the service, on the clock of the counts' start and close.
      const receivedUs = usOf(data.at);
      const seq = seqOf(event.position);
      // This segment's reads that placed an asset, decoded once for every projection split by asset.
      for (const read of segmentReads(data, segment).assigned) {
        inputs.push({ type: 'read', orgId: data.org_id, assetId: read.assetId, locationId: data.location_id, observedUs: read.observedUs, readKey: read.readKey, receivedUs, seq });
      }
      return inputs;
    }
    case LocationCreated.type:
    case LocationMoved.type:
    case LocationRestored.type:
      return [{ type: 'tree', orgId: d.org_id as number, locationId: d.location_id as number, parentId: (d.parent_id as number | null) ?? null }];
    case AssetDeleted.type:
    case AssetRestored.type:
      if (!inAssetSegment(segment, d.org_id as number, d.asset_id as number)) return [];
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

/** The asset states this process's batches left, by segment row token (../engine-states.ts). */
const kept = new EngineStates();

async function load(tx: pg.PoolClient, segment: Segment, inputs: CountsInput[]): Promise<{ engine: CountsEngine; texts: Map<string, string> }> {
  const { rows: sharedRows } = await tx.query<{ state: SharedState; token: string | null }>('SELECT state, batch_token AS token FROM counts_engine_segments WHERE segment = $1', [
    segment.index,
  ]);
  // The states the last batch of this segment left here, when it was this process's and committed.
  const texts = kept.take(sharedRows[0]?.token ?? null);
  const named = new Map<string, [number, number]>();
  for (const input of inputs) if ('assetId' in input) named.set(assetKey(input.orgId, input.assetId), [input.orgId, input.assetId]);
  // The named assets whose state this process holds are not loaded again.
  const { held: assets, unknown } = EngineStates.split<AssetState>(named, texts);
  if (unknown.length > 0) {
    const { rows } = await tx.query<AssetRow>(
      `SELECT org_id, asset_id, position, deleted, ahead FROM counts_engine_assets WHERE (org_id, asset_id) IN (SELECT * FROM unnest($1::int[], $2::int[]))`,
      [unknown.map((n) => n[0]), unknown.map((n) => n[1])],
    );
    for (const r of rows) assets.set(assetKey(r.org_id, r.asset_id), assetOf(r));
  }
  // The paths up from the reads' locations and from a tree step's location and new parent
  // (ancestorsOf), and the whole tree of an organization whose count starts (zoneOf).
  const from = inputs.flatMap((input) => walkStartsOf(input));
  const whole = inputs.flatMap((input) => (input.type === 'count_started' ? [input.orgId] : []));
  const tree = await loadTrees(tx, 'counts_engine_tree', segment.index, from, whole);
  return { engine: new CountsEngine({ ...(sharedRows[0]?.state ?? emptyShared()), tree }, assets), texts };
}

interface AssetRow {
  org_id: number;
  asset_id: number;
  position: AssetState['position'];
  deleted: boolean;
  ahead: AheadRead[] | null;
}

const assetOf = (r: AssetRow): AssetState => ({ orgId: r.org_id, assetId: r.asset_id, position: r.position, deleted: r.deleted, ...(r.ahead ? { ahead: r.ahead } : {}) });

/** Before a start: the segment's assets of that organization with ahead reads, those not in the step's memory already (an index on them). */
async function loadAhead(tx: pg.PoolClient, segment: Segment, engine: CountsEngine, orgId: number): Promise<void> {
  const { rows } = await tx.query<AssetRow>(
    'SELECT org_id, asset_id, position, deleted, ahead FROM counts_engine_assets WHERE org_id = $1 AND segment = $2 AND ahead IS NOT NULL',
    [orgId, segment.index],
  );
  for (const r of rows) if (!engine.assets.has(assetKey(r.org_id, r.asset_id))) engine.assets.set(assetKey(r.org_id, r.asset_id), assetOf(r));
}

/**
 * The assets the step changed (their positions first: a start reads them); each one's state, as
 * written, goes into `texts` (the states kept for the next batch, ../engine-states.ts).
 */
async function saveAssets(tx: pg.PoolClient, segment: Segment, engine: CountsEngine, texts: Map<string, string>): Promise<void> {
  const assets = [...engine.dirtyAssets].map((key) => engine.assets.get(key)!);
  for (const key of engine.dirtyAssets) texts.set(key, JSON.stringify(engine.assets.get(key)));
  engine.dirtyAssets.clear();
  if (assets.length === 0) return;
  await tx.query(
    `INSERT INTO counts_engine_assets (org_id, asset_id, segment, position, location_id, deleted, ahead)
     SELECT * FROM unnest($1::int[], $2::int[], $3::int[], $4::jsonb[], $5::int[], $6::boolean[], $7::jsonb[])
     ON CONFLICT (org_id, asset_id) DO UPDATE SET position = EXCLUDED.position, location_id = EXCLUDED.location_id, deleted = EXCLUDED.deleted, ahead = EXCLUDED.ahead`,
    [
      assets.map((a) => a.orgId),
      assets.map((a) => a.assetId),
      assets.map(() => segment.index),
      assets.map((a) => (a.position ? JSON.stringify(a.position) : null)),
      assets.map((a) => a.position?.locationId ?? null),
      assets.map((a) => a.deleted),
      assets.map((a) => (a.ahead ? JSON.stringify(a.ahead) : null)),
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
 * seen in the zone is none). An item of an open count with an ahead sighting is "tracked" in
 * `count_ahead_sightings` until the close: its ahead sightings, and its latest settled one of each
 * side (from before its first ahead one — what the item showed then, all settled — and after).
 */
async function saveItems(tx: pg.PoolClient, segment: Segment, engine: CountsEngine): Promise<void> {
  const items = [...engine.items.values()];
  engine.items.clear();
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
  const tracking = items.filter((i) => i.ahead.length > 0);
  if (tracking.length > 0) {
    // Newly tracked: what the item shows before this batch (settled only) is its settled baseline, first in the log.
    await tx.query(
      `INSERT INTO count_ahead_sightings (org_id, count_id, asset_id, segment, zone, ahead, location_id, seen_at, seq)
       SELECT ci.org_id, ci.count_id, ci.asset_id, $4, s.zone, false, s.location_id, s.seen_at, 0
         FROM unnest($1::int[], $2::int[], $3::int[]) AS t(org_id, count_id, asset_id)
         JOIN count_items ci ON ci.org_id = t.org_id AND ci.count_id = t.count_id AND ci.asset_id = t.asset_id
         CROSS JOIN LATERAL (VALUES (true, ci.zone_location_id, ci.zone_seen_at), (false, ci.out_location_id, ci.out_seen_at)) AS s(zone, location_id, seen_at)
        WHERE s.seen_at IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM count_ahead_sightings a WHERE a.org_id = t.org_id AND a.count_id = t.count_id AND a.segment = $4 AND a.asset_id = t.asset_id)`,
      [tracking.map((i) => i.orgId), tracking.map((i) => i.countId), tracking.map((i) => i.assetId), segment.index],
    );
  }
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
  const ahead = tracking.flatMap((i) => i.ahead.map((a) => ({ ...a, orgId: i.orgId, countId: i.countId, assetId: i.assetId })));
  if (ahead.length > 0) await tx.query(...sightingsInsert(ahead, segment, true, ''));
  const settled = items.flatMap((i) =>
    (['zone', 'out'] as const).flatMap((side) => {
      const s = i.settled[side];
      return s ? [{ orgId: i.orgId, countId: i.countId, assetId: i.assetId, zone: side === 'zone', ...s }] : [];
    }),
  );
  if (settled.length > 0) {
    // A tracked item's settled sightings: the latest of each side (a tie keeps the first in the log).
    await tx.query(
      ...sightingsInsert(
        settled,
        segment,
        false,
        `WHERE EXISTS (SELECT 1 FROM count_ahead_sightings a WHERE a.org_id = t.org_id AND a.count_id = t.count_id AND a.segment = $8 AND a.asset_id = t.asset_id)
       ON CONFLICT (org_id, count_id, asset_id, zone) WHERE NOT ahead
       DO UPDATE SET location_id = EXCLUDED.location_id, seen_at = EXCLUDED.seen_at, seq = EXCLUDED.seq WHERE EXCLUDED.seen_at > count_ahead_sightings.seen_at`,
      ),
    );
  }
}

type SightingRow = Sighting & { orgId: number; countId: number; assetId: number; zone: boolean };

/** The statement and parameters writing sightings to `count_ahead_sightings` (rows as `t`, the segment as `$8`), `tail` after its SELECT. */
function sightingsInsert(rows: readonly SightingRow[], segment: Segment, ahead: boolean, tail: string): [string, unknown[]] {
  return [
    `INSERT INTO count_ahead_sightings (org_id, count_id, asset_id, segment, zone, ahead, location_id, seen_at, seq)
     SELECT t.org_id, t.count_id, t.asset_id, $8, t.zone, ${ahead}, t.location_id, ${FROM_US('t.us')}, t.seq
       FROM unnest($1::int[], $2::int[], $3::int[], $4::boolean[], $5::int[], $6::bigint[], $7::numeric[]) AS t(org_id, count_id, asset_id, zone, location_id, us, seq)
      ${tail}`,
    [rows.map((a) => a.orgId), rows.map((a) => a.countId), rows.map((a) => a.assetId), rows.map((a) => a.zone), rows.map((a) => a.locationId), rows.map((a) => a.us), rows.map((a) => a.seq), segment.index],
  ];
}

/**
 * A close, for the segment's tracked items of that count (and only those: an index by count):
 * each side becomes the latest of its sightings observed by the close (a tie: the first in the
 * log), an unexpected item no longer seen in the zone goes, and the count's ahead sightings go.
 */
async function settleClose(tx: pg.PoolClient, segment: Segment, orgId: number, countId: number, closedUs: number): Promise<void> {
  await tx.query(
    `WITH tracked AS (SELECT DISTINCT asset_id FROM count_ahead_sightings WHERE org_id = $1 AND count_id = $2 AND segment = $3),
          best AS (SELECT DISTINCT ON (asset_id, zone) asset_id, zone, location_id, seen_at FROM count_ahead_sightings
                    WHERE org_id = $1 AND count_id = $2 AND segment = $3 AND seen_at <= ${FROM_US('$4::bigint')}
                    ORDER BY asset_id, zone, seen_at DESC, seq)
     UPDATE count_items ci SET zone_location_id = z.location_id, zone_seen_at = z.seen_at, out_location_id = o.location_id, out_seen_at = o.seen_at
       FROM tracked t LEFT JOIN best z ON z.asset_id = t.asset_id AND z.zone LEFT JOIN best o ON o.asset_id = t.asset_id AND NOT o.zone
      WHERE ci.org_id = $1 AND ci.count_id = $2 AND ci.asset_id = t.asset_id`,
    [orgId, countId, segment.index, closedUs],
  );
  await tx.query(
    `DELETE FROM count_items ci WHERE ci.org_id = $1 AND ci.count_id = $2 AND NOT ci.expected AND ci.zone_seen_at IS NULL
        AND ci.asset_id IN (SELECT asset_id FROM count_ahead_sightings WHERE org_id = $1 AND count_id = $2 AND segment = $3)`,
    [orgId, countId, segment.index],
  );
  await tx.query('DELETE FROM count_ahead_sightings WHERE org_id = $1 AND count_id = $2 AND segment = $3', [orgId, countId, segment.index]);
}

export const countsProjection: Projection = {
  name: 'counts',
  eventTypes: [ScansRecorded.type, ...TREE_TYPES, AssetDeleted.type, AssetRestored.type, CountStarted.type, CountClosed.type],
  tables: ['counts', 'count_items', 'counts_engine_segments', 'counts_engine_tree', 'counts_engine_assets', 'count_ahead_sightings'],
  // Each segment's copy of the tree and the counts, its assets' positions and ahead reads, its open counts' ahead sightings: the result is `counts` and `count_items`.
  segmentStateTables: ['counts_engine_segments', 'counts_engine_tree', 'counts_engine_assets', 'count_ahead_sightings'],
  splittable: true,
  async apply(events, tx, options) {
    const segment = options?.segment ?? { index: 0, count: 1 };
    const batch = events.map((event) => ({ event, inputs: inputsOf(event, segment) })).filter((b) => b.inputs.length > 0);
    if (batch.length === 0) return;
    const { engine, texts } = await load(
      tx,
      segment,
      batch.flatMap((b) => b.inputs),
    );
    for (const { event, inputs } of batch) {
      for (const input of inputs) {
        if (input.type === 'count_started') await loadAhead(tx, segment, engine, input.orgId);
        if (input.type === 'count_closed') await saveItems(tx, segment, engine);
        const wasOpen = input.type === 'count_closed' && engine.shared.counts[input.orgId]?.[input.countId]?.closedUs === null;
        engine.step(input);
        if (input.type === 'count_closed' && wasOpen) await settleClose(tx, segment, input.orgId, input.countId, input.closedUs);
        if (input.type === 'count_started') {
          // Expected: the segment's assets whose current location is in the zone here in the log.
          await saveAssets(tx, segment, engine, texts);
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
    await saveAssets(tx, segment, engine, texts);
    await saveItems(tx, segment, engine);
    await saveTreeChanges(tx, 'counts_engine_tree', segment.index, engine.treeChanges);
    const token = await writeSegmentRow(tx, 'counts_engine_segments', segment.index, engine.shared, engine.sharedChanged);
    // The states written are in `texts` (saveAssets), and so are those taken from the last batch;
    // those loaded from their rows and left unchanged are added as they stand.
    for (const [key, asset] of engine.assets) if (!texts.has(key)) texts.set(key, JSON.stringify(asset));
    kept.keep(token, texts);
  },
};
