import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';

/**
 * `metadata` is stored as is (docs/api.md "POST /assets"): its keys are the client's, and a key that
 * is the name of a built-in object property (`__proto__`, `constructor`, …) is stored and
 * returned like any other, at any depth, never dropped or turned into a prototype (issue 9).
 */

interface Asset {
  id: number;
  metadata: Record<string, unknown>;
}

let svc: TestService;
let call: ReturnType<typeof client>;

beforeAll(async () => {
  svc = await startTestService('metadata_keys');
  const ctx = svc.service.ctx;
  const org = await createOrg(ctx, 'Metadata Keys Org');
  const key = await mintApiKey(ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write'] });
  call = client(svc.apiUrl, key.token);
});

afterAll(async () => {
  await svc?.stop();
});

/** Same values whatever the key order (own keys only, `__proto__` included). */
function identical(a: unknown, b: unknown): boolean {
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) return Object.is(a, b);
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ak = Object.keys(a).sort();
  const bk = Object.keys(b).sort();
  return ak.length === bk.length && ak.every((k, i) => k === bk[i] && identical((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

describe('keys in metadata', () => {
  it('that are names of built-in object properties are stored and returned like any other key', async () => {
    const raw =
      '{"name":"keys","metadata":{"__proto__":{"polluted":true},"constructor":1,"toString":"s","hasOwnProperty":null,"valueOf":[],"":"empty","a.b":{"__proto__":[1]},"[0]":0}}';
    const sent = JSON.parse(raw) as { metadata: Record<string, unknown> };
    expect(Object.keys(sent.metadata)).toContain('__proto__');
    const created = await call<{ data: Asset }>('POST', '/assets', { raw });
    expect(created.status, created.text).toBe(201);
    const read = await call<{ data: Asset }>('GET', `/assets/${created.body.data.id}`);
    expect(identical(created.body.data.metadata, sent.metadata), created.text).toBe(true);
    expect(identical(read.body.data.metadata, sent.metadata), read.text).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();

    const patched = await call<{ data: Asset }>('PATCH', `/assets/${created.body.data.id}`, { raw: '{"metadata":{"__proto__":{"x":1}}}' });
    expect(patched.status, patched.text).toBe(200);
    const again = await call<{ data: Asset }>('GET', `/assets/${created.body.data.id}`);
    expect(identical(again.body.data.metadata, JSON.parse('{"__proto__":{"x":1}}')), again.text).toBe(true);
  });
});
