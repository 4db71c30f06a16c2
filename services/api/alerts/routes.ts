import { NotFoundError, ValidationFailed, fieldErrors, type FieldError } from '../../../shared/errors.js';
import type { ServiceContext } from '../../../shared/service-context.js';
import { orgOf } from '../../../shared/auth/org.js';
import { defineRoute, textParam, type RouteDefinition } from '../../../shared/http/routes.js';
import { dataEnvelopeSchema, jsonSchemaOf } from '../../../shared/http/openapi.js';
import { listEnvelopeSchema, pageOf, pagingQuery } from '../../../shared/http/lists.js';
import { queryParams } from '../../../shared/http/validation.js';
import { sameInstant } from '../../../shared/domain/patch.js';
import { ALERT_STATUSES, RULE_FIELD_ORDER, alertViewSchema, createRuleSchema, patchRuleSchema, ruleViewSchema, type AlertView, type RuleView } from '../../../shared/domain/alerts/schema.js';
import { acknowledgeAlert, createAlertRule, deleteAlertRule, updateAlertRule } from '../../../shared/domain/alerts/commands.js';
import { alertsExport, findAlert, findRule, listAlerts, listRules, rulesExport } from '../../../projections/alert-rules/queries.js';

/** The /alert-rules and /alerts routes (docs/api.md "Alerts"). */

const { limit, offset } = pagingQuery([]);
const pageQuery = { limit, offset };

const alertQuery = {
  status: queryParams.oneOf(ALERT_STATUSES),
  rule_id: { ...queryParams.id(), description: 'the alerts of this rule' },
  asset_id: { ...queryParams.id(), description: 'the alerts of this asset' },
  since: { ...queryParams.timestamp(), description: 'RFC 3339; alerts raised at or after it' },
  until: { ...queryParams.timestamp(), description: 'RFC 3339; alerts raised at or before it' },
  limit,
  offset,
};

const ruleJsonSchema = jsonSchemaOf(ruleViewSchema);
const alertJsonSchema = jsonSchemaOf(alertViewSchema);
const singleRule = dataEnvelopeSchema(ruleJsonSchema);
const singleAlert = dataEnvelopeSchema(alertJsonSchema);
const ruleNotFound = { description: 'No such alert rule in this organization' };
const alertNotFound = { description: 'No such alert in this organization (an id that is not <rule>-<asset>-<n> included)' };

function noSuchRule(): NotFoundError {
  return new NotFoundError('Alert rule not found');
}

function noSuchAlert(): NotFoundError {
  return new NotFoundError('Alert not found');
}

