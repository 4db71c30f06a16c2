import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AlertsEngine, assetKey, emptyShared, newAsset, unresolvedAlertIds, upgradeAssetState, type AlertsInput, type Rule } from './engine.js';

/** The alerts subscriber's pure step (docs/design.md "Alerts", "Alerts: time as an event"), event by event. */

const S = 1_000_000;
const T0 = Date.UTC(2026, 10, 1) * 1000;
const ORG = 1;
const ASSET = 7;
// The tree: 1 (site) ← 2 (zone) ← 3 (bay); 4 (yard) under 1.
const TREE: AlertsInput[] = [
  { type: 'tree', orgId: ORG, locationId: 1, parentId: null, recordedUs: T0 },
  { type: 'tree', orgId: ORG, locationId: 2, parentId: 1, recordedUs: T0 },
  { type: 'tree', orgId: ORG, locationId: 3, parentId: 2, recordedUs: T0 },
  { type: 'tree', orgId: ORG, locationId: 4, parentId: 1, recordedUs: T0 },
];

let keyN = 0;
const read = (locationId: number, us: number, readKey = `k${keyN++}`): AlertsInput => ({ type: 'read', orgId: ORG, assetId: ASSET, locationId, observedUs: us, readKey });
const rule = (ruleId: number, kind: Rule['kind'], thresholdSeconds: number | null = null, locationId = 2): Rule => ({
  orgId: ORG,
  ruleId,
  kind,
  locationId,
  thresholdSeconds,
  assetIds: null,
  isActive: true,
});
const created = (r: Rule, recordedUs = T0): AlertsInput => ({ type: 'rule_created', rule: r, recordedUs });
const tick = (untilUs: number): AlertsInput => ({ type: 'tick', untilUs });

function run(inputs: AlertsInput[]) {
  const engine = new AlertsEngine(emptyShared(), new Map(), new Map());
  inputs.forEach((input, i) => engine.step(input, String(i + 1)));
  const rows = [...engine.alerts.values()].map((a) => ({
    id: a.alertId,
    kind: a.kind,
    at: (a.raisedUs - T0) / S,
    location: a.locationId,
    status: a.status,
    resolved: a.resolvedUs === null ? null : (a.resolvedUs - T0) / S,
  }));
  return { engine, rows };
}

