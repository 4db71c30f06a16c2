import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { mintSession } from '../../shared/domain/people/session-tokens.js';
import { personWithToken } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';

/**
 * The webhook endpoints API (docs/api.md "Webhooks") under the contract's rules: validation codes,
 * the per-org limit, merge patch, 404 for another org's endpoints and deliveries, scopes, 405 and
 * HEAD; and the refusal of private targets when they are not allowed.
 */

let open: TestService;
let strict: TestService;

beforeAll(async () => {
  // No webhooks role: these tests only talk to the API.
  open = await startTestService('webhook_endpoints', { ROLES: 'api,projector' });
  strict = await startTestService('webhook_endpoints_strict', { ROLES: 'api,projector', ENVIRONMENT: 'production', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' });
});
afterAll(async () => {
  await open?.stop();
  await strict?.stop();
});

async function orgApi(svc: TestService, scopes = ['webhooks:read', 'webhooks:write']) {
  const ctx = svc.service.ctx;
  const orgId = (await createOrg(ctx, `org-${Math.random()}`)).id;
  const key = await mintApiKey(ctx, { orgId, scopes });
  return { orgId, api: client(svc.apiUrl, key.token), token: key.token };
}

type Field = { field: string; code: string; params?: Record<string, unknown> };

async function fieldsOf(reply: Promise<{ status: number; body: { error?: { type: string; fields?: Field[] } }; text: string }>): Promise<Array<[string, string]>> {
  const got = await reply;
  expect(got.status, got.text).toBe(400);
  expect(got.body.error!.type).toBe('validation_error');
  return got.body.error!.fields!.map((f) => [f.field, f.code]);
}

describe('webhook endpoints: the API', () => {
  it('create (201, Location, the secret once), read and list (no secret), merge patch, delete (204)', async () => {
    const { api } = await orgApi(open);
    const created = await api<{ data: Record<string, unknown> & { id: number; secret: string } }>('POST', '/webhook-endpoints', {
      body: { url: 'https://partner.example/hooks', event_types: ['asset.moved'], description: 'dock moves' },
    });
    expect(created.status, created.text).toBe(201);
    const id = created.body.data.id;
    expect(created.headers.get('location')).toBe(`/api/v1/webhook-endpoints/${id}`);
    expect(created.body.data).toEqual({
      id,
      url: 'https://partner.example/hooks',
      description: 'dock moves',
      event_types: ['asset.moved'],
      is_active: true,
      disabled_reason: null,
      not_seen_after_seconds: 3600,
      created_at: expect.any(String),
      updated_at: expect.any(String),
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
    });
    const { secret, ...view } = created.body.data;
    const read = await api<{ data: Record<string, unknown> }>('GET', `/webhook-endpoints/${id}`);
    expect(read.body.data).toEqual(view);
    expect(read.text).not.toContain(secret.slice(6));
    const list = await api<{ data: unknown[]; total_count: number; limit: number; offset: number }>('GET', '/webhook-endpoints');
    expect(list.body).toEqual({ data: [view], limit: 50, offset: 0, total_count: 1 });
    // A verbatim GET → PATCH round trip changes nothing.
    const same = await api<{ data: Record<string, unknown> }>('PATCH', `/webhook-endpoints/${id}`, { body: view });
    expect(same.status, same.text).toBe(200);
    expect(same.body.data).toEqual(view);
    const patched = await api<{ data: Record<string, unknown> }>('PATCH', `/webhook-endpoints/${id}`, {
      body: { description: null, event_types: ['asset.moved', 'asset.not_seen'], not_seen_after_seconds: 60, is_active: false },
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.data).toMatchObject({ description: null, event_types: ['asset.moved', 'asset.not_seen'], not_seen_after_seconds: 60, is_active: false, url: 'https://partner.example/hooks' });
    expect(Date.parse(patched.body.data.updated_at as string)).toBeGreaterThanOrEqual(Date.parse(view.updated_at as string));
    expect(await fieldsOf(api('PATCH', `/webhook-endpoints/${id}`, { body: { id: id + 1, created_at: '2000-01-01T00:00:00Z' } }))).toEqual([
      ['id', 'read_only'],
      ['created_at', 'read_only'],
    ]);
    expect((await api('HEAD', `/webhook-endpoints/${id}`)).status).toBe(200);
    expect((await api('GET', `/webhook-endpoints/${id}/deliveries`)).body).toEqual({ data: [], limit: 50, offset: 0, total_count: 0 });
    const put = await api('PUT', `/webhook-endpoints/${id}`, { body: {} });
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('GET, HEAD, PATCH, DELETE');
    expect((await api('DELETE', `/webhook-endpoints/${id}`)).status).toBe(204);
    expect((await api('GET', `/webhook-endpoints/${id}`)).status).toBe(404);
    expect((await api('DELETE', `/webhook-endpoints/${id}`)).status).toBe(404);
  });

  it('validation: the contract codes, every field at once', async () => {
    const { api } = await orgApi(open);
    expect(await fieldsOf(api('POST', '/webhook-endpoints', { body: {} }))).toEqual([
      ['url', 'required'],
      ['event_types', 'required'],
    ]);
    const unknownType = await api<{ error: { fields: Field[] } }>('POST', '/webhook-endpoints', { body: { url: 'https://a.example', event_types: ['asset.moved', 'asset.teleported'] } });
    expect(unknownType.status).toBe(400);
    expect(unknownType.body.error.fields).toEqual([
      { field: 'event_types[1]', code: 'invalid_value', message: expect.any(String), params: { allowed_values: ['asset.first_seen', 'asset.moved', 'asset.not_seen', 'asset.seen_again', 'alert.raised', 'alert.resolved'] } },
    ]);
    const cases: Array<[Record<string, unknown>, Array<[string, string]>]> = [
      [{ url: 'ftp://a.example/x', event_types: ['asset.moved'] }, [['url', 'invalid_value']]],
      [{ url: 'not a url', event_types: ['asset.moved'] }, [['url', 'invalid_value']]],
      [{ url: 'https://user:pw@a.example/x', event_types: ['asset.moved'] }, [['url', 'invalid_value']]],
      [{ url: `https://a.example/${'x'.repeat(2031)}`, event_types: ['asset.moved'] }, [['url', 'too_long']]],
      [{ url: 'https://a.example', event_types: [] }, [['event_types', 'too_short']]],
      [{ url: 'https://a.example', event_types: ['asset.moved', 'asset.moved'] }, [['event_types', 'invalid_value']]],
      [{ url: 'https://a.example', event_types: ['asset.moved'], not_seen_after_seconds: 59 }, [['not_seen_after_seconds', 'too_small']]],
      [{ url: 'https://a.example', event_types: ['asset.moved'], not_seen_after_seconds: 2_592_001 }, [['not_seen_after_seconds', 'too_large']]],
      [{ url: 'https://a.example', event_types: ['asset.moved'], description: '' }, [['description', 'too_short']]],
      [{ url: 'https://a.example', event_types: ['asset.moved'], secret: 'whsec_x' }, [['secret', 'unknown_field']]],
    ];
    for (const [body, expected] of cases) expect([body, await fieldsOf(api('POST', '/webhook-endpoints', { body }))]).toEqual([body, expected]);
    // 2048 characters exactly is the longest url.
    expect((await api('POST', '/webhook-endpoints', { body: { url: `https://a.example/${'x'.repeat(2030)}`, event_types: ['asset.moved'] } })).status).toBe(201);
    const wrongType = await api<{ error: { type: string } }>('POST', '/webhook-endpoints', { body: { url: 7, event_types: ['asset.moved'] } });
    expect([wrongType.status, wrongType.body.error.type]).toEqual([400, 'bad_request']);
    expect((await api('POST', '/webhook-endpoints', { body: { url: 'https://a.example', event_types: ['asset.moved'] }, contentType: 'text/plain' })).status).toBe(415);
    expect((await api('GET', '/webhook-endpoints?limit=0')).status).toBe(400);
  });

  it('at most 20 endpoints per organization (409 beyond); a deleted one no longer counts', async () => {
    const { api } = await orgApi(open);
    const ids: number[] = [];
    const results = await Promise.all(
      Array.from({ length: 22 }, (_, i) => api<{ data: { id: number }; error?: { type: string } }>('POST', '/webhook-endpoints', { body: { url: `https://a.example/${i}`, event_types: ['asset.moved'] } })),
    );
    for (const r of results) if (r.status === 201) ids.push(r.body.data.id);
    expect(results.map((r) => r.status).sort()).toEqual([...Array(20).fill(201), 409, 409]);
    expect(results.find((r) => r.status === 409)!.body.error!.type).toBe('conflict');
    expect((await api('DELETE', `/webhook-endpoints/${ids[0]}`)).status).toBe(204);
    expect((await api('POST', '/webhook-endpoints', { body: { url: 'https://a.example/again', event_types: ['asset.moved'] } })).status).toBe(201);
    expect((await api<{ total_count: number }>('GET', '/webhook-endpoints?limit=5&offset=18')).body).toMatchObject({ total_count: 20 });
  });

  it('tenancy: org B never sees org A\'s endpoints or deliveries (404), and its list is its own', async () => {
    const a = await orgApi(open);
    const b = await orgApi(open);
    const created = await a.api<{ data: { id: number } }>('POST', '/webhook-endpoints', { body: { url: 'https://a.example', event_types: ['asset.moved'] } });
    const id = created.body.data.id;
    for (const [method, path, body] of [
      ['GET', `/webhook-endpoints/${id}`],
      ['PATCH', `/webhook-endpoints/${id}`, { description: 'mine now' }],
      ['DELETE', `/webhook-endpoints/${id}`],
      ['POST', `/webhook-endpoints/${id}/rotate-secret`],
      ['GET', `/webhook-endpoints/${id}/deliveries`],
      ['POST', `/webhook-endpoints/${id}/deliveries/1/redeliver`],
    ] as const) {
      const reply = await b.api<{ error: { type: string } }>(method, path, body === undefined ? {} : { body });
      expect([method, path, reply.status, reply.body.error?.type]).toEqual([method, path, 404, 'not_found']);
    }
    expect((await b.api<{ total_count: number }>('GET', '/webhook-endpoints')).body.total_count).toBe(0);
    expect((await a.api('GET', `/webhook-endpoints/${id}`)).status).toBe(200);
  });

  it('scopes: webhooks:read reads, webhooks:write writes, other keys are refused', async () => {
    const writer = await orgApi(open);
    const created = await writer.api<{ data: { id: number } }>('POST', '/webhook-endpoints', { body: { url: 'https://a.example', event_types: ['asset.moved'] } });
    const reader = await mintApiKey(open.service.ctx, { orgId: writer.orgId, scopes: ['webhooks:read'] });
    const other = await mintApiKey(open.service.ctx, { orgId: writer.orgId, scopes: ['assets:read', 'tracking:read'] });
    const asReader = client(open.apiUrl, reader.token);
    const asOther = client(open.apiUrl, other.token);
    expect((await asReader('GET', `/webhook-endpoints/${created.body.data.id}`)).status).toBe(200);
    const refused = await asReader<{ error: { detail: string } }>('POST', '/webhook-endpoints', { body: { url: 'https://a.example', event_types: ['asset.moved'] } });
    expect([refused.status, refused.body.error.detail]).toEqual([403, 'Missing required scope: webhooks:write']);
    expect((await asReader('POST', `/webhook-endpoints/${created.body.data.id}/rotate-secret`)).status).toBe(403);
    expect((await asOther<{ error: { detail: string } }>('GET', '/webhook-endpoints')).body.error.detail).toBe('Missing required scope: webhooks:read');
  });

  it("session tokens: an admin's manages them, an operator's and a viewer's are refused on every webhook route (webhooks are the admins' in the web application)", async () => {
    const writer = await orgApi(open);
    const created = await writer.api<{ data: { id: number } }>('POST', '/webhook-endpoints', { body: { url: 'https://a.example', event_types: ['asset.moved'] } });
    const asAdmin = client(open.apiUrl, (await personWithToken(open.service.ctx, writer.orgId, 'admin')).token);
    const asUnscoped = client(open.apiUrl, (await mintSession(open.service.ctx, { user: 'ops@example.com', orgId: writer.orgId })).token);
    expect((await asUnscoped('GET', '/webhook-endpoints')).status).toBe(200);
    for (const role of ['operator', 'viewer'] as const) {
    const asMember = client(open.apiUrl, (await personWithToken(open.service.ctx, writer.orgId, role)).token);
    expect((await asAdmin('GET', `/webhook-endpoints/${created.body.data.id}`)).status).toBe(200);
    expect((await asAdmin('POST', '/webhook-endpoints', { body: { url: 'https://b.example', event_types: ['asset.moved'] } })).status).toBe(201);
    // The member's token passes every other read (assets, say), not these.
    expect((await asMember('GET', '/assets')).status).toBe(200);
    const id = created.body.data.id;
    for (const [method, path, body] of [
      ['GET', '/webhook-endpoints', undefined],
      ['GET', `/webhook-endpoints/${id}`, undefined],
      ['GET', `/webhook-endpoints/${id}/deliveries`, undefined],
      ['POST', '/webhook-endpoints', { url: 'https://c.example', event_types: ['asset.moved'] }],
      ['POST', `/webhook-endpoints/${id}/rotate-secret`, undefined],
      ['DELETE', `/webhook-endpoints/${id}`, undefined],
    ] as const) {
      const refused = await asMember<{ error: { type: string; detail: string } }>(method, path, body === undefined ? {} : { body });
      expect([method, path, refused.status, refused.body.error.detail]).toEqual([method, path, 403, `Your role (${role}) does not allow this`]);
    }
    }
  });
});

describe('webhook endpoints: private targets refused unless allowed', () => {
  it('refuses at create and on PATCH: literal private, loopback and link-local addresses (IPv4, IPv6, IPv4-mapped), names resolving to them, and http', async () => {
    const { api } = await orgApi(strict);
    for (const url of [
      'https://127.0.0.1/hook',
      'https://10.0.0.1/hook',
      'https://172.16.5.4/hook',
      'https://192.168.1.1/hook',
      'https://169.254.169.254/latest/meta-data',
      'https://0.0.0.0/hook',
      'https://[::1]/hook',
      'https://[fe80::1]/hook',
      'https://[fc00::1]/hook',
      'https://[::ffff:10.0.0.1]/hook',
      'https://[::ffff:127.0.0.1]/hook',
      'https://localhost/hook',
      'https://localhost:8443/hook',
      'http://93.184.215.14/hook',
    ]) {
      const reply = await api<{ error: { fields: Field[] } }>('POST', '/webhook-endpoints', { body: { url, event_types: ['asset.moved'] } });
      expect([url, reply.status, reply.body.error?.fields?.map((f) => [f.field, f.code])]).toEqual([url, 400, [['url', 'invalid_value']]]);
    }
    const created = await api<{ data: { id: number } }>('POST', '/webhook-endpoints', { body: { url: 'https://93.184.215.14/hook', event_types: ['asset.moved'] } });
    expect(created.status).toBe(201);
    expect(await fieldsOf(api('PATCH', `/webhook-endpoints/${created.body.data.id}`, { body: { url: 'https://[::ffff:192.168.0.1]/x' } }))).toEqual([['url', 'invalid_value']]);
  });

  it('allowed where private targets are (ENVIRONMENT=development by default): http and loopback', async () => {
    const { api } = await orgApi(open);
    expect((await api('POST', '/webhook-endpoints', { body: { url: 'http://127.0.0.1:9/hook', event_types: ['asset.moved'] } })).status).toBe(201);
    expect((await api('POST', '/webhook-endpoints', { body: { url: 'http://localhost:9/hook', event_types: ['asset.moved'] } })).status).toBe(201);
  });
});
