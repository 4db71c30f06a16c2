import { setParent, type Tree, type TreeChanges } from '../engine-tree.js';
import { followPosition, type Position } from '../tracking/current-location.js';
import type { AlertRuleKind } from '../../shared/domain/alerts/events.js';
import type { CommandActor } from '../../shared/event-store/command-context.js';

/**
 * The alerts subscriber's step, pure (docs/design.md "Alerts" and "Alerts: time as an event"):
 * the state of one segment and one event in, the state and the alerts it changed out. No SQL, no
 * clock: the only time it knows is the log's (observed times of reads, recorded times of events,
 * the `until_us` of clock ticks), so a rebuild or a replay takes every step again the same way.
 *
 * - A zone is a rule's location and its descendants, as the tree stands at that point of the log.
 * - An asset's current location is the report's rule, followed from a position with
 *   `followPosition` (projections/tracking/current-location.ts): late reads do not move it, a read
 *   delivered again counts once.
 * - `since[R]`, for each ancestor R of the asset's current location (itself included): when it
 *   entered R's subtree by its reads (the observed time of the read that did), or the recorded
 *   time of the tree edit that put it there. A dwell's entry is `since` of the rule's location.
 * - The clock C is the largest `until_us` of the clock ticks and recorded time of the rule events
 *   followed; a deadline D is due when C ≥ D, or when a read that becomes the asset's latest has an
 *   observed time ≥ D. The alert is raised at D.
 */

export interface Rule {
  orgId: number;
  ruleId: number;
  kind: AlertRuleKind;
  locationId: number;
  thresholdSeconds: number | null;
  assetIds: number[] | null;
  isActive: boolean;
}

/** What every segment follows: the rules, the tree (location → parent) and the clock. */
export interface SharedState {
  clockUs: number;
  /** By `org/rule`. */
  rules: Record<string, Rule>;
  /** org → location → parent (null: a root): the organizations the batch touches only (kept a row per location, projections/engine-tree.ts). */
  tree: Tree;
}

/** What an asset's rule keeps of it between events. */
export interface Watch {
  /** Alerts of this rule for this asset so far: the next one is `<rule>-<asset>-<n + 1>`. */
  n: number;
  /** A dwell alert was raised for the current stay in the zone. */
  dwellRaised?: boolean;
  /** A not_seen alert was raised for the silence after the read at this observed time. */
  silentFor?: number;
  /**
   * Its `entered` or `left` alerts not yet acknowledged (they stay open until then), as ranges of
   * n, both ends included: alerts nobody acknowledges are one range, so the state does not grow
   * with them.
   */
  open?: Array<[number, number]>;
}

export interface AssetState {
  orgId: number;
  assetId: number;
  position: Position | null;
  /** Ancestor location (as text) → when the asset entered its subtree (µs), for its current location's ancestors. */
  since: Record<string, number>;
  deleted: boolean;
  /** By rule id. */
  watches: Record<string, Watch>;
  /** Its `dwell_exceeded` and `not_seen` alerts not yet resolved, by id (a few: each resolves when the stay or the silence ends); `entered` and `left` ones are in `watches[rule].open`. */
  unresolved: string[];
}

export type AlertStatus = 'open' | 'acknowledged' | 'resolved';

export interface AlertRow {
  orgId: number;
  alertId: string;
  ruleId: number;
  kind: AlertRuleKind;
  assetId: number;
  locationId: number;
  raisedUs: number;
  status: AlertStatus;
  /** The acknowledgement's `at`, as recorded. */
  acknowledgedAt: string | null;
  acknowledgedBy: CommandActor | null;
  resolvedUs: number | null;
  raisedPosition: string;
}

/** A change an endpoint is told of (docs/design.md "Webhooks": `alert.raised`, `alert.resolved`): the alert as it was right after it. */
export interface AlertChange {
  change: 'raised' | 'resolved';
  alert: AlertRow;
}

