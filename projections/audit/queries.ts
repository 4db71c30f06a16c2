import type pg from 'pg';
import { z } from 'zod';
import { pageSql, readPage, rfc3339Sql, viewColumnsSql, type Page } from '../../shared/db/json-sql.js';
import { planned } from '../../shared/db/prepared.js';
import { SqlParams } from '../../shared/db/list-sql.js';
import { viewFields } from '../../shared/domain/fields.js';
import { ACTOR_TYPES, type ActorType } from '../../shared/event-store/command-context.js';
import { RESOURCE_TYPES, type ResourceType } from './actions.js';

/** Reads of the audit log (docs/api.md "Audit log"): a page of it, newest first, in one statement Postgres answers in JSON. */

const { timestamp, externalKey } = viewFields;

/** An entry of `GET /audit-events`. */
export const auditEventSchema = z.object({
  id: z.uuid().describe("the event's id: the same after a rebuild"),
  occurred_at: timestamp,
  action: z.string().describe('`<resource_type>.<verb>`, e.g. asset.updated (docs/api.md "Audit log"); new actions may appear'),
  resource_type: z.enum(RESOURCE_TYPES).describe('new types may appear'),
  resource_id: z.string().min(1).describe("the resource's id as text (an asset's 42 is \"42\"; a scan point's is <reader id>/<capture point>)"),
  resource_external_key: externalKey.nullable().describe("an asset's or location's external_key when the event happened; null for other resources"),
  actor: z.object({
    type: z.enum(ACTOR_TYPES),
    id: z.string().nullable().describe('an API key id, a user id; null for the CLI and the service itself'),
    name: z.string().nullable().describe("an API key's name, a person's email, \"cli\"; null for the service itself"),
  }),
  request_id: z.string().nullable().describe('the X-Request-ID of the request (one per CLI run); null for events recorded before requests were'),
  changes: z
    .record(z.string(), z.object({ from: z.unknown(), to: z.unknown() }))
    .nullable()
    .describe('for an update: each field changed, with its value before and after; otherwise null'),
});

const COLUMNS = viewColumnsSql(auditEventSchema, {
  id: 'e.id',
  occurred_at: rfc3339Sql('e.occurred_at'),
  action: 'e.action',
  resource_type: 'e.resource_type',
  resource_id: 'e.resource_id',
  resource_external_key: 'e.resource_external_key',
  actor: `json_build_object('type', e.actor_type, 'id', e.actor_id, 'name', e.actor_name)`,
  request_id: 'e.request_id',
  changes: 'e.changes',
});

export interface AuditFilter {
  since?: Date;
  until?: Date;
  actor_type?: ActorType;
  actor_id?: string;
  resource_type?: ResourceType;
  resource_id?: string;
  action?: string;
  limit: number;
  offset: number;
}

/** A page of an organization's audit log, newest first (ties in log order, newest first), and its total_count. */
export function listAuditEvents(pool: pg.Pool, orgId: number, filter: AuditFilter): Promise<Page> {
  return readPage(pool, auditListQuery(orgId, filter));
}

/** Newest first; ties in log order, newest first. */
const ORDER = 'e.occurred_at DESC, e.seq DESC';

export function auditListQuery(orgId: number, filter: AuditFilter): pg.QueryConfig {
  const { params, whereSql } = auditSelection(orgId, filter);
  const limit = params.add(filter.limit);
  const offset = params.add(filter.offset);
  // Planned for its values: which index serves (the org's recent rows, a resource's, an actor's, an
  // action's) depends on how many rows each filter leaves.
  return planned(
    pageSql(
      `SELECT ${COLUMNS} FROM audit_events e WHERE ${whereSql} ORDER BY ${ORDER} LIMIT ${limit} OFFSET ${offset}`,
      `SELECT count(*)::int FROM audit_events e WHERE ${whereSql}`,
    ),
    params.values,
  );
}

/** The whole list's entries, one row each (docs/api.md "Export"): the list's filters and order, no page. */
export function auditExportQuery(orgId: number, filter: Omit<AuditFilter, 'limit' | 'offset'>): pg.QueryConfig {
  const { params, whereSql } = auditSelection(orgId, filter);
  return planned(`SELECT ${COLUMNS} FROM audit_events e WHERE ${whereSql} ORDER BY ${ORDER}`, params.values);
}


function auditSelection(orgId: number, filter: Omit<AuditFilter, 'limit' | 'offset'>) {
  const params = new SqlParams();
  // Org 0 holds a person's events before their first membership: never an organization's.
  const where = [`e.org_id = ${params.add(orgId)}`];
  if (filter.since !== undefined) where.push(`e.occurred_at >= ${params.add(filter.since)}`);
  if (filter.until !== undefined) where.push(`e.occurred_at <= ${params.add(filter.until)}`);
  if (filter.actor_type !== undefined) where.push(`e.actor_type = ${params.add(filter.actor_type)}`);
  if (filter.actor_id !== undefined) where.push(`e.actor_id = ${params.add(filter.actor_id)}`);
  if (filter.resource_type !== undefined) where.push(`e.resource_type = ${params.add(filter.resource_type)}`);
  if (filter.resource_id !== undefined) where.push(`e.resource_id = ${params.add(filter.resource_id)}`);
  if (filter.action !== undefined) where.push(`e.action = ${params.add(filter.action)}`);
  return { params, whereSql: where.join(' AND ') };
}
