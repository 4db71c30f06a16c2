import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createOrg, mintApiKey, personWithToken } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import type { Json } from '../people/app-client.js';
import { createEndpoint } from '../../services/webhooks/endpoints.js';
import { webhookEndpointsStream } from '../../shared/domain/webhook-endpoints/events.js';
import { rebuildProjections, selectProjections } from '../../shared/projection/rebuild.js';
import { allProjections } from '../../projections/index.js';
import { wholeAuditLog, type AuditEntry } from './support.js';

/**
 * Webhook endpoints in the audit log (docs/api.md "Audit log", docs/design.md "Webhooks"): every
 * change of an endpoint is a command whose event the log lists once, with who asked and the
 * request id, and never its secret; a rebuild of the audit projection gives the same list, and
 * one of the endpoints' own projection changes no endpoint.
 */

const SLOW = 120_000;

let svc: TestService;
let orgId: number;
let writer: { id: string; token: string };
let auditor: { id: string; token: string };
/** Every secret an answer showed: none may appear in the log or the audit log. */
const secrets: string[] = [];

async function api(token: string, method: string, path: string, body?: unknown, requestId?: string): Promise<{ status: number; body: Json }> {
  const headers: Record<string, string> = { ...bearer(token) };
  if (requestId) headers['x-request-id'] = requestId;
  if (body !== undefined) headers['content-type'] = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
  const response = await fetch(`${svc.apiUrl}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  const parsed = text ? JSON.parse(text) : {};
  if (typeof parsed?.data?.secret === 'string') secrets.push(parsed.data.secret);
  return { status: response.status, body: parsed };
}

async function endpointRows(): Promise<unknown[]> {
  const { rows } = await svc.service.ctx.pool.query(
    'SELECT id, org_id, url, description, event_types, is_active, disabled_reason, not_seen_after_seconds, secret_encrypted, previous_secret_encrypted, previous_until, created_at, updated_at FROM service.webhook_endpoints ORDER BY id',
  );
  return rows;
}

beforeAll(async () => {
  svc = await startTestService('audit_webhooks', { ROLES: 'api,projector', RATE_LIMIT_PER_MINUTE: '1000000', RATE_LIMIT_BURST: '1000000' });
  const { ctx } = svc.service;
  orgId = (await createOrg(ctx, 'Acme')).id;
  writer = await mintApiKey(ctx, { orgId, name: 'hooks', scopes: ['webhooks:read', 'webhooks:write'] });
  auditor = await mintApiKey(ctx, { orgId, name: 'auditor', scopes: ['audit:read'] });
}, SLOW);

afterAll(async () => {
  await svc?.stop();
});

describe('webhook endpoints in the audit log', () => {
  let endpoint: number;

  it("an API key's create, update, rotation and delete: one entry each, with the key and our request id; a no-op is none", async () => {
    const created = await api(writer.token, 'POST', '/webhook-endpoints', { url: 'http://127.0.0.1:9/hook', event_types: ['asset.moved'] }, 'wh-create');
    expect(created.status).toBe(201);
    endpoint = created.body.data.id;
    expect((await api(writer.token, 'PATCH', `/webhook-endpoints/${endpoint}`, { description: 'Partner', is_active: false }, 'wh-patch')).status).toBe(200);
    // Equal values change nothing: no event, no entry.
    const noop = await api(writer.token, 'PATCH', `/webhook-endpoints/${endpoint}`, { description: 'Partner' }, 'wh-noop');
    expect(noop.status).toBe(200);
    expect((await api(writer.token, 'POST', `/webhook-endpoints/${endpoint}/rotate-secret`, undefined, 'wh-rotate')).status).toBe(200);
    expect((await api(writer.token, 'DELETE', `/webhook-endpoints/${endpoint}`, undefined, 'wh-delete')).status).toBe(204);
    // A refusal is no entry either.
    expect((await api(writer.token, 'DELETE', `/webhook-endpoints/${endpoint}`, undefined, 'wh-again')).status).toBe(404);

    const log = await wholeAuditLog(svc, auditor.token, { resource_type: 'webhook_endpoint', resource_id: String(endpoint) });
    const actor = { type: 'api_key', id: writer.id, name: 'hooks' };
    expect(log.map((e) => [e.action, e.request_id, e.actor])).toEqual([
      ['webhook_endpoint.deleted', 'wh-delete', actor],
      ['webhook_endpoint.secret_rotated', 'wh-rotate', actor],
      ['webhook_endpoint.updated', 'wh-patch', actor],
      ['webhook_endpoint.created', 'wh-create', actor],
    ]);
    const [deleted, rotated, updated, create] = log as AuditEntry[];
    expect(create).toMatchObject({ occurred_at: created.body.data.created_at, resource_external_key: null, changes: null });
    expect(updated!.changes).toEqual({ description: { from: null, to: 'Partner' }, is_active: { from: true, to: false } });
    expect(rotated!.changes).toBeNull();
    expect(deleted!.changes).toBeNull();
    // The action filter knows them.
    expect((await wholeAuditLog(svc, auditor.token, { action: 'webhook_endpoint.secret_rotated' })).map((e) => e.request_id)).toEqual(['wh-rotate']);
  });

  it("an admin's session token: the person is the actor", async () => {
    const admin = await personWithToken(svc.service.ctx, orgId, 'admin');
    const created = await api(admin.token, 'POST', '/webhook-endpoints', { url: 'http://127.0.0.1:9/admin', event_types: ['asset.first_seen'] }, 'wh-admin');
    expect(created.status).toBe(201);
    const [entry] = await wholeAuditLog(svc, auditor.token, { resource_type: 'webhook_endpoint', resource_id: String(created.body.data.id) });
    expect(entry).toMatchObject({ action: 'webhook_endpoint.created', request_id: 'wh-admin', actor: { type: 'user', name: admin.email } });
    expect([admin.userId, admin.email]).toContain(entry!.actor.id);
  });

  it('an endpoint written before endpoints were events: brought into the log by the service on the next command, its row untouched', async () => {
    const { ctx } = svc.service;
    const other = (await createOrg(ctx, 'Initech')).id;
    const otherKey = await mintApiKey(ctx, { orgId: other, name: 'hooks', scopes: ['webhooks:read', 'webhooks:write'] });
    const otherAuditor = await mintApiKey(ctx, { orgId: other, name: 'auditor', scopes: ['audit:read'] });
    // As the table held it: no event.
    const old = await createEndpoint(ctx.pool, ctx.keyEncryption.keys, other, { url: 'http://127.0.0.1:9/old', description: 'old', eventTypes: ['asset.moved'], notSeenAfterSeconds: 600 });
    secrets.push(old.secret);
    expect(await ctx.store.readStream(webhookEndpointsStream(other))).toEqual([]);

    expect((await api(otherKey.token, 'PATCH', `/webhook-endpoints/${old.id}`, { not_seen_after_seconds: 900 }, 'wh-old')).status).toBe(200);
    const log = await wholeAuditLog(svc, otherAuditor.token, { resource_type: 'webhook_endpoint' });
    expect(log.map((e) => [e.action, e.resource_id, e.request_id, e.actor.type])).toEqual([
      ['webhook_endpoint.updated', String(old.id), 'wh-old', 'api_key'],
      ['webhook_endpoint.created', String(old.id), null, 'system'],
    ]);
    expect(log[0]!.changes).toEqual({ not_seen_after_seconds: { from: 600, to: 900 } });
    expect(log[1]!.occurred_at).toBe(old.created_at);
    // Still the same secret, and it still counts toward the limit.
    const { rows } = await ctx.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM service.webhook_endpoints WHERE id = $1 AND secret_encrypted IS NOT NULL', [old.id]);
    expect(rows[0]!.n).toBe(1);
  });

  it('no secret in any event, nor in the audit log', async () => {
    expect(secrets.length).toBeGreaterThanOrEqual(4);
    const { rows } = await svc.service.ctx.pool.query<{ text: string }>(
      `SELECT type || ' ' || data::text || ' ' || metadata::text AS text FROM event_store.events WHERE type LIKE 'WebhookEndpoint%'`,
    );
    expect(rows.length).toBeGreaterThanOrEqual(6);
    const audit = JSON.stringify(await wholeAuditLog(svc, auditor.token));
    for (const secret of secrets) {
      const body = secret.slice('whsec_'.length);
      for (const row of rows) expect(row.text).not.toContain(body);
      expect(audit).not.toContain(body);
    }
    // Nothing staged is left once the events are applied.
    const staged = await svc.service.ctx.pool.query('SELECT 1 FROM service.webhook_endpoint_secrets');
    expect(staged.rowCount).toBe(0);
  });

  it('a rebuild of the audit projection gives the same list; a rebuild of the endpoints projection changes no endpoint (a deleted one stays deleted)', async () => {
    const { ctx } = svc.service;
    const before = await wholeAuditLog(svc, auditor.token);
    expect(before.filter((e) => e.resource_type === 'webhook_endpoint')).toHaveLength(5);
    const rows = await endpointRows();
    await rebuildProjections({ store: ctx.store, pool: ctx.pool, log: ctx.log, projections: selectProjections(allProjections(), ['audit', 'webhook_endpoints']), batchSize: 3 });
    expect(await wholeAuditLog(svc, auditor.token)).toEqual(before);
    expect(await endpointRows()).toEqual(rows);
    expect((await api(writer.token, 'GET', `/webhook-endpoints/${endpoint}`)).status).toBe(404);
  }, SLOW);
});