/** One event as the step sees it: only what the alerts depend on. */
export type AlertsInput =
  | { type: 'read'; orgId: number; assetId: number; locationId: number; observedUs: number; readKey: string }
  | { type: 'rule_created'; rule: Rule; recordedUs: number }
  | { type: 'rule_updated'; orgId: number; ruleId: number; changes: Partial<Omit<Rule, 'orgId' | 'ruleId'>> & { name?: string }; recordedUs: number }
  | { type: 'rule_deleted'; orgId: number; ruleId: number; recordedUs: number }
  | { type: 'tree'; orgId: number; locationId: number; parentId: number | null; recordedUs: number }
  | { type: 'asset_deleted'; orgId: number; assetId: number; recordedUs: number }
  | { type: 'asset_restored'; orgId: number; assetId: number; recordedUs: number }
  | { type: 'acknowledged'; orgId: number; assetId: number; alertId: string; at: string; by: CommandActor }
  | { type: 'tick'; untilUs: number };

/** The fields of a rule whose change resolves its alerts and judges afresh (a name change does nothing). */
const JUDGED_FIELDS = ['kind', 'locationId', 'thresholdSeconds', 'assetIds', 'isActive'] as const;

export const ruleKey = (orgId: number, ruleId: number) => `${orgId}/${ruleId}`;
export const assetKey = (orgId: number, assetId: number) => `${orgId}/${assetId}`;
/** An alert's key among the loaded ones (ids are unique within an organization). */
export const alertKey = (orgId: number, alertId: string) => `${orgId}/${alertId}`;
/** The rule an alert id names (`<rule id>-<asset id>-<n>`): an alert's rule, without its row. */
export const ruleIdOfAlert = (alertId: string) => Number(alertId.slice(0, alertId.indexOf('-')));

export function emptyShared(): SharedState {
  return { clockUs: 0, rules: {}, tree: {} };
}

export function newAsset(orgId: number, assetId: number): AssetState {
  return { orgId, assetId, position: null, since: {}, deleted: false, watches: {}, unresolved: [] };
}

/** The n of an alert id (`<rule id>-<asset id>-<n>`). */
const nOfAlert = (alertId: string) => Number(alertId.slice(alertId.lastIndexOf('-') + 1));
const OPEN_KINDS: readonly AlertRuleKind[] = ['entered', 'left'];

/** The ids of a rule's open `entered` or `left` alerts for an asset. */
export function openAlertIds(asset: AssetState, ruleId: number): string[] {
  const ids: string[] = [];
  for (const [from, to] of asset.watches[ruleId]?.open ?? []) for (let n = from; n <= to; n++) ids.push(`${ruleId}-${asset.assetId}-${n}`);
  return ids;
}

/** Every alert of the asset not yet resolved: its `unresolved`, then each rule's open ones. */
export function unresolvedAlertIds(asset: AssetState): string[] {
  return [...asset.unresolved, ...Object.keys(asset.watches).flatMap((ruleId) => openAlertIds(asset, Number(ruleId)))];
}

/**
 * A state written before `entered` and `left` alerts were kept as ranges (they were in
 * `unresolved`), as it is now: each moves to its rule's `open` (the rule's kind as the shared state
 * has it; a rule no longer there left none unresolved). Deterministic, so a live state and a
 * rebuilt one agree after their next write.
 */
export function upgradeAssetState(shared: SharedState, asset: AssetState): void {
  const kept: string[] = [];
  for (const id of asset.unresolved) {
    const ruleId = ruleIdOfAlert(id);
    const kind = shared.rules[ruleKey(asset.orgId, ruleId)]?.kind;
    if (kind && OPEN_KINDS.includes(kind)) {
      const watch = (asset.watches[ruleId] ??= { n: 0 });
      watch.n = Math.max(watch.n, nOfAlert(id));
      addOpen(watch, nOfAlert(id));
    } else {
      kept.push(id);
    }
  }
  asset.unresolved = kept;
}

/** Adds n to the ranges (in any order; adjacent ranges merge). */
function addOpen(watch: Watch, n: number): void {
  const open = (watch.open ??= []);
  const last = open[open.length - 1];
  if (last && last[1] === n - 1) last[1] = n;
  else if (!open.some(([from, to]) => from <= n && n <= to)) {
    open.push([n, n]);
    open.sort((a, b) => a[0] - b[0]);
    for (let i = open.length - 1; i > 0; i--) {
      if (open[i - 1]![1] + 1 >= open[i]![0]) {
        open[i - 1]![1] = Math.max(open[i - 1]![1], open[i]![1]);
        open.splice(i, 1);
      }
    }
  }
}

