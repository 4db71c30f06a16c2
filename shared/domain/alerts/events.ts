import { z } from 'zod';
import { defineEvent } from '../../event-store/catalogue.js';

/**
 * Alert rules, acknowledgements and the alerts clock as events (docs/design.md "Alerts";
 * docs/api.md "Alerts"). An organization's rules share one stream, `alert-rules-<org>`, so the
 * limit on their number (100) is decided on it. An alert is not an event: it is derived from the
 * log by the `alerts` subscriber, so a rebuild gives the same alerts with the same ids; only what a
 * person or a key does to one (acknowledging it) and the clock that time-based alerts wait for are
 * appended.
 */

const orgId = z.number().int().positive();
const ruleId = z.number().int().positive();
const assetIds = z.array(z.number().int().positive()).min(1).max(1000).nullable();

export const ALERT_RULE_KINDS = ['entered', 'left', 'dwell_exceeded', 'not_seen'] as const;
export type AlertRuleKind = (typeof ALERT_RULE_KINDS)[number];
const kind = z.enum(ALERT_RULE_KINDS);

export const AlertRuleCreated = defineEvent(
  'AlertRuleCreated',
  1,
  z.object({
    org_id: orgId,
    rule_id: ruleId,
    name: z.string().min(1),
    kind,
    /** The zone: this location and its descendants, as the tree stands at each event. */
    location_id: z.number().int().positive(),
    /** Required for `dwell_exceeded` and `not_seen`, null for `entered` and `left`. */
    threshold_seconds: z.number().int().positive().nullable(),
    /** null: every asset of the organization. */
    asset_ids: assetIds,
    is_active: z.boolean(),
    at: z.string(),
  }),
);

/** The fields a PATCH changed, each to its new value (absent: unchanged). */
export const alertRuleChanges = z.object({
  name: z.string().min(1).optional(),
  kind: kind.optional(),
  location_id: z.number().int().positive().optional(),
  threshold_seconds: z.number().int().positive().nullable().optional(),
  asset_ids: assetIds.optional(),
  is_active: z.boolean().optional(),
});

export const AlertRuleUpdated = defineEvent('AlertRuleUpdated', 1, z.object({ org_id: orgId, rule_id: ruleId, changes: alertRuleChanges, at: z.string() }));

export const AlertRuleDeleted = defineEvent('AlertRuleDeleted', 1, z.object({ org_id: orgId, rule_id: ruleId, at: z.string() }));

/**
 * An alert acknowledged, on the alert's own stream `alert-<org>-<alert id>` (appended once: a
 * second acknowledgement finds the stream and answers the alert unchanged). `asset_id` routes it
 * to the segment of the `alerts` subscriber that holds the alert. Who acknowledged it is the
 * event's actor (its metadata, as for every command).
 */
export const AlertAcknowledged = defineEvent(
  'AlertAcknowledged',
  1,
  z.object({ org_id: orgId, alert_id: z.string().min(1), rule_id: ruleId, asset_id: z.number().int().positive(), at: z.string() }),
);

/**
 * The alerts clock (stream `alerts-clock`): appended by a process running the `alerts` subscriber
 * when the service's clock has passed a time-based alert's `raised_at` (docs/design.md "Alerts:
 * time as an event"). The subscriber raises every time-based alert due at or before `until_us`
 * when it follows this event, so a rebuild raises them at the same place in the log as the live
 * service did. More than one tick for the same instant is harmless.
 */
export const AlertClockTicked = defineEvent(
  'AlertClockTicked',
  1,
  z.object({
    /** Microseconds since the epoch: the service's clock when the tick was appended. */
    until_us: z.number().int().positive(),
    at: z.string(),
  }),
);

export type AlertRuleChanges = z.output<typeof alertRuleChanges>;

export type AlertRuleEvent =
  | { type: 'AlertRuleCreated'; data: z.output<typeof AlertRuleCreated.schema> }
  | { type: 'AlertRuleUpdated'; data: z.output<typeof AlertRuleUpdated.schema> }
  | { type: 'AlertRuleDeleted'; data: z.output<typeof AlertRuleDeleted.schema> };

export const alertRuleEvents = [AlertRuleCreated, AlertRuleUpdated, AlertRuleDeleted];
export const alertEvents = [AlertAcknowledged, AlertClockTicked];

export const alertRulesStream = (orgId: number): string => `alert-rules-${orgId}`;
export const alertStream = (orgId: number, alertId: string): string => `alert-${orgId}-${alertId}`;
export const ALERTS_CLOCK_STREAM = 'alerts-clock';
