import type pg from 'pg';
import { AlertAcknowledged, AlertClockTicked, AlertRuleCreated, AlertRuleDeleted, AlertRuleUpdated } from '../../shared/domain/alerts/events.js';
import { AssetDeleted, AssetRestored } from '../../shared/domain/assets/events.js';
import { LocationCreated, LocationMoved, LocationRestored } from '../../shared/domain/locations/events.js';
import { ScansRecorded, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import { SYSTEM_COMMAND_ACTOR, type CommandActor } from '../../shared/event-store/command-context.js';
import type { RecordedEvent } from '../../shared/event-store/port.js';
import { loadTrees, saveTreeChanges, walkStartsOf } from '../engine-tree.js';
import { EngineStates, writeSegmentRow } from '../engine-states.js';
import type { Projection } from '../../shared/projection/projection.js';
import { inAssetSegment, segmentReads } from '../segment-reads.js';
import { actorOfMetadata } from '../audit/projection.js';
import { AlertsEngine, alertKey, assetKey, emptyShared, unresolvedAlertIds, upgradeAssetState, type AlertChange, type AlertRow, type AlertsInput, type AssetState, type SharedState } from './engine.js';
import { notifyAlertsChanged } from './notice.js';

/**
 * The `alerts` projection, the alerts subscriber (docs/design.md "Alerts", "Alerts: time as an
 * event"): the log's events turned into the step's inputs (./engine.ts), the step's state loaded
 * and saved around each batch, the alerts it changed written. Split into segments by asset: every
 * segment follows the rules, the tree and the clock; a read, an acknowledgement, an asset's delete
 * or restore go to the segment of its asset (`org/asset`).
 */

interface Segment {
  index: number;
  count: number;
}

const RULE_TYPES: readonly string[] = [AlertRuleCreated.type, AlertRuleUpdated.type, AlertRuleDeleted.type];
const TREE_TYPES: readonly string[] = [LocationCreated.type, LocationMoved.type, LocationRestored.type];

const recordedUs = (event: RecordedEvent) => event.recordedAt.getTime() * 1000;

type Data = Record<string, unknown>;

/** The step's inputs of one event for one segment, in order (a ScansRecorded gives one per read of the segment's assets). */
export function inputsOf(event: RecordedEvent, segment: Segment): AlertsInput[] {
  const d = event.data as Data;
  switch (event.type) {
    case ScansRecorded.type: {
      const data = event.data as unknown as ScansRecordedData;
      if (data.location_id === null || data.org_id === 0) return [];
      const inputs: AlertsInput[] = [];
      // This segment's reads that placed an asset, decoded once for every projection split by asset.
      for (const read of segmentReads(data, segment).assigned) {
        inputs.push({ type: 'read', orgId: data.org_id, assetId: read.assetId, locationId: data.location_id, observedUs: read.observedUs, readKey: read.readKey });
      }
      return inputs;
    }
    case AlertRuleCreated.type: {
      // Alert events are decoded with their schema: one that does not fit throws, and its stream is set aside.
      const d = AlertRuleCreated.schema.parse(event.data);
      return [
        {
          type: 'rule_created',
          recordedUs: recordedUs(event),
          rule: {
            orgId: d.org_id,
            ruleId: d.rule_id,
            kind: d.kind,
            locationId: d.location_id,
            thresholdSeconds: d.threshold_seconds,
            assetIds: d.asset_ids,
            isActive: d.is_active,
          },
        },
      ];
    }
    case AlertRuleUpdated.type: {
      const d = AlertRuleUpdated.schema.parse(event.data);
      const c = d.changes;
      return [
        {
          type: 'rule_updated',
          orgId: d.org_id,
          ruleId: d.rule_id,
          recordedUs: recordedUs(event),
          changes: {
            kind: c.kind,
            locationId: c.location_id,
            thresholdSeconds: c.threshold_seconds,
            assetIds: c.asset_ids,
            isActive: c.is_active,
          },
        },
      ];
    }
    case AlertRuleDeleted.type: {
      const d = AlertRuleDeleted.schema.parse(event.data);
      return [{ type: 'rule_deleted', orgId: d.org_id, ruleId: d.rule_id, recordedUs: recordedUs(event) }];
    }
    case LocationCreated.type:
    case LocationMoved.type:
    case LocationRestored.type:
      return [{ type: 'tree', orgId: d.org_id as number, locationId: d.location_id as number, parentId: (d.parent_id as number | null) ?? null, recordedUs: recordedUs(event) }];
    case AssetDeleted.type:
    case AssetRestored.type:
      if (!inAssetSegment(segment, d.org_id as number, d.asset_id as number)) return [];
      return [{ type: event.type === AssetDeleted.type ? 'asset_deleted' : 'asset_restored', orgId: d.org_id as number, assetId: d.asset_id as number, recordedUs: recordedUs(event) }];
    case AlertAcknowledged.type: {
      const d = AlertAcknowledged.schema.parse(event.data);
      if (!inAssetSegment(segment, d.org_id, d.asset_id)) return [];
      // Who acknowledged: the event's actor as the audit log names it (its mapping of the metadata).
      const by: CommandActor = actorOfMetadata(event.metadata.actor) ?? SYSTEM_COMMAND_ACTOR;
      return [{ type: 'acknowledged', orgId: d.org_id, assetId: d.asset_id, alertId: d.alert_id, at: d.at, by: { ...by } }];
    }
    case AlertClockTicked.type:
      return [{ type: 'tick', untilUs: AlertClockTicked.schema.parse(event.data).until_us }];
    default:
      return [];
  }
}

interface AlertDbRow {
  org_id: number;
  alert_id: string;
  rule_id: number;
  kind: AlertRow['kind'];
  asset_id: number;
  location_id: number;
  raised_us: string;
  status: AlertRow['status'];
  acknowledged_at: string | null;
  acknowledged_by: CommandActor | null;
  resolved_us: string | null;
  raised_position: string;
}

const US = (column: string) => `(extract(epoch FROM ${column}) * 1000000)::bigint::text`;
const FROM_US = (param: string) => `(timestamptz 'epoch' + ${param} * interval '1 microsecond')`;

/** The asset states this process's batches left, by segment row token (../engine-states.ts). */
const kept = new EngineStates();

/** What a batch loaded: its engine, the webhooks role's cursor, and the asset states as JSON text known to be in their rows now (`kept`). */
interface Loaded {
  engine: AlertsEngine;
  sent: OutboxKey | null;
  texts: Map<string, string>;
}

/**
 * The moved locations ($6, $7: orgs and locations) and every location under them in the segment's
 * tree. Each step looks up the children of each location found by the index on parents (`OFFSET
 * 0` keeps the subquery a lookup per location): as a join, on a table without statistics yet, it
 * was planned as a hash of the segment's whole tree at every level of the walk.
 */
const UNDER_MOVED = `WITH RECURSIVE under (org_id, location_id) AS (
       SELECT * FROM unnest($6::int[], $7::int[])
       UNION
       SELECT c.org_id, c.location_id FROM under u,
              LATERAL (SELECT t.org_id, t.location_id FROM alerts_engine_tree t
                        WHERE t.segment = $3 AND t.org_id = u.org_id AND t.parent_id = u.location_id OFFSET 0) c)`;

/** The keys of the assets positioned at a location of `under` (UNDER_MOVED). */
const ASSETS_UNDER_MOVED = `UNION SELECT x.org_id, x.asset_id FROM under u
               JOIN alerts_engine_assets x ON x.segment = $3 AND x.org_id = u.org_id AND x.location_id = u.location_id`;

/** What a batch needs loaded: the segment's shared state, the assets it names or may touch, their alerts. */
async function load(tx: pg.PoolClient, segment: Segment, batch: Array<{ event: RecordedEvent; inputs: AlertsInput[] }>): Promise<Loaded> {
  // With the segment's state, where the webhooks role's cursor stands (null before its first step):
  // the outbox rows at or behind it are never read again (writeOutbox).
  const { rows: sharedRows } = await tx.query<{ state: SharedState | null; token: string | null; sent: OutboxKey | null }>(
    `SELECT s.state, s.batch_token AS token,
            (SELECT json_build_object('commit', position_commit::text, 'prepare', position_prepare::text, 'orgId', org_id, 'alertId', alert_id, 'change', change)
               FROM service.webhook_alert_cursor) AS sent
       FROM (SELECT 1) one LEFT JOIN alerts_engine_segments s ON s.segment = $1`,
    [segment.index],
  );
  const shared = sharedRows[0]?.state ?? emptyShared();
  // The states the last batch of this segment left here, when it was this process's and committed.
  const texts = kept.take(sharedRows[0]?.token ?? null);
  const named = new Map<string, [number, number]>();
  const wholeOrgs = new Set<number>();
  // Locations moved or restored: their subtrees' assets change zones, no other asset does.
  const moved = new Map<string, [number, number]>();
  const deleted = new Set<string>();
  const alertIds = new Map<string, [number, string]>();
  let clockUs = shared.clockUs;
  for (const { event, inputs } of batch) {
    for (const input of inputs) {
      if ('assetId' in input) named.set(assetKey(input.orgId, input.assetId), [input.orgId, input.assetId]);
      if (input.type === 'acknowledged') alertIds.set(alertKey(input.orgId, input.alertId), [input.orgId, input.alertId]);
      if (input.type === 'asset_deleted') deleted.add(assetKey(input.orgId, input.assetId));
      if (input.type === 'rule_created' || input.type === 'rule_updated' || input.type === 'rule_deleted') {
        wholeOrgs.add(input.type === 'rule_created' ? input.rule.orgId : input.orgId);
        clockUs = Math.max(clockUs, input.recordedUs);
      }
      // A new location holds no asset yet: only a move or a restore changes a zone's assets, those
      // positioned under it. Under it in the tree as loaded is enough, whatever else the batch
      // moves: an asset whose ancestors any step of the batch changes is under one of the batch's
      // moved locations in the tree it started from (by induction on the moves before that step).
      if (input.type === 'tree' && event.type !== LocationCreated.type) moved.set(`${input.orgId}/${input.locationId}`, [input.orgId, input.locationId]);
      if (input.type === 'tick') clockUs = Math.max(clockUs, input.untilUs);
    }
  }
  // The named assets whose state this process holds are not loaded again.
  const { held: assets, unknown } = EngineStates.split<AssetState>(named, texts);
  // The keys of each reason, then their rows: as one WHERE … OR … the test of the named keys is a
  // hashed subplan and the plan a scan of every asset, every batch (EXPLAIN ANALYZE at 100,000
  // asset states, 500 named: 76 ms, against 2.6 ms this way). The walk down the tree from moved
  // locations only when there are some: it doubles the statement's planning time (0.5 → 1 ms).
  const walk = [...moved.values()];
  const { rows } = await tx.query<{ org_id: number; asset_id: number; state: string }>(
    `${walk.length > 0 ? UNDER_MOVED : ''}
     SELECT a.org_id, a.asset_id, a.state::text AS state FROM alerts_engine_assets a
      WHERE (a.org_id, a.asset_id) IN (SELECT * FROM unnest($1::int[], $2::int[])
                                       UNION SELECT org_id, asset_id FROM alerts_engine_assets WHERE segment = $3 AND org_id = ANY ($4::int[])
                                       UNION SELECT org_id, asset_id FROM alerts_engine_assets WHERE segment = $3 AND next_deadline_us <= $5::bigint
                                       ${walk.length > 0 ? ASSETS_UNDER_MOVED : ''})`,
    [
      unknown.map((n) => n[0]),
      unknown.map((n) => n[1]),
      segment.index,
      [...wholeOrgs],
      clockUs,
      ...(walk.length > 0 ? [walk.map((m) => m[0]), walk.map((m) => m[1])] : []),
    ],
  );
  for (const r of rows) {
    const key = assetKey(r.org_id, r.asset_id);
    if (assets.has(key)) continue;
    assets.set(key, JSON.parse(r.state) as AssetState);
    texts.set(key, r.state);
  }
  // The paths up from where the steps walk (ancestorsOf): the reads' locations, the loaded assets'
  // positions (a tree move walks up from each), a tree step's location and new parent.
  const from = batch.flatMap(({ inputs }) => inputs.flatMap((input) => ('orgId' in input ? walkStartsOf(input) : [])));
  for (const state of assets.values()) if (state.position) from.push([state.orgId, state.position.locationId]);
  shared.tree = await loadTrees(tx, 'alerts_engine_tree', segment.index, from);
  // An open `entered` or `left` alert changes only by its acknowledgement (loaded by id above), its
  // asset's deletion, or its rule's change or deletion (the whole org's assets then): a read, a
  // tick or a tree edit never touches it, so it is loaded only then. An asset keeps its
  // unacknowledged ones for good (as ranges: engine.ts `Watch.open`): loading them all made every
  // read of it cost more than the last.
  for (const asset of assets.values()) {
    upgradeAssetState(shared, asset);
    const all = wholeOrgs.has(asset.orgId) || deleted.has(assetKey(asset.orgId, asset.assetId));
    for (const id of all ? unresolvedAlertIds(asset) : asset.unresolved) alertIds.set(alertKey(asset.orgId, id), [asset.orgId, id]);
  }
  const alerts = new Map<string, AlertRow>();
  if (alertIds.size > 0) {
    const { rows: alertRows } = await tx.query<AlertDbRow>(
      `SELECT org_id, alert_id, rule_id, kind, asset_id, location_id, ${US('raised_at')} AS raised_us, status, acknowledged_at_rfc3339 AS acknowledged_at,
              acknowledged_by, ${US('resolved_at')} AS resolved_us, raised_position::text AS raised_position
         FROM alerts WHERE (org_id, alert_id) IN (SELECT * FROM unnest($1::int[], $2::text[]))`,
      [[...alertIds.values()].map((a) => a[0]), [...alertIds.values()].map((a) => a[1])],
    );
    for (const r of alertRows) {
      alerts.set(alertKey(r.org_id, r.alert_id), {
        orgId: r.org_id,
        alertId: r.alert_id,
        ruleId: r.rule_id,
        kind: r.kind,
        assetId: r.asset_id,
        locationId: r.location_id,
        raisedUs: Number(r.raised_us),
        status: r.status,
        acknowledgedAt: r.acknowledged_at,
        acknowledgedBy: r.acknowledged_by,
        resolvedUs: r.resolved_us === null ? null : Number(r.resolved_us),
        raisedPosition: r.raised_position,
      });
    }
  }
  return { engine: new AlertsEngine(shared, assets, alerts), sent: sharedRows[0]?.sent ?? null, texts };
}

/** A row of the outbox: a change, with the position and recorded time of the event that caused it. */
interface OutboxRow extends AlertChange {
  commit: string;
  prepare: string;
  recordedAt: string;
}

/** The outbox's key, as the webhooks role's cursor holds it (service.webhook_alert_cursor). */
interface OutboxKey {
  commit: string;
  prepare: string;
  orgId: number;
  alertId: string;
  change: string;
}

/** Text compared code unit by code unit: byte by byte for the ASCII ids and changes (the columns' "C" collation). */
const compareText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Whether `row` is at or behind `key` in the outbox's order (position, org, alert id, change). */
export function atOrBehind(row: OutboxKey, key: OutboxKey): boolean {
  const order =
    Number(BigInt(row.commit) - BigInt(key.commit)) ||
    Number(BigInt(row.prepare) - BigInt(key.prepare)) ||
    row.orgId - key.orgId ||
    compareText(row.alertId, key.alertId) ||
    compareText(row.change, key.change);
  return order <= 0;
}

/**
 * The outbox (table `alert_outbox`, docs/design.md "Webhooks"): one row per alert raised or
 * resolved, in the batch's transaction. Its key is the causing event's position, the alert and the
 * change; the step is deterministic and each alert is one asset's, made by one segment, so a
 * rebuild with any number of segments writes the same rows, except those at or behind the webhooks
 * role's cursor (`sent`, read with the batch's state): the role never reads them again (its cursor
 * only moves forward) and its prune would delete them. A live batch writes after its checkpoint,
 * which the cursor never passes, so it writes every row; a rebuild or a replay writes only those
 * still to be followed. The cursor read may be behind the cursor at commit: more rows then, never
 * fewer.
 */
async function writeOutbox(tx: pg.PoolClient, all: OutboxRow[], sent: OutboxKey | null): Promise<void> {
  const rows = sent ? all.filter((r) => !atOrBehind({ commit: r.commit, prepare: r.prepare, orgId: r.alert.orgId, alertId: r.alert.alertId, change: r.change }, sent)) : all;
  if (rows.length === 0) return;
  await tx.query(
    `INSERT INTO alert_outbox (position_commit, position_prepare, org_id, alert_id, change, recorded_at, rule_id, kind, asset_id, location_id, raised_at, status,
                               acknowledged_at, acknowledged_by, resolved_at)
     SELECT t.c, t.p, t.org_id, t.alert_id, t.change, t.recorded_at, t.rule_id, t.kind, t.asset_id, t.location_id, ${FROM_US('t.raised_us')}, t.status,
            t.acknowledged_at, t.acknowledged_by, ${FROM_US('t.resolved_us')}
       FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::text[], $5::text[], $6::timestamptz[], $7::int[], $8::text[], $9::int[], $10::int[], $11::bigint[], $12::text[],
                   $13::timestamptz[], $14::jsonb[], $15::bigint[])
            AS t(c, p, org_id, alert_id, change, recorded_at, rule_id, kind, asset_id, location_id, raised_us, status, acknowledged_at, acknowledged_by, resolved_us)`,
    [
      rows.map((r) => r.commit),
      rows.map((r) => r.prepare),
      rows.map((r) => r.alert.orgId),
      rows.map((r) => r.alert.alertId),
      rows.map((r) => r.change),
      rows.map((r) => r.recordedAt),
      rows.map((r) => r.alert.ruleId),
      rows.map((r) => r.alert.kind),
      rows.map((r) => r.alert.assetId),
      rows.map((r) => r.alert.locationId),
      rows.map((r) => r.alert.raisedUs),
      rows.map((r) => r.alert.status),
      rows.map((r) => r.alert.acknowledgedAt),
      rows.map((r) => (r.alert.acknowledgedBy ? JSON.stringify(r.alert.acknowledgedBy) : null)),
      rows.map((r) => r.alert.resolvedUs),
    ],
  );
}

/**
 * Writes what the batch changed, and a new token in the segment's row; returns the token (the
 * states, `texts` now, are kept under it once the batch is written).
 */
async function save(tx: pg.PoolClient, segment: Segment, engine: AlertsEngine, texts: Map<string, string>): Promise<string> {
  await saveTreeChanges(tx, 'alerts_engine_tree', segment.index, engine.treeChanges);
  const token = await writeSegmentRow(tx, 'alerts_engine_segments', segment.index, engine.shared, engine.sharedChanged);
  const assets = [...engine.assets.values()].filter((a) => engine.dirtyAssets.has(assetKey(a.orgId, a.assetId)));
  const written = assets.map((a) => JSON.stringify(a));
  assets.forEach((a, i) => texts.set(assetKey(a.orgId, a.assetId), written[i]!));
  if (assets.length > 0) {
    await tx.query(
      `INSERT INTO alerts_engine_assets (org_id, asset_id, segment, state, next_deadline_us, location_id)
       SELECT * FROM unnest($1::int[], $2::int[], $3::int[], $4::jsonb[], $5::bigint[], $6::int[])
       ON CONFLICT (org_id, asset_id) DO UPDATE SET state = EXCLUDED.state, next_deadline_us = EXCLUDED.next_deadline_us, location_id = EXCLUDED.location_id`,
      [
        assets.map((a) => a.orgId),
        assets.map((a) => a.assetId),
        assets.map(() => segment.index),
        written,
        assets.map((a) => engine.nextDeadline(a)),
        assets.map((a) => a.position?.locationId ?? null),
      ],
    );
  }
  const alerts = [...engine.dirtyAlerts].map((id) => engine.alerts.get(id)!);
  if (alerts.length > 0) {
    await tx.query(
      `INSERT INTO alerts (org_id, alert_id, rule_id, kind, asset_id, location_id, raised_at, status, acknowledged_at, acknowledged_by, resolved_at, raised_position)
       SELECT t.org_id, t.alert_id, t.rule_id, t.kind, t.asset_id, t.location_id, ${FROM_US('t.raised_us')}, t.status, t.acknowledged_at, t.acknowledged_by,
              ${FROM_US('t.resolved_us')}, t.raised_position
         FROM unnest($1::int[], $2::text[], $3::int[], $4::text[], $5::int[], $6::int[], $7::bigint[], $8::text[], $9::timestamptz[], $10::jsonb[], $11::bigint[], $12::bigint[])
              AS t(org_id, alert_id, rule_id, kind, asset_id, location_id, raised_us, status, acknowledged_at, acknowledged_by, resolved_us, raised_position)
       ON CONFLICT (org_id, alert_id) DO UPDATE
         SET status = EXCLUDED.status, acknowledged_at = EXCLUDED.acknowledged_at, acknowledged_by = EXCLUDED.acknowledged_by, resolved_at = EXCLUDED.resolved_at`,
      [
        alerts.map((a) => a.orgId),
        alerts.map((a) => a.alertId),
        alerts.map((a) => a.ruleId),
        alerts.map((a) => a.kind),
        alerts.map((a) => a.assetId),
        alerts.map((a) => a.locationId),
        alerts.map((a) => a.raisedUs),
        alerts.map((a) => a.status),
        alerts.map((a) => a.acknowledgedAt),
        alerts.map((a) => (a.acknowledgedBy ? JSON.stringify(a.acknowledgedBy) : null)),
        alerts.map((a) => a.resolvedUs),
        alerts.map((a) => a.raisedPosition),
      ],
    );
    // The console's open inboxes read again once this commits (docs/web-app.md "Live alerts").
    await notifyAlertsChanged(tx, alerts.map((a) => a.orgId));
  }
  return token;
}

export const alertsProjection: Projection = {
  name: 'alerts',
  eventTypes: [ScansRecorded.type, ...RULE_TYPES, ...TREE_TYPES, AssetDeleted.type, AssetRestored.type, AlertAcknowledged.type, AlertClockTicked.type],
  tables: ['alerts', 'alerts_engine_segments', 'alerts_engine_tree', 'alerts_engine_assets', 'alert_outbox'],
  // Each segment's copy of the rules, tree and clock, and its assets' positions: the result is `alerts`.
  segmentStateTables: ['alerts_engine_segments', 'alerts_engine_tree', 'alerts_engine_assets'],
  // The API's orders and filters; the subscriber reads `alerts` by its key only.
  indexesAfterReplay: ['alerts_recent', 'alerts_by_status', 'alerts_by_rule', 'alerts_by_asset'],
  splittable: true,
  async apply(events, tx, options) {
    const segment = options?.segment ?? { index: 0, count: 1 };
    const batch = events.map((event) => ({ event, inputs: inputsOf(event, segment) })).filter((b) => b.inputs.length > 0);
    if (batch.length === 0) return;
    const { engine, sent, texts } = await load(tx, segment, batch);
    const outbox: OutboxRow[] = [];
    for (const { event, inputs } of batch) {
      const prepare = event.position.prepare.toString();
      for (const input of inputs) engine.step(input, prepare);
      if (engine.changes.length === 0) continue;
      const at = { commit: event.position.commit.toString(), prepare, recordedAt: event.recordedAt.toISOString() };
      for (const change of engine.changes.splice(0)) outbox.push({ ...change, ...at });
    }
    const token = await save(tx, segment, engine, texts);
    await writeOutbox(tx, outbox, sent);
    kept.keep(token, texts);
  },
};
