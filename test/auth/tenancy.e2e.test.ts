import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * Tenancy: org B's key pointed at org A's ids must get exactly what a non-existent id gets
 * (404, fk_not_found or an empty list), never A's data and never a different error. Covers the
 * master-data endpoints that exist: assets, locations (with tree views) and tags of both.
 */

interface Reply {
  status: number;
  body: Record<string, unknown>;
}

interface ErrorShape {
  type: string;
  status: number;
  detail: string;
  fields?: Array<{ field: string; code: string }>;
}

const MISSING = 2_000_000_000;
const ALL_SCOPES = ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read'];

let svc: TestService;
let tokenA: string;
let tokenB: string;
/** Org A's resources. */
const a = { asset: 0, assetKey: '', assetTag: 0, root: 0, rootKey: '', child: 0, locationTag: 0, tagValue: '' };
/** Org B's own resources, the owners of sub-resource requests that name A's tag ids. */
const b = { asset: 0, location: 0 };

async function send(token: string, method: string, path: string, body?: unknown): Promise<Reply> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (body !== undefined) headers['content-type'] = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
  const response = await fetch(svc.apiUrl + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

async function created(token: string, path: string, body: unknown): Promise<{ id: number; external_key?: string }> {
  const reply = await send(token, 'POST', path, body);
  expect(reply.status, JSON.stringify(reply.body)).toBe(201);
  return (reply.body as { data: { id: number; external_key?: string } }).data;
}

/** An error with the ids in its text made neutral, so A's id and a missing id compare equal. */
function neutral(reply: Reply, ids: number[]): unknown {
  const error = reply.body.error as ErrorShape | undefined;
  if (!error) return { status: reply.status, body: reply.body };
  let detail = error.detail;
  for (const id of ids) detail = detail.split(String(id)).join('<id>');
  return { status: reply.status, type: error.type, detail, fields: error.fields?.map((f) => [f.field, f.code]) };
}

beforeAll(async () => {
  svc = await startTestService('auth_tenancy');
  const { ctx } = svc.service;
  const orgA = await createOrg(ctx, 'Tenant A');
  const orgB = await createOrg(ctx, 'Tenant B');
  tokenA = (await mintApiKey(ctx, { orgId: orgA.id, scopes: ALL_SCOPES })).token;
  tokenB = (await mintApiKey(ctx, { orgId: orgB.id, scopes: ALL_SCOPES })).token;

  a.tagValue = `E2801160600002084D9F${Date.now().toString(16).slice(-4).toUpperCase()}`;
  const root = await created(tokenA, '/locations', { name: 'A warehouse', external_key: 'A-ROOT' });
  a.root = root.id;
  a.rootKey = root.external_key!;
  a.child = (await created(tokenA, '/locations', { name: 'A aisle', external_key: 'A-AISLE', parent_id: a.root })).id;
  const asset = await created(tokenA, '/assets', { name: 'A forklift', external_key: 'A-FORKLIFT' });
  a.asset = asset.id;
  a.assetKey = asset.external_key!;
  a.assetTag = (await created(tokenA, `/assets/${a.asset}/tags`, { tag_type: 'rfid', value: a.tagValue })).id;
  a.locationTag = (await created(tokenA, `/locations/${a.root}/tags`, { tag_type: 'barcode', value: 'A-SHELF-LABEL' })).id;

  b.asset = (await created(tokenB, '/assets', { name: 'B pallet', external_key: 'B-PALLET' })).id;
  b.location = (await created(tokenB, '/locations', { name: 'B dock', external_key: 'B-DOCK' })).id;
});

afterAll(async () => {
  await svc?.stop();
});

/** Requests by id: each is made with A's id and with a missing one; B must not tell them apart. */
const byId: Array<{ name: string; expected: number; request: (id: number) => [string, string, unknown?]; id: () => number }> = [
  { name: 'GET asset', expected: 404, id: () => a.asset, request: (id) => ['GET', `/assets/${id}`] },
  { name: 'PATCH asset', expected: 404, id: () => a.asset, request: (id) => ['PATCH', `/assets/${id}`, { name: 'stolen' }] },
  { name: 'rename asset', expected: 404, id: () => a.asset, request: (id) => ['POST', `/assets/${id}/rename`, { external_key: 'STOLEN' }] },
  { name: 'DELETE asset', expected: 404, id: () => a.asset, request: (id) => ['DELETE', `/assets/${id}`] },
  { name: 'GET asset tags', expected: 404, id: () => a.asset, request: (id) => ['GET', `/assets/${id}/tags`] },
  { name: 'POST asset tag', expected: 404, id: () => a.asset, request: (id) => ['POST', `/assets/${id}/tags`, { tag_type: 'ble', value: 'B-BEACON' }] },
  { name: 'GET asset tag', expected: 404, id: () => a.asset, request: (id) => ['GET', `/assets/${id}/tags/${a.assetTag}`] },
  { name: 'DELETE asset tag', expected: 404, id: () => a.asset, request: (id) => ['DELETE', `/assets/${id}/tags/${a.assetTag}`] },
  { name: 'A tag under B asset: GET', expected: 404, id: () => a.assetTag, request: (id) => ['GET', `/assets/${b.asset}/tags/${id}`] },
  { name: 'A tag under B asset: DELETE', expected: 404, id: () => a.assetTag, request: (id) => ['DELETE', `/assets/${b.asset}/tags/${id}`] },
  { name: 'GET location', expected: 404, id: () => a.root, request: (id) => ['GET', `/locations/${id}`] },
  { name: 'PATCH location', expected: 404, id: () => a.root, request: (id) => ['PATCH', `/locations/${id}`, { name: 'stolen' }] },
  { name: 'rename location', expected: 404, id: () => a.root, request: (id) => ['POST', `/locations/${id}/rename`, { external_key: 'STOLEN' }] },
  { name: 'DELETE location', expected: 404, id: () => a.child, request: (id) => ['DELETE', `/locations/${id}`] },
  { name: 'ancestors', expected: 404, id: () => a.child, request: (id) => ['GET', `/locations/${id}/ancestors`] },
  { name: 'children', expected: 404, id: () => a.root, request: (id) => ['GET', `/locations/${id}/children`] },
  { name: 'descendants', expected: 404, id: () => a.root, request: (id) => ['GET', `/locations/${id}/descendants`] },
  { name: 'GET location tags', expected: 404, id: () => a.root, request: (id) => ['GET', `/locations/${id}/tags`] },
  { name: 'POST location tag', expected: 404, id: () => a.root, request: (id) => ['POST', `/locations/${id}/tags`, { tag_type: 'ble', value: 'B-BEACON-2' }] },
  { name: 'GET location tag', expected: 404, id: () => a.root, request: (id) => ['GET', `/locations/${id}/tags/${a.locationTag}`] },
  { name: 'DELETE location tag', expected: 404, id: () => a.root, request: (id) => ['DELETE', `/locations/${id}/tags/${a.locationTag}`] },
  { name: 'A tag under B location: GET', expected: 404, id: () => a.locationTag, request: (id) => ['GET', `/locations/${b.location}/tags/${id}`] },
  { name: 'A tag under B location: DELETE', expected: 404, id: () => a.locationTag, request: (id) => ['DELETE', `/locations/${b.location}/tags/${id}`] },
  { name: 'create location under A parent_id', expected: 400, id: () => a.root, request: (id) => ['POST', '/locations', { name: 'B shelf', parent_id: id }] },
  { name: 're-parent B location under A', expected: 400, id: () => a.root, request: (id) => ['PATCH', `/locations/${b.location}`, { parent_id: id }] },
  { name: 'list locations by A parent_id', expected: 200, id: () => a.root, request: (id) => ['GET', `/locations?parent_id=${id}`] },
  { name: 'list locations by A id', expected: 200, id: () => a.root, request: (id) => ['GET', `/locations?id=${id}&include_deleted=true`] },
  { name: 'list assets by A location_id', expected: 200, id: () => a.root, request: (id) => ['GET', `/assets?location_id=${id}`] },
];

describe('tenancy: org B against org A', () => {
  it.each(byId)('$name: same answer as for a missing id', async ({ expected, request, id }) => {
    const [method, path, body] = request(id());
    const foreign = await send(tokenB, method, path, body);
    const [missingMethod, missingPath, missingBody] = request(MISSING);
    const missing = await send(tokenB, missingMethod, missingPath, missingBody);
    expect(foreign.status, JSON.stringify(foreign.body)).toBe(expected);
    expect(neutral(foreign, [id()])).toEqual(neutral(missing, [MISSING]));
    if (expected === 400) {
      const fields = (foreign.body.error as ErrorShape).fields ?? [];
      expect(fields.map((f) => f.code)).toEqual(['fk_not_found']);
    }
    if (expected === 200) expect(foreign.body).toMatchObject({ data: [], total_count: 0 });
  });

  it('natural keys of A resolve to nothing for B', async () => {
    const requests: Array<[string, string, unknown?]> = [
      ['GET', `/assets?external_key=${a.assetKey}`],
      ['GET', `/locations?external_key=${a.rootKey}`],
      ['GET', `/locations?parent_external_key=${a.rootKey}`],
      ['GET', `/assets?location_external_key=${a.rootKey}`],
      ['GET', `/assets?q=forklift`],
      ['GET', `/assets?q=${a.tagValue}`],
      ['GET', `/locations?q=warehouse`],
    ];
    for (const [method, path] of requests) {
      const reply = await send(tokenB, method, path);
      expect({ path, status: reply.status, data: reply.body.data, total: reply.body.total_count }).toEqual({ path, status: 200, data: [], total: 0 });
    }
    const fk = await send(tokenB, 'POST', '/locations', { name: 'B shelf', parent_external_key: a.rootKey });
    expect(fk.status).toBe(400);
    expect((fk.body.error as ErrorShape).fields?.map((f) => [f.field, f.code])).toEqual([['parent_external_key', 'fk_not_found']]);
  });

  it('B lists only its own rows, and may reuse A’s keys and tag values', async () => {
    const assets = await send(tokenB, 'GET', '/assets');
    expect((assets.body.data as Array<{ id: number }>).map((r) => r.id)).toEqual([b.asset]);
    const locations = await send(tokenB, 'GET', '/locations');
    expect((locations.body.data as Array<{ id: number }>).map((r) => r.id)).toEqual([b.location]);
    await created(tokenB, '/assets', { name: 'B forklift', external_key: a.assetKey, tags: [{ tag_type: 'rfid', value: a.tagValue }] });
  });

  it('A still sees all of its data unchanged', async () => {
    const asset = await send(tokenA, 'GET', `/assets/${a.asset}`);
    expect(asset.status).toBe(200);
    expect(asset.body.data).toMatchObject({ id: a.asset, name: 'A forklift', external_key: 'A-FORKLIFT' });
    expect((await send(tokenA, 'GET', `/locations/${a.child}`)).status).toBe(200);
    expect((await send(tokenA, 'GET', `/assets/${a.asset}/tags/${a.assetTag}`)).status).toBe(200);
    expect((await send(tokenA, 'GET', `/locations/${a.root}/tags/${a.locationTag}`)).status).toBe(200);
  });
});
