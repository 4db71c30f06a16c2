import { randomBytes, randomUUID } from 'node:crypto';
import type pg from 'pg';
import { inTransaction } from '../../shared/db/pool.js';
import type { KeyRing } from '../../shared/auth/key-encryption.js';
import { sealingWithKeyRing } from '../../shared/auth/signing-keys.js';
import { ConflictError, NotFoundError } from '../../shared/errors.js';
import { DomainRefusal } from '../../shared/domain/refusal.js';
import type { ServiceContext } from '../../shared/service-context.js';
import { executeCommand, loadStream, waitForStream } from '../../shared/domain/command.js';
import { SYSTEM_COMMAND_ACTOR, runInCommandContext } from '../../shared/event-store/command-context.js';
import { webhookEndpointEvents, webhookEndpointsStream } from '../../shared/domain/webhook-endpoints/events.js';
import { decide, evolve, initialState, type WebhookEndpointCommand, type WebhookEndpointsState } from '../../shared/domain/webhook-endpoints/decider.js';
import { MAX_ENDPOINTS_PER_ORG, type DeliveryView, type EndpointView, type WebhookEventType } from './schema.js';
import { QUEUE_INSERTED } from './queue.js';
import { SECRET_COLUMNS, keyRingRequired, openSecrets, sealSecrets, type StoredSecrets } from './secrets.js';

