import type pg from 'pg';
import { prepared } from '../../shared/db/prepared.js';
import type { AlertStatus, AlertView, RuleView } from '../../shared/domain/alerts/schema.js';

/**
 * Reads of the alert rules (table `alert_rules`, this folder's projection) and of the alerts
 * (table `alerts`, written by the `alerts` subscriber) for the API (docs/api.md "Alerts"). External
 * keys are the current ones: a deleted asset's or location's is null.
 */

const RULE_COLUMNS = `r.rule_id AS id, r.name, r.kind, r.location_id, l.external_key AS location_external_key, r.threshold_seconds, r.asset_ids,
  r.is_active, r.created_at_rfc3339 AS created_at, r.updated_at_rfc3339 AS updated_at`;
const RULE_FROM = `alert_rules r LEFT JOIN locations l ON l.org_id = r.org_id AND l.id = r.location_id AND l.deleted_at IS NULL`;

export async function findRule(db: pg.Pool | pg.PoolClient, orgId: number, ruleId: number): Promise<RuleView | null> {
  const { rows } = await db.query<RuleView>(prepared(`SELECT ${RULE_COLUMNS} FROM ${RULE_FROM} WHERE r.org_id = $1 AND r.rule_id = $2 AND r.deleted_at IS NULL`, [orgId, ruleId]));
  return rows[0] ?? null;
}

/** The organization's rules, oldest first. */
export async function listRules(db: pg.Pool, orgId: number, limit: number, offset: number): Promise<{ data: RuleView[]; total: number }> {
  const [page, count] = await Promise.all([
    db.query<RuleView>(prepared(`SELECT ${RULE_COLUMNS} FROM ${RULE_FROM} WHERE r.org_id = $1 AND r.deleted_at IS NULL ORDER BY r.rule_id LIMIT $2 OFFSET $3`, [orgId, limit, offset])),
    db.query<{ n: number }>(prepared('SELECT count(*)::int AS n FROM alert_rules WHERE org_id = $1 AND deleted_at IS NULL', [orgId])),
  ]);
  return { data: page.rows, total: count.rows[0]!.n };
}

/** Every rule of the org, oldest first (docs/api.md "Export"): the list's statement without a page. */
export function rulesExport(orgId: number): { query: pg.QueryConfig } {
  return { query: { text: `SELECT ${RULE_COLUMNS} FROM ${RULE_FROM} WHERE r.org_id = $1 AND r.deleted_at IS NULL ORDER BY r.rule_id`, values: [orgId] } };
}

/** The Alert as the API shows it, from rows with the columns of `alerts` named `a`: the one mapping (the webhooks' `alert.*` data is made with it too). */
export const ALERT_COLUMNS = `a.alert_id AS id, a.rule_id, a.kind, a.asset_id, s.external_key AS asset_external_key, a.location_id, l.external_key AS location_external_key,
  a.raised_at_rfc3339 AS raised_at, a.status, a.acknowledged_at_rfc3339 AS acknowledged_at, a.acknowledged_by, a.resolved_at_rfc3339 AS resolved_at`;
/** `source` (the table `alerts`, or the outbox `alert_outbox`, which has its columns) as `a`, with the current external keys. */
export const alertFrom = (source: string) => `${source} a
  LEFT JOIN assets s ON s.org_id = a.org_id AND s.id = a.asset_id AND s.deleted_at IS NULL
  LEFT JOIN locations l ON l.org_id = a.org_id AND l.id = a.location_id AND l.deleted_at IS NULL`;
const ALERT_FROM = alertFrom('alerts');
/** Newest first; alerts of one instant in the order they were raised, the last first; then the id. */
const ALERT_ORDER = 'ORDER BY a.raised_at DESC, a.raised_position DESC, a.alert_id';

export interface AlertFilter {
  status?: AlertStatus;
  rule_id?: number;
  asset_id?: number;
  since?: Date;
  until?: Date;
}

function alertWhere(orgId: number, filter: AlertFilter): { sql: string; values: unknown[] } {
  const values: unknown[] = [orgId];
  const conditions = ['a.org_id = $1'];
  const add = (condition: string, value: unknown) => {
    values.push(value);
    conditions.push(condition.replace('?', `$${values.length}`));
  };
  if (filter.status !== undefined) add('a.status = ?', filter.status);
  if (filter.rule_id !== undefined) add('a.rule_id = ?', filter.rule_id);
  if (filter.asset_id !== undefined) add('a.asset_id = ?', filter.asset_id);
  if (filter.since !== undefined) add('a.raised_at >= ?', filter.since);
  if (filter.until !== undefined) add('a.raised_at <= ?', filter.until);
  return { sql: conditions.join(' AND '), values };
}

export async function findAlert(db: pg.Pool | pg.PoolClient, orgId: number, alertId: string): Promise<AlertView | null> {
  const { rows } = await db.query<AlertView>(prepared(`SELECT ${ALERT_COLUMNS} FROM ${ALERT_FROM} WHERE a.org_id = $1 AND a.alert_id = $2`, [orgId, alertId]));
  return rows[0] ?? null;
}

export async function listAlerts(db: pg.Pool, orgId: number, filter: AlertFilter, limit: number, offset: number): Promise<{ data: AlertView[]; total: number }> {
  const where = alertWhere(orgId, filter);
  const n = where.values.length;
  const [page, count] = await Promise.all([
    db.query<AlertView>({ text: `SELECT ${ALERT_COLUMNS} FROM ${ALERT_FROM} WHERE ${where.sql} ${ALERT_ORDER} LIMIT $${n + 1} OFFSET $${n + 2}`, values: [...where.values, limit, offset] }),
    db.query<{ n: number }>({ text: `SELECT count(*)::int AS n FROM alerts a WHERE ${where.sql}`, values: where.values }),
  ]);
  return { data: page.rows, total: count.rows[0]!.n };
}

/** Every alert the filters keep, newest first (docs/api.md "Export"). */
export function alertsExport(orgId: number, filter: AlertFilter): { query: pg.QueryConfig } {
  const where = alertWhere(orgId, filter);
  return { query: { text: `SELECT ${ALERT_COLUMNS} FROM ${ALERT_FROM} WHERE ${where.sql} ${ALERT_ORDER}`, values: where.values } };
}
