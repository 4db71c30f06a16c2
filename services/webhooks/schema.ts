import { z } from 'zod';
import { description, viewFields } from '../../shared/domain/fields.js';
import { readOnlyField } from '../../shared/domain/patch.js';

/**
 * The webhook endpoints' bodies and views (docs/api.md "Webhooks"): the same schemas validate
 * requests, type the answers and feed the OpenAPI document.
 */

export const WEBHOOK_EVENT_TYPES = ['asset.first_seen', 'asset.moved', 'asset.not_seen', 'asset.seen_again', 'alert.raised', 'alert.resolved'] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

export const MAX_ENDPOINTS_PER_ORG = 20;
export const URL_MAX_LENGTH = 2048;
export const NOT_SEEN_MIN_SECONDS = 60;
export const NOT_SEEN_MAX_SECONDS = 2_592_000;
export const NOT_SEEN_DEFAULT_SECONDS = 3600;

/**
 * `url`: https or http, at most 2048 characters, no credentials. Whether http and the host's
 * address are allowed depends on the installation: the handler checks them (it resolves the host).
 */
function targetUrl() {
  return z
    .string()
    .max(URL_MAX_LENGTH)
    .meta({
      format: 'uri',
      // The host part without credentials; the refinement below is the rule, this shows its shape.
      pattern: '^https?://[^/@?#\\s]+([/?#]\\S*)?$',
      description: 'https:// URL without credentials (http:// only where the installation allows private targets)',
    })
    .superRefine((value, ctx) => {
      let url: URL;
      try {
        url = new URL(value);
      } catch {
        ctx.addIssue({ code: 'custom', message: 'url must be an absolute https:// URL' });
        return;
      }
      if (url.protocol !== 'https:' && url.protocol !== 'http:') {
        ctx.addIssue({ code: 'custom', message: 'url must be an https:// URL' });
      } else if (url.username !== '' || url.password !== '') {
        ctx.addIssue({ code: 'custom', message: 'url must not carry credentials' });
      } else if (url.hostname === '') {
        ctx.addIssue({ code: 'custom', message: 'url must name a host' });
      }
    });
}

const eventTypes = z
  .array(z.enum(WEBHOOK_EVENT_TYPES))
  .min(1)
  .max(WEBHOOK_EVENT_TYPES.length)
  .meta({ uniqueItems: true })
  .superRefine((types, ctx) => {
    if (new Set(types).size !== types.length) ctx.addIssue({ code: 'custom', message: 'event_types must not repeat a type' });
  });

const notSeenAfter = z.number().int().min(NOT_SEEN_MIN_SECONDS).max(NOT_SEEN_MAX_SECONDS);

export const ENDPOINT_FIELD_ORDER = ['id', 'url', 'description', 'event_types', 'is_active', 'disabled_reason', 'not_seen_after_seconds', 'created_at', 'updated_at'] as const;

export const createEndpointSchema = z.strictObject({
  url: targetUrl(),
  event_types: eventTypes,
  description: description.nullable().optional(),
  not_seen_after_seconds: notSeenAfter.optional(),
});

export const patchEndpointSchema = z.strictObject({
  id: readOnlyField.optional().meta({ readOnly: true, description: 'Read-only: accepted when it equals the current value' }),
  url: targetUrl().optional(),
  description: description.nullable().optional(),
  event_types: eventTypes.optional(),
  is_active: z.boolean().optional().meta({ description: 'true also clears disabled_reason: delivery resumes with the events queued behind the one it gave up on (that one needs a redeliver)' }),
  disabled_reason: readOnlyField.optional().meta({ readOnly: true, description: 'Read-only: accepted when it equals the current value' }),
  not_seen_after_seconds: notSeenAfter.optional(),
  created_at: readOnlyField.optional().meta({ readOnly: true, description: 'Read-only: accepted when it names the same instant' }),
  updated_at: readOnlyField.optional().meta({ readOnly: true, description: 'Read-only: accepted when it names the same instant' }),
});

export const endpointViewSchema = z.object({
  id: viewFields.id,
  url: z.string(),
  description: z.string().nullable(),
  event_types: z.array(z.enum(WEBHOOK_EVENT_TYPES)),
  is_active: z.boolean(),
  disabled_reason: z.string().nullable(),
  not_seen_after_seconds: z.number().int(),
  created_at: viewFields.timestamp,
  updated_at: viewFields.timestamp,
});

export const endpointWithSecretSchema = endpointViewSchema.extend({
  secret: z.string().regex(/^whsec_[A-Za-z0-9+/=]+$/).meta({ description: 'The signing secret, shown in this answer only' }),
});

export const deliveryViewSchema = z.object({
  id: viewFields.id,
  webhook_id: z.string(),
  event_type: z.enum(WEBHOOK_EVENT_TYPES),
  attempt: z.number().int().min(0),
  status: z.enum(['pending', 'succeeded', 'failed']),
  response_status: z.number().int().nullable(),
  duration_ms: z.number().int().nullable(),
  error: z.string().nullable(),
  next_attempt_at: viewFields.timestamp.nullable(),
  created_at: viewFields.timestamp,
});

export type EndpointView = z.infer<typeof endpointViewSchema>;
export type DeliveryView = z.infer<typeof deliveryViewSchema>;
