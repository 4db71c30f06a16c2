import { z } from 'zod';
import { MAX_ID, fieldErrors } from '../../errors.js';
import { bodyId, externalKey, name, viewFields } from '../fields.js';
import { readOnlyField } from '../patch.js';
import { ACTOR_TYPES } from '../../event-store/command-context.js';
import { ALERT_RULE_KINDS } from './events.js';

/**
 * The alert rules' bodies and views, and the alert's view (docs/api.md "Alerts"): the same
 * schemas validate requests, type the answers and feed the OpenAPI document. A body decodes its
 * zone once, here, into one reference (`zone`); the decider judges what it names.
 */

export const MAX_RULES_PER_ORG = 100;
export const THRESHOLD_MIN_SECONDS = 60;
export const THRESHOLD_MAX_SECONDS = 2_592_000;
export const MAX_RULE_ASSETS = 1000;

export const ALERT_STATUSES = ['open', 'acknowledged', 'resolved'] as const;
export type AlertStatus = (typeof ALERT_STATUSES)[number];

/** How a body names the zone: by id, by key, or (PATCH only, a GET→PATCH round trip) by both, which must name one location. */
export type ZoneRef =
  | { field: 'location_id'; id: number }
  | { field: 'location_external_key'; externalKey: string }
  | { field: 'both'; id: number; externalKey: string };

export const RULE_FIELD_ORDER = ['id', 'name', 'kind', 'location_id', 'location_external_key', 'threshold_seconds', 'asset_ids', 'is_active', 'created_at', 'updated_at'] as const;

const kind = z.enum(ALERT_RULE_KINDS);
const threshold = z.number().int().min(THRESHOLD_MIN_SECONDS).max(THRESHOLD_MAX_SECONDS).meta({ description: 'required for dwell_exceeded and not_seen; absent or null for entered and left' });
const assetIds = z
  .array(bodyId)
  .min(1)
  .max(MAX_RULE_ASSETS)
  .meta({ uniqueItems: true, description: 'null: every asset of the organization; else 1..1000 distinct ids of existing assets' })
  .superRefine((ids, ctx) => {
    // Judged once every id is one (an id out of range is its own error, and two beyond 2^53 may read as one).
    if (ids.every((id) => Number.isSafeInteger(id) && id >= 1 && id <= MAX_ID) && new Set(ids).size !== ids.length) {
      ctx.addIssue({ code: 'custom', message: 'asset_ids must not repeat an id' });
    }
  });

function ambiguousZone(ctx: z.RefinementCtx): typeof z.NEVER {
  for (const error of fieldErrors.ambiguous(['location_id', 'location_external_key'])) {
    ctx.addIssue({ code: 'custom', path: [error.field], message: error.message, params: { code: error.code } });
  }
  return z.NEVER;
}

export const createRuleSchema = z
  .strictObject({
    name,
    kind,
    location_id: bodyId.optional(),
    location_external_key: externalKey('location_external_key').optional(),
    threshold_seconds: threshold.nullable().optional(),
    asset_ids: assetIds.nullable().optional(),
    is_active: z.boolean().optional(),
  })
  // The document states what the transform and the decider check: the zone by exactly one of the
  // two (found by Schemathesis, which sent a body with neither as schema-valid), and a threshold
  // for the time-based kinds only.
  .meta({
    oneOf: [
      { required: ['location_id'], properties: { location_id: { type: 'integer' } } },
      { required: ['location_external_key'], properties: { location_external_key: { type: 'string' } } },
    ],
    allOf: [
      { if: { properties: { kind: { enum: ['dwell_exceeded', 'not_seen'] } } }, then: { required: ['threshold_seconds'], properties: { threshold_seconds: { type: 'integer' } } } },
      { if: { properties: { kind: { enum: ['entered', 'left'] } } }, then: { properties: { threshold_seconds: { type: 'null' } } } },
    ],
  })
  .transform((body, ctx) => {
    // Runs once the rest of the body is valid, so a zone named twice or not at all is reported alone.
    if (body.location_id !== undefined && body.location_external_key !== undefined) return ambiguousZone(ctx);
    let zone: ZoneRef;
    if (body.location_id !== undefined) zone = { field: 'location_id', id: body.location_id };
    else if (body.location_external_key !== undefined) zone = { field: 'location_external_key', externalKey: body.location_external_key };
    else {
      ctx.addIssue({ code: 'custom', path: ['location_id'], message: 'location_id or location_external_key is required', params: { code: 'required' } });
      return z.NEVER;
    }
    return { name: body.name, kind: body.kind, zone, threshold_seconds: body.threshold_seconds ?? null, asset_ids: body.asset_ids ?? null, is_active: body.is_active ?? true };
  });

