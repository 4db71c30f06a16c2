import { refuse, type DomainRefusal } from '../refusal.js';
import type { Decider } from '../decider.js';
import type { WebhookEndpointChanges, WebhookEndpointEvent } from './events.js';

/** An endpoint's configuration as its events leave it (its secret is not in the log). */
export interface EndpointConfig {
  url: string;
  description: string | null;
  event_types: string[];
  is_active: boolean;
  not_seen_after_seconds: number;
}

/** An organization's endpoints, by id. */
export interface WebhookEndpointsState {
  endpoints: ReadonlyMap<number, EndpointConfig>;
}

export type WebhookEndpointCommand =
  | {
      type: 'CreateWebhookEndpoint';
      orgId: number;
      endpointId: number;
      url: string;
      description: string | null;
      eventTypes: string[];
      notSeenAfterSeconds: number;
      secretId: string;
      /** At most this many endpoints per organization. */
      max: number;
      at: string;
    }
  /** Brings endpoints written before they were events into the log (their rows exist). */
  | {
      type: 'ImportWebhookEndpoints';
      orgId: number;
      rows: ReadonlyArray<{ id: number; url: string; description: string | null; event_types: string[]; is_active: boolean; disabled_reason: string | null; not_seen_after_seconds: number; created_at: string }>;
    }
  /**
   * A merge patch. `isActiveNow`: whether the endpoint is active as delivery left it (the
   * delivery side disables an endpoint that keeps failing, outside the log), read by the handler.
   */
  | { type: 'UpdateWebhookEndpoint'; orgId: number; endpointId: number; patch: WebhookEndpointChanges; isActiveNow: boolean; at: string }
  | { type: 'DeleteWebhookEndpoint'; orgId: number; endpointId: number; at: string }
  | { type: 'RotateWebhookEndpointSecret'; orgId: number; endpointId: number; secretId: string; previousUntil: string; at: string };

export function endpointNotFound(): DomainRefusal {
  return refuse.notFound('Webhook endpoint not found');
}

export const initialState: WebhookEndpointsState = { endpoints: new Map() };

export function evolve(state: WebhookEndpointsState, event: WebhookEndpointEvent): WebhookEndpointsState {
  const endpoints = new Map(state.endpoints);
  switch (event.type) {
    case 'WebhookEndpointCreated': {
      const d = event.data;
      endpoints.set(d.endpoint_id, {
        url: d.url,
        description: d.description,
        event_types: d.event_types,
        is_active: d.imported?.is_active ?? true,
        not_seen_after_seconds: d.not_seen_after_seconds,
      });
      break;
    }
    case 'WebhookEndpointUpdated': {
      const current = endpoints.get(event.data.endpoint_id);
      if (current) endpoints.set(event.data.endpoint_id, { ...current, ...definedOnly(event.data.changes) });
      break;
    }
    case 'WebhookEndpointDeleted':
      endpoints.delete(event.data.endpoint_id);
      break;
    case 'WebhookEndpointSecretRotated':
      return state;
  }
  return { endpoints };
}

function definedOnly(changes: WebhookEndpointChanges): Partial<EndpointConfig> {
  return Object.fromEntries(Object.entries(changes).filter(([, value]) => value !== undefined)) as Partial<EndpointConfig>;
}

function sameValue(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function requireEndpoint(state: WebhookEndpointsState, endpointId: number): EndpointConfig {
  const endpoint = state.endpoints.get(endpointId);
  if (!endpoint) throw endpointNotFound();
  return endpoint;
}

/**
 * A create beyond the limit is refused (409); an update, delete or rotation of an endpoint the
 * organization does not have is not found (404); an update whose values equal the current ones
 * appends nothing (the endpoint's `updated_at` stays).
 */
export function decide(command: WebhookEndpointCommand, state: WebhookEndpointsState): WebhookEndpointEvent[] {
  switch (command.type) {
    case 'CreateWebhookEndpoint':
      if (state.endpoints.size >= command.max) throw refuse.conflict(`An organization has at most ${command.max} webhook endpoints; delete one first`);
      return [
        {
          type: 'WebhookEndpointCreated',
          data: {
            org_id: command.orgId,
            endpoint_id: command.endpointId,
            url: command.url,
            description: command.description,
            event_types: command.eventTypes,
            not_seen_after_seconds: command.notSeenAfterSeconds,
            secret_id: command.secretId,
            at: command.at,
          },
        },
      ];
    case 'ImportWebhookEndpoints':
      return command.rows
        .filter((row) => !state.endpoints.has(row.id))
        .map((row) => ({
          type: 'WebhookEndpointCreated' as const,
          data: {
            org_id: command.orgId,
            endpoint_id: row.id,
            url: row.url,
            description: row.description,
            event_types: row.event_types,
            not_seen_after_seconds: row.not_seen_after_seconds,
            secret_id: null,
            imported: { is_active: row.is_active, disabled_reason: row.disabled_reason },
            at: row.created_at,
          },
        }));
    case 'UpdateWebhookEndpoint': {
      const current = { ...requireEndpoint(state, command.endpointId), is_active: command.isActiveNow };
      const changes: WebhookEndpointChanges = {};
      for (const [field, value] of Object.entries(command.patch) as Array<[keyof EndpointConfig, unknown]>) {
        if (value !== undefined && !sameValue(current[field], value)) (changes as Record<string, unknown>)[field] = value;
      }
      if (Object.keys(changes).length === 0) return [];
      return [{ type: 'WebhookEndpointUpdated', data: { org_id: command.orgId, endpoint_id: command.endpointId, changes, at: command.at } }];
    }
    case 'DeleteWebhookEndpoint':
      requireEndpoint(state, command.endpointId);
      return [{ type: 'WebhookEndpointDeleted', data: { org_id: command.orgId, endpoint_id: command.endpointId, at: command.at } }];
    case 'RotateWebhookEndpointSecret':
      requireEndpoint(state, command.endpointId);
      return [
        {
          type: 'WebhookEndpointSecretRotated',
          data: { org_id: command.orgId, endpoint_id: command.endpointId, secret_id: command.secretId, previous_until: command.previousUntil, at: command.at },
        },
      ];
  }
}

export const webhookEndpointsDecider: Decider<WebhookEndpointsState, WebhookEndpointCommand, WebhookEndpointEvent> = { initialState, evolve, decide };