/** Takes n out of the ranges. */
function removeOpen(watch: Watch | undefined, n: number): void {
  const open = watch?.open;
  if (!open) return;
  const i = open.findIndex(([from, to]) => from <= n && n <= to);
  if (i < 0) return;
  const [from, to] = open[i]!;
  const rest: Array<[number, number]> = [];
  if (from < n) rest.push([from, n - 1]);
  if (n < to) rest.push([n + 1, to]);
  open.splice(i, 1, ...rest);
  if (open.length === 0) delete watch!.open;
}

/** A location and its ancestors, nearest first, as the tree stands (a location not in it: itself). */
export function ancestorsOf(shared: SharedState, orgId: number, locationId: number): number[] {
  const tree = shared.tree[orgId] ?? {};
  const chain: number[] = [];
  for (let at: number | null | undefined = locationId; at != null && !chain.includes(at); at = tree[at]) chain.push(at);
  return chain;
}

/**
 * The step's state for one batch: the segment's shared state, the assets it loaded (those the
 * batch names, every asset of an org whose rules or tree change, those with a deadline up to the
 * batch's clock), and their unresolved alerts plus those acknowledged. `dirty*` say what to write.
 */
export class AlertsEngine {
  readonly dirtyAssets = new Set<string>();
  readonly dirtyAlerts = new Set<string>();
  /** The alerts raised and resolved, in the order the steps made them (the outbox's rows; the caller takes them after each step). */
  readonly changes: AlertChange[] = [];
  /** Whether the clock or the rules changed (the shared state's row to write). */
  sharedChanged = false;
  /** The tree's locations the steps changed (their rows to write: projections/engine-tree.ts). */
  readonly treeChanges: TreeChanges = new Map();
  /**
   * The active rules of each org, by rule id, with their asset lists as sets, and the rules of
   * each asset: what `rulesOf` answers, made once for the batch and again after a rule changes
   * (a step asks it several times a read, and the rules rarely change).
   */
  private rulesByOrg: Map<number, Array<{ rule: Rule; assets: Set<number> | null }>> | null = null;
  private rulesByAsset = new WeakMap<AssetState, readonly Rule[]>();

  constructor(
    readonly shared: SharedState,
    readonly assets: Map<string, AssetState>,
    /** By `alertKey`. */
    readonly alerts: Map<string, AlertRow>,
  ) {}

  /** Follows one event, at `position` (its log position, as text: the alerts it raises keep it). */
  step(input: AlertsInput, position: string): void {
    switch (input.type) {
      case 'read':
        return this.read(input, position);
      case 'tick':
        if (input.untilUs > this.shared.clockUs) {
          this.shared.clockUs = input.untilUs;
          this.sharedChanged = true;
        }
        return this.raiseDue(null, position);
      case 'rule_created':
        this.advanceClock(input.recordedUs);
        this.touchOrg(input.rule.orgId);
        this.shared.rules[ruleKey(input.rule.orgId, input.rule.ruleId)] = { ...input.rule };
        this.rulesChanged();
        return this.raiseDue(null, position);
      case 'rule_updated': {
        this.advanceClock(input.recordedUs);
        this.touchOrg(input.orgId);
        const key = ruleKey(input.orgId, input.ruleId);
        const rule = this.shared.rules[key];
        if (rule) {
          const next = { ...rule, ...Object.fromEntries(JUDGED_FIELDS.filter((f) => input.changes[f] !== undefined).map((f) => [f, input.changes[f]])) } as Rule;
          if (JUDGED_FIELDS.some((f) => JSON.stringify(next[f]) !== JSON.stringify(rule[f]))) {
            this.forgetRule(rule, input.recordedUs);
            this.shared.rules[key] = next;
            this.rulesChanged();
          }
        }
        return this.raiseDue(null, position);
      }
      case 'rule_deleted': {
        this.advanceClock(input.recordedUs);
        this.touchOrg(input.orgId);
        const key = ruleKey(input.orgId, input.ruleId);
        const rule = this.shared.rules[key];
        if (rule) {
          this.forgetRule(rule, input.recordedUs);
          delete this.shared.rules[key];
          this.rulesChanged();
        }
        return this.raiseDue(null, position);
      }
      case 'tree':
        return this.moveLocation(input, position);
      case 'asset_deleted': {
        const asset = this.asset(input.orgId, input.assetId);
        for (const id of unresolvedAlertIds(asset)) this.resolve(asset, id, input.recordedUs);
        for (const watch of Object.values(asset.watches)) clearMarks(watch);
        asset.deleted = true;
        return;
      }
      case 'asset_restored': {
        const asset = this.asset(input.orgId, input.assetId);
        asset.deleted = false;
        return this.raiseDue(asset, position);
      }
      case 'acknowledged':
        return this.acknowledge(input);
    }
  }

