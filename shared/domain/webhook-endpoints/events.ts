import { z } from 'zod';
import { defineEvent } from '../../event-store/catalogue.js';

/**
 * Webhook endpoints as events (docs/design.md "Webhooks", "Secrets are not events"): an
 * organization's endpoints share one stream, `webhook-endpoints-<org>`, so the limit on their
 * number is decided on it. No event carries a secret: a created or rotated secret is stored
 * sealed in `service.webhook_endpoint_secrets` before the append, and the event names it by
 * `secret_id`, as `PasswordSet` names a credential.
 */

const orgId = z.number().int().positive();
const endpointId = z.number().int().positive();
const eventTypes = z.array(z.string().min(1)).min(1);

export const WebhookEndpointCreated = defineEvent(
  'WebhookEndpointCreated',
  1,
  z.object({
    org_id: orgId,
    endpoint_id: endpointId,
    url: z.string().min(1),
    description: z.string().nullable(),
    event_types: eventTypes,
    not_seen_after_seconds: z.number().int().positive(),
    /**
     * The staged secret the projection moves onto the endpoint; null for an endpoint written
     * before endpoints were events, whose row (secret included) already exists: the event only
     * brings it into the log (`imported`).
     */
    secret_id: z.string().min(1).nullable(),
    /** Such an import: the endpoint's state then, whether active, and why disabled. */
    imported: z.object({ is_active: z.boolean(), disabled_reason: z.string().nullable() }).optional(),
    at: z.string(),
  }),
);

/** The fields a PATCH changed, each to its new value (absent: unchanged). */
export const webhookEndpointChanges = z.object({
  url: z.string().min(1).optional(),
  description: z.string().nullable().optional(),
  event_types: eventTypes.optional(),
  is_active: z.boolean().optional(),
  not_seen_after_seconds: z.number().int().positive().optional(),
});

export const WebhookEndpointUpdated = defineEvent(
  'WebhookEndpointUpdated',
  1,
  z.object({ org_id: orgId, endpoint_id: endpointId, changes: webhookEndpointChanges, at: z.string() }),
);

export const WebhookEndpointDeleted = defineEvent('WebhookEndpointDeleted', 1, z.object({ org_id: orgId, endpoint_id: endpointId, at: z.string() }));

export const WebhookEndpointSecretRotated = defineEvent(
  'WebhookEndpointSecretRotated',
  1,
  z.object({
    org_id: orgId,
    endpoint_id: endpointId,
    /** The staged pair (the new secret and the one it replaces, sealed under one key). */
    secret_id: z.string().min(1),
    /** Until when the replaced secret also signs. */
    previous_until: z.string(),
    at: z.string(),
  }),
);

export type WebhookEndpointChanges = z.output<typeof webhookEndpointChanges>;

export type WebhookEndpointEvent =
  | { type: 'WebhookEndpointCreated'; data: z.output<typeof WebhookEndpointCreated.schema> }
  | { type: 'WebhookEndpointUpdated'; data: z.output<typeof WebhookEndpointUpdated.schema> }
  | { type: 'WebhookEndpointDeleted'; data: z.output<typeof WebhookEndpointDeleted.schema> }
  | { type: 'WebhookEndpointSecretRotated'; data: z.output<typeof WebhookEndpointSecretRotated.schema> };

export const webhookEndpointEvents = [WebhookEndpointCreated, WebhookEndpointUpdated, WebhookEndpointDeleted, WebhookEndpointSecretRotated];

export function webhookEndpointsStream(orgId: number): string {
  return `webhook-endpoints-${orgId}`;
}
