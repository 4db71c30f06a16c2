import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import {
  assertNoFailures,
  checkedResponses,
  contractOf,
  guardInstalled,
  guardResponses,
  recordResponse,
  takeFailures,
  unguardResponses,
  type Contract,
  type ObservedResponse,
} from '../support/openapi-guard.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * The contract guard (test/support/openapi-guard.ts) cannot pass silently: it is installed in
 * every test file, it checks the responses of test services, and it refuses each way a response
 * can depart from the published document.
 */

let svc: TestService;
let contract: Contract;
let token: string;

beforeAll(async () => {
  svc = await startTestService('openapi_guard');
  contract = contractOf(await (await fetch(new URL('/openapi/v1.json', svc.apiUrl))).text());
  const org = await createOrg(svc.service.ctx, 'Guard');
  token = (await mintApiKey(svc.service.ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write'] })).token;
});
afterAll(async () => {
  await svc?.stop();
});

/** A real response of the service, as the guard sees it. */
async function observe(path: string, init: RequestInit = {}): Promise<ObservedResponse> {
  const response = await fetch(svc.apiUrl + path, { ...init, headers: { authorization: `Bearer ${token}`, ...(init.headers as Record<string, string>) } });
  return { status: response.status, headers: response.headers, body: await response.text() };
}

/** The same response with some headers changed (null removes one). */
function withHeaders(response: ObservedResponse, changes: Record<string, string | null>): ObservedResponse {
  const headers = new Headers(response.headers);
  for (const [name, value] of Object.entries(changes)) {
    if (value === null) headers.delete(name);
    else headers.set(name, value);
  }
  return { ...response, headers };
}

function withBody(response: ObservedResponse, change: (body: { data: Record<string, unknown> }) => unknown): ObservedResponse {
  return { ...response, body: JSON.stringify(change(JSON.parse(response.body) as { data: Record<string, unknown> })) };
}

describe('the contract guard', () => {
  it('wraps fetch in every test file and checks the responses of test services (and only those)', async () => {
    expect(guardInstalled()).toBe(true);
    const before = checkedResponses();
    expect((await fetch(`${svc.apiUrl}/assets`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    expect((await fetch(`${svc.apiUrl}/assets`)).status).toBe(401);
    expect(checkedResponses()).toBe(before + 2);
    // The ops listener and the documents themselves are not operations of the document.
    await fetch(new URL('/openapi/v1.json', svc.apiUrl));
    await fetch(`${svc.opsUrl}/healthz`);
    expect(checkedResponses()).toBe(before + 2);
  });

  it('accepts the real responses it is shown', async () => {
    const created = await observe('/assets', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Pump' }) });
    expect(contract.check('POST', '/api/v1/assets', created)).toEqual([]);
    const id = (JSON.parse(created.body) as { data: { id: number } }).data.id;
    expect(contract.check('GET', `/api/v1/assets/${id}`, await observe(`/assets/${id}`))).toEqual([]);
    expect(contract.check('HEAD', `/api/v1/assets/${id}`, await observe(`/assets/${id}`, { method: 'HEAD' }))).toEqual([]);
  });

  it('refuses a body that departs from the schema: an undeclared field, a wrong type, a bad format or pattern, a missing field', async () => {
    const created = await observe('/assets', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Valve' }) });
    const id = (JSON.parse(created.body) as { data: { id: number } }).data.id;
    const read = await observe(`/assets/${id}`);
    const check = (response: ObservedResponse) => contract.check('GET', `/api/v1/assets/${id}`, response);
    expect(check(withBody(read, (b) => ({ ...b, data: { ...b.data, colour: 'red' } })))).toEqual([expect.stringMatching(/must NOT have additional properties \(colour\)/)]);
    expect(check(withBody(read, (b) => ({ ...b, next: null })))).toEqual([expect.stringMatching(/additional properties \(next\)/)]);
    expect(check(withBody(read, (b) => ({ data: { ...b.data, id: String(b.data.id) } })))).toEqual([expect.stringMatching(/body\/data\/id must be integer/)]);
    expect(check(withBody(read, (b) => ({ data: { ...b.data, created_at: 'yesterday' } })))).toEqual([expect.stringMatching(/created_at must match format "date-time"/)]);
    expect(check(withBody(read, (b) => ({ data: { ...b.data, external_key: 'A.B' } })))).toEqual([expect.stringMatching(/external_key must match pattern/)]);
    expect(check(withBody(read, (b) => ({ data: { ...b.data, id: 0 } })))).toEqual([expect.stringMatching(/id must be >= 1/)]);
    const { tags: _tags, ...withoutTags } = (JSON.parse(read.body) as { data: Record<string, unknown> }).data;
    expect(check({ ...read, body: JSON.stringify({ data: withoutTags }) })).toEqual([expect.stringMatching(/must have required property 'tags'/)]);
    expect(check({ ...read, body: 'not json' })).toEqual([expect.stringMatching(/not JSON/)]);
    expect(check(withHeaders(read, { 'content-type': 'text/plain' }))).toEqual([expect.stringMatching(/Content-Type text\/plain/)]);
  });

  it('refuses a status the operation does not list, and a 405 or 404 that does not read as components.responses says', async () => {
    const read = await observe('/assets');
    expect(contract.check('GET', '/api/v1/assets', { ...read, status: 405 })).toEqual([expect.stringMatching(/status 405 is not documented for get \/assets/)]);
    expect(contract.check('GET', '/api/v1/orgs/me', { ...read, status: 403 })).toEqual([expect.stringMatching(/status 403 is not documented for get \/orgs\/me/)]);
    const refused = await observe('/assets', { method: 'PUT' });
    expect(refused.status).toBe(405);
    expect(contract.check('PUT', '/api/v1/assets', refused)).toEqual([]);
    expect(contract.check('PUT', '/api/v1/assets', withHeaders(refused, { allow: 'GET, HEAD' }))).toEqual([expect.stringMatching(/Allow: GET, HEAD, but \/assets declares/)]);
    expect(contract.check('PUT', '/api/v1/assets', withHeaders(refused, { allow: null }))).toEqual([expect.stringMatching(/header Allow is missing/)]);
    expect(contract.check('GET', '/api/v1/no-such-route', read)).toEqual([expect.stringMatching(/status 200, but #\/components\/responses\/UnknownRoute is 404/)]);
  });

  it('refuses a documented header that is missing or out of its schema', async () => {
    const read = await observe('/assets');
    expect(contract.check('GET', '/api/v1/assets', withHeaders(read, { 'x-request-id': null }))).toEqual(['header X-Request-ID is missing']);
    expect(contract.check('GET', '/api/v1/assets', withHeaders(read, { 'x-ratelimit-remaining': 'many' }))).toEqual([expect.stringMatching(/header X-RateLimit-Remaining: .* must be integer/)]);
    const unauthorized = await observe('/assets', { headers: { authorization: 'Basic x' } });
    expect(unauthorized.status).toBe(401);
    expect(contract.check('GET', '/api/v1/assets', unauthorized)).toEqual([]);
    expect(contract.check('GET', '/api/v1/assets', withHeaders(unauthorized, { 'www-authenticate': 'Basic' }))).toEqual([expect.stringMatching(/header WWW-Authenticate: .* must be equal to constant/)]);
    const created = await observe('/assets', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Hose' }) });
    expect(contract.check('POST', '/api/v1/assets', withHeaders(created, { location: null }))).toEqual(['header Location is missing']);
    const rateLimited = { ...unauthorized, status: 429, body: unauthorized.body.replace('"unauthorized"', '"rate_limited"').replace(/"status":401/, '"status":429') };
    expect(contract.check('GET', '/api/v1/assets', rateLimited)).toEqual(['header Retry-After is missing']);
  });

  it('refuses a HEAD answer with a body', async () => {
    const read = await observe('/assets');
    expect(contract.check('HEAD', '/api/v1/assets', read)).toEqual([expect.stringMatching(/a body where the document has none/)]);
  });

  it('a response that does not match, received through fetch, is recorded and fails the test (afterEach)', async () => {
    // A listener that answers like the service but for one field, guarded like a test service.
    const documentText = await (await fetch(new URL('/openapi/v1.json', svc.apiUrl))).text();
    const real = await observe('/orgs/me');
    const rogue = http.createServer((request, response) => {
      if (request.url === '/openapi/v1.json') return response.writeHead(200, { 'content-type': 'application/json' }).end(documentText);
      const headers = Object.fromEntries([...real.headers].filter(([name]) => !['content-length', 'x-request-id'].includes(name)));
      response.writeHead(200, headers).end(JSON.stringify({ data: { ...(JSON.parse(real.body) as { data: object }).data, extra: true } }));
    });
    await new Promise<void>((resolve) => rogue.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(rogue.address() as AddressInfo).port}/api/v1`;
    try {
      await guardResponses(base, new URL('/openapi/v1.json', base).href);
      const response = await fetch(`${base}/orgs/me`);
      expect(response.status).toBe(200);
      expect(((await response.json()) as { data: { extra: boolean } }).data.extra).toBe(true);
      const failures = takeFailures();
      expect(failures).toHaveLength(1);
      expect(failures[0]).toMatch(/^GET \/api\/v1\/orgs\/me → 200 does not match the OpenAPI document \[the contract guard > a response that does not match/);
      expect(failures[0]).toContain('header X-Request-ID is missing');
      expect(failures[0]).toContain('must NOT have additional properties (extra)');
    } finally {
      unguardResponses(base);
      await new Promise((resolve) => rogue.close(resolve));
    }
    // What the setup file's afterEach does with a recorded failure.
    recordResponse('GET', new URL(`${svc.apiUrl}/assets`), { ...real, status: 418 });
    expect(() => assertNoFailures()).toThrow(/1 response\(s\) did not match the published OpenAPI document:\nGET \/api\/v1\/assets → 418/);
    expect(() => assertNoFailures()).not.toThrow();
  });
});
