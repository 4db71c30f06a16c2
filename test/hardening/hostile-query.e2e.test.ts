import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { client, errorOf, type Reply } from '../master-data/http.js';

/**
 * Hostile query strings never reach a 500 (issue 9): keys that are names of properties every
 * object inherits (a lookup in a plain object finds them without the client declaring them), and
 * NUL in a value (Postgres text cannot hold it). Both are refused on every endpoint, with
 * `unknown_field` and `invalid_value` on the parameter. docs/api.md "What text the service accepts".
 */

let svc: TestService;
let call: ReturnType<typeof client>;
let assetId: number;
let locationId: number;

beforeAll(async () => {
  svc = await startTestService('hostile_query');
  const ctx = svc.service.ctx;
  const org = await createOrg(ctx, 'Query Org');
  const key = await mintApiKey(ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write'] });
  call = client(svc.apiUrl, key.token);
  const asset = await call<{ data: { id: number } }>('POST', '/assets', { body: { name: 'Asset' } });
  expect(asset.status, asset.text).toBe(201);
  assetId = asset.body.data.id;
  const root = await call<{ data: { id: number } }>('POST', '/locations', { body: { name: 'Root' } });
  expect(root.status, root.text).toBe(201);
  locationId = root.body.data.id;
});

afterAll(async () => {
  await svc?.stop();
});

interface Field {
  field: string;
  code: string;
  message: string;
}

const withIds = (path: string) => path.replace('{asset}', String(assetId)).replace('{location}', String(locationId));

/** A 400 validation_error whose entry on `field` has `code`. */
function expectFieldError(reply: Reply, field: string, code: string, label: string): Field {
  expect(reply.status, `${label}: ${reply.text}`).toBe(400);
  const error = errorOf(reply);
  expect(error.type, label).toBe('validation_error');
  const entry = (error.fields as Field[]).find((f) => f.field === field && f.code === code);
  expect(entry, `${label}: ${reply.text}`).toBeDefined();
  return entry!;
}

// Every property an object inherits from Object.prototype: the class of query keys that a lookup
// in a plain object would find without the client declaring them.
const BUILT_IN_KEYS = Object.getOwnPropertyNames(Object.prototype);

describe('query keys that are names of built-in object properties', () => {
  it('are unknown_field on every endpoint, list or not', async () => {
    expect(BUILT_IN_KEYS).toEqual(expect.arrayContaining(['__proto__', 'constructor', 'toString', 'valueOf', 'hasOwnProperty']));
    const paths = [
      ['GET', '/assets'],
      ['GET', '/locations'],
      ['GET', '/assets/{asset}'],
      ['GET', '/assets/{asset}/tags'],
      ['GET', '/locations/{location}'],
      ['GET', '/locations/{location}/children'],
      ['GET', '/locations/{location}/ancestors'],
      ['GET', '/locations/{location}/descendants'],
      ['GET', '/locations/{location}/tags'],
      ['GET', '/orgs/me'],
      ['DELETE', '/assets/999999'],
    ];
    for (const [method, path] of paths) {
      for (const key of BUILT_IN_KEYS) {
        for (const query of [`${encodeURIComponent(key)}=1`, `${encodeURIComponent(key)}=x&${encodeURIComponent(key)}=y`, `limit=5&${encodeURIComponent(key)}`]) {
          const reply = await call(method!, `${withIds(path!)}?${query}`);
          expectFieldError(reply, key, 'unknown_field', `${method} ${path}?${query}`);
        }
      }
    }
    // A body route checks its query too, before the body.
    const reply = await call('POST', '/assets?constructor=1', { body: { name: 'n' } });
    expectFieldError(reply, 'constructor', 'unknown_field', 'POST /assets?constructor=1');
  });
});

describe('NUL in a query value', () => {
  it('is invalid_value on that parameter, whatever the parameter', async () => {
    const cases: Array<[string, string]> = [
      ['/assets?q=%00', 'q'],
      ['/assets?q=forklift%00', 'q'],
      ['/locations?q=%00', 'q'],
      ['/assets?external_key=%00', 'external_key'],
      ['/assets?external_key=A&external_key=B%00', 'external_key'],
      ['/assets?location_external_key=%00', 'location_external_key'],
      ['/locations?external_key=%00', 'external_key'],
      ['/locations?parent_external_key=%00', 'parent_external_key'],
      ['/assets?sort=%00', 'sort'],
      ['/assets?limit=%00', 'limit'],
      ['/assets?is_active=%00', 'is_active'],
      ['/locations/{location}/children?offset=%00', 'offset'],
      ['/assets/{asset}/tags?limit=1%00', 'limit'],
    ];
    for (const [path, field] of cases) {
      const reply = await call('GET', withIds(path));
      expectFieldError(reply, field, 'invalid_value', path);
    }
    const q = await call('GET', '/assets?q=a%00');
    expect((errorOf(q).fields as Field[])[0]!.message).toBe('q must not contain the NUL character (\\u0000)');
  });
});