/**
 * The webhook endpoints of an organization and their deliveries (migrations/service/400_webhooks.sql).
 * Every statement names the org: another organization's endpoint is not found, like any resource.
 *
 * Endpoints are changed by commands that append events (`createEndpointCommand` and the others
 * below; docs/design.md "Webhooks"), which the `webhook_endpoints` projection
 * (projections/webhook-endpoints/) applies to `service.webhook_endpoints`. The table functions
 * `createEndpoint`, `updateEndpoint`, `deleteEndpoint` and `rotateSecret` write the table
 * directly, with no event: fixtures for tests and benchmarks that need an endpoint without the
 * log; the service itself never calls them, and the audit log never lists what they write.
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

/** Every endpoint of the org as its view, oldest first (docs/api.md "Export"): the list's statement without a page, and its row's view. */
export function endpointsExport(orgId: number): { query: pg.QueryConfig; item(row: Record<string, unknown>): Record<string, unknown> } {
  return {
    query: { text: `SELECT ${ENDPOINT_COLUMNS} FROM service.webhook_endpoints WHERE org_id = $1 ORDER BY id`, values: [orgId] },
    item: (row) => endpointView(row as unknown as EndpointRow),
  };
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

/** Every delivery of an endpoint as its view, newest first (docs/api.md "Export"): the list's statement without a page, and its row's view. */
export function deliveriesExport(orgId: number, endpointId: number): { query: pg.QueryConfig; item(row: Record<string, unknown>): Record<string, unknown> } {
  return {
    query: { text: `SELECT ${DELIVERY_COLUMNS} FROM service.webhook_deliveries WHERE endpoint_id = $1 AND org_id = $2 ORDER BY id DESC`, values: [endpointId, orgId] },
    item: (row) => deliveryView(row as unknown as DeliveryRow),
  };
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

// The commands (docs/design.md "Webhooks", "Secrets are not events").

/** The org's endpoint stream as its decider folds it, and the revision to append with. */
async function loadEndpoints(ctx: Pick<ServiceContext, 'store'>, orgId: number): Promise<{ state: WebhookEndpointsState; expectedRevision: bigint | 'no_stream' }> {
  const loaded = await loadStream(ctx, webhookEndpointsStream(orgId), { initialState, evolve }, webhookEndpointEvents);
  return { state: loaded.state, expectedRevision: loaded.expectedRevision as bigint | 'no_stream' };
}

async function decideAndAppend(ctx: ServiceContext, orgId: number, command: (state: WebhookEndpointsState) => Promise<WebhookEndpointCommand>, before?: () => Promise<unknown>): Promise<void> {
  const streamId = webhookEndpointsStream(orgId);
  await executeCommand(ctx, async () => {
    await before?.();
    const { state, expectedRevision } = await loadEndpoints(ctx, orgId);
    const events = decide(await command(state), state);
    return { appends: [{ streamId, expectedRevision, events }], result: undefined };
  });
}

/**
 * Endpoints written before endpoints were events exist only in the table: before the first
 * command on an organization's endpoints, each of its rows gets a `WebhookEndpointCreated` (no
 * secret: `secret_id` null, the row keeps its own) appended by the service itself (`system`), so
 * the stream knows them (the limit counts them, an update finds them) and the audit log lists
 * them. An organization whose stream exists has nothing to import.
 */
export async function importUnloggedEndpoints(ctx: ServiceContext, orgId: number): Promise<number> {
  const streamId = webhookEndpointsStream(orgId);
  const [last] = await ctx.store.readStream(streamId, { direction: 'backwards', maxCount: 1 });
  if (last) return 0;
  const { rows } = await ctx.pool.query<EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM service.webhook_endpoints WHERE org_id = $1 ORDER BY id`, [orgId]);
  if (rows.length === 0) return 0;
  const imported = rows.map((row) => ({ ...endpointView(row), event_types: row.event_types as string[] }));
  const { append } = await runInCommandContext({ actor: SYSTEM_COMMAND_ACTOR, requestId: null }, () =>
    executeCommand(ctx, async () => {
      const { state, expectedRevision } = await loadEndpoints(ctx, orgId);
      // Another process imported them first, or a command came after.
      if (expectedRevision !== 'no_stream') return { appends: [], result: undefined };
      const events = decide({ type: 'ImportWebhookEndpoints', orgId, rows: imported }, state);
      return { appends: [{ streamId, expectedRevision, events }], result: undefined };
    }),
  );
  return append ? rows.length : 0;
}

/** Stages sealed secrets for the event that names them (`secret_id`), under the key ring's shared lock. */
async function stageSecrets(pool: pg.Pool, keys: KeyRing, endpointId: number, secret: string, previous: string | null): Promise<string> {
  const secretId = randomUUID();
  await inTransaction(pool, async (client) => {
    await sealingWithKeyRing(client, keys);
    const sealed = sealSecrets(keys, endpointId, secret, previous);
    await client.query(
      `INSERT INTO service.webhook_endpoint_secrets (secret_id, endpoint_id, secret_encrypted, previous_secret_encrypted, encryption_key_id) VALUES ($1, $2, $3, $4, $5)`,
      [secretId, endpointId, sealed.secret_encrypted, sealed.previous_secret_encrypted, sealed.encryption_key_id],
    );
  });
  return secretId;
}

async function unstageSecrets(pool: pg.Pool, secretId: string): Promise<void> {
  await pool.query('DELETE FROM service.webhook_endpoint_secrets WHERE secret_id = $1', [secretId]);
}

/** A refusal: nothing was appended, so the staged secret is named by no event. */
function refused(error: unknown): boolean {
  return error instanceof DomainRefusal || error instanceof ConflictError || error instanceof NotFoundError;
}

async function projectedView(ctx: ServiceContext, orgId: number, id: number): Promise<EndpointView> {
  const view = await findEndpoint(ctx.pool, orgId, id);
  // The command waited for the projection: only a delete racing this answer removes it.
  if (!view) throw new NotFoundError('Webhook endpoint not found');
  return view;
}

/**
 * POST /webhook-endpoints: a new id and secret; the secret is staged sealed (bound to the id),
 * then `WebhookEndpointCreated` names it. At most MAX_ENDPOINTS_PER_ORG per organization, decided
 * on the organization's stream.
 */
export async function createEndpointCommand(ctx: ServiceContext, orgId: number, input: EndpointInput): Promise<EndpointView & { secret: string }> {
  const keys = ctx.keyEncryption.keys;
  if (!keys) throw keyRingRequired();
  await importUnloggedEndpoints(ctx, orgId);
  const id = (await ctx.pool.query<{ id: number }>(`SELECT nextval(pg_get_serial_sequence('service.webhook_endpoints', 'id'))::int AS id`)).rows[0]!.id;
  const secret = newSecret();
  const secretId = await stageSecrets(ctx.pool, keys, id, secret, null);
  try {
    await decideAndAppend(ctx, orgId, async () => ({
      type: 'CreateWebhookEndpoint',
      orgId,
      endpointId: id,
      url: input.url,
      description: input.description,
      eventTypes: input.eventTypes,
      notSeenAfterSeconds: input.notSeenAfterSeconds,
      secretId,
      max: MAX_ENDPOINTS_PER_ORG,
      at: new Date().toISOString(),
    }));
  } catch (error) {
    if (refused(error)) await unstageSecrets(ctx.pool, secretId);
    throw error;
  }
  return { ...(await projectedView(ctx, orgId, id)), secret };
}

/**
 * PATCH: the changed fields only (equal values append nothing, so `updated_at` stays);
 * `is_active: true` on an endpoint delivery disabled also clears its `disabled_reason`.
 */
export async function updateEndpointCommand(ctx: ServiceContext, orgId: number, id: number, changes: EndpointChanges): Promise<EndpointView> {
  await importUnloggedEndpoints(ctx, orgId);
  await decideAndAppend(
    ctx,
    orgId,
    async () => {
      // Whether it is active as delivery left it: read once the table reflects the stream.
      const row = await findEndpoint(ctx.pool, orgId, id);
      return {
        type: 'UpdateWebhookEndpoint',
        orgId,
        endpointId: id,
        patch: { url: changes.url, description: changes.description, event_types: changes.eventTypes, is_active: changes.isActive, not_seen_after_seconds: changes.notSeenAfterSeconds },
        isActiveNow: row?.is_active ?? true,
        at: new Date().toISOString(),
      };
    },
    () => waitForStream(ctx, webhookEndpointsStream(orgId)),
  );
  return projectedView(ctx, orgId, id);
}

/** DELETE: the endpoint, its deliveries and its queue (the projection's delete cascades). */
export async function deleteEndpointCommand(ctx: ServiceContext, orgId: number, id: number): Promise<void> {
  await importUnloggedEndpoints(ctx, orgId);
  await decideAndAppend(ctx, orgId, async () => ({ type: 'DeleteWebhookEndpoint', orgId, endpointId: id, at: new Date().toISOString() }));
}

/**
 * rotate-secret: a new secret, and the current one signs beside it for PREVIOUS_SECRET_HOURS.
 * Both are staged sealed under the ring's current key (a row's secrets share one key), after the
 * table reflects every earlier rotation, then `WebhookEndpointSecretRotated` names them.
 */
export async function rotateSecretCommand(ctx: ServiceContext, orgId: number, id: number): Promise<EndpointView & { secret: string }> {
  const keys = ctx.keyEncryption.keys;
  if (!keys) throw keyRingRequired();
  await importUnloggedEndpoints(ctx, orgId);
  const streamId = webhookEndpointsStream(orgId);
  let staged: string | null = null;
  let secret = '';
  try {
    await decideAndAppend(
      ctx,
      orgId,
      async (state) => {
        if (staged !== null) await unstageSecrets(ctx.pool, staged);
        staged = null;
        if (!state.endpoints.has(id)) return { type: 'RotateWebhookEndpointSecret', orgId, endpointId: id, secretId: 'none', previousUntil: '', at: '' };
        const found = await ctx.pool.query<StoredSecrets>(`SELECT id, ${SECRET_COLUMNS} FROM service.webhook_endpoints WHERE org_id = $1 AND id = $2`, [orgId, id]);
        if (!found.rows[0]) throw new NotFoundError('Webhook endpoint not found');
        secret = newSecret();
        staged = await stageSecrets(ctx.pool, keys, id, secret, openSecrets(found.rows[0], keys).secret);
        const at = new Date();
        return {
          type: 'RotateWebhookEndpointSecret',
          orgId,
          endpointId: id,
          secretId: staged,
          previousUntil: new Date(at.getTime() + PREVIOUS_SECRET_HOURS * 3_600_000).toISOString(),
          at: at.toISOString(),
        };
      },
      () => waitForStream(ctx, streamId),
    );
  } catch (error) {
    if (refused(error) && staged !== null) await unstageSecrets(ctx.pool, staged);
    throw error;
  }
  return { ...(await projectedView(ctx, orgId, id)), secret };
}
