import type { CommandPort } from '../port.js';
import { executeCommand, loadStream, waitForStream } from '../command.js';
import { alertDecider, alertRulesDecider, type AlertRuleCommand, type AlertRulesState, type ZoneLookup } from './decider.js';
import { alertRuleEvents, alertRulesStream, alertStream, AlertAcknowledged } from './events.js';
import { MAX_RULES_PER_ORG, type CreateRuleBody, type PatchRuleBody, type ZoneRef } from './schema.js';

/**
 * Alert rule and alert command handlers (docs/api.md "Alerts"): read what the decision needs
 * (the organization's rule stream, the zone's location, which assets exist), decide, append
 * (executeCommand retries a lost race and waits for the projections, so the caller's next read
 * sees the change).
 */

async function lookUpZone(ctx: CommandPort, orgId: number, ref: ZoneRef): Promise<ZoneLookup> {
  const by = ref.field === 'location_id' ? { id: ref.id } : { externalKey: ref.externalKey };
  const found = await ctx.readModels.findExistingLocation(orgId, by);
  return { ref, found: found ? { id: found.id } : null };
}

async function missingAssets(ctx: CommandPort, orgId: number, assetIds: readonly number[]): Promise<number[]> {
  if (assetIds.length === 0) return [];
  const existing = new Set(await ctx.readModels.findExistingAssetIds(orgId, assetIds));
  return assetIds.filter((id) => !existing.has(id));
}

async function decideOnRules(ctx: CommandPort, orgId: number, command: (state: AlertRulesState) => Promise<AlertRuleCommand>): Promise<void> {
  const streamId = alertRulesStream(orgId);
  await executeCommand(ctx, async () => {
    const { state, expectedRevision } = await loadStream(ctx, streamId, alertRulesDecider, alertRuleEvents);
    const events = alertRulesDecider.decide(await command(state), state);
    return { appends: [{ streamId, expectedRevision, events }], result: undefined };
    // One stream per organization: this process's writers of it queue instead of retrying each other.
  }, { serializeOn: streamId });
}

/** POST /alert-rules: a new rule id (from its sequence); at most MAX_RULES_PER_ORG rules, decided on the organization's stream. */
export async function createAlertRule(ctx: CommandPort, orgId: number, body: CreateRuleBody): Promise<number> {
  const ruleId = await ctx.ids.nextId('alert_rule_ids');
  const at = new Date().toISOString();
  await decideOnRules(ctx, orgId, async () => {
    const [zone, missingAssetIds] = await Promise.all([lookUpZone(ctx, orgId, body.zone), missingAssets(ctx, orgId, body.asset_ids ?? [])]);
    return {
      type: 'CreateAlertRule',
      orgId,
      ruleId,
      name: body.name,
      kind: body.kind,
      zone,
      thresholdSeconds: body.threshold_seconds,
      assetIds: body.asset_ids,
      missingAssetIds,
      isActive: body.is_active,
      max: MAX_RULES_PER_ORG,
      at,
    };
  });
  return ruleId;
}

/** PATCH /alert-rules/{id}: the merged rule is judged as a create would be; equal values append nothing. */
export async function updateAlertRule(ctx: CommandPort, orgId: number, ruleId: number, body: PatchRuleBody): Promise<void> {
  await decideOnRules(ctx, orgId, async (state) => {
    const current = state.rules.get(ruleId);
    // Only the assets the rule does not name yet must exist: a verbatim round trip of a rule one of whose assets was deleted since still passes.
    const added = body.asset_ids?.filter((id) => !(current?.asset_ids ?? []).includes(id)) ?? [];
    // The zone it has already, named by id, needs no look-up (its location may have been deleted since).
    const sameZone = body.zone?.field === 'location_id' && body.zone.id === current?.location_id;
    const [zone, missingAssetIds] = await Promise.all([body.zone && !sameZone ? lookUpZone(ctx, orgId, body.zone) : undefined, current ? missingAssets(ctx, orgId, added) : []]);
    return {
      type: 'UpdateAlertRule',
      orgId,
      ruleId,
      patch: { name: body.name, kind: body.kind, zone, threshold_seconds: body.threshold_seconds, asset_ids: body.asset_ids, is_active: body.is_active },
      missingAssetIds,
      at: new Date().toISOString(),
    };
  });
}

export async function deleteAlertRule(ctx: CommandPort, orgId: number, ruleId: number): Promise<void> {
  await decideOnRules(ctx, orgId, async () => ({ type: 'DeleteAlertRule', orgId, ruleId, at: new Date().toISOString() }));
}

/**
 * POST /alerts/{id}/acknowledge: `AlertAcknowledged` on the alert's own stream, expecting none.
 * When the stream exists (acknowledged before, or a concurrent acknowledgement won the race) it
 * appends nothing and waits until what is there is projected, so every caller reads the same
 * alert afterwards. `alert`: the alert as the read model holds it (the handler found it).
 */
export async function acknowledgeAlert(ctx: CommandPort, orgId: number, alert: { id: string; ruleId: number; assetId: number }): Promise<void> {
  const streamId = alertStream(orgId, alert.id);
  const { append } = await executeCommand(ctx, async () => {
    const { state, expectedRevision } = await loadStream(ctx, streamId, alertDecider, [AlertAcknowledged]);
    const events = alertDecider.decide({ type: 'AcknowledgeAlert', orgId, alertId: alert.id, ruleId: alert.ruleId, assetId: alert.assetId, at: new Date().toISOString() }, state);
    return { appends: [{ streamId, expectedRevision, events }], result: undefined };
  });
  if (!append) await waitForStream(ctx, streamId);
}
