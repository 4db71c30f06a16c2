import { fieldErrors, type FieldError } from '../../errors.js';
import type { Decider } from '../decider.js';
import { refuse, type DomainRefusal } from '../refusal.js';
import type { z } from 'zod';
import type { AlertAcknowledged, AlertRuleChanges, AlertRuleEvent, AlertRuleKind } from './events.js';
import { RULE_FIELD_ORDER, type ZoneRef } from './schema.js';

/**
 * An organization's alert rules (stream `alert-rules-<org>`; docs/api.md "Alerts"): the rules as
 * their events leave them, and the decisions on them. What a decision needs from the read
 * models (the location a zone reference names, which of the rule's assets exist) is read by the
 * handler and passed in on the command.
 */

export interface RuleConfig {
  name: string;
  kind: AlertRuleKind;
  location_id: number;
  threshold_seconds: number | null;
  asset_ids: number[] | null;
  is_active: boolean;
}

export interface AlertRulesState {
  rules: ReadonlyMap<number, RuleConfig>;
}

/** A zone reference and the existing location of the org the handler found for it (for `both`: by its key). */
export interface ZoneLookup {
  ref: ZoneRef;
  found: { id: number } | null;
}

export type AlertRuleCommand =
  | {
      type: 'CreateAlertRule';
      orgId: number;
      ruleId: number;
      name: string;
      kind: AlertRuleKind;
      zone: ZoneLookup;
      thresholdSeconds: number | null;
      assetIds: number[] | null;
      /** Those of `assetIds` that are no existing asset of the org. */
      missingAssetIds: number[];
      isActive: boolean;
      /** At most this many rules per organization. */
      max: number;
      at: string;
    }
  | {
      type: 'UpdateAlertRule';
      orgId: number;
      ruleId: number;
      /** A merge patch: absent fields are unchanged. */
      patch: { name?: string; kind?: AlertRuleKind; zone?: ZoneLookup; threshold_seconds?: number | null; asset_ids?: number[] | null; is_active?: boolean };
      /** Those of the patch's `asset_ids` not in the rule already that are no existing asset of the org. */
      missingAssetIds: number[];
      at: string;
    }
  | { type: 'DeleteAlertRule'; orgId: number; ruleId: number; at: string };

export function ruleNotFound(): DomainRefusal {
  return refuse.notFound('Alert rule not found');
}

export const initialState: AlertRulesState = { rules: new Map() };

export function evolve(state: AlertRulesState, event: AlertRuleEvent): AlertRulesState {
  const rules = new Map(state.rules);
  switch (event.type) {
    case 'AlertRuleCreated': {
      const d = event.data;
      rules.set(d.rule_id, { name: d.name, kind: d.kind, location_id: d.location_id, threshold_seconds: d.threshold_seconds, asset_ids: d.asset_ids, is_active: d.is_active });
      break;
    }
    case 'AlertRuleUpdated': {
      const current = rules.get(event.data.rule_id);
      if (current) rules.set(event.data.rule_id, { ...current, ...definedOnly(event.data.changes) });
      break;
    }
    case 'AlertRuleDeleted':
      rules.delete(event.data.rule_id);
      break;
  }
  return { rules };
}

function definedOnly(changes: AlertRuleChanges): Partial<RuleConfig> {
  return Object.fromEntries(Object.entries(changes).filter(([, value]) => value !== undefined)) as Partial<RuleConfig>;
}

/** The existing location a zone reference names, or the field errors for it. */
function zoneOf({ ref, found }: ZoneLookup): number | FieldError[] {
  if (ref.field === 'both') return found && found.id === ref.id ? found.id : fieldErrors.ambiguous(['location_id', 'location_external_key']);
  if (found) return found.id;
  return [
    fieldErrors.fkNotFound(
      ref.field,
      ref.field === 'location_id' ? `location_id ${ref.id} does not reference a live location` : `location_external_key "${ref.externalKey}" does not reference a live location`,
    ),
  ];
}

const TIMED: ReadonlySet<AlertRuleKind> = new Set(['dwell_exceeded', 'not_seen']);

/** The threshold rule on a whole rule (a create's, or a PATCH's merged one). */
function thresholdErrors(kind: AlertRuleKind, threshold: number | null): FieldError[] {
  if (TIMED.has(kind) && threshold === null) return [{ ...fieldErrors.required('threshold_seconds'), message: `threshold_seconds is required for a ${kind} rule` }];
  if (!TIMED.has(kind) && threshold !== null) return [fieldErrors.invalidValue('threshold_seconds', `threshold_seconds is only for dwell_exceeded and not_seen rules, not ${kind}`)];
  return [];
}

