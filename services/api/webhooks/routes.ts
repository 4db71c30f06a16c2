import { NotFoundError, ValidationFailed, fieldErrors, type FieldError } from '../../../shared/errors.js';
import type { ServiceContext } from '../../../shared/service-context.js';
import { orgOf } from '../../../shared/auth/org.js';
import { defineRoute, type RouteDefinition } from '../../../shared/http/routes.js';
import { dataEnvelopeSchema, jsonSchemaOf } from '../../../shared/http/openapi.js';
import { listEnvelopeSchema, pageOf, pagingQuery } from '../../../shared/http/lists.js';
import { sameInstant } from '../../../shared/domain/patch.js';
import {
  ENDPOINT_FIELD_ORDER,
  NOT_SEEN_DEFAULT_SECONDS,
  createEndpointSchema,
  deliveryViewSchema,
  endpointViewSchema,
  endpointWithSecretSchema,
  patchEndpointSchema,
  type EndpointView,
} from '../../webhooks/schema.js';
import {
  createEndpointCommand,
  deleteEndpointCommand,
  deliveriesExport,
  endpointsExport,
  findEndpoint,
  listDeliveries,
  listEndpoints,
  redeliver,
  rotateSecretCommand,
  updateEndpointCommand,
} from '../../webhooks/endpoints.js';
import { refusedHost } from '../../webhooks/targets.js';

/** The /webhook-endpoints routes (docs/api.md "Webhooks"). */

const { limit, offset } = pagingQuery([]);
const pageQuery = { limit, offset };

const endpointJsonSchema = jsonSchemaOf(endpointViewSchema);
const singleSchema = dataEnvelopeSchema(endpointJsonSchema);
const withSecretSchema = dataEnvelopeSchema(jsonSchemaOf(endpointWithSecretSchema));
const deliveryJsonSchema = jsonSchemaOf(deliveryViewSchema);
const notFound = { description: 'No such webhook endpoint in this organization' };
const badUrl = { description: 'invalid_value on url: not https (or http where private targets are allowed), credentials in it, or a host that is or resolves to a loopback, private or link-local address' };

function endpointNotFound(): NotFoundError {
  return new NotFoundError('Webhook endpoint not found');
}

