import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { handheld } from '../support/scans.js';
import { startTestService, type TestService } from '../support/service.js';
import { client, errorOf, type Reply } from '../master-data/http.js';

/**
 * The edge accepts only instants every store can hold (docs/api.md, "Time range"): on every path
 * an instant outside 0001-01-01T00:00:00Z..9999-12-31T23:59:59.999999Z is `invalid_value` with
 * one message, a date that does not exist is refused with the path's usual message, and what is
 * accepted is applied by the projections (the write answers only once they show it).
 */

const RANGE = 'must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z';

/** Inside RFC 3339's syntax, outside the range once in UTC. */
const OUT_OF_RANGE = ['0000-01-01T00:00:00Z', '0000-12-31T23:59:59.999999Z', '0001-01-01T00:00:00+00:01', '9999-12-31T23:59:59-00:01', '9999-12-31T23:30:00-01:00'];
/** Dates and times that do not exist, or are not RFC 3339. */
const IMPOSSIBLE = ['2026-02-30T00:00:00Z', '2025-02-29T00:00:00Z', '2026-04-31T00:00:00Z', '2026-01-01T24:00:00Z', '2026-01-01T23:60:00Z', '2026-01-01T23:59:60Z', '2026-13-01T00:00:00Z', '2026-00-10T00:00:00Z', '2026-01-00T00:00:00Z', '2026-01-01T00:00:00+24:00', '2026-01-01T00:00:00+01:60', '10000-01-01T00:00:00Z', '-0001-01-01T00:00:00Z', '2026-01-01T00:00:00'];

let svc: TestService;
let call: ReturnType<typeof client>;
let submit: ReturnType<typeof handheld>;
let assetId: number;
let locationId: number;