function missingAssetsErrors(missing: readonly number[]): FieldError[] {
  if (missing.length === 0) return [];
  const shown = missing.slice(0, 10).join(', ');
  const more = missing.length > 10 ? ` (and ${missing.length - 10} more)` : '';
  return [fieldErrors.fkNotFound('asset_ids', `asset_ids ${shown}${more} ${missing.length === 1 ? 'does' : 'do'} not reference an existing asset`)];
}

function inFieldOrder(errors: FieldError[]): FieldError[] {
  const rank = (field: string) => RULE_FIELD_ORDER.indexOf(field as (typeof RULE_FIELD_ORDER)[number]);
  return [...errors].sort((a, b) => rank(a.field) - rank(b.field));
}

function sameValue(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * A rule's field errors are all reported at once, in the rule's field order; a create beyond the
 * limit is refused (409) once its fields are valid; an update or delete of a rule the
 * organization does not have is not found (404); an update whose values equal the current ones
 * appends nothing (the rule's `updated_at` stays).
 */
export function decide(command: AlertRuleCommand, state: AlertRulesState): AlertRuleEvent[] {
  switch (command.type) {
    case 'CreateAlertRule': {
      const zone = zoneOf(command.zone);
      const errors = [...(Array.isArray(zone) ? zone : []), ...thresholdErrors(command.kind, command.thresholdSeconds), ...missingAssetsErrors(command.missingAssetIds)];
      if (errors.length > 0) throw refuse.invalid(inFieldOrder(errors));
      if (state.rules.size >= command.max) throw refuse.conflict(`An organization has at most ${command.max} alert rules; delete one first`);
      return [
        {
          type: 'AlertRuleCreated',
          data: {
            org_id: command.orgId,
            rule_id: command.ruleId,
            name: command.name,
            kind: command.kind,
            location_id: zone as number,
            threshold_seconds: command.thresholdSeconds,
            asset_ids: command.assetIds,
            is_active: command.isActive,
            at: command.at,
          },
        },
      ];
    }
    case 'UpdateAlertRule': {
      const current = state.rules.get(command.ruleId);
      if (!current) throw ruleNotFound();
      const { zone: zoneLookup, ...patch } = command.patch;
      const zone = zoneLookup ? zoneOf(zoneLookup) : current.location_id;
      const merged: RuleConfig = { ...current, ...definedOnly(patch), ...(typeof zone === 'number' ? { location_id: zone } : {}) };
      const errors = [...(Array.isArray(zone) ? zone : []), ...thresholdErrors(merged.kind, merged.threshold_seconds), ...missingAssetsErrors(command.missingAssetIds)];
      if (errors.length > 0) throw refuse.invalid(inFieldOrder(errors));
      const changes: Record<string, unknown> = {};
      for (const field of Object.keys(merged) as Array<keyof RuleConfig>) {
        if (!sameValue(current[field], merged[field])) changes[field] = merged[field];
      }
      if (Object.keys(changes).length === 0) return [];
      return [{ type: 'AlertRuleUpdated', data: { org_id: command.orgId, rule_id: command.ruleId, changes: changes as AlertRuleChanges, at: command.at } }];
    }
    case 'DeleteAlertRule':
      if (!state.rules.has(command.ruleId)) throw ruleNotFound();
      return [{ type: 'AlertRuleDeleted', data: { org_id: command.orgId, rule_id: command.ruleId, at: command.at } }];
  }
}

export const alertRulesDecider: Decider<AlertRulesState, AlertRuleCommand, AlertRuleEvent> = { initialState, evolve, decide };

export type AlertAcknowledgedEvent = { type: 'AlertAcknowledged'; data: z.output<typeof AlertAcknowledged.schema> };

/** An alert's own stream (`alert-<org>-<alert id>`): whether it was acknowledged. */
export interface AlertState {
  acknowledged: boolean;
}

export type AlertCommand = { type: 'AcknowledgeAlert'; orgId: number; alertId: string; ruleId: number; assetId: number; at: string };

/** An alert is acknowledged once: a second acknowledgement appends nothing (docs/api.md "Alerts"). */
export const alertDecider: Decider<AlertState, AlertCommand, AlertAcknowledgedEvent> = {
  initialState: { acknowledged: false },
  evolve: () => ({ acknowledged: true }),
  decide(command, state) {
    if (state.acknowledged) return [];
    return [{ type: 'AlertAcknowledged', data: { org_id: command.orgId, alert_id: command.alertId, rule_id: command.ruleId, asset_id: command.assetId, at: command.at } }];
  },
};
