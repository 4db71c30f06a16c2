import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyMigrationGroup } from '../../shared/db/migrate.js';
import { createPool, type Pool } from '../../shared/db/pool.js';
import { ALERTS_CLOCK_STREAM, alertRulesStream, alertStream } from '../../shared/domain/alerts/events.js';
import { ScansRecorded, locationScansStream, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import { decodeReads, encodeReads, type RawRead } from '../../shared/domain/scans/read-codec.js';
import { comparePositions, START, type EventData, type Position, type RecordedEvent } from '../../shared/event-store/port.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { createLogger } from '../../shared/logger.js';
import { readCheckpoint } from '../../shared/projection/checkpoints.js';
import { rebuildProjections } from '../../shared/projection/rebuild.js';
import { replayProjections } from '../../shared/projection/replay.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import { segmentName } from '../../shared/projection/segments.js';
import { seededRandom as random } from '../../shared/random.js';
import { alertsProjection, inputsOf } from '../../projections/alerts/projection.js';
import { eventually } from '../event-store/conformance.js';
import { readLogUpTo } from '../support/read-log.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { watchStatements, type SentStatement } from '../support/statements.js';

/**
 * The alerts subscriber (docs/design.md "Alerts", "Alerts: time as an event") against a small
 * reference model written from the rules' text: random trees (with moves), rules (created,
 * changed, deleted), reads (late ones, redeliveries, ties), acknowledgements, asset deletes and
 * clock ticks are appended to a real event store; the `alerts` projection is run by the real
 * projector with a random batch size and 1 to 8 segments; its table must equal the model's rows,
 * ids included, and so must a `projections rebuild` and a `replay --until` a random instant of
 * the history. The model is a naive replay of the whole log, event by event: every read kept,
 * the current location recomputed from all of them, every alert searched for.
 *
 * Reproduce a failure with the seed it prints: PROPERTY_SEED=<seed> PROPERTY_RUNS=<n> npx vitest run test/properties/alerts-reference.int.test.ts
 */

const SEED = Number(process.env.PROPERTY_SEED ?? 20261129);
const RUNS = Number(process.env.PROPERTY_RUNS ?? 6);
const S = 1_000_000;
const log = createLogger('silent');
let db: TestDatabase;
let pool: Pool;
let store: PostgresEventStore;

beforeAll(async () => {
  db = await createTestDatabase('alerts_reference');
  pool = createPool(db.url, { max: 30 });
  store = new PostgresEventStore(pool, db.url, { pollIntervalMs: 20 });
});

afterAll(async () => {
  await store?.close();
  await pool?.end();
  await db?.drop();
});

// ---------------------------------------------------------------------------------------------
// The history: what is appended, as a list of appends.

type Kind = 'entered' | 'left' | 'dwell_exceeded' | 'not_seen';
const KINDS: Kind[] = ['entered', 'left', 'dwell_exceeded', 'not_seen'];
const tagOf = (assetId: number) => `E28011606000020900000${String(assetId).padStart(3, '0')}`;
const ACTOR = { type: 'api_key', id: 'key-1', name: 'ops key' };

/**
 * Appends a random history of one organization; its last position. An acknowledgement names an
 * alert the model says exists at that point (mostly an unresolved one), or now and then one that
 * does not.
 */
async function appendHistory(orgId: number, seed: number): Promise<Position> {
  const rnd = random(seed);
  let head: Position = START;
  let sent = 0;
  const flush = async () => {
    for (; sent < appends.length; sent++) head = (await store.appendToStream(appends[sent]!.stream, [appends[sent]!.event])).position;
  };
  const pick = <T>(items: readonly T[]): T => items[Math.floor(rnd() * items.length)]!;
  const int = (min: number, max: number) => min + Math.floor(rnd() * (max - min + 1));
  const appends: Array<{ stream: string; event: EventData }> = [];
  const at = () => new Date().toISOString();
  const locations = int(3, 6);
  const assets = int(1, 4);
  const parents = new Map<number, number | null>();
  for (let id = 1; id <= locations; id++) {
    const parent = id === 1 || rnd() < 0.1 ? null : int(1, id - 1);
    parents.set(id, parent);
    appends.push({
      stream: `location-${orgId}-${id}`,
      event: {
        type: 'LocationCreated',
        data: { org_id: orgId, location_id: id, external_key: `L${id}`, name: `L${id}`, description: null, parent_id: parent, is_active: true, valid_from: null, valid_to: null, at: at() },
      },
    });
  }
  // Observed times either ahead of the clock (ticks decide) or behind it (a rule's recorded time does).
  let us = Date.now() * 1000 + (rnd() < 0.6 ? 2 * 3600 * S : -3 * 3600 * S);
  const delivered: Array<{ read: RawRead; locationId: number }> = [];
  const rules = new Map<number, { kind: Kind }>();
  let nextRule = 1;
  const deleted = new Set<number>();
  const ops = int(40, 140);
  const early = int(1, 3);
  for (let i = 0; i < ops; i++) {
    const r = i < early ? 0.7 : rnd();
    if (r < 0.46) {
      // One event of 1 to 3 reads at one location: new ones mostly forward in time, some late, some delivered again.
      const locationId = int(1, locations);
      const reads: RawRead[] = [];
      for (let n = int(1, 3); n > 0; n--) {
        const again = delivered.filter((d) => d.locationId === locationId);
        if (again.length > 0 && rnd() < 0.1) {
          reads.push(pick(again).read);
          continue;
        }
        const tie = rnd() < 0.1;
        if (!tie) us += int(0, 50) * S + int(0, 999);
        const late = rnd() < 0.12 ? int(1, 400) * S : 0;
        const read: RawRead = { tag_type: 'rfid', value: tagOf(int(1, assets)), observedUs: us - late, rssi: -60, capturePoint: `door-${locationId}` };
        reads.push(read);
        delivered.push({ read, locationId });
      }
      const { capturePoints, ...encoded } = encodeReads(reads, (read) => ({ assetId: Number(read.value.slice(-3)), cause: null }));
      const data: ScansRecordedData = { org_id: orgId, location_id: locationId, source: { kind: 'reader', reader_id: 'reader-1', capture_points: capturePoints }, ...encoded, at: at() };
      appends.push({ stream: locationScansStream(orgId, locationId), event: { type: ScansRecorded.type, data: data as never } });
    } else if (r < 0.58) {
      appends.push({ stream: ALERTS_CLOCK_STREAM, event: { type: 'AlertClockTicked', data: { until_us: us + int(-120, 120) * S, at: at() } } });
    } else if (r < 0.67) {
      // A location moved under another (never under itself or its subtree), or to the root.
      const id = int(2, locations);
      const under = (a: number | null): boolean => a !== null && (a === id || under(parents.get(a) ?? null));
      const choices = [null, ...[...parents.keys()].filter((p) => !under(p))];
      const parent = pick(choices);
      appends.push({ stream: `location-${orgId}-${id}`, event: { type: 'LocationMoved', data: { org_id: orgId, location_id: id, parent_id: parent, previous_parent_id: parents.get(id) ?? null, at: at() } } });
      parents.set(id, parent);
    } else if (r < 0.76 && rules.size < 6) {
      const kind = pick(KINDS);
      const ruleId = nextRule++;
      rules.set(ruleId, { kind });
      const timed = kind === 'dwell_exceeded' || kind === 'not_seen';
      appends.push({
        stream: alertRulesStream(orgId),
        event: {
          type: 'AlertRuleCreated',
          data: {
            org_id: orgId,
            rule_id: ruleId,
            name: `rule ${ruleId}`,
            kind,
            location_id: int(1, locations),
            threshold_seconds: timed ? int(60, 300) : null,
            asset_ids: rnd() < 0.6 ? null : [...new Set([int(1, assets), int(1, assets)])],
            is_active: rnd() < 0.85,
            at: at(),
          },
        },
      });
    } else if (r < 0.82 && rules.size > 0) {
      const ruleId = pick([...rules.keys()]);
      const rule = rules.get(ruleId)!;
      const timed = rule.kind === 'dwell_exceeded' || rule.kind === 'not_seen';
      const which = int(0, 5);
      let changes: Record<string, unknown>;
      if (which === 0) changes = { name: `renamed ${i}` };
      else if (which === 1) changes = { location_id: int(1, locations) };
      else if (which === 2) changes = timed ? { threshold_seconds: int(60, 300) } : { name: `renamed ${i}` };
      else if (which === 3) changes = { is_active: rnd() < 0.6 };
      else if (which === 4) changes = { asset_ids: rnd() < 0.5 ? null : [int(1, assets)] };
      else {
        const kind = pick(KINDS);
        rule.kind = kind;
        changes = { kind, threshold_seconds: kind === 'dwell_exceeded' || kind === 'not_seen' ? int(60, 300) : null };
      }
      appends.push({ stream: alertRulesStream(orgId), event: { type: 'AlertRuleUpdated', data: { org_id: orgId, rule_id: ruleId, changes: changes as never, at: at() } } });
    } else if (r < 0.84 && rules.size > 0) {
      const ruleId = pick([...rules.keys()]);
      rules.delete(ruleId);
      appends.push({ stream: alertRulesStream(orgId), event: { type: 'AlertRuleDeleted', data: { org_id: orgId, rule_id: ruleId, at: at() } } });
    } else if (r < 0.96 && nextRule > 1) {
      // An acknowledgement: of an alert the model has raised so far, mostly an unresolved one; now
      // and then of one that does not exist (the API appends none; the model and the subscriber ignore it alike).
      await flush();
      const raised = referenceAlerts(await readLog(head)).filter((a) => a.org === orgId);
      const unresolved = raised.filter((a) => a.status !== 'resolved');
      const chosen = rnd() < 0.7 && unresolved.length > 0 ? pick(unresolved) : raised.length > 0 && rnd() < 0.8 ? pick(raised) : null;
      const ruleId = chosen?.rule ?? int(1, nextRule - 1);
      const assetId = chosen?.asset ?? int(1, assets);
      const alertId = chosen?.id ?? `${ruleId}-${assetId}-${int(1, 3)}`;
      appends.push({
        stream: alertStream(orgId, alertId),
        event: {
          type: 'AlertAcknowledged',
          data: { org_id: orgId, alert_id: alertId, rule_id: ruleId, asset_id: assetId, at: new Date(Math.floor(us / 1000) + int(0, 999)).toISOString() },
          metadata: { actor: ACTOR },
        },
      });
    } else {
      const assetId = int(1, assets);
      const type = deleted.has(assetId) ? 'AssetRestored' : 'AssetDeleted';
      if (deleted.has(assetId)) deleted.delete(assetId);
      else deleted.add(assetId);
      appends.push({ stream: `asset-${orgId}-${assetId}`, event: { type, data: { org_id: orgId, asset_id: assetId, external_key: `A${assetId}`, at: at() } } });
    }
  }
  await flush();
  return head;
}

// ---------------------------------------------------------------------------------------------
// The reference model: the rules' text, applied naively to the whole log.

interface ModelAlert {
  org: number;
  id: string;
  rule: number;
  kind: Kind;
  asset: number;
  location: number;
  raisedUs: number;
  /** Index of the event that raised it. */
  index: number;
  position: string;
  status: 'open' | 'acknowledged' | 'resolved';
  ackAt: string | null;
  ackBy: unknown;
  resolvedUs: number | null;
}

interface ModelRule {
  org: number;
  id: number;
  kind: Kind;
  location: number;
  threshold: number | null;
  assets: number[] | null;
  active: boolean;
  /** Index of the event from which it judges afresh (its creation or last change). */
  from: number;
}

/** The fields of the events the model reads (each event has some of them). */
interface Fields {
  org_id: number;
  rule_id: number;
  kind: Kind;
  location_id: number;
  threshold_seconds: number | null;
  asset_ids: number[] | null;
  is_active: boolean;
  changes: Partial<Pick<Fields, 'kind' | 'location_id' | 'threshold_seconds' | 'asset_ids' | 'is_active'>>;
  parent_id: number | null;
  asset_id: number;
  alert_id: string;
  at: string;
  until_us: number;
}

const micros = (iso: string) => {
  const fraction = (/\.(\d+)/.exec(iso)?.[1] ?? '').padEnd(6, '0').slice(0, 6);
  return Date.parse(iso.replace(/\.\d+/, '')) * 1000 + Number(fraction);
};

function referenceAlerts(events: readonly RecordedEvent[]): ModelAlert[] {
  const tree = new Map<string, number | null>(); // org/location → parent
  const rules = new Map<string, ModelRule>();
  const alerts: ModelAlert[] = [];
  let clock = 0;
  // Per asset (org/asset): every distinct read kept, its deletion, and the times its location's ancestors were entered.
  const reads = new Map<string, Array<{ us: number; order: number; location: number }>>();
  const keys = new Set<string>();
  const deletedAt = new Map<string, number>(); // asset → index of its deletion (absent: not deleted)
  const restoredAt = new Map<string, number>();
  /** Membership history: after each change of an asset's ancestors, (index, time, ancestors). */
  const history = new Map<string, Array<{ index: number; us: number; ancestors: Set<number> }>>();

  const ancestors = (org: number, location: number): Set<number> => {
    const chain = new Set<number>();
    for (let at: number | null | undefined = location; at != null && !chain.has(at); at = tree.get(`${org}/${at}`)) chain.add(at);
    return chain;
  };
  const latest = (asset: string) => {
    const list = reads.get(asset) ?? [];
    let best: (typeof list)[number] | null = null;
    for (const r of list) if (!best || r.us > best.us || (r.us === best.us && r.order > best.order)) best = r;
    return best;
  };
  /** Since when (and from which event) the asset has been in the subtree of `location` without a break, or null. */
  const stayIn = (asset: string, location: number): { us: number; index: number } | null => {
    const h = history.get(asset) ?? [];
    if (h.length === 0 || !h.at(-1)!.ancestors.has(location)) return null;
    let k = h.length - 1;
    while (k > 0 && h[k - 1]!.ancestors.has(location)) k--;
    return { us: h[k]!.us, index: h[k]!.index };
  };
  const record = (asset: string, index: number, us: number, org: number) => {
    const now = latest(asset);
    const set = now ? ancestors(org, now.location) : new Set<number>();
    const h = history.get(asset) ?? [];
    const last = h.at(-1);
    if (last && [...set].every((x) => last.ancestors.has(x)) && set.size === last.ancestors.size) return;
    h.push({ index, us, ancestors: set });
    history.set(asset, h);
  };
  const judging = (org: number, assetId: number): ModelRule[] =>
    [...rules.values()].filter((r) => r.org === org && r.active && (r.assets === null || r.assets.includes(assetId)) && !deletedAt.has(`${org}/${assetId}`)).sort((a, b) => a.id - b.id);
  const raise = (org: number, rule: ModelRule, assetId: number, raisedUs: number, location: number, index: number, position: string) => {
    const n = alerts.filter((a) => a.org === org && a.rule === rule.id && a.asset === assetId).length + 1;
    alerts.push({ org, id: `${rule.id}-${assetId}-${n}`, rule: rule.id, kind: rule.kind, asset: assetId, location, raisedUs, index, position, status: 'open', ackAt: null, ackBy: null, resolvedUs: null });
  };
  const resolve = (a: ModelAlert, us: number) => {
    if (a.status === 'resolved') return;
    a.status = 'resolved';
    a.resolvedUs = us;
  };
  const unresolved = (org: number, assetId: number, ruleId?: number, kinds?: Kind[]) =>
    alerts.filter((a) => a.org === org && a.asset === assetId && a.status !== 'resolved' && (ruleId === undefined || a.rule === ruleId) && (!kinds || kinds.includes(a.kind)));
  /** The deadline of a time-based rule for an asset, when not raised yet for this stay or silence since the rule (or the asset) judges afresh. */
  const deadline = (org: number, assetId: number, rule: ModelRule): number | null => {
    const asset = `${org}/${assetId}`;
    if (rule.threshold === null) return null;
    const stay = stayIn(asset, rule.location);
    const now = latest(asset);
    if (!stay || !now) return null;
    const d = rule.kind === 'dwell_exceeded' ? stay.us + rule.threshold * S : now.us + rule.threshold * S;
    const since = Math.max(rule.from, stay.index, restoredAt.get(asset) ?? -1);
    const raised = alerts.some((a) => a.org === org && a.rule === rule.id && a.asset === assetId && a.index >= since && a.raisedUs === d);
    return raised ? null : d;
  };
  const raiseDue = (org: number, assetId: number, upTo: number, index: number, position: string) => {
    const now = latest(`${org}/${assetId}`);
    for (const rule of judging(org, assetId)) {
      const d = deadline(org, assetId, rule);
      if (d !== null && d <= upTo) raise(org, rule, assetId, d, now!.location, index, position);
    }
  };
  const everyAsset = () => [...reads.keys()].map((k) => k.split('/').map(Number) as [number, number]);

  events.forEach((event, index) => {
    const d = event.data as unknown as Fields;
    const position = event.position.prepare.toString();
    const recorded = event.recordedAt.getTime() * 1000;
    switch (event.type) {
      case 'ScansRecorded': {
        const data = event.data as unknown as ScansRecordedData;
        decodeReads(data).forEach((read, k) => {
          if (read.assetId === null) return;
          const org = data.org_id;
          const asset = `${org}/${read.assetId}`;
          if (keys.has(read.readKey)) return; // a read delivered again counts once
          keys.add(read.readKey);
          const before = latest(asset);
          const order = index * 1000 + k;
          const isLatest = !before || read.observedUs > before.us || (read.observedUs === before.us && order > before.order);
          // A read that becomes the latest, observed at or after a deadline: raised at the deadline first.
          if (isLatest) raiseDue(org, read.assetId, read.observedUs, index, position);
          reads.set(asset, [...(reads.get(asset) ?? []), { us: read.observedUs, order, location: data.location_id! }]);
          const wasIn = before ? ancestors(org, before.location) : new Set<number>();
          if (isLatest && (!before || before.location !== data.location_id)) {
            record(asset, index, read.observedUs, org);
            const isIn = ancestors(org, data.location_id!);
            for (const rule of judging(org, read.assetId)) {
              const was = wasIn.has(rule.location);
              const is = isIn.has(rule.location);
              if (rule.kind === 'entered' && !was && is) raise(org, rule, read.assetId, read.observedUs, data.location_id!, index, position);
              if (rule.kind === 'left' && was && !is) raise(org, rule, read.assetId, read.observedUs, data.location_id!, index, position);
              if (was && !is) for (const a of unresolved(org, read.assetId, rule.id, ['dwell_exceeded', 'not_seen'])) resolve(a, read.observedUs);
            }
          }
          // A read after the silence sees the asset again.
          if (before && read.observedUs > before.us) for (const a of unresolved(org, read.assetId, undefined, ['not_seen'])) resolve(a, read.observedUs);
          if (isLatest) raiseDue(org, read.assetId, clock, index, position);
        });
        return;
      }
      case 'AlertRuleCreated':
        clock = Math.max(clock, recorded);
        rules.set(`${d.org_id}/${d.rule_id}`, { org: d.org_id, id: d.rule_id, kind: d.kind, location: d.location_id, threshold: d.threshold_seconds, assets: d.asset_ids, active: d.is_active, from: index });
        break;
      case 'AlertRuleUpdated': {
        clock = Math.max(clock, recorded);
        const rule = rules.get(`${d.org_id}/${d.rule_id}`);
        const c = d.changes;
        if (!rule) break;
        const next: ModelRule = {
          ...rule,
          kind: c.kind ?? rule.kind,
          location: c.location_id ?? rule.location,
          threshold: c.threshold_seconds !== undefined ? c.threshold_seconds : rule.threshold,
          assets: c.asset_ids !== undefined ? c.asset_ids : rule.assets,
          active: c.is_active ?? rule.active,
        };
        const same = next.kind === rule.kind && next.location === rule.location && next.threshold === rule.threshold && JSON.stringify(next.assets) === JSON.stringify(rule.assets) && next.active === rule.active;
        if (same) break;
        for (const a of alerts) if (a.org === rule.org && a.rule === rule.id) resolve(a, recorded);
        rules.set(`${d.org_id}/${d.rule_id}`, { ...next, from: index });
        break;
      }
      case 'AlertRuleDeleted': {
        clock = Math.max(clock, recorded);
        const rule = rules.get(`${d.org_id}/${d.rule_id}`);
        if (!rule) break;
        for (const a of alerts) if (a.org === rule.org && a.rule === rule.id) resolve(a, recorded);
        rules.delete(`${d.org_id}/${d.rule_id}`);
        break;
      }
      case 'LocationCreated':
      case 'LocationMoved':
      case 'LocationRestored': {
        const org = d.org_id;
        const before = new Map(everyAsset().filter(([o]) => o === org).map(([o, a]) => [a, ancestors(o, latest(`${o}/${a}`)!.location)]));
        tree.set(`${org}/${d.location_id}`, d.parent_id);
        for (const [assetId, wasIn] of before) {
          const asset = `${org}/${assetId}`;
          const isIn = ancestors(org, latest(asset)!.location);
          record(asset, index, recorded, org);
          for (const rule of judging(org, assetId)) {
            if (wasIn.has(rule.location) && !isIn.has(rule.location)) for (const a of unresolved(org, assetId, rule.id, ['dwell_exceeded', 'not_seen'])) resolve(a, recorded);
          }
        }
        break;
      }
      case 'AssetDeleted': {
        const asset = `${d.org_id}/${d.asset_id}`;
        for (const a of unresolved(d.org_id, d.asset_id)) resolve(a, recorded);
        deletedAt.set(asset, index);
        break;
      }
      case 'AssetRestored':
        deletedAt.delete(`${d.org_id}/${d.asset_id}`);
        restoredAt.set(`${d.org_id}/${d.asset_id}`, index);
        break;
      case 'AlertAcknowledged': {
        const a = alerts.find((x) => x.org === d.org_id && x.id === d.alert_id);
        if (!a || a.ackAt !== null) break;
        a.ackAt = d.at;
        a.ackBy = (event.metadata as { actor?: unknown }).actor;
        if (a.status === 'resolved') break;
        if (a.kind === 'entered' || a.kind === 'left') resolve(a, micros(d.at));
        else a.status = 'acknowledged';
        break;
      }
      case 'AlertClockTicked':
        clock = Math.max(clock, d.until_us);
        break;
      default:
        return;
    }
    // After anything but a read: whatever is due at the clock is raised.
    for (const [org, assetId] of everyAsset()) raiseDue(org, assetId, clock, index, position);
  });
  return alerts;
}

// ---------------------------------------------------------------------------------------------

const readLog = (head: Position) => readLogUpTo(store, head);

/** A fresh read-model schema with `alerts` applied up to `head` by the followers of `segments` segments. */
async function project(schema: string, segments: number, batchSize: number, head: Position): Promise<void> {
  await pool.query(`DROP SCHEMA IF EXISTS ${pg.escapeIdentifier(schema)} CASCADE`);
  await applyMigrationGroup(pool, 'read-model', schema);
  const runtime = new ProjectorRuntime({ store, pool, schema, projections: [alertsProjection], log, batchSize, takeoverIntervalMs: 50, leaseMs: 5_000, segments: { all: segments, byName: {} } });
  runtime.start();
  try {
    await eventually(async () => {
      for (let index = 0; index < segments; index++) {
        const at = await readCheckpoint(pool, schema, segmentName('alerts', index, segments));
        expect(comparePositions(at, head)).toBeGreaterThanOrEqual(0);
      }
    }, 60_000);
  } finally {
    await runtime.stop();
  }
}

async function tableRows(schema: string): Promise<string[]> {
  const { rows } = await pool.query<{ row: string }>(
    `SELECT concat_ws(' ', org_id, alert_id, rule_id, kind, asset_id, location_id, (extract(epoch FROM raised_at) * 1000000)::bigint, status,
            coalesce((extract(epoch FROM acknowledged_at) * 1000000)::bigint::text, ''), coalesce(concat_ws(',', acknowledged_by->>'type', acknowledged_by->>'id', acknowledged_by->>'name'), ''),
            coalesce((extract(epoch FROM resolved_at) * 1000000)::bigint::text, ''), raised_position) AS row
       FROM ${pg.escapeIdentifier(schema)}.alerts`,
  );
  return rows.map((r) => r.row).sort();
}

const modelRows = (alerts: ModelAlert[]) =>
  alerts
    .map((a) =>
      [a.org, a.id, a.rule, a.kind, a.asset, a.location, a.raisedUs, a.status, a.ackAt === null ? '' : micros(a.ackAt), a.ackBy === null ? '' : ((b) => `${b.type},${b.id},${b.name}`)(a.ackBy as typeof ACTOR), a.resolvedUs ?? '', a.position].join(' '),
    )
    .sort();

describe('alerts subscriber against the reference model', () => {
  it('gives the model’s alerts, ids included, for any history, batch size and 1 to 8 segments; so do a rebuild and a replay --until', { timeout: 600_000 }, async () => {
    let run = 0;
    let raised = 0;
    let acknowledged = 0;
    let timed = 0;
    await fc.assert(
      fc.asyncProperty(fc.integer(), fc.integer({ min: 1, max: 40 }), fc.integer({ min: 1, max: 8 }), fc.double({ min: 0.2, max: 0.9, noNaN: true }), async (seed, batch, segments, cut) => {
        run++;
        const orgId = 100 + run;
        const head = await appendHistory(orgId, seed);
        const events = await readLog(head);
        const model = referenceAlerts(events);
        const ours = events.filter((e) => (e.data as { org_id?: number }).org_id === orgId);
        const mine = model.filter((a) => a.org === orgId);
        raised += mine.length;
        acknowledged += mine.filter((a) => a.ackAt !== null && a.kind !== 'entered' && a.kind !== 'left').length;
        timed += mine.filter((a) => a.kind === 'dwell_exceeded' || a.kind === 'not_seen').length;
        const schema = `alerts_run_${run}`;
        await project(schema, segments, batch, head);
        const projected = await tableRows(schema);
        // A history depends on the clock (acknowledgements name what the model raised so far), so a
        // failure is printed whole, to be replayed: its events in log order with their recorded times.
        if (JSON.stringify(projected) !== JSON.stringify(modelRows(model))) {
          console.error(`alerts property: failing history (org ${orgId}, ${segments} segments, batch ${batch}):`);
          console.error(JSON.stringify(events.map((e) => ({ type: e.type, data: e.data, metadata: e.metadata, recorded_at: e.recordedAt.toISOString(), position: e.position.prepare.toString() }))));
        }
        expect(projected, `seed ${seed}, ${segments} segments, batch ${batch}`).toEqual(modelRows(model));

        await rebuildProjections({ store, pool, log, projections: [alertsProjection], schema, segments: { all: segments, byName: {} }, batchSize: batch * 3 });
        expect(await tableRows(schema), 'rebuild').toEqual(modelRows(model));

        // A replay up to an instant of this history: the alerts of the events recorded until then.
        const until = ours[Math.floor(ours.length * cut)]!.recordedAt;
        const into = `alerts_replay_${run}`;
        await replayProjections({ store, pool, log, projections: [alertsProjection], until, into, replace: true, segments: { all: segments, byName: {} }, batchSize: batch * 5 });
        expect(await tableRows(into), 'replay --until').toEqual(modelRows(referenceAlerts(events.filter((e) => e.recordedAt.getTime() <= until.getTime()))));
        await pool.query(`DROP SCHEMA ${pg.escapeIdentifier(into)} CASCADE; DROP SCHEMA ${pg.escapeIdentifier(schema)} CASCADE`);
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true },
    );
    // The histories did raise alerts (a model that raises nothing would agree with anything).
    expect(raised).toBeGreaterThan(RUNS * 3);
    expect(timed).toBeGreaterThan(RUNS);
    expect(acknowledged).toBeGreaterThan(0);
  });

  it('the batch after a committed one loads no state its process already holds, and gives the model’s alerts', { timeout: 300_000 }, async () => {
    const head = await appendHistory(950, 4300);
    const events = await readLog(head);
    const schema = 'alerts_kept';
    await applyMigrationGroup(pool, 'read-model', schema);
    // How often each named asset's state was read from the database: asked for by a load (its first
    // two parameters, the named assets' orgs and ids) and found there.
    const loads = new Map<string, number>();
    const countLoads = ({ text, values, result }: SentStatement) => {
      if (!text.includes('a.state::text AS state')) return;
      const [orgs, assets] = values as number[][];
      const asked = new Set(orgs!.map((org, i) => `${org}/${assets![i]}`));
      void result.then(({ rows }: pg.QueryResult<{ org_id: number; asset_id: number }>) => {
        for (const { org_id, asset_id } of rows) if (asked.has(`${org_id}/${asset_id}`)) loads.set(`${org_id}/${asset_id}`, (loads.get(`${org_id}/${asset_id}`) ?? 0) + 1);
      });
    };
    const named: number[] = [];
    const client = await pool.connect();
    try {
      await watchStatements(countLoads, async () => {
        for (let i = 0; i < events.length; i += 4) {
          const batch = events.slice(i, i + 4);
          const assets = new Set(batch.flatMap((e) => inputsOf(e, { index: 0, count: 1 }).flatMap((input) => ('assetId' in input ? [`${input.orgId}/${input.assetId}`] : []))));
          if (assets.size > 0) named.push(assets.size);
          await client.query(`BEGIN; SET LOCAL search_path TO ${pg.escapeIdentifier(schema)}`);
          await alertsProjection.apply(batch, client);
          await client.query('COMMIT');
        }
      });
    } finally {
      client.release();
    }
    // A state is read from its row at most once: the later batches that name its asset find it
    // kept. (An asset named before it has a state, by an acknowledgement of an alert it never had,
    // is asked for again, and found then or made by its first read: the process keeps states, not
    // their absence.)
    const { rows: stated } = await pool.query<{ key: string }>(`SELECT org_id || '/' || asset_id AS key FROM ${pg.escapeIdentifier(schema)}.alerts_engine_assets`);
    expect(named.reduce((a, b) => a + b, 0)).toBeGreaterThan(stated.length * 2);
    expect([...loads].filter(([, n]) => n > 1)).toEqual([]);
    expect(await tableRows(schema)).toEqual(modelRows(referenceAlerts(events)));
    await pool.query(`DROP SCHEMA ${pg.escapeIdentifier(schema)} CASCADE`);
  });

  it('a batch rolled back and applied again gives the model’s alerts: the states it changed in the process are not the next batch’s', { timeout: 300_000 }, async () => {
    // Each batch applied in a transaction rolled back, then again in one committed: the first
    // changes the asset states in the process (projections/engine-states.ts), which must not be
    // taken for the rows the second reads.
    for (let run = 1; run <= 3; run++) {
      const head = await appendHistory(900 + run, 4200 + run);
      const events = await readLog(head);
      const schema = `alerts_rollback_${run}`;
      await applyMigrationGroup(pool, 'read-model', schema);
      const client = await pool.connect();
      try {
        for (let i = 0; i < events.length; i += 4) {
          for (const end of ['ROLLBACK', 'COMMIT']) {
            await client.query(`BEGIN; SET LOCAL search_path TO ${pg.escapeIdentifier(schema)}`);
            await alertsProjection.apply(events.slice(i, i + 4), client);
            await client.query(end);
          }
        }
      } finally {
        client.release();
      }
      const rows = await tableRows(schema);
      expect(rows.length).toBeGreaterThan(0);
      expect(rows, `run ${run}`).toEqual(modelRows(referenceAlerts(events)));
      await pool.query(`DROP SCHEMA ${pg.escapeIdentifier(schema)} CASCADE`);
    }
  });
});