export function alertRoutes(ctx: ServiceContext): RouteDefinition[] {
  async function ruleOr404(orgId: number, id: number): Promise<RuleView> {
    const rule = await findRule(ctx.pool, orgId, id);
    if (!rule) throw noSuchRule();
    return rule;
  }

  async function alertOr404(orgId: number, id: string): Promise<AlertView> {
    const alert = await findAlert(ctx.pool, orgId, id);
    if (!alert) throw noSuchAlert();
    return alert;
  }

  return [
    defineRoute({
      method: 'GET',
      path: '/alert-rules',
      operationId: 'listAlertRules',
      summary: 'List alert rules',
      tag: 'Alerts',
      scope: 'alerts:read',
      query: pageQuery,
      responses: { 200: { description: 'a page of rules, oldest first', schema: listEnvelopeSchema(ruleJsonSchema) } },
      async handler({ principal, query }) {
        const page = pageOf(query);
        const { data, total } = await listRules(ctx.pool, orgOf(principal, 'forbidden'), page.limit, page.offset);
        return { status: 200, body: { data, limit: page.limit, offset: page.offset, total_count: total } };
      },
      export: { pool: ctx.pool, source: async ({ principal }) => rulesExport(orgOf(principal, 'forbidden')) },
    }),

    defineRoute({
      method: 'POST',
      path: '/alert-rules',
      operationId: 'createAlertRule',
      summary: 'Create an alert rule on a zone (a location and its descendants)',
      tag: 'Alerts',
      scope: 'alerts:write',
      body: createRuleSchema,
      bodyFieldOrder: RULE_FIELD_ORDER,
      responses: {
        201: { description: 'Created; Location names the new rule', schema: singleRule },
        409: { description: 'The organization already has 100 alert rules' },
      },
      async handler({ principal, body }) {
        const orgId = orgOf(principal, 'forbidden');
        const id = await createAlertRule(ctx, orgId, body);
        return { status: 201, body: { data: await ruleOr404(orgId, id) }, headers: { Location: `/api/v1/alert-rules/${id}` } };
      },
    }),

    defineRoute({
      method: 'GET',
      path: '/alert-rules/{rule_id}',
      operationId: 'getAlertRule',
      summary: 'Read an alert rule',
      tag: 'Alerts',
      scope: 'alerts:read',
      responses: { 200: { description: 'the rule', schema: singleRule }, 404: ruleNotFound },
      async handler({ principal, params }) {
        return { status: 200, body: { data: await ruleOr404(orgOf(principal, 'forbidden'), params.rule_id!) } };
      },
    }),

    defineRoute({
      method: 'PATCH',
      path: '/alert-rules/{rule_id}',
      operationId: 'updateAlertRule',
      summary: 'Update an alert rule (JSON merge patch); the merged rule is validated as a create',
      tag: 'Alerts',
      scope: 'alerts:write',
      body: patchRuleSchema,
      bodyFieldOrder: RULE_FIELD_ORDER,
      responses: {
        200: { description: 'the updated rule', schema: singleRule },
        400: { description: 'read_only: a read-only field whose value differs' },
        404: ruleNotFound,
      },
      async stateBodyErrors({ principal, params, body }) {
        const rule = await findRule(ctx.pool, orgOf(principal, 'forbidden'), params.rule_id!);
        return rule ? readOnlyErrors(rule, body) : [];
      },
      async handler({ principal, params, body }) {
        const orgId = orgOf(principal, 'forbidden');
        const id = params.rule_id!;
        const current = await ruleOr404(orgId, id);
        const readOnly = readOnlyErrors(current, body);
        if (readOnly.length > 0) throw new ValidationFailed(readOnly);
        await updateAlertRule(ctx, orgId, id, body);
        return { status: 200, body: { data: await ruleOr404(orgId, id) } };
      },
    }),

    defineRoute({
      method: 'DELETE',
      path: '/alert-rules/{rule_id}',
      operationId: 'deleteAlertRule',
      summary: 'Delete an alert rule; its open alerts are resolved',
      tag: 'Alerts',
      scope: 'alerts:write',
      responses: { 204: { description: 'deleted; it no longer counts toward the limit' }, 404: ruleNotFound },
      async handler({ principal, params }) {
        await deleteAlertRule(ctx, orgOf(principal, 'forbidden'), params.rule_id!);
        return { status: 204 };
      },
    }),

    defineRoute({
      method: 'GET',
      path: '/alerts',
      operationId: 'listAlerts',
      summary: 'List alerts, newest first',
      tag: 'Alerts',
      scope: 'alerts:read',
      query: alertQuery,
      responses: { 200: { description: 'a page of alerts, newest raised_at first', schema: listEnvelopeSchema(alertJsonSchema) } },
      async handler({ principal, query }) {
        const page = pageOf(query);
        const { data, total } = await listAlerts(ctx.pool, orgOf(principal, 'forbidden'), query, page.limit, page.offset);
        return { status: 200, body: { data, limit: page.limit, offset: page.offset, total_count: total } };
      },
      export: { pool: ctx.pool, source: async ({ principal, query }) => alertsExport(orgOf(principal, 'forbidden'), query) },
    }),

    defineRoute({
      method: 'GET',
      path: '/alerts/{alert_id}',
      operationId: 'getAlert',
      summary: 'Read an alert',
      tag: 'Alerts',
      scope: 'alerts:read',
      responses: { 200: { description: 'the alert', schema: singleAlert }, 404: alertNotFound },
      async handler({ principal, params }) {
        return { status: 200, body: { data: await alertOr404(orgOf(principal, 'forbidden'), textParam(params, 'alert_id')) } };
      },
    }),

    defineRoute({
      method: 'POST',
      path: '/alerts/{alert_id}/acknowledge',
      operationId: 'acknowledgeAlert',
      summary: 'Acknowledge an alert; again, the same alert, unchanged',
      tag: 'Alerts',
      scope: 'alerts:write',
      // A person's session token: an operator's or an admin's (docs/api.md "Alerts"); rules are the admins'.
      sessionMemberRole: 'operator',
      responses: { 200: { description: 'the alert as acknowledged (or as it was, when acknowledged before)', schema: singleAlert }, 404: alertNotFound },
      async handler({ principal, params }) {
        const orgId = orgOf(principal, 'forbidden');
        const alert = await alertOr404(orgId, textParam(params, 'alert_id'));
        await acknowledgeAlert(ctx, orgId, { id: alert.id, ruleId: alert.rule_id, assetId: alert.asset_id });
        return { status: 200, body: { data: await alertOr404(orgId, alert.id) } };
      },
    }),
  ];
}

/** PATCH's read-only fields: accepted when equal to the current value, else read_only. */
function readOnlyErrors(current: RuleView, body: Record<string, unknown>): FieldError[] {
  const errors: FieldError[] = [];
  const message = (field: string) => `${field} is server-managed; submit the current value or omit it`;
  if (body.id !== undefined && body.id !== current.id) errors.push(fieldErrors.readOnly('id', message('id')));
  for (const field of ['created_at', 'updated_at'] as const) {
    if (body[field] !== undefined && !sameInstant(current[field], body[field])) errors.push(fieldErrors.readOnly(field, message(field)));
  }
  return errors;
}
