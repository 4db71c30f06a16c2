import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { client, errorOf, type Reply } from '../master-data/http.js';

/**
 * `metadata` is stored as is (docs/api.md "POST /assets"): what a 2xx accepted is exactly what every
 * later read returns (issue 9, "Silently changed data"). A number the service cannot keep
 * exactly (beyond a 64-bit float's range or precision, or -0, which numeric storage turns into 0)
 * is refused with `invalid_value` on `metadata`, on create and on PATCH. docs/api.md "What text the
 * service accepts".
 */

interface Asset {
  id: number;
  metadata: Record<string, unknown>;
  updated_at: string;
}

let svc: TestService;
let call: ReturnType<typeof client>;
let assetId: number;

beforeAll(async () => {
  svc = await startTestService('metadata_exact');
  const ctx = svc.service.ctx;
  const org = await createOrg(ctx, 'Metadata Org');
  const key = await mintApiKey(ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write'] });
  call = client(svc.apiUrl, key.token);
  const created = await call<{ data: Asset }>('POST', '/assets', { body: { name: 'Numbers', metadata: { unchanged: 1 } } });
  expect(created.status, created.text).toBe(201);
  assetId = created.body.data.id;
});

afterAll(async () => {
  await svc?.stop();
});

/** Same values, -0 apart from 0, whatever the key order. */
function identical(a: unknown, b: unknown): boolean {
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) return Object.is(a, b);
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ak = Object.keys(a).sort();
  const bk = Object.keys(b).sort();
  return ak.length === bk.length && ak.every((k, i) => k === bk[i] && identical((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

function expectRefusedOnMetadata(reply: Reply, label: string): void {
  expect(reply.status, `${label}: ${reply.text}`).toBe(400);
  const error = errorOf(reply);
  expect(error.type).toBe('validation_error');
  expect(error.fields!.map((f) => [f.field, f.code]), label).toEqual([['metadata', 'invalid_value']]);
  expect(error.fields![0]!.message, label).toMatch(/^metadata holds the number .+, which cannot be stored exactly/);
}

// Numbers whose value a double (what the service computes with) does not hold: overflow,
// integers past 2^53 and decimals with more digits than survive, underflow, and negative zero.
const CANNOT_KEEP = [
  '1e309',
  '-1e309',
  '1E400',
  '123456789012345678901234567890',
  '9007199254740993',
  '-9007199254740993',
  '18446744073709551615',
  '0.1000000000000000055511151231257827',
  '3.14159265358979323846264338327950288',
  '1e-400',
  '2.5e-324',
  '-0',
  '-0.0',
  '-0e5',
];

describe('numbers in metadata', () => {
  it('that cannot be kept exactly are refused on create and on PATCH, at any depth, and nothing changes', async () => {
    for (const number of CANNOT_KEEP) {
      for (const metadata of [`{"n":${number}}`, `{"a":{"b":[1,2,{"c":${number}}]}}`, `{"list":[${number}]}`]) {
        expectRefusedOnMetadata(await call('POST', '/assets', { raw: `{"name":"n","metadata":${metadata}}` }), `create ${metadata}`);
        expectRefusedOnMetadata(await call('PATCH', `/assets/${assetId}`, { raw: `{"metadata":${metadata}}` }), `patch ${metadata}`);
      }
    }
    const after = await call<{ data: Asset }>('GET', `/assets/${assetId}`);
    expect(after.body.data.metadata).toEqual({ unchanged: 1 });
  });

  it('that can be kept are accepted and every read returns exactly the value sent', async () => {
    const numbers = [
      '0',
      '1',
      '-1',
      '1.5',
      '0.1',
      '-2.5e-7',
      '1.0',
      '1e2',
      '1E+2',
      '100e-2',
      '0.30000000000000004',
      '9007199254740992',
      '-9007199254740992',
      '123456789012345680000000000000',
      '1e21',
      '1.7976931348623157e308',
      '-1.7976931348623157e308',
      '5e-324',
      '2.2250738585072014e-308',
      '0.000',
    ];
    const nested = `{${numbers.map((n, i) => `"k${i}":${n}`).join(',')}}`;
    const raw = `{"name":"kept","metadata":{"top":[${numbers.join(',')}],"nested":{"deeper":${nested}}}}`;
    const sent = JSON.parse(raw) as { metadata: unknown };
    const created = await call<{ data: Asset }>('POST', '/assets', { raw });
    expect(created.status, created.text).toBe(201);
    expect(identical(created.body.data.metadata, sent.metadata), created.text).toBe(true);
    const read = await call<{ data: Asset }>('GET', `/assets/${created.body.data.id}`);
    expect(identical(read.body.data.metadata, sent.metadata), read.text).toBe(true);
    const listed = await call<{ data: Asset[] }>('GET', `/assets?external_key=${encodeURIComponent((read.body.data as unknown as { external_key: string }).external_key)}`);
    expect(identical(listed.body.data[0]!.metadata, sent.metadata), listed.text).toBe(true);

    // And what was read back can be sent back: a verbatim PATCH is a no-op.
    const patched = await call<{ data: Asset }>('PATCH', `/assets/${created.body.data.id}`, { raw: `{"metadata":${JSON.stringify(read.body.data.metadata)}}` });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.data.updated_at).toBe(read.body.data.updated_at);
    // The whole view, as its text came (docs/api.md "Changing a record: PATCH": a body you just read can be sent back).
    const view = read.text.slice('{"data":'.length, -1);
    const echoed = await call<{ data: Asset }>('PATCH', `/assets/${created.body.data.id}`, { raw: view });
    expect(echoed.status, echoed.text).toBe(200);
    expect(echoed.body.data.updated_at).toBe(read.body.data.updated_at);
  });

  it('outside metadata keep their own rules (an id beyond the range stays too_large)', async () => {
    const reply = await call('POST', '/locations', { raw: '{"name":"n","parent_id":123456789012345678901234567890}' });
    expect(reply.status).toBe(400);
    expect(errorOf(reply).fields!.map((f) => [f.field, f.code, f.params])).toEqual([['parent_id', 'too_large', { max: 2147483647 }]]);
  });
});