export type CreateRuleBody = z.output<typeof createRuleSchema>;

export const patchRuleSchema = z
  .strictObject({
    id: readOnlyField.optional().meta({ readOnly: true, description: 'Read-only: accepted when it equals the current value' }),
    name: name.optional(),
    kind: kind.optional(),
    location_id: bodyId.optional(),
    location_external_key: externalKey('location_external_key').nullable().optional().meta({ description: "null names nothing (a round trip of a rule whose zone was deleted): the zone is then location_id's, or unchanged" }),
    threshold_seconds: threshold.nullable().optional(),
    asset_ids: assetIds.nullable().optional(),
    is_active: z.boolean().optional(),
    created_at: readOnlyField.optional().meta({ readOnly: true, description: 'Read-only: accepted when it names the same instant' }),
    updated_at: readOnlyField.optional().meta({ readOnly: true, description: 'Read-only: accepted when it names the same instant' }),
  })
  .transform((body) => {
    // A null key names nothing: the zone stays as it is unless location_id names one.
    const { location_id: id, location_external_key: key } = body;
    let zone: ZoneRef | undefined;
    if (id !== undefined && key != null) zone = { field: 'both', id, externalKey: key };
    else if (id !== undefined) zone = { field: 'location_id', id };
    else if (key != null) zone = { field: 'location_external_key', externalKey: key };
    return { ...body, zone };
  });

export type PatchRuleBody = z.output<typeof patchRuleSchema>;

export const ruleViewSchema = z.object({
  id: viewFields.id,
  name: z.string(),
  kind,
  location_id: viewFields.id,
  location_external_key: viewFields.externalKey.nullable().meta({ description: "the zone's current key; null once that location is deleted" }),
  threshold_seconds: z.number().int().nullable(),
  asset_ids: z.array(viewFields.id).nullable(),
  is_active: z.boolean(),
  created_at: viewFields.timestamp,
  updated_at: viewFields.timestamp,
});

export type RuleView = z.infer<typeof ruleViewSchema>;

/** Who acknowledged an alert, as the audit log names an actor (docs/api.md "Audit log"). */
export const actorViewSchema = z.object({
  type: z.enum(ACTOR_TYPES),
  id: z.string().nullable().meta({ description: 'an API key id, a user id; null for the CLI and the service itself' }),
  name: z.string().nullable().meta({ description: "an API key's name, a person's email, \"cli\"; null for the service itself" }),
});

export const alertViewSchema = z.object({
  id: z.string().meta({ description: '<rule id>-<asset id>-<n>: the n-th alert of that rule for that asset' }),
  rule_id: viewFields.id,
  kind,
  asset_id: viewFields.id,
  asset_external_key: viewFields.externalKey.nullable(),
  location_id: viewFields.id,
  location_external_key: viewFields.externalKey.nullable(),
  raised_at: viewFields.timestamp,
  status: z.enum(ALERT_STATUSES),
  acknowledged_at: viewFields.timestamp.nullable(),
  acknowledged_by: actorViewSchema.nullable(),
  resolved_at: viewFields.timestamp.nullable(),
});

export type AlertView = z.infer<typeof alertViewSchema>;
