import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { inTransaction } from '../../shared/db/pool.js';
import type { KeyRing } from '../../shared/auth/key-encryption.js';
import { sealingWithKeyRing } from '../../shared/auth/signing-keys.js';
import { ConflictError } from '../../shared/errors.js';
import { MAX_ENDPOINTS_PER_ORG, type DeliveryView, type EndpointView, type WebhookEventType } from './schema.js';
import { QUEUE_INSERTED } from './queue.js';
import { SECRET_COLUMNS, keyRingRequired, openSecrets, sealSecrets, type StoredSecrets } from './secrets.js';

/**
 * The webhook endpoints of an organization and their deliveries (migrations/service/400_webhooks.sql).
 * Every statement names the org: another organization's endpoint is not found, like any resource.
 */

/** How long a rotated-out secret keeps signing beside the new one. */
export const PREVIOUS_SECRET_HOURS = 24;

/** A new signing secret: 32 random bytes, base64, with the Standard Webhooks prefix. */
export function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

interface EndpointRow {
  id: number;
  url: string;
  description: string | null;
  event_types: WebhookEventType[];
  is_active: boolean;
  disabled_reason: string | null;
  not_seen_after_seconds: number;
  created_at: Date;
  updated_at: Date;
}

const ENDPOINT_COLUMNS = 'id, url, description, event_types, is_active, disabled_reason, not_seen_after_seconds, created_at, updated_at';

function endpointView(row: EndpointRow): EndpointView {
  return {
    id: row.id,
    url: row.url,
    description: row.description,
    event_types: row.event_types,
    is_active: row.is_active,
    disabled_reason: row.disabled_reason,
    not_seen_after_seconds: row.not_seen_after_seconds,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

export interface EndpointInput {
  url: string;
  description: string | null;
  eventTypes: WebhookEventType[];
  notSeenAfterSeconds: number;
}

/**
 * Creates an endpoint, at most MAX_ENDPOINTS_PER_ORG per org (counted under a per-org lock). Its
 * secret is stored sealed with `keys` (services/webhooks/secrets.ts).
 */
export async function createEndpoint(pool: pg.Pool, keys: KeyRing | null, orgId: number, input: EndpointInput): Promise<EndpointView & { secret: string }> {
  if (!keys) throw keyRingRequired();
  return inTransaction(pool, async (client) => {
    await sealingWithKeyRing(client, keys);
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`webhook-endpoints:${orgId}`]);
    const count = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM service.webhook_endpoints WHERE org_id = $1', [orgId]);
    if (count.rows[0]!.n >= MAX_ENDPOINTS_PER_ORG) {
      throw new ConflictError(`An organization has at most ${MAX_ENDPOINTS_PER_ORG} webhook endpoints; delete one first`);
    }
    const secret = newSecret();
    // The id first: the sealed secret is bound to it.
    const id = (await client.query<{ id: number }>(`SELECT nextval(pg_get_serial_sequence('service.webhook_endpoints', 'id'))::int AS id`)).rows[0]!.id;
    const sealed = sealSecrets(keys, id, secret, null);
    const { rows } = await client.query<EndpointRow>(
      `INSERT INTO service.webhook_endpoints (id, org_id, url, description, event_types, not_seen_after_seconds, secret_encrypted, encryption_key_id)
       OVERRIDING SYSTEM VALUE VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ${ENDPOINT_COLUMNS}`,
      [id, orgId, input.url, input.description, input.eventTypes, input.notSeenAfterSeconds, sealed.secret_encrypted, sealed.encryption_key_id],
    );
    return { ...endpointView(rows[0]!), secret };
  });
}