  /** The asset's state, created when it has none, and marked to be written. */
  asset(orgId: number, assetId: number): AssetState {
    const key = assetKey(orgId, assetId);
    let asset = this.assets.get(key);
    if (!asset) this.assets.set(key, (asset = newAsset(orgId, assetId)));
    this.dirtyAssets.add(key);
    return asset;
  }

  /** The rules that judge this asset now: active, of its org, naming it or every asset; by rule id. */
  rulesOf(asset: AssetState): readonly Rule[] {
    if (asset.deleted) return [];
    let rules = this.rulesByAsset.get(asset);
    if (!rules) {
      rules = (this.activeRules().get(asset.orgId) ?? []).filter((r) => r.assets === null || r.assets.has(asset.assetId)).map((r) => r.rule);
      this.rulesByAsset.set(asset, rules);
    }
    return rules;
  }

  private activeRules(): Map<number, Array<{ rule: Rule; assets: Set<number> | null }>> {
    if (!this.rulesByOrg) {
      this.rulesByOrg = new Map();
      for (const rule of Object.values(this.shared.rules)) {
        if (!rule.isActive) continue;
        let list = this.rulesByOrg.get(rule.orgId);
        if (!list) this.rulesByOrg.set(rule.orgId, (list = []));
        list.push({ rule, assets: rule.assetIds === null ? null : new Set(rule.assetIds) });
      }
      for (const list of this.rulesByOrg.values()) list.sort((a, b) => a.rule.ruleId - b.rule.ruleId);
    }
    return this.rulesByOrg;
  }

  /** A rule was added, changed or removed: the shared state is to be written, the rules of each asset made again. */
  private rulesChanged(): void {
    this.sharedChanged = true;
    this.rulesByOrg = null;
    this.rulesByAsset = new WeakMap();
  }

  /** The deadline of a time-based rule for this asset, or null (not in the zone, already raised, not time-based). */
  deadlineOf(asset: AssetState, rule: Rule): number | null {
    if (!asset.position || rule.thresholdSeconds === null) return null;
    const entry = asset.since[rule.locationId];
    if (entry === undefined) return null;
    const watch = asset.watches[rule.ruleId];
    const thresholdUs = rule.thresholdSeconds * 1_000_000;
    if (rule.kind === 'dwell_exceeded') return watch?.dwellRaised ? null : entry + thresholdUs;
    if (rule.kind === 'not_seen') return watch?.silentFor === asset.position.lastSeenUs ? null : asset.position.lastSeenUs + thresholdUs;
    return null;
  }

  /** The asset's earliest deadline (the ticker's index), or null. */
  nextDeadline(asset: AssetState): number | null {
    let next: number | null = null;
    for (const rule of this.rulesOf(asset)) {
      const d = this.deadlineOf(asset, rule);
      if (d !== null && (next === null || d < next)) next = d;
    }
    return next;
  }

  /** A rule of the org changed: every asset of it may have another deadline. */
  private touchOrg(orgId: number): void {
    for (const asset of this.assets.values()) if (asset.orgId === orgId) this.dirtyAssets.add(assetKey(orgId, asset.assetId));
  }

  private advanceClock(us: number): void {
    if (us > this.shared.clockUs) {
      this.shared.clockUs = us;
      this.sharedChanged = true;
    }
  }

