import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createOrg, mintApiKey, mintSession, personWithToken } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { scanner } from '../support/scans.js';
import { locationScansStream } from '../../shared/domain/scans/events.js';
import { AppClient, tokenOf, type Json } from '../people/app-client.js';
import { auditEvents, cliJson, wholeAuditLog, type AuditEntry } from './support.js';

/**
 * `GET /api/v1/audit-events` (docs/api.md "Audit log"): who changed what, recorded by every
 * pipeline that runs commands (an API key, a person's session token, the console's cookie session,
 * the CLI), newest first, filtered, scoped and confined to the caller's organization.
 */

const PASSWORD = 'correct horse battery';
const SLOW = 120_000;

let svc: TestService;
let orgA: number;
let orgB: number;
let writer: { id: string; token: string };
let auditor: { id: string; token: string };

/** A call of /api/v1 with a token and, when given, our own X-Request-ID. */
async function api(token: string, method: string, path: string, body?: unknown, requestId?: string): Promise<{ status: number; body: Json }> {
  const headers: Record<string, string> = { ...bearer(token) };
  if (requestId) headers['x-request-id'] = requestId;
  if (body !== undefined) headers['content-type'] = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
  const response = await fetch(`${svc.apiUrl}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : {} };
}

beforeAll(async () => {
  svc = await startTestService('audit_log', { RATE_LIMIT_PER_MINUTE: '1000000', RATE_LIMIT_BURST: '1000000' });
  const { ctx } = svc.service;
  orgA = (await createOrg(ctx, 'Acme')).id;
  orgB = (await createOrg(ctx, 'Globex')).id;
  writer = await mintApiKey(ctx, { orgId: orgA, name: 'partner', scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write'] });
  auditor = await mintApiKey(ctx, { orgId: orgA, name: 'auditor', scopes: ['audit:read'] });
}, SLOW);

afterAll(async () => {
  await svc?.stop();
});

describe('an API key’s changes', () => {
  let asset: number;

  it('each write is one entry, newest first, with the key as actor and our request id; an update says from what to what', async () => {
    const created = await api(writer.token, 'POST', '/assets', { external_key: 'FORK-7', name: 'Forklift' }, 'req-create');
    expect(created.status).toBe(201);
    asset = created.body.data.id;
    expect((await api(writer.token, 'PATCH', `/assets/${asset}`, { name: 'Lift', is_active: false }, 'req-patch')).status).toBe(200);
    expect((await api(writer.token, 'POST', `/assets/${asset}/rename`, { external_key: 'LIFT-7' }, 'req-rename')).status).toBe(200);
    // A no-op is no change: nothing is appended, nothing listed.
    expect((await api(writer.token, 'PATCH', `/assets/${asset}`, { name: 'Lift' }, 'req-noop')).status).toBe(200);
    expect((await api(writer.token, 'DELETE', `/assets/${asset}`, undefined, 'req-delete')).status).toBe(204);

    const page = await auditEvents(svc, auditor.token, { resource_type: 'asset', resource_id: String(asset) });
    expect(page.status).toBe(200);
    expect(Object.keys(page.body)).toEqual(['data', 'limit', 'offset', 'total_count']);
    expect(page.body).toMatchObject({ limit: 50, offset: 0, total_count: 4 });
    const actor = { type: 'api_key', id: writer.id, name: 'partner' };
    expect(page.body.data.map((e: AuditEntry) => [e.action, e.resource_external_key, e.request_id, e.actor])).toEqual([
      ['asset.deleted', 'LIFT-7', 'req-delete', actor],
      ['asset.renamed', 'LIFT-7', 'req-rename', actor],
      ['asset.updated', 'FORK-7', 'req-patch', actor],
      ['asset.created', 'FORK-7', 'req-create', actor],
    ]);
    const [deleted, renamed, updated, create] = page.body.data as AuditEntry[];
    expect(Object.keys(create!)).toEqual(['id', 'occurred_at', 'action', 'resource_type', 'resource_id', 'resource_external_key', 'actor', 'request_id', 'changes']);
    expect(create).toMatchObject({ resource_type: 'asset', resource_id: String(asset), changes: null, occurred_at: created.body.data.created_at });
    expect(create!.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(updated!.changes).toEqual({ name: { from: 'Forklift', to: 'Lift' }, is_active: { from: true, to: false } });
    expect(renamed!.changes).toEqual({ external_key: { from: 'FORK-7', to: 'LIFT-7' } });
    expect(deleted!.changes).toBeNull();
  });

  it('a location moved under another: location.moved with its parent from and to; a PATCH of name and parent is two entries of one request', async () => {
    const root = (await api(writer.token, 'POST', '/locations', { external_key: 'SITE', name: 'Site' })).body.data.id as number;
    const hall = (await api(writer.token, 'POST', '/locations', { external_key: 'HALL', name: 'Hall' })).body.data.id as number;
    expect((await api(writer.token, 'PATCH', `/locations/${hall}`, { parent_id: root, name: 'Hall 1' }, 'req-move')).status).toBe(200);
    const moved = (await auditEvents(svc, auditor.token, { resource_type: 'location', resource_id: String(hall) })).body.data as AuditEntry[];
    expect(moved.map((e) => [e.action, e.request_id, e.changes])).toEqual([
      ['location.moved', 'req-move', { parent_id: { from: null, to: root } }],
      ['location.updated', 'req-move', { name: { from: 'Hall', to: 'Hall 1' } }],
      ['location.created', expect.any(String), null],
    ]);
  });

  it('tags attached and detached are entries of their own; a tag retired with its deleted owner is part of the delete', async () => {
    const id = (await api(writer.token, 'POST', '/assets', { name: 'Tagged', tags: [{ tag_type: 'rfid', value: 'E2801160' }] }, 'req-tagged')).body.data.id as number;
    const tag = (await api(writer.token, 'POST', `/assets/${id}/tags`, { tag_type: 'barcode', value: 'SN-1' }, 'req-attach')).body.data;
    expect((await api(writer.token, 'DELETE', `/assets/${id}/tags/${tag.id}`, undefined, 'req-detach')).status).toBe(204);
    expect((await api(writer.token, 'DELETE', `/assets/${id}`, undefined, 'req-gone')).status).toBe(204);
    const tags = (await auditEvents(svc, auditor.token, { resource_type: 'tag' })).body.data as AuditEntry[];
    expect(tags.map((e) => [e.action, e.request_id, e.resource_external_key])).toEqual([
      ['tag.detached', 'req-detach', null],
      ['tag.attached', 'req-attach', null],
      ['tag.attached', 'req-tagged', null],
    ]);
    expect((await auditEvents(svc, auditor.token, { action: 'asset.deleted', resource_id: String(id) })).body.data).toHaveLength(1);
  });
});

describe('the list', () => {
  it('filters: since and until (inclusive), actor, resource, action; paging with total_count', async () => {
    const all = await wholeAuditLog(svc, auditor.token);
    expect(all.length).toBeGreaterThan(10);
    // Newest first.
    const times = all.map((e) => Date.parse(e.occurred_at));
    expect([...times].sort((a, b) => b - a)).toEqual(times);
    const middle = all[Math.floor(all.length / 2)]!;
    const since = await wholeAuditLog(svc, auditor.token, { since: middle.occurred_at });
    expect(since).toEqual(all.filter((e) => e.occurred_at >= middle.occurred_at));
    const until = await wholeAuditLog(svc, auditor.token, { until: middle.occurred_at });
    expect(until).toEqual(all.filter((e) => e.occurred_at <= middle.occurred_at));
    // Another spelling of the same instant is the same filter.
    const offsetForm = new Date(Date.parse(middle.occurred_at)).toISOString().replace('Z', '+00:00');
    expect(await wholeAuditLog(svc, auditor.token, { since: offsetForm })).toEqual(since);

    expect(await wholeAuditLog(svc, auditor.token, { actor_type: 'api_key', actor_id: writer.id })).toEqual(all.filter((e) => e.actor.id === writer.id));
    expect(await wholeAuditLog(svc, auditor.token, { actor_id: writer.id })).toEqual(all.filter((e) => e.actor.id === writer.id));
    expect(await wholeAuditLog(svc, auditor.token, { actor_type: 'system' })).toEqual(all.filter((e) => e.actor.type === 'system'));
    expect(await wholeAuditLog(svc, auditor.token, { action: 'location.created' })).toEqual(all.filter((e) => e.action === 'location.created'));
    expect(await wholeAuditLog(svc, auditor.token, { resource_type: 'location' })).toEqual(all.filter((e) => e.resource_type === 'location'));

    const first = await auditEvents(svc, auditor.token, { limit: 3 });
    const second = await auditEvents(svc, auditor.token, { limit: 3, offset: 3 });
    expect(first.body).toMatchObject({ limit: 3, offset: 0, total_count: all.length });
    expect([...first.body.data, ...second.body.data]).toEqual(all.slice(0, 6));
  });

  it('refuses a bad filter as every list does: invalid_value, unknown_field, too_large; HEAD without a body; 405 otherwise', async () => {
    const refused = async (query: Record<string, string>) => {
      const { status, body } = await auditEvents(svc, auditor.token, query);
      expect(status, JSON.stringify(query)).toBe(400);
      return body.error.fields.map((f: { field: string; code: string; message: string; params?: unknown }) => [f.field, f.code, f.message, f.params]);
    };
    expect(await refused({ since: 'yesterday' })).toEqual([['since', 'invalid_value', "Invalid 'since' timestamp; expected RFC 3339", undefined]]);
    expect(await refused({ until: '2026-02-30T00:00:00Z' })).toEqual([['until', 'invalid_value', "Invalid 'until' timestamp; expected RFC 3339", undefined]]);
    expect((await refused({ actor_type: 'robot' }))[0]).toEqual(['actor_type', 'invalid_value', expect.any(String), { allowed_values: ['api_key', 'user', 'cli', 'system'] }]);
    expect((await refused({ resource_type: 'spaceship' }))[0]!.slice(0, 2)).toEqual(['resource_type', 'invalid_value']);
    expect((await refused({ action: 'asset.exploded' }))[0]!.slice(0, 2)).toEqual(['action', 'invalid_value']);
    expect((await refused({ sort: '-occurred_at', colour: 'red' })).map((f: unknown[]) => f.slice(0, 2))).toEqual([
      ['sort', 'unknown_field'],
      ['colour', 'unknown_field'],
    ]);
    expect((await refused({ limit: '201' }))[0]!.slice(0, 2)).toEqual(['limit', 'too_large']);

    const head = await fetch(`${svc.apiUrl}/audit-events`, { method: 'HEAD', headers: bearer(auditor.token) });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
    const post = await fetch(`${svc.apiUrl}/audit-events`, { method: 'POST', headers: bearer(auditor.token) });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
  });
});

describe('who may read it', () => {
  it('a key without audit:read: 403; an admin’s session token: yes; an operator’s or a viewer’s: 403', async () => {
    const refused = await auditEvents(svc, writer.token);
    expect(refused.status).toBe(403);
    expect(refused.body.error.detail).toBe('Missing required scope: audit:read');

    const admin = await mintSession(svc.service.ctx, { user: 'root@example.com', orgId: orgA });
    expect((await auditEvents(svc, admin.token)).status).toBe(200);
    for (const role of ['viewer', 'operator'] as const) {
      const person = await personWithToken(svc.service.ctx, orgA, role);
      const forbidden = await auditEvents(svc, person.token);
      expect(forbidden.status).toBe(403);
      expect(forbidden.body.error).toMatchObject({ type: 'forbidden', detail: `Your role (${role}) does not allow this` });
    }
  });

  it('only the caller’s organization: another’s entries are never listed, whatever the filter', async () => {
    const otherWriter = await mintApiKey(svc.service.ctx, { orgId: orgB, name: 'globex', scopes: ['assets:write', 'assets:read'] });
    const otherAuditor = await mintApiKey(svc.service.ctx, { orgId: orgB, name: 'globex-audit', scopes: ['audit:read'] });
    const theirs = (await api(otherWriter.token, 'POST', '/assets', { name: 'Theirs' }, 'req-globex')).body.data.id as number;

    const ours = await wholeAuditLog(svc, auditor.token);
    expect(ours.some((e) => e.request_id === 'req-globex')).toBe(false);
    expect(await wholeAuditLog(svc, auditor.token, { actor_id: otherWriter.id })).toEqual([]);

    const log = await wholeAuditLog(svc, otherAuditor.token);
    expect(log.map((e) => e.action)).toEqual(['asset.created', 'api_key.minted', 'api_key.minted', 'organization.created']);
    expect(log[0]).toMatchObject({ resource_id: String(theirs), request_id: 'req-globex', actor: { type: 'api_key', id: otherWriter.id, name: 'globex' } });
    expect(log.some((e) => e.actor.id === writer.id)).toBe(false);
  });
});

describe('actors', () => {
  it('events appended outside any pipeline: the actor their data names, else the service itself', async () => {
    const log = await wholeAuditLog(svc, auditor.token, { resource_type: 'organization' });
    expect(log).toEqual([expect.objectContaining({ action: 'organization.created', resource_id: String(orgA), actor: { type: 'system', id: null, name: null }, request_id: null })]);
    // Keys minted by the tests' helper record the CLI as their minter (ApiKeyMinted.minted_by).
    const minted = await wholeAuditLog(svc, auditor.token, { action: 'api_key.minted', resource_id: auditor.id });
    expect(minted.map((e) => e.actor)).toEqual([{ type: 'cli', id: null, name: 'cli' }]);
  });

  it("a person's session token on /api/v1: the person, by user id (their email when the token names none) and email", async () => {
    const session = await mintSession(svc.service.ctx, { user: 'grace@example.com', orgId: orgA });
    const created = await api(session.token, 'POST', '/locations', { name: 'By Grace' }, 'req-grace');
    expect(created.status).toBe(201);
    const [entry] = await wholeAuditLog(svc, auditor.token, { resource_type: 'location', resource_id: String(created.body.data.id) });
    expect(entry).toMatchObject({ action: 'location.created', request_id: 'req-grace', actor: { type: 'user', name: 'grace@example.com' } });
    expect(entry!.actor.id).toBe('grace@example.com');
  });

  it('the CLI and the console: users create (CLI), the setup link (the person), a key minted and revoked in the console (the signed-in admin)', async () => {
    const created = await cliJson(svc, 'users', 'create', '--email', 'ada@example.com', '--org', String(orgA), '--role', 'admin');
    const ada = new AppClient(svc.apiUrl);
    expect((await ada.request('POST', '/password-setup', { token: tokenOf(created.setup_url), password: PASSWORD })).status).toBe(200);
    expect((await ada.signIn('ada@example.com', PASSWORD)).status).toBe(200);
    const minted = await fetch(`${new URL(svc.apiUrl).origin}/app/api/keys`, {
      method: 'POST',
      headers: { origin: ada.origin, cookie: ada.cookie!, 'x-csrf-token': ada.csrf!, 'content-type': 'application/json', 'x-request-id': 'req-console-mint' },
      body: JSON.stringify({ name: 'from the console', access: { assets: 'read', audit: 'read' } }),
    });
    expect(minted.status).toBe(201);
    const key = ((await minted.json()) as { data: { id: string; scopes: string[] } }).data;
    expect(key.scopes).toEqual(['assets:read', 'audit:read']);
    expect((await ada.request('DELETE', `/keys/${key.id}`)).status).toBe(200);
    const cliKey = await cliJson(svc, 'keys', 'mint', '--org', String(orgA), '--name', 'cli key', '--scopes', 'audit:read');

    const person = { type: 'user', id: created.id, name: 'ada@example.com' };
    const cli = { type: 'cli', id: null, name: 'cli' };
    const people = await wholeAuditLog(svc, auditor.token, { resource_id: created.id });
    expect(people.map((e) => [e.action, e.actor])).toEqual([
      ['user.password_set', person],
      ['user.setup_link_issued', cli],
      ['membership.granted', cli],
      ['user.created', cli],
    ]);
    // One CLI run is one request: its entries share a ULID.
    const cliRequest = people[1]!.request_id!;
    expect(cliRequest).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(people.slice(1).map((e) => e.request_id)).toEqual([cliRequest, cliRequest, cliRequest]);

    const keys = await wholeAuditLog(svc, auditor.token, { resource_type: 'api_key' });
    expect(keys.slice(0, 3).map((e) => [e.action, e.resource_id, e.actor, e.request_id === null])).toEqual([
      ['api_key.minted', cliKey.id, cli, false],
      ['api_key.revoked', key.id, person, false],
      ['api_key.minted', key.id, person, false],
    ]);
    expect(keys[2]!.request_id).toBe('req-console-mint');
    expect(keys[0]!.request_id).not.toBe(cliRequest);
    expect(await wholeAuditLog(svc, auditor.token, { actor_type: 'user', actor_id: created.id })).toEqual(
      (await wholeAuditLog(svc, auditor.token)).filter((e) => e.actor.id === created.id),
    );
  }, SLOW);

  it('scans are no entries, and their events carry no actor, though they come over HTTP', async () => {
    const before = (await auditEvents(svc, auditor.token)).body.total_count as number;
    const dock = (await api(writer.token, 'POST', '/locations', { external_key: 'DOCK-9', name: 'Dock' })).body.data.id as number;
    await api(writer.token, 'POST', '/assets', { name: 'Pallet', tags: [{ tag_type: 'rfid', value: 'E2009999' }] });
    const { scan } = await scanner(svc, orgA);
    await scan({ id: dock }, [{ tag_type: 'rfid', value: 'E2009999' }]);
    // The location, the asset and its tag, the scanner's key (minted by the helper): nothing for the scan.
    expect((await auditEvents(svc, auditor.token)).body.total_count).toBe(before + 4);
    const events = await svc.service.ctx.store.readStream(locationScansStream(orgA, dock));
    expect(events.map((e) => e.type)).toEqual(['ScansRecorded']);
    expect(events[0]!.metadata).not.toHaveProperty('actor');
    expect(events[0]!.metadata).not.toHaveProperty('request_id');
  });
});