describe('alerts step', () => {
  it('entered and left: a read that moves the asset in or out of the zone, at its observed time and new location', () => {
    const { rows } = run([...TREE, created(rule(1, 'entered')), created(rule(2, 'left')), read(4, T0 + 10 * S), read(3, T0 + 20 * S), read(2, T0 + 30 * S), read(4, T0 + 40 * S)]);
    expect(rows).toEqual([
      { id: '1-7-1', kind: 'entered', at: 20, location: 3, status: 'open', resolved: null },
      { id: '2-7-1', kind: 'left', at: 40, location: 4, status: 'open', resolved: null },
    ]);
  });

  it('the first read ever, into the zone, is an entry; a late read and a read delivered again move nothing', () => {
    const { rows } = run([...TREE, created(rule(1, 'entered')), created(rule(2, 'left')), read(3, T0 + 10 * S, 'a'), read(4, T0 + 5 * S), read(3, T0 + 10 * S, 'a')]);
    expect(rows.map((r) => r.id)).toEqual(['1-7-1']);
  });

  it('moves before the rule raise nothing', () => {
    const { rows } = run([...TREE, read(3, T0 + 10 * S), created(rule(1, 'entered'), T0 + 100 * S)]);
    expect(rows).toEqual([]);
  });

  it('dwell_exceeded: raised at entry + threshold when the clock passes it, resolved when the asset leaves', () => {
    const { rows } = run([...TREE, created(rule(1, 'dwell_exceeded', 60)), read(3, T0 + 10 * S), read(2, T0 + 20 * S), tick(T0 + 69 * S)]);
    expect(rows).toEqual([]);
    const later = run([...TREE, created(rule(1, 'dwell_exceeded', 60)), read(3, T0 + 10 * S), read(2, T0 + 20 * S), tick(T0 + 70 * S), read(4, T0 + 90 * S)]);
    expect(later.rows).toEqual([{ id: '1-7-1', kind: 'dwell_exceeded', at: 70, location: 2, status: 'resolved', resolved: 90 }]);
  });

  it('dwell_exceeded: a read whose observed time is past the deadline raises it at the deadline, before the read resolves it', () => {
    const { rows } = run([...TREE, created(rule(1, 'dwell_exceeded', 60)), read(3, T0 + 10 * S), read(4, T0 + 200 * S)]);
    expect(rows).toEqual([{ id: '1-7-1', kind: 'dwell_exceeded', at: 70, location: 3, status: 'resolved', resolved: 200 }]);
  });

  it('not_seen: raised at the last read + threshold, resolved by the next read; a new silence is a new alert', () => {
    const { rows } = run([...TREE, created(rule(1, 'not_seen', 60)), read(3, T0 + 10 * S), tick(T0 + 100 * S), read(3, T0 + 110 * S), tick(T0 + 200 * S)]);
    expect(rows).toEqual([
      { id: '1-7-1', kind: 'not_seen', at: 70, location: 3, status: 'resolved', resolved: 110 },
      { id: '1-7-2', kind: 'not_seen', at: 170, location: 3, status: 'open', resolved: null },
    ]);
  });

  it('a rule created when a dwell is already past its threshold raises at once, at its deadline in observed time', () => {
    const { rows } = run([...TREE, read(3, T0 + 10 * S), created(rule(1, 'dwell_exceeded', 60), T0 + 500 * S)]);
    expect(rows).toEqual([{ id: '1-7-1', kind: 'dwell_exceeded', at: 70, location: 3, status: 'open', resolved: null }]);
  });

  it('a tree edit changes the zone from that event on: no entered alert, the dwell counts from the edit, leaving by an edit resolves', () => {
    const inputs: AlertsInput[] = [
      ...TREE,
      created(rule(1, 'entered')),
      created(rule(2, 'dwell_exceeded', 60)),
      read(4, T0 + 10 * S),
      // The yard moves under the zone: the asset is in it without moving.
      { type: 'tree', orgId: ORG, locationId: 4, parentId: 2, recordedUs: T0 + 100 * S },
      tick(T0 + 161 * S),
      { type: 'tree', orgId: ORG, locationId: 4, parentId: 1, recordedUs: T0 + 300 * S },
    ];
    expect(run(inputs).rows).toEqual([{ id: '2-7-1', kind: 'dwell_exceeded', at: 160, location: 4, status: 'resolved', resolved: 300 }]);
  });

  it('a rule changed in what it judges resolves its alerts and judges afresh; a name change does nothing', () => {
    const base: AlertsInput[] = [...TREE, created(rule(1, 'dwell_exceeded', 60)), read(3, T0 + 10 * S), tick(T0 + 80 * S)];
    const renamed = run([...base, { type: 'rule_updated', orgId: ORG, ruleId: 1, changes: { name: 'x' }, recordedUs: T0 + 90 * S }]);
    expect(renamed.rows.map((r) => r.status)).toEqual(['open']);
    const changed = run([...base, { type: 'rule_updated', orgId: ORG, ruleId: 1, changes: { thresholdSeconds: 120 }, recordedUs: T0 + 90 * S }, tick(T0 + 131 * S)]);
    expect(changed.rows).toEqual([
      { id: '1-7-1', kind: 'dwell_exceeded', at: 70, location: 3, status: 'resolved', resolved: 90 },
      { id: '1-7-2', kind: 'dwell_exceeded', at: 130, location: 3, status: 'open', resolved: null },
    ]);
    const deleted = run([...base, { type: 'rule_deleted', orgId: ORG, ruleId: 1, recordedUs: T0 + 90 * S }, tick(T0 + 1000 * S)]);
    expect(deleted.rows.map((r) => [r.status, r.resolved])).toEqual([['resolved', 90]]);
  });

  it('acknowledging: entered/left resolve; an open dwell is acknowledged and still resolves on leaving; again changes nothing', () => {
    const by = { type: 'api_key' as const, id: 'k1', name: 'ops key' };
    const at = new Date((T0 + 50 * S) / 1000).toISOString();
    const ack = (alertId: string, when = at): AlertsInput => ({ type: 'acknowledged', orgId: ORG, assetId: ASSET, alertId, at: when, by });
    const { rows, engine } = run([
      ...TREE,
      created(rule(1, 'entered')),
      created(rule(2, 'dwell_exceeded', 60)),
      read(3, T0 + 10 * S),
      tick(T0 + 80 * S),
      ack('1-7-1'),
      ack('2-7-1'),
      ack('2-7-1', new Date((T0 + 60 * S) / 1000).toISOString()),
      read(4, T0 + 100 * S),
      ack('1-7-1', new Date((T0 + 70 * S) / 1000).toISOString()),
    ]);
    expect(rows).toEqual([
      { id: '1-7-1', kind: 'entered', at: 10, location: 3, status: 'resolved', resolved: 50 },
      { id: '2-7-1', kind: 'dwell_exceeded', at: 70, location: 3, status: 'resolved', resolved: 100 },
    ]);
    expect(engine.alerts.get(`${ORG}/2-7-1`)!.acknowledgedAt).toBe(at);
    expect(engine.alerts.get(`${ORG}/2-7-1`)!.acknowledgedBy).toEqual(by);
  });

  it("a deleted asset's open alerts resolve at the deletion; rules for other assets do not judge it", () => {
    const only: Rule = { ...rule(2, 'entered'), assetIds: [99] };
    const { rows } = run([...TREE, created(rule(1, 'not_seen', 60)), created(only), read(3, T0 + 10 * S), tick(T0 + 100 * S), { type: 'asset_deleted', orgId: ORG, assetId: ASSET, recordedUs: T0 + 120 * S }]);
    expect(rows).toEqual([{ id: '1-7-1', kind: 'not_seen', at: 70, location: 3, status: 'resolved', resolved: 120 }]);
  });

  it('the next deadline of an asset is the earliest of its rules, none once raised', () => {
    const { engine } = run([...TREE, created(rule(1, 'dwell_exceeded', 600)), created(rule(2, 'not_seen', 60)), read(3, T0 + 10 * S)]);
    const asset = engine.assets.get(`${ORG}/${ASSET}`)!;
    expect(engine.nextDeadline(asset)).toBe(T0 + 70 * S);
    engine.step(tick(T0 + 70 * S), 'x');
    expect(engine.nextDeadline(asset)).toBe(T0 + 610 * S);
  });

  it('open entered and left alerts are kept as ranges: a thousand nobody acknowledges are one; acknowledged in any order, the ranges are the rest', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 60 }), fc.func(fc.boolean()), fc.array(fc.nat(), { maxLength: 80 }), (moves, acknowledges, order) => {
        const inputs: AlertsInput[] = [...TREE, created(rule(1, 'entered')), created(rule(2, 'left'))];
        for (let i = 0; i < moves; i++) inputs.push(read(3, T0 + (2 * i + 1) * S), read(4, T0 + (2 * i + 2) * S));
        const { engine } = run(inputs);
        const asset = engine.assets.get(assetKey(ORG, ASSET))!;
        expect(asset.watches[1]!.open).toEqual([[1, moves]]);
        expect(asset.watches[2]!.open).toEqual([[1, moves]]);
        expect(asset.unresolved).toEqual([]);
        // Acknowledge some of the entered ones, in a random order.
        const chosen = [...new Set(order.map((i) => (i % moves) + 1))].filter((n) => acknowledges(n));
        chosen.forEach((n, i) => engine.step({ type: 'acknowledged', orgId: ORG, assetId: ASSET, alertId: `1-${ASSET}-${n}`, at: new Date(T0 / 1000 + 1e6).toISOString(), by: { type: 'user', id: '1', name: 'x' } }, `a${i}`));
        const rest = Array.from({ length: moves }, (_, i) => i + 1).filter((n) => !chosen.includes(n));
        expect(unresolvedAlertIds(asset).filter((id) => id.startsWith('1-'))).toEqual(rest.map((n) => `1-${ASSET}-${n}`));
        for (const n of chosen) expect(engine.alerts.get(`${ORG}/1-${ASSET}-${n}`)!.status).toBe('resolved');
        // Ranges, in order, apart: never two that touch.
        const open = asset.watches[1]!.open ?? [];
        for (let i = 1; i < open.length; i++) expect(open[i]![0]).toBeGreaterThan(open[i - 1]![1] + 1);
      }),
      { numRuns: 200 },
    );
  });

  it('a state written before the ranges (open alerts listed in `unresolved`) is read as it is now', () => {
    const shared = emptyShared();
    shared.rules['1/1'] = rule(1, 'entered');
    shared.rules['1/2'] = rule(2, 'dwell_exceeded', 60);
    const asset = { ...newAsset(ORG, ASSET), watches: { 1: { n: 5 }, 2: { n: 1, dwellRaised: true } }, unresolved: ['1-7-2', '1-7-3', '1-7-5', '2-7-1'] };
    upgradeAssetState(shared, asset);
    expect(asset.unresolved).toEqual(['2-7-1']);
    expect(asset.watches[1]).toEqual({ n: 5, open: [[2, 3], [5, 5]] });
    expect(unresolvedAlertIds(asset)).toEqual(['2-7-1', '1-7-2', '1-7-3', '1-7-5']);
  });
});