  /** Raises every deadline ≤ `upTo` (the clock by default) of one asset, or of every asset loaded. */
  private raiseDue(only: AssetState | null, position: string, upTo = this.shared.clockUs): void {
    for (const asset of only ? [only] : this.assets.values()) {
      for (const rule of this.rulesOf(asset)) {
        const d = this.deadlineOf(asset, rule);
        if (d === null || d > upTo) continue;
        const watch = this.watch(asset, rule.ruleId);
        if (rule.kind === 'dwell_exceeded') watch.dwellRaised = true;
        else watch.silentFor = asset.position!.lastSeenUs;
        this.raise(asset, rule, d, asset.position!.locationId, position);
      }
    }
  }

  private watch(asset: AssetState, ruleId: number): Watch {
    this.dirtyAssets.add(assetKey(asset.orgId, asset.assetId));
    return (asset.watches[ruleId] ??= { n: 0 });
  }

  private raise(asset: AssetState, rule: Rule, raisedUs: number, locationId: number, position: string): void {
    const watch = this.watch(asset, rule.ruleId);
    watch.n += 1;
    const alertId = `${rule.ruleId}-${asset.assetId}-${watch.n}`;
    const row: AlertRow = {
      orgId: asset.orgId,
      alertId,
      ruleId: rule.ruleId,
      kind: rule.kind,
      assetId: asset.assetId,
      locationId,
      raisedUs,
      status: 'open',
      acknowledgedAt: null,
      acknowledgedBy: null,
      resolvedUs: null,
      raisedPosition: position,
    };
    this.alerts.set(alertKey(asset.orgId, alertId), row);
    this.changes.push({ change: 'raised', alert: { ...row } });
    if (OPEN_KINDS.includes(rule.kind)) addOpen(watch, watch.n);
    else asset.unresolved.push(alertId);
    this.dirtyAlerts.add(alertKey(asset.orgId, alertId));
  }

  private resolve(asset: AssetState, alertId: string, atUs: number): void {
    const alert = this.alerts.get(alertKey(asset.orgId, alertId));
    removeOpen(asset.watches[ruleIdOfAlert(alertId)], nOfAlert(alertId));
    asset.unresolved = asset.unresolved.filter((id) => id !== alertId);
    this.dirtyAssets.add(assetKey(asset.orgId, asset.assetId));
    if (!alert || alert.status === 'resolved') return;
    alert.status = 'resolved';
    alert.resolvedUs = atUs;
    this.dirtyAlerts.add(alertKey(asset.orgId, alertId));
    this.changes.push({ change: 'resolved', alert: { ...alert } });
  }

  /** Resolves the asset's unresolved alerts of a rule (of the kinds given, or all). */
  private resolveOf(asset: AssetState, ruleId: number, atUs: number, kinds?: readonly AlertRuleKind[]): void {
    // The rule's alerts are those whose id starts with its id (`<rule id>-…`): the others are not looked up.
    const prefix = `${ruleId}-`;
    const open = !kinds || kinds.some((kind) => OPEN_KINDS.includes(kind)) ? openAlertIds(asset, ruleId) : [];
    for (const id of [...asset.unresolved.filter((id) => id.startsWith(prefix)), ...open]) {
      const alert = this.alerts.get(alertKey(asset.orgId, id));
      if (alert && alert.ruleId === ruleId && (!kinds || kinds.includes(alert.kind))) this.resolve(asset, id, atUs);
    }
  }

  /** A rule changed (in what it judges) or deleted: its alerts resolve, and it judges afresh from here. */
  private forgetRule(rule: Rule, atUs: number): void {
    for (const asset of this.assets.values()) {
      if (asset.orgId !== rule.orgId) continue;
      this.resolveOf(asset, rule.ruleId, atUs);
      const watch = asset.watches[rule.ruleId];
      if (watch) {
        clearMarks(watch);
        this.dirtyAssets.add(assetKey(asset.orgId, asset.assetId));
      }
    }
  }