export async function listEndpoints(pool: pg.Pool, orgId: number, limit: number, offset: number): Promise<{ data: EndpointView[]; total: number }> {
  const { rows } = await pool.query<EndpointRow & { total: number }>(
    `SELECT ${ENDPOINT_COLUMNS}, count(*) OVER ()::int AS total FROM service.webhook_endpoints WHERE org_id = $1 ORDER BY id LIMIT $2 OFFSET $3`,
    [orgId, limit, offset],
  );
  const total = rows[0]?.total ?? (offset > 0 ? (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM service.webhook_endpoints WHERE org_id = $1', [orgId])).rows[0]!.n : 0);
  return { data: rows.map(endpointView), total };
}

export async function findEndpoint(pool: pg.Pool | pg.PoolClient, orgId: number, id: number): Promise<EndpointView | null> {
  const { rows } = await pool.query<EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM service.webhook_endpoints WHERE org_id = $1 AND id = $2`, [orgId, id]);
  return rows[0] ? endpointView(rows[0]) : null;
}

export interface EndpointChanges {
  url?: string;
  description?: string | null;
  eventTypes?: WebhookEventType[];
  isActive?: boolean;
  notSeenAfterSeconds?: number;
}

/**
 * Applies a merge patch. Equal values change nothing (not even updated_at); `is_active: true` on
 * an endpoint disabled after failing also clears its `disabled_reason`.
 */
export async function updateEndpoint(pool: pg.Pool, orgId: number, id: number, changes: EndpointChanges): Promise<EndpointView | null> {
  const { rows } = await pool.query<EndpointRow>(
    `WITH changed AS (
       SELECT e.id,
              COALESCE($3, e.url) AS url,
              CASE WHEN $4::boolean THEN $5 ELSE e.description END AS description,
              COALESCE($6::text[], e.event_types) AS event_types,
              COALESCE($7, e.is_active) AS is_active,
              CASE WHEN $7 IS TRUE THEN NULL ELSE e.disabled_reason END AS disabled_reason,
              COALESCE($8, e.not_seen_after_seconds) AS not_seen_after_seconds
         FROM service.webhook_endpoints e WHERE e.org_id = $1 AND e.id = $2 FOR UPDATE),
       -- The queue of an endpoint that stops or resumes (docs/design.md "Webhooks").
       paused AS (
         UPDATE service.webhook_queue q SET paused = NOT c.is_active
           FROM changed c WHERE q.endpoint_id = c.id AND q.paused = c.is_active)
     UPDATE service.webhook_endpoints e
        SET url = c.url, description = c.description, event_types = c.event_types, is_active = c.is_active,
            disabled_reason = c.disabled_reason, not_seen_after_seconds = c.not_seen_after_seconds,
            updated_at = CASE WHEN (e.url, e.description, e.event_types, e.is_active, e.disabled_reason, e.not_seen_after_seconds)
                                   IS DISTINCT FROM (c.url, c.description, c.event_types, c.is_active, c.disabled_reason, c.not_seen_after_seconds)
                              THEN now() ELSE e.updated_at END
       FROM changed c WHERE e.id = c.id
     RETURNING e.${ENDPOINT_COLUMNS.split(', ').join(', e.')}`,
    [
      orgId,
      id,
      changes.url ?? null,
      changes.description !== undefined,
      changes.description ?? null,
      changes.eventTypes ?? null,
      changes.isActive ?? null,
      changes.notSeenAfterSeconds ?? null,
    ],
  );
  return rows[0] ? endpointView(rows[0]) : null;
}

export async function deleteEndpoint(pool: pg.Pool, orgId: number, id: number): Promise<boolean> {
  const { rowCount } = await pool.query('DELETE FROM service.webhook_endpoints WHERE org_id = $1 AND id = $2', [orgId, id]);
  return (rowCount ?? 0) > 0;
}

/**
 * A new secret; the current one keeps signing beside it for PREVIOUS_SECRET_HOURS. Both are sealed
 * again under the ring's current key, so a row's secrets always share one key.
 */
export async function rotateSecret(pool: pg.Pool, keys: KeyRing | null, orgId: number, id: number): Promise<(EndpointView & { secret: string }) | null> {
  if (!keys) throw keyRingRequired();
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await sealingWithKeyRing(client, keys);
    const found = await client.query<StoredSecrets>(`SELECT id, ${SECRET_COLUMNS} FROM service.webhook_endpoints WHERE org_id = $1 AND id = $2 FOR UPDATE`, [orgId, id]);
    if (!found.rows[0]) {
      await client.query('ROLLBACK');
      return null;
    }
    const secret = newSecret();
    const sealed = sealSecrets(keys, id, secret, openSecrets(found.rows[0], keys).secret);
    const { rows } = await client.query<EndpointRow>(
      `UPDATE service.webhook_endpoints
          SET secret = NULL, previous_secret = NULL, secret_encrypted = $3, previous_secret_encrypted = $4, encryption_key_id = $5,
              previous_until = now() + make_interval(hours => $6), updated_at = now()
        WHERE org_id = $1 AND id = $2 RETURNING ${ENDPOINT_COLUMNS}`,
      [orgId, id, sealed.secret_encrypted, sealed.previous_secret_encrypted, sealed.encryption_key_id, PREVIOUS_SECRET_HOURS],
    );
    await client.query('COMMIT');
    return { ...endpointView(rows[0]!), secret };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

interface DeliveryRow {
  id: number;
  webhook_id: string;
  event_type: DeliveryView['event_type'];
  attempt: number;
  status: DeliveryView['status'];
  response_status: number | null;
  duration_ms: number | null;
  error: string | null;
  next_attempt_at: Date;
  created_at: Date;
}

const DELIVERY_COLUMNS = 'id, webhook_id, event_type, attempt, status, response_status, duration_ms, error, next_attempt_at, created_at';

function deliveryView(row: DeliveryRow): DeliveryView {
  return {
    id: row.id,
    webhook_id: row.webhook_id,
    event_type: row.event_type,
    attempt: row.attempt,
    status: row.status,
    response_status: row.response_status,
    duration_ms: row.duration_ms,
    error: row.error,
    next_attempt_at: row.status === 'pending' ? row.next_attempt_at.toISOString() : null,
    created_at: row.created_at.toISOString(),
  };
}

/** An endpoint's deliveries, newest first; null when the org has no such endpoint. */
export async function listDeliveries(
  pool: pg.Pool,
  orgId: number,
  endpointId: number,
  limit: number,
  offset: number,
): Promise<{ data: DeliveryView[]; total: number } | null> {
  if (!(await findEndpoint(pool, orgId, endpointId))) return null;
  const [page, count] = await Promise.all([
    pool.query<DeliveryRow>(
      `SELECT ${DELIVERY_COLUMNS} FROM service.webhook_deliveries WHERE endpoint_id = $1 AND org_id = $2 ORDER BY id DESC LIMIT $3 OFFSET $4`,
      [endpointId, orgId, limit, offset],
    ),
    pool.query<{ n: number }>('SELECT count(*)::int AS n FROM service.webhook_deliveries WHERE endpoint_id = $1 AND org_id = $2', [endpointId, orgId]),
  ]);
  return { data: page.rows.map(deliveryView), total: count.rows[0]!.n };
}

/**
 * Sends an event again: a new delivery with the same webhook-id and body, queued behind the
 * asset's pending ones for that endpoint. Null when the org has no such endpoint or delivery.
 */
export async function redeliver(pool: pg.Pool, orgId: number, endpointId: number, deliveryId: number): Promise<DeliveryView | null> {
  const { rows } = await pool.query<DeliveryRow>(
    `WITH inserted AS (
       INSERT INTO service.webhook_deliveries (endpoint_id, org_id, asset_id, webhook_id, event_type, body)
       SELECT endpoint_id, org_id, asset_id, webhook_id, event_type, body FROM service.webhook_deliveries
        WHERE id = $3 AND endpoint_id = $2 AND org_id = $1
       RETURNING ${DELIVERY_COLUMNS}, endpoint_id, asset_id),
     ${QUEUE_INSERTED}
     SELECT ${DELIVERY_COLUMNS} FROM inserted`,
    [orgId, endpointId, deliveryId],
  );
  return rows[0] ? deliveryView(rows[0]) : null;
}
