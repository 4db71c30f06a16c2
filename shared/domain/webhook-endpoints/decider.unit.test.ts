import { describe, expect, it } from 'vitest';
import { DomainRefusal } from '../refusal.js';
import { decide, evolve, initialState, type WebhookEndpointCommand, type WebhookEndpointsState } from './decider.js';
import type { WebhookEndpointEvent } from './events.js';

/** The webhook endpoints decider: given(events).when(command).then(events | error), with no I/O. */

const T0 = '2026-01-01T00:00:00.000Z';
const T1 = '2026-01-02T00:00:00.000Z';

const fold = (events: readonly WebhookEndpointEvent[]): WebhookEndpointsState => events.reduce(evolve, initialState);

function refusal(events: readonly WebhookEndpointEvent[], command: WebhookEndpointCommand): unknown {
  try {
    decide(command, fold(events));
  } catch (error) {
    return error;
  }
  throw new Error('the command was accepted');
}

const created = (id: number): WebhookEndpointEvent => ({
  type: 'WebhookEndpointCreated',
  data: { org_id: 3, endpoint_id: id, url: `https://p.example/${id}`, description: null, event_types: ['asset.moved'], not_seen_after_seconds: 3600, secret_id: `s${id}`, at: T0 },
});

const create = (id: number, max = 20): WebhookEndpointCommand => ({
  type: 'CreateWebhookEndpoint',
  orgId: 3,
  endpointId: id,
  url: `https://p.example/${id}`,
  description: null,
  eventTypes: ['asset.moved'],
  notSeenAfterSeconds: 3600,
  secretId: `s${id}`,
  max,
  at: T0,
});

const update = (id: number, patch: Extract<WebhookEndpointCommand, { type: 'UpdateWebhookEndpoint' }>['patch'], isActiveNow = true): WebhookEndpointCommand => ({
  type: 'UpdateWebhookEndpoint',
  orgId: 3,
  endpointId: id,
  patch,
  isActiveNow,
  at: T1,
});

describe('webhook endpoints evolve', () => {
  it('creates, updates and deletes fold into the org’s endpoints; a rotation changes nothing the log knows', () => {
    const events: WebhookEndpointEvent[] = [
      created(1),
      created(2),
      { type: 'WebhookEndpointUpdated', data: { org_id: 3, endpoint_id: 1, changes: { description: 'd', is_active: false }, at: T1 } },
      { type: 'WebhookEndpointSecretRotated', data: { org_id: 3, endpoint_id: 1, secret_id: 'r1', previous_until: T1, at: T1 } },
      { type: 'WebhookEndpointDeleted', data: { org_id: 3, endpoint_id: 2, at: T1 } },
    ];
    expect([...fold(events).endpoints.entries()]).toStrictEqual([
      [1, { url: 'https://p.example/1', description: 'd', event_types: ['asset.moved'], is_active: false, not_seen_after_seconds: 3600 }],
    ]);
  });

  it('an imported endpoint keeps whether it was active', () => {
    const [imported] = decide(
      { type: 'ImportWebhookEndpoints', orgId: 3, rows: [{ id: 7, url: 'https://p.example/7', description: null, event_types: ['asset.moved'], is_active: false, disabled_reason: 'gave up', not_seen_after_seconds: 60, created_at: T0 }] },
      initialState,
    );
    expect(imported).toMatchObject({ type: 'WebhookEndpointCreated', data: { endpoint_id: 7, secret_id: null, imported: { is_active: false, disabled_reason: 'gave up' }, at: T0 } });
    expect(fold([imported!]).endpoints.get(7)?.is_active).toBe(false);
  });
});

describe('webhook endpoints decide', () => {
  it('a create names its staged secret, never the secret', () => {
    expect(decide(create(1), initialState)).toStrictEqual([created(1)]);
  });

  it('at most `max` endpoints: the next is refused (409); a deleted one no longer counts', () => {
    const full = [created(1), created(2)];
    expect(refusal(full, create(3, 2))).toMatchObject({ kind: 'conflict' });
    expect(refusal(full, create(3, 2))).toBeInstanceOf(DomainRefusal);
    expect(decide(create(3, 2), fold([...full, { type: 'WebhookEndpointDeleted', data: { org_id: 3, endpoint_id: 1, at: T1 } }]))).toHaveLength(1);
  });

  it('an update lists only the fields that change; equal values append nothing', () => {
    expect(decide(update(1, { description: null, url: 'https://p.example/1' }), fold([created(1)]))).toStrictEqual([]);
    expect(decide(update(1, { description: 'x', event_types: ['asset.moved'], not_seen_after_seconds: 60 }), fold([created(1)]))).toStrictEqual([
      { type: 'WebhookEndpointUpdated', data: { org_id: 3, endpoint_id: 1, changes: { description: 'x', not_seen_after_seconds: 60 }, at: T1 } },
    ]);
  });

  it('is_active is decided against the endpoint as delivery left it: true on one delivery disabled is a change', () => {
    expect(decide(update(1, { is_active: true }, false), fold([created(1)]))).toStrictEqual([
      { type: 'WebhookEndpointUpdated', data: { org_id: 3, endpoint_id: 1, changes: { is_active: true }, at: T1 } },
    ]);
    expect(decide(update(1, { is_active: false }, false), fold([created(1)]))).toStrictEqual([]);
  });

  it('an endpoint the org does not have (never, or deleted) is not found for an update, a delete and a rotation', () => {
    const gone = [created(1), { type: 'WebhookEndpointDeleted', data: { org_id: 3, endpoint_id: 1, at: T1 } } as WebhookEndpointEvent];
    for (const events of [[], gone]) {
      expect(refusal(events, update(1, { description: 'x' }))).toMatchObject({ kind: 'not_found', message: 'Webhook endpoint not found' });
      expect(refusal(events, { type: 'DeleteWebhookEndpoint', orgId: 3, endpointId: 1, at: T1 })).toMatchObject({ kind: 'not_found', message: 'Webhook endpoint not found' });
      expect(refusal(events, { type: 'RotateWebhookEndpointSecret', orgId: 3, endpointId: 1, secretId: 'r', previousUntil: T1, at: T1 })).toMatchObject({ kind: 'not_found', message: 'Webhook endpoint not found' });
    }
  });

  it('an import brings only the rows the stream does not know', () => {
    const rows = [1, 2].map((id) => ({ id, url: `https://p.example/${id}`, description: null, event_types: ['asset.moved'], is_active: true, disabled_reason: null, not_seen_after_seconds: 3600, created_at: T0 }));
    expect(decide({ type: 'ImportWebhookEndpoints', orgId: 3, rows }, fold([created(1)])).map((e) => e.data.endpoint_id)).toEqual([2]);
  });
});
