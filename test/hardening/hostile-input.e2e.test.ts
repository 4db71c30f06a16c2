import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { client, errorOf, type Reply } from '../master-data/http.js';

/**
 * Hostile bodies never reach a 500 (issue 9): text that is not well-formed Unicode, NUL where
 * Postgres cannot store it, and nesting deep enough to overflow a recursive walk. Each is refused
 * with a 4xx in the error envelope, for every place such input can appear in a body, not only the
 * examples of the issue. docs/api.md "What text the service accepts" states the rules.
 */

let svc: TestService;
let call: ReturnType<typeof client>;
let token: string;
let assetId: number;
let locationId: number;
let childId: number;

beforeAll(async () => {
  svc = await startTestService('hostile_input');
  const ctx = svc.service.ctx;
  const org = await createOrg(ctx, 'Hostile Org');
  const key = await mintApiKey(ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write'] });
  token = key.token;
  call = client(svc.apiUrl, token);
  const asset = await call<{ data: { id: number } }>('POST', '/assets', { body: { name: 'Target asset', metadata: { keep: 'me' } } });
  expect(asset.status, asset.text).toBe(201);
  assetId = asset.body.data.id;
  const root = await call<{ data: { id: number } }>('POST', '/locations', { body: { name: 'Root' } });
  expect(root.status, root.text).toBe(201);
  locationId = root.body.data.id;
  const child = await call<{ data: { id: number } }>('POST', '/locations', { body: { name: 'Child', parent_id: locationId } });
  expect(child.status, child.text).toBe(201);
  childId = child.body.data.id;
});

afterAll(async () => {
  await svc?.stop();
});

interface Field {
  field: string;
  code: string;
  message: string;
}

/** The top-level body field a field entry names (`tags[0].value` → `tags`). */
const topField = (field: string) => field.split(/[.[]/)[0]!;

function expectRefused(reply: Reply, label: string): void {
  expect(reply.status, `${label}: ${reply.text}`).toBe(400);
  expect(['validation_error', 'bad_request'], label).toContain(errorOf(reply).type);
}

/** A 400 validation_error with an entry on `field` (or inside it) of one of `codes`. */
function expectFieldError(reply: Reply, field: string, codes: string[], label: string): Field {
  expect(reply.status, `${label}: ${reply.text}`).toBe(400);
  const error = errorOf(reply);
  expect(error.type, label).toBe('validation_error');
  const entry = (error.fields as Field[]).find((f) => topField(f.field) === field && codes.includes(f.code));
  expect(entry, `${label}: ${reply.text}`).toBeDefined();
  return entry!;
}

// Strings that are not well-formed UTF-16, written as JSON escapes (the only way they can arrive
// in a UTF-8 body): lone high and low surrogates, at the start, the end and in the middle, and a
// pair in the wrong order.
const MALFORMED = ['\\ud800', '\\udfff', 'abc\\udbff', '\\udc00x', '\\ud800\\u0041', '\\udc00\\ud800', 'ok\\ud83d'];

/** Every place a client string can travel in a body, as [method, path, raw body, field]. */
function bodiesCarrying(text: string): Array<[string, string, string, string]> {
  const s = `"${text}"`;
  return [
    ['POST', '/assets', `{"name":${s}}`, 'name'],
    ['POST', '/assets', `{"name":"n","description":${s}}`, 'description'],
    ['POST', '/assets', `{"name":"n","external_key":${s}}`, 'external_key'],
    ['POST', '/assets', `{"name":"n","metadata":{"k":${s}}}`, 'metadata'],
    ['POST', '/assets', `{"name":"n","metadata":{${s}:1}}`, 'metadata'],
    ['POST', '/assets', `{"name":"n","metadata":{"a":[1,{"b":[${s}]}]}}`, 'metadata'],
    ['POST', '/assets', `{"name":"n","metadata":{"a":{"b":{${s}:null}}}}`, 'metadata'],
    ['POST', '/assets', `{"name":"n","tags":[{"tag_type":"rfid","value":${s}}]}`, 'tags'],
    ['POST', '/assets', `{"name":"n","tags":[{"tag_type":${s},"value":"v"}]}`, 'tags'],
    ['PATCH', '/assets/{asset}', `{"name":${s}}`, 'name'],
    ['PATCH', '/assets/{asset}', `{"description":${s}}`, 'description'],
    ['PATCH', '/assets/{asset}', `{"metadata":{"k":[${s}]}}`, 'metadata'],
    ['PATCH', '/assets/{asset}', `{"metadata":{${s}:"v"}}`, 'metadata'],
    ['PATCH', '/assets/{asset}', `{"external_key":${s}}`, 'external_key'],
    ['POST', '/assets/{asset}/rename', `{"external_key":${s}}`, 'external_key'],
    ['POST', '/assets/{asset}/tags', `{"tag_type":"ble","value":${s}}`, 'value'],
    ['POST', '/locations', `{"name":${s}}`, 'name'],
    ['POST', '/locations', `{"name":"n","description":${s}}`, 'description'],
    ['POST', '/locations', `{"name":"n","external_key":${s}}`, 'external_key'],
    ['POST', '/locations', `{"name":"n","parent_external_key":${s}}`, 'parent_external_key'],
    ['POST', '/locations', `{"name":"n","tags":[{"tag_type":"barcode","value":${s}}]}`, 'tags'],
    ['PATCH', '/locations/{location}', `{"name":${s}}`, 'name'],
    ['PATCH', '/locations/{location}', `{"parent_external_key":${s}}`, 'parent_external_key'],
    ['POST', '/locations/{location}/rename', `{"external_key":${s}}`, 'external_key'],
    ['POST', '/locations/{location}/tags', `{"tag_type":"rfid","value":${s}}`, 'value'],
  ];
}

const withIds = (path: string) => path.replace('{asset}', String(assetId)).replace('{location}', String(locationId));

describe('text that is not well-formed Unicode', () => {
  it('is invalid_value on the field holding it, in every string of every body (values and keys, any depth)', async () => {
    for (const text of MALFORMED) {
      for (const [method, path, raw, field] of bodiesCarrying(text)) {
        const reply = await call(method, withIds(path), { raw });
        expectFieldError(reply, field, ['invalid_value'], `${method} ${path} ${raw}`);
      }
    }
  });

  it('in an unknown key or an unknown field’s value is still a 400, never a 500', async () => {
    for (const text of MALFORMED) {
      for (const raw of [`{"name":"n","${text}":1}`, `{"name":"n","extra":"${text}"}`, `{"name":"n","extra":{"${text}":["${text}"]}}`]) {
        expectRefused(await call('POST', '/assets', { raw }), raw);
        expectRefused(await call('POST', '/locations', { raw }), raw);
      }
    }
  });

  it('names the rule in the message and changes nothing', async () => {
    const reply = await call('PATCH', `/assets/${assetId}`, { raw: '{"name":"\\ud800renamed","metadata":{"k":"\\udfff"}}' });
    const entries = errorOf(reply).fields as Field[];
    expect(entries.map((f) => [f.field, f.code])).toEqual([
      ['name', 'invalid_value'],
      ['metadata', 'invalid_value'],
    ]);
    expect(entries[0]!.message).toBe('name must be valid Unicode text (no lone surrogates)');
    const after = await call<{ data: { name: string; metadata: unknown } }>('GET', `/assets/${assetId}`);
    expect(after.body.data).toMatchObject({ name: 'Target asset', metadata: { keep: 'me' } });
  });

  it('well-formed text outside the BMP (surrogate pairs, escaped or raw) is accepted and returned as sent', async () => {
    const raw = '{"name":"\\ud83d\\ude9c tractor 🚜","metadata":{"\\ud83d\\udce6":"📦","nested":["\\ud834\\udd1e"]}}';
    const reply = await call<{ data: { id: number } }>('POST', '/assets', { raw });
    expect(reply.status, reply.text).toBe(201);
    const got = await call<{ data: { name: string; metadata: unknown } }>('GET', `/assets/${reply.body.data.id}`);
    const sent = JSON.parse(raw) as { name: string; metadata: unknown };
    expect(got.body.data.name).toBe(sent.name);
    expect(got.body.data.metadata).toEqual(sent.metadata);
  });

  it('a body that is not valid UTF-8 is a 400 bad_request (it is not JSON text)', async () => {
    for (const bytes of [Buffer.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]), Buffer.from('{"name":"\xed\xa0\x80"}', 'latin1')]) {
      const response = await fetch(`${svc.apiUrl}/assets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: bytes,
      });
      const body = (await response.json()) as { error: { type: string; detail: string } };
      expect(response.status).toBe(400);
      expect(body.error).toMatchObject({ type: 'bad_request', detail: 'Request body is not valid JSON' });
    }
  });
});

describe('NUL (U+0000)', () => {
  it('anywhere in metadata (keys and values, any depth) is invalid_value on metadata, on create and on PATCH', async () => {
    const metadatas = [
      '{"k":"\\u0000"}',
      '{"k":"a\\u0000b"}',
      '{"\\u0000":1}',
      '{"a\\u0000":1}',
      '{"a":[{"b":"\\u0000"}]}',
      '{"a":{"b":{"\\u0000c":true}}}',
      '{"a":["x",["y",["\\u0000"]]]}',
    ];
    for (const metadata of metadatas) {
      const created = await call('POST', '/assets', { raw: `{"name":"n","metadata":${metadata}}` });
      const entry = expectFieldError(created, 'metadata', ['invalid_value'], metadata);
      expect(entry).toMatchObject({ field: 'metadata', message: 'metadata must not contain the NUL character (\\u0000)' });
      expectFieldError(await call('PATCH', `/assets/${assetId}`, { raw: `{"metadata":${metadata}}` }), 'metadata', ['invalid_value'], metadata);
    }
  });

  it('in any other string of a body is a 400 as well', async () => {
    for (const [method, path, raw, field] of bodiesCarrying('x\\u0000y')) {
      const reply = await call(method, withIds(path), { raw });
      expectFieldError(reply, field, ['invalid_value'], `${method} ${path} ${raw}`);
    }
  });
});

/** `{"a":{"a":…{}…}}` with `levels` objects, the outermost included. */
const nestedObjects = (levels: number) => '{"a":'.repeat(levels - 1) + '{}' + '}'.repeat(levels - 1);
const nestedArrays = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
// Just under the 1 MiB body limit, so the nesting itself is what the service has to survive.
const HUGE = 500_000;

describe('nesting', () => {
  it('metadata may nest 32 levels (its own object counting as the first); beyond that is invalid_value on metadata', async () => {
    const ok = await call<{ data: { id: number; metadata: unknown } }>('POST', '/assets', { raw: `{"name":"deep","metadata":${nestedObjects(32)}}` });
    expect(ok.status, ok.text).toBe(201);
    expect(ok.body.data.metadata).toEqual(JSON.parse(nestedObjects(32)));
    const mixed = `{"a":[${nestedObjects(30)}]}`; // 32 levels: object, array, then 30 objects
    expect((await call('POST', '/assets', { raw: `{"name":"deep","metadata":${mixed}}` })).status).toBe(201);

    for (const metadata of [nestedObjects(33), `{"a":[${nestedObjects(31)}]}`, `{"a":${nestedArrays(32)}}`, nestedObjects(5_000), `{"a":${nestedArrays(HUGE / 2)}}`]) {
      const created = await call('POST', '/assets', { raw: `{"name":"deep","metadata":${metadata}}` });
      const entry = expectFieldError(created, 'metadata', ['invalid_value'], `create, ${metadata.length} bytes`);
      expect(entry.message).toBe('metadata must not nest objects and arrays more than 32 levels deep');
      expectFieldError(await call('PATCH', `/assets/${assetId}`, { raw: `{"metadata":${metadata}}` }), 'metadata', ['invalid_value'], 'patch');
    }
  });

  it('a body of about 1 MiB nested anywhere (whole body, a declared field, an unknown one, an array) is a 400, never a 500', async () => {
    const bodies = [
      nestedArrays(HUGE),
      '['.repeat(HUGE * 2 - 10),
      nestedObjects(HUGE / 5),
      `{"name":${nestedArrays(HUGE)}}`,
      `{"name":"n","unknown":${nestedArrays(HUGE)}}`,
      `{"name":"n","metadata":${nestedObjects(HUGE / 5)}}`,
      `{"name":"n","tags":${nestedArrays(HUGE)}}`,
      `{"name":"n","tags":[{"tag_type":"rfid","value":${nestedArrays(HUGE)}}]}`,
    ];
    for (const raw of bodies) {
      expect(raw.length).toBeLessThan(1024 * 1024);
      for (const [method, path] of [
        ['POST', '/assets'],
        ['PATCH', `/assets/${assetId}`],
        ['POST', '/locations'],
        ['PATCH', `/locations/${childId}`],
        ['POST', `/assets/${assetId}/tags`],
      ] as const) {
        const started = performance.now();
        expectRefused(await call(method, path, { raw }), `${method} ${path} ${raw.slice(0, 30)}…`);
        expect(performance.now() - started).toBeLessThan(5_000);
      }
    }
    // And the service is fine afterwards.
    expect((await call('GET', '/assets?limit=1')).status).toBe(200);
  });
});