beforeAll(async () => {
  svc = await startTestService('time_range');
  const ctx = svc.service.ctx;
  const org = await createOrg(ctx, 'Time Org');
  const key = await mintApiKey(ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read'] });
  call = client(svc.apiUrl, key.token);
  submit = handheld(svc, (await mintApiKey(ctx, { orgId: org.id, scopes: ['scans:write'] })).token);
  const asset = await call<{ data: { id: number } }>('POST', '/assets', { body: { name: 'Clocked', tags: [{ tag_type: 'rfid', value: 'E2000001' }] } });
  expect(asset.status, asset.text).toBe(201);
  assetId = asset.body.data.id;
  const location = await call<{ data: { id: number } }>('POST', '/locations', { body: { name: 'Dock' } });
  expect(location.status, location.text).toBe(201);
  locationId = location.body.data.id;
});

afterAll(async () => {
  await svc?.stop();
});

function expectInvalid(reply: Reply, field: string, message: string | RegExp, label: string): void {
  expect(reply.status, `${label}: ${reply.text}`).toBe(400);
  const error = errorOf(reply);
  expect(error.type, label).toBe('validation_error');
  const entry = error.fields!.find((f) => f.field === field);
  expect(entry, `${label}: ${reply.text}`).toBeDefined();
  expect(entry!.code, label).toBe('invalid_value');
  if (typeof message === 'string') expect(entry!.message, label).toBe(message);
  else expect(entry!.message, label).toMatch(message);
}

describe('public bodies', () => {
  it('the issue\'s request: valid_from year 0 is invalid_value, and the service goes on for every write', async () => {
    const reply = await call('POST', '/assets', { body: { name: 't', valid_from: '0000-01-01T00:00:00Z' } });
    expectInvalid(reply, 'valid_from', `valid_from ${RANGE}`, 'year 0');
    expect(errorOf(reply).detail).toBe(`valid_from ${RANGE}`);
    const after = await call('POST', '/assets', { body: { name: 'after' } });
    expect(after.status, after.text).toBe(201);
  });

  it('every timestamp field of assets, locations and tags refuses instants out of range with the range message', async () => {
    const targets: Array<{ method: string; path: () => string; body: (field: string, value: string) => Record<string, unknown>; fields: string[] }> = [
      { method: 'POST', path: () => '/assets', body: (f, v) => ({ name: 'n', [f]: v }), fields: ['valid_from', 'valid_to'] },
      { method: 'PATCH', path: () => `/assets/${assetId}`, body: (f, v) => ({ [f]: v }), fields: ['valid_from', 'valid_to'] },
      { method: 'POST', path: () => '/locations', body: (f, v) => ({ name: 'n', [f]: v }), fields: ['valid_from', 'valid_to'] },
      { method: 'PATCH', path: () => `/locations/${locationId}`, body: (f, v) => ({ [f]: v }), fields: ['valid_from', 'valid_to'] },
      { method: 'POST', path: () => `/assets/${assetId}/tags`, body: (f, v) => ({ tag_type: 'rfid', value: 'AB01', [f]: v }), fields: ['valid_from', 'valid_to'] },
      { method: 'POST', path: () => '/assets', body: (f, v) => ({ name: 'n', tags: [{ tag_type: 'rfid', value: 'AB02', [f]: v }] }), fields: ['tags[0].valid_from', 'tags[0].valid_to'] },
    ];
    for (const target of targets) {
      for (const field of target.fields) {
        const leaf = field.replace(/^.*\./, '');
        for (const value of OUT_OF_RANGE) {
          const label = `${target.method} ${target.path()} ${field}=${value}`;
          expectInvalid(await call(target.method, target.path(), { body: target.body(leaf, value) }), field, `${leaf} ${RANGE}`, label);
        }
        for (const value of IMPOSSIBLE) {
          const label = `${target.method} ${target.path()} ${field}=${value}`;
          expectInvalid(await call(target.method, target.path(), { body: target.body(leaf, value) }), field, `${leaf} must be an RFC 3339 timestamp`, label);
        }
      }
    }
  });

  it('the range\'s own ends are accepted, applied and shown (to the millisecond)', async () => {
    const reply = await call<{ data: { id: number; valid_from: string; valid_to: string } }>('POST', '/assets', {
      body: { name: 'ends', valid_from: '0001-01-01T00:00:00Z', valid_to: '9999-12-31T23:59:59.999999Z' },
    });
    expect(reply.status, reply.text).toBe(201);
    expect(reply.body.data.valid_from).toBe('0001-01-01T00:00:00.000Z');
    expect(reply.body.data.valid_to).toBe('9999-12-31T23:59:59.999Z');
    const offsets = await call<{ data: { valid_from: string; valid_to: string } }>('POST', '/locations', {
      body: { name: 'offset ends', valid_from: '0001-01-01T00:59:00+00:59', valid_to: '9999-12-31T22:59:59.999999-01:00' },
    });
    expect(offsets.status, offsets.text).toBe(201);
    expect(offsets.body.data.valid_from).toBe('0001-01-01T00:00:00.000Z');
    expect(offsets.body.data.valid_to).toBe('9999-12-31T23:59:59.999Z');
    const read = await call<{ data: { valid_to: string } }>('GET', `/assets/${reply.body.data.id}`);
    expect(read.body.data.valid_to).toBe('9999-12-31T23:59:59.999Z');
  });
});

describe('queries', () => {
  it('history from/to: out of range → the range message; impossible → the usual timestamp message', async () => {
    for (const field of ['from', 'to']) {
      for (const value of OUT_OF_RANGE) {
        const reply = await call('GET', `/assets/${assetId}/history?${field}=${encodeURIComponent(value)}`);
        expectInvalid(reply, field, `${field} ${RANGE}`, `${field}=${value}`);
      }
      for (const value of IMPOSSIBLE) {
        const reply = await call('GET', `/assets/${assetId}/history?${field}=${encodeURIComponent(value)}`);
        expectInvalid(reply, field, `Invalid '${field}' timestamp; expected RFC 3339`, `${field}=${value}`);
      }
      const ok = await call('GET', `/assets/${assetId}/history?${field}=${encodeURIComponent('0001-01-01T00:00:00Z')}`);
      expect(ok.status, ok.text).toBe(200);
    }
  });
});

describe('handheld submissions', () => {
  const body = (reads: Array<Record<string, unknown>>, extra: Record<string, unknown> = {}) => ({
    submission_id: randomUUID(),
    device_id: 'hh-1',
    location: { id: locationId },
    reads,
    ...extra,
  });

  it('a read observed at 0001-01-01T00:00:00Z is recorded (202), and the asset is placed', async () => {
    const reply = await submit(body([{ tag_type: 'rfid', value: 'E2000001', observed_at: '0001-01-01T00:00:00Z' }]));
    expect(reply.status, JSON.stringify(reply.body)).toBe(202);
    expect(reply.body.data).toEqual({ accepted: 1, unknown: 0, duplicate: false });
    const history = await call<{ data: Array<{ event_observed_at: string }> }>('GET', `/assets/${assetId}/history`);
    expect(history.status, history.text).toBe(200);
    expect(history.body.data.map((v) => v.event_observed_at)).toContain('0001-01-01T00:00:00.000Z');
  });

  it('observed_at out of range → the range message; impossible dates → the timestamp message', async () => {
    for (const value of OUT_OF_RANGE) {
      const reply = await submit(body([{ tag_type: 'rfid', value: 'E2000001', observed_at: value }]));
      expect(reply.status, `${value}: ${JSON.stringify(reply.body)}`).toBe(400);
      expect(reply.body.error!.fields).toEqual([expect.objectContaining({ field: 'reads[0].observed_at', code: 'invalid_value', message: `observed_at ${RANGE}` })]);
    }
    for (const value of IMPOSSIBLE) {
      const reply = await submit(body([{ tag_type: 'rfid', value: 'E2000001', observed_at: value }]));
      expect(reply.status, `${value}: ${JSON.stringify(reply.body)}`).toBe(400);
      expect(reply.body.error!.fields).toEqual([expect.objectContaining({ field: 'reads[0].observed_at', code: 'invalid_value', message: 'observed_at must be an RFC 3339 timestamp' })]);
    }
  });

  it('submission_id and device_id refuse every C0 control and DEL, tab included', async () => {
    for (const control of ['\t', '\n', '\r', '\u0001', '\u001f', '\u007f']) {
      for (const field of ['submission_id', 'device_id']) {
        const reply = await submit(body([{ tag_type: 'rfid', value: 'E2000001' }], { [field]: `id${control}x` }));
        expect(reply.status, `${field} with ${JSON.stringify(control)}: ${JSON.stringify(reply.body)}`).toBe(400);
        expect(reply.body.error!.fields).toEqual([expect.objectContaining({ field, code: 'invalid_value', message: `${field} must not contain control characters` })]);
      }
    }
  });
});

describe('bodies over 1 MiB', () => {
  // A client that sends its whole body before reading the answer (fetch does) reads the 413
  // envelope, instead of a connection closed under it (EPIPE).
  for (const size of [2 * 1024 * 1024, 8 * 1024 * 1024]) {
    it(`a ${size / 1024 / 1024} MiB body reaches fetch as the 413 envelope, on both listeners`, async () => {
      const big = JSON.stringify({ name: 'n', metadata: { blob: 'x'.repeat(size) } });
      const token = (await mintApiKey(svc.service.ctx, { orgId: (await createOrg(svc.service.ctx, 'Big')).id, scopes: ['assets:write', 'scans:write'] })).token;
      for (const url of [`${svc.apiUrl}/assets`, `${svc.ingestUrl}/scans`]) {
        const response = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: big });
        expect(response.status, url).toBe(413);
        const envelope = (await response.json()) as { error: { type: string; detail: string } };
        expect(envelope.error.type).toBe('payload_too_large');
        expect(envelope.error.detail).toBe('Request body must not exceed 1 MiB');
      }
    });
  }

  it('the body is the last check (route, method, key, scope, content type, path ids come first), whatever its size', async () => {
    const big = JSON.stringify({ name: 'n', metadata: { blob: 'x'.repeat(3 * 1024 * 1024) } });
    const token = (await mintApiKey(svc.service.ctx, { orgId: (await createOrg(svc.service.ctx, 'Order')).id, scopes: ['assets:read'] })).token;
    const cases: Array<[string, string, Record<string, string>, number, string]> = [
      ['POST', `${svc.apiUrl}/no-such-route`, { authorization: `Bearer ${token}` }, 404, 'not_found'],
      ['PUT', `${svc.apiUrl}/assets`, { authorization: `Bearer ${token}` }, 405, 'method_not_allowed'],
      ['POST', `${svc.apiUrl}/assets`, { authorization: 'Bearer not-a-token' }, 401, 'unauthorized'],
      ['POST', `${svc.apiUrl}/assets`, { authorization: `Bearer ${token}` }, 403, 'forbidden'],
      ['POST', `${svc.ingestUrl}/scans`, { authorization: `Bearer ${token}` }, 403, 'forbidden'],
    ];
    for (let round = 0; round < 2; round++) {
      for (const [method, url, headers, status, type] of cases) {
        const response = await fetch(url, { method, headers: { ...headers, 'content-type': 'application/json' }, body: big });
        expect(response.status, `${method} ${url}`).toBe(status);
        expect(((await response.json()) as { error: { type: string } }).error.type).toBe(type);
      }
    }
  });

  it('a body sent without a length (chunked) past 1 MiB also gets the envelope', async () => {
    const token = (await mintApiKey(svc.service.ctx, { orgId: (await createOrg(svc.service.ctx, 'Chunked')).id, scopes: ['assets:write'] })).token;
    const encoder = new TextEncoder();
    const chunk = encoder.encode('x'.repeat(64 * 1024));
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent === 0) controller.enqueue(encoder.encode('{"name":"n","metadata":{"blob":"'));
        if (sent >= 3 * 1024 * 1024) {
          controller.enqueue(encoder.encode('"}}'));
          controller.close();
          return;
        }
        controller.enqueue(chunk);
        sent += chunk.length;
      },
    });
    const response = await fetch(`${svc.apiUrl}/assets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(response.status).toBe(413);
    expect(((await response.json()) as { error: { type: string } }).error.type).toBe('payload_too_large');
  });
});