  private read(input: Extract<AlertsInput, { type: 'read' }>, position: string): void {
    const asset = this.asset(input.orgId, input.assetId);
    const before = asset.position;
    const { after, changes } = followPosition(before, [input]);
    const first = changes.some((c) => c.kind === 'first_seen');
    const moved = changes.some((c) => c.kind === 'moved');
    const advanced = changes.some((c) => c.kind === 'advanced');
    // A read at the latest instant, counted for the first time, is the latest too (a tie in observed time).
    const tie = !!before && !!after && after.lastSeenUs === before.lastSeenUs && after.keys.length > before.keys.length;
    // A read that becomes the asset's latest: its observed time shows how long the asset stayed or was silent.
    if (first || moved || advanced || tie) this.raiseDue(asset, position, input.observedUs);
    asset.position = after;
    if (first || moved) {
      const wasIn = new Set(before ? Object.keys(asset.since).map(Number) : []);
      const nowIn = ancestorsOf(this.shared, input.orgId, input.locationId);
      const since: Record<string, number> = {};
      for (const r of nowIn) since[r] = wasIn.has(r) ? asset.since[r]! : input.observedUs;
      asset.since = since;
      for (const rule of this.rulesOf(asset)) {
        const was = wasIn.has(rule.locationId);
        const is = since[rule.locationId] !== undefined;
        if (rule.kind === 'entered' && !was && is) this.raise(asset, rule, input.observedUs, input.locationId, position);
        if (rule.kind === 'left' && was && !is) this.raise(asset, rule, input.observedUs, input.locationId, position);
        if (was && !is) this.leave(asset, rule, input.observedUs);
      }
    }
    // A read after a silence ends it: a not_seen alert resolves at the read's observed time.
    if (advanced) for (const rule of this.rulesOf(asset)) if (rule.kind === 'not_seen') this.resolveOf(asset, rule.ruleId, input.observedUs, ['not_seen']);
    if (first || moved || advanced) this.raiseDue(asset, position);
  }

  /** The asset is out of a rule's zone: its dwell and silence end there. */
  private leave(asset: AssetState, rule: Rule, atUs: number): void {
    this.resolveOf(asset, rule.ruleId, atUs, ['dwell_exceeded', 'not_seen']);
    const watch = asset.watches[rule.ruleId];
    if (watch) clearMarks(watch);
  }

  /** A location moved (or created, or restored) under a parent: the zones change from here, nobody moved. */
  private moveLocation(input: Extract<AlertsInput, { type: 'tree' }>, position: string): void {
    setParent(this.shared.tree, this.treeChanges, input.orgId, input.locationId, input.parentId);
    for (const asset of this.assets.values()) {
      if (asset.orgId !== input.orgId || !asset.position) continue;
      const nowIn = ancestorsOf(this.shared, asset.orgId, asset.position.locationId);
      const since: Record<string, number> = {};
      for (const r of nowIn) since[r] = asset.since[r] ?? input.recordedUs;
      const was = asset.since;
      if (JSON.stringify(Object.keys(since).sort()) === JSON.stringify(Object.keys(was).sort())) continue;
      this.dirtyAssets.add(assetKey(asset.orgId, asset.assetId));
      asset.since = since;
      for (const rule of this.rulesOf(asset)) if (was[rule.locationId] !== undefined && since[rule.locationId] === undefined) this.leave(asset, rule, input.recordedUs);
      this.raiseDue(asset, position);
    }
  }

  private acknowledge(input: Extract<AlertsInput, { type: 'acknowledged' }>): void {
    const alert = this.alerts.get(alertKey(input.orgId, input.alertId));
    if (!alert || alert.acknowledgedAt !== null) return;
    alert.acknowledgedAt = input.at;
    alert.acknowledgedBy = input.by;
    this.dirtyAlerts.add(alertKey(input.orgId, input.alertId));
    if (alert.status === 'resolved') return;
    if (alert.kind === 'entered' || alert.kind === 'left') {
      this.resolve(this.asset(alert.orgId, alert.assetId), alert.alertId, isoToMicros(input.at));
    } else {
      alert.status = 'acknowledged';
    }
  }
}

function clearMarks(watch: Watch): void {
  delete watch.dwellRaised;
  delete watch.silentFor;
}

/** Microseconds since the epoch of an RFC 3339 instant (its fraction kept to the microsecond). */
export function isoToMicros(iso: string): number {
  const match = /\.(\d+)/.exec(iso);
  const fraction = match ? match[1]!.padEnd(6, '0').slice(0, 6) : '000000';
  const ms = Date.parse(iso.replace(/\.\d+/, ''));
  return ms * 1000 + Number(fraction);
}
