import type pg from 'pg';
import type { RecordedEvent } from '../../shared/event-store/port.js';
import type { Projection } from '../../shared/projection/projection.js';
import { eventsOf } from '../../shared/event-store/catalogue.js';
import { webhookEndpointEvents, type WebhookEndpointEvent } from '../../shared/domain/webhook-endpoints/events.js';

/**
 * The webhook endpoints the delivery side reads (`service.webhook_endpoints`,
 * migrations/service/400-403; docs/design.md "Webhooks"), kept from the endpoint events.
 *
 * Unlike a read model it writes a `service` table by its qualified name and declares no table of
 * its own: the table also holds what is not in the log (the sealed secrets, moved here from
 * `service.webhook_endpoint_secrets`, and the delivery side's own `is_active = false` with its
 * `disabled_reason` when an endpoint keeps failing), and its deliveries reference it. So a
 * rebuild or a replay, which apply the log again from the start, must leave it as it is: each
 * event is applied once, when its revision is past the one `service.webhook_endpoint_revisions`
 * holds for its organization's stream, and skipped otherwise. A rebuild never deletes an endpoint.
 */

async function firstTime(tx: pg.PoolClient, orgId: number, revision: bigint): Promise<boolean> {
  const { rowCount } = await tx.query(
    `INSERT INTO service.webhook_endpoint_revisions AS r (org_id, revision) VALUES ($1, $2)
     ON CONFLICT (org_id) DO UPDATE SET revision = EXCLUDED.revision WHERE r.revision < EXCLUDED.revision`,
    [orgId, revision.toString()],
  );
  return (rowCount ?? 0) > 0;
}

class StagedSecretMissing extends Error {
  constructor(secretId: string, endpointId: number) {
    super(`webhook endpoint ${endpointId}: the staged secret ${secretId} its event names is not in service.webhook_endpoint_secrets`);
    this.name = 'StagedSecretMissing';
  }
}

async function applyOne(tx: pg.PoolClient, event: WebhookEndpointEvent): Promise<void> {
  switch (event.type) {
    case 'WebhookEndpointCreated': {
      const d = event.data;
      // An import: the row (and its secret) was there before the event.
      if (d.secret_id === null) return;
      const { rowCount } = await tx.query(
        `INSERT INTO service.webhook_endpoints (id, org_id, url, description, event_types, not_seen_after_seconds, secret_encrypted, encryption_key_id, created_at, updated_at)
         OVERRIDING SYSTEM VALUE
         SELECT $1, $2, $3, $4, $5, $6, s.secret_encrypted, s.encryption_key_id, $7, $7 FROM service.webhook_endpoint_secrets s WHERE s.secret_id = $8 AND s.endpoint_id = $1
         ON CONFLICT (id) DO NOTHING`,
        [d.endpoint_id, d.org_id, d.url, d.description, d.event_types, d.not_seen_after_seconds, d.at, d.secret_id],
      );
      if (rowCount === 0) {
        const exists = await tx.query('SELECT 1 FROM service.webhook_endpoints WHERE id = $1', [d.endpoint_id]);
        if (exists.rowCount === 0) throw new StagedSecretMissing(d.secret_id, d.endpoint_id);
      }
      await tx.query('DELETE FROM service.webhook_endpoint_secrets WHERE secret_id = $1', [d.secret_id]);
      return;
    }
    case 'WebhookEndpointUpdated': {
      const { org_id, endpoint_id, changes, at } = event.data;
      await tx.query(
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
                disabled_reason = c.disabled_reason, not_seen_after_seconds = c.not_seen_after_seconds, updated_at = $9
           FROM changed c WHERE e.id = c.id`,
        [
          org_id,
          endpoint_id,
          changes.url ?? null,
          changes.description !== undefined,
          changes.description ?? null,
          changes.event_types ?? null,
          changes.is_active ?? null,
          changes.not_seen_after_seconds ?? null,
          at,
        ],
      );
      return;
    }
    case 'WebhookEndpointDeleted':
      // Its deliveries and queue go with it (ON DELETE CASCADE).
      await tx.query('DELETE FROM service.webhook_endpoints WHERE org_id = $1 AND id = $2', [event.data.org_id, event.data.endpoint_id]);
      return;
    case 'WebhookEndpointSecretRotated': {
      const d = event.data;
      const { rowCount } = await tx.query(
        `UPDATE service.webhook_endpoints e
            SET secret = NULL, previous_secret = NULL, secret_encrypted = s.secret_encrypted, previous_secret_encrypted = s.previous_secret_encrypted,
                encryption_key_id = s.encryption_key_id, previous_until = $4, updated_at = $5
           FROM service.webhook_endpoint_secrets s
          WHERE e.org_id = $1 AND e.id = $2 AND s.secret_id = $3 AND s.endpoint_id = e.id`,
        [d.org_id, d.endpoint_id, d.secret_id, d.previous_until, d.at],
      );
      if (rowCount === 0) {
        const exists = await tx.query('SELECT 1 FROM service.webhook_endpoints WHERE id = $1', [d.endpoint_id]);
        if (exists.rowCount !== 0) throw new StagedSecretMissing(d.secret_id, d.endpoint_id);
      }
      await tx.query('DELETE FROM service.webhook_endpoint_secrets WHERE secret_id = $1', [d.secret_id]);
      return;
    }
  }
}

export const webhookEndpointsProjection: Projection = {
  name: 'webhook_endpoints',
  eventTypes: webhookEndpointEvents.map((d) => d.type),
  tables: [],
  async apply(events: RecordedEvent[], tx: pg.PoolClient): Promise<void> {
    for (const recorded of events) {
      const [event] = eventsOf([recorded], webhookEndpointEvents);
      if (!event) continue;
      if (await firstTime(tx, event.data.org_id, recorded.revision)) await applyOne(tx, event);
    }
  },
};