export function webhookRoutes(ctx: ServiceContext): RouteDefinition[] {
  /** http, or a host that is or resolves to a non-public address: refused unless private targets are allowed. */
  async function checkTarget(url: string): Promise<void> {
    if (ctx.config.WEBHOOK_ALLOW_PRIVATE_TARGETS) return;
    const target = new URL(url);
    if (target.protocol !== 'https:') throw new ValidationFailed([fieldErrors.invalidValue('url', 'url must be an https:// URL')]);
    const refused = await refusedHost(target);
    if (refused) throw new ValidationFailed([fieldErrors.invalidValue('url', `url is refused: ${refused}`)]);
  }

  async function endpointOr404(orgId: number, id: number): Promise<EndpointView> {
    const endpoint = await findEndpoint(ctx.pool, orgId, id);
    if (!endpoint) throw endpointNotFound();
    return endpoint;
  }

  return [
    defineRoute({
      method: 'GET',
      path: '/webhook-endpoints',
      operationId: 'listWebhookEndpoints',
      summary: 'List webhook endpoints',
      tag: 'Webhooks',
      scope: 'webhooks:read',
      query: pageQuery,
      responses: { 200: { description: 'a page of endpoints, oldest first (no secrets)', schema: listEnvelopeSchema(endpointJsonSchema) } },
      async handler({ principal, query }) {
        const page = pageOf(query);
        const { data, total } = await listEndpoints(ctx.pool, orgOf(principal, 'forbidden'), page.limit, page.offset);
        return { status: 200, body: { data, limit: page.limit, offset: page.offset, total_count: total } };
      },
      export: {
        pool: ctx.pool,
        source: async ({ principal }) => endpointsExport(orgOf(principal, 'forbidden')),
      },
    }),

    defineRoute({
      method: 'POST',
      path: '/webhook-endpoints',
      operationId: 'createWebhookEndpoint',
      summary: 'Create a webhook endpoint; the answer holds its signing secret, this once',
      tag: 'Webhooks',
      scope: 'webhooks:write',
      body: createEndpointSchema,
      responses: {
        201: { description: 'Created; Location names the new endpoint', schema: withSecretSchema },
        400: badUrl,
        409: { description: 'The organization already has 20 webhook endpoints' },
      },
      async handler({ principal, body }) {
        const orgId = orgOf(principal, 'forbidden');
        await checkTarget(body.url);
        const created = await createEndpointCommand(ctx, orgId, {
          url: body.url,
          description: body.description ?? null,
          eventTypes: body.event_types,
          notSeenAfterSeconds: body.not_seen_after_seconds ?? NOT_SEEN_DEFAULT_SECONDS,
        });
        return { status: 201, body: { data: created }, headers: { Location: `/api/v1/webhook-endpoints/${created.id}` } };
      },
    }),

    defineRoute({
      method: 'GET',
      path: '/webhook-endpoints/{endpoint_id}',
      operationId: 'getWebhookEndpoint',
      summary: 'Read a webhook endpoint (no secret)',
      tag: 'Webhooks',
      scope: 'webhooks:read',
      responses: { 200: { description: 'the endpoint', schema: singleSchema }, 404: notFound },
      async handler({ principal, params }) {
        return { status: 200, body: { data: await endpointOr404(orgOf(principal, 'forbidden'), params.endpoint_id!) } };
      },
    }),

    defineRoute({
      method: 'PATCH',
      path: '/webhook-endpoints/{endpoint_id}',
      operationId: 'updateWebhookEndpoint',
      summary: 'Update a webhook endpoint (JSON merge patch)',
      tag: 'Webhooks',
      scope: 'webhooks:write',
      body: patchEndpointSchema,
      bodyFieldOrder: ENDPOINT_FIELD_ORDER,
      responses: {
        200: { description: 'the updated endpoint', schema: singleSchema },
        400: { description: `${badUrl.description}; read_only: a read-only field whose value differs` },
        404: notFound,
      },
      async stateBodyErrors({ principal, params, body }) {
        const endpoint = await findEndpoint(ctx.pool, orgOf(principal, 'forbidden'), params.endpoint_id!);
        return endpoint ? readOnlyErrors(endpoint, body) : [];
      },
      async handler({ principal, params, body }) {
        const orgId = orgOf(principal, 'forbidden');
        const id = params.endpoint_id!;
        const current = await endpointOr404(orgId, id);
        const readOnly = readOnlyErrors(current, body);
        if (readOnly.length > 0) throw new ValidationFailed(readOnly);
        if (body.url !== undefined && body.url !== current.url) await checkTarget(body.url);
        const updated = await updateEndpointCommand(ctx, orgId, id, {
          url: body.url,
          description: body.description,
          eventTypes: body.event_types,
          isActive: body.is_active,
          notSeenAfterSeconds: body.not_seen_after_seconds,
        });
        return { status: 200, body: { data: updated } };
      },
    }),

    defineRoute({
      method: 'DELETE',
      path: '/webhook-endpoints/{endpoint_id}',
      operationId: 'deleteWebhookEndpoint',
      summary: 'Delete a webhook endpoint and its deliveries',
      tag: 'Webhooks',
      scope: 'webhooks:write',
      responses: { 204: { description: 'deleted; it no longer counts toward the limit' }, 404: notFound },
      async handler({ principal, params }) {
        await deleteEndpointCommand(ctx, orgOf(principal, 'forbidden'), params.endpoint_id!);
        return { status: 204 };
      },
    }),

    defineRoute({
      method: 'POST',
      path: '/webhook-endpoints/{endpoint_id}/rotate-secret',
      operationId: 'rotateWebhookEndpointSecret',
      summary: 'A new signing secret; the old one also signs for 24 hours',
      tag: 'Webhooks',
      scope: 'webhooks:write',
      responses: { 200: { description: 'the endpoint with its new secret, this once', schema: withSecretSchema }, 404: notFound },
      async handler({ principal, params }) {
        const rotated = await rotateSecretCommand(ctx, orgOf(principal, 'forbidden'), params.endpoint_id!);
        return { status: 200, body: { data: rotated } };
      },
    }),

    defineRoute({
      method: 'GET',
      path: '/webhook-endpoints/{endpoint_id}/deliveries',
      operationId: 'listWebhookDeliveries',
      summary: "An endpoint's deliveries, newest first",
      tag: 'Webhooks',
      scope: 'webhooks:read',
      query: pageQuery,
      responses: { 200: { description: 'a page of deliveries', schema: listEnvelopeSchema(deliveryJsonSchema) }, 404: notFound },
      async handler({ principal, params, query }) {
        const page = pageOf(query);
        const listed = await listDeliveries(ctx.pool, orgOf(principal, 'forbidden'), params.endpoint_id!, page.limit, page.offset);
        if (!listed) throw endpointNotFound();
        return { status: 200, body: { data: listed.data, limit: page.limit, offset: page.offset, total_count: listed.total } };
      },
      export: {
        pool: ctx.pool,
        async source({ principal, params }, db) {
          const orgId = orgOf(principal, 'forbidden');
          if (!(await findEndpoint(db, orgId, params.endpoint_id!))) throw endpointNotFound();
          return deliveriesExport(orgId, params.endpoint_id!);
        },
      },
    }),

    defineRoute({
      method: 'POST',
      path: '/webhook-endpoints/{endpoint_id}/deliveries/{delivery_id}/redeliver',
      operationId: 'redeliverWebhook',
      summary: 'Send a delivered (or failed) event again, with the same webhook-id',
      tag: 'Webhooks',
      scope: 'webhooks:write',
      responses: { 202: { description: 'the new delivery, queued', schema: dataEnvelopeSchema(deliveryJsonSchema) }, 404: { description: 'No such endpoint, or no such delivery of it, in this organization' } },
      async handler({ principal, params }) {
        const orgId = orgOf(principal, 'forbidden');
        await endpointOr404(orgId, params.endpoint_id!);
        const delivery = await redeliver(ctx.pool, orgId, params.endpoint_id!, params.delivery_id!);
        if (!delivery) throw new NotFoundError('Webhook delivery not found');
        return { status: 202, body: { data: delivery } };
      },
    }),
  ];
}

/** PATCH's read-only fields: accepted when equal to the current value, else read_only. */
function readOnlyErrors(current: EndpointView, body: Record<string, unknown>): FieldError[] {
  const errors: FieldError[] = [];
  const message = (field: string) => `${field} is server-managed; submit the current value or omit it`;
  if (body.id !== undefined && body.id !== current.id) errors.push(fieldErrors.readOnly('id', message('id')));
  if (body.disabled_reason !== undefined && body.disabled_reason !== current.disabled_reason) errors.push(fieldErrors.readOnly('disabled_reason', message('disabled_reason')));
  for (const field of ['created_at', 'updated_at'] as const) {
    if (body[field] !== undefined && !sameInstant(current[field], body[field])) errors.push(fieldErrors.readOnly(field, message(field)));
  }
  return errors;
}
