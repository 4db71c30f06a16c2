import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MINTABLE_SCOPES } from '../../shared/auth/scopes.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { checkedResponses } from '../support/openapi-guard.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * Issue 14: the published documents tell a generated client everything: valid OpenAPI 3.1, the
 * headers of every answer, HEAD wherever GET, the real status list of each operation, exact
 * formats. Every response below is also checked against the document by the contract guard
 * (test/support/openapi-guard.ts), which fails a test whose response the document does not list.
 */

type Json = Record<string, unknown>;
interface Operation {
  operationId: string;
  'x-required-scopes': string[];
  parameters?: Json[];
  requestBody?: { content: Record<string, { schema: Json }> };
  responses: Record<string, { description: string; headers?: Record<string, { $ref: string }>; content?: Record<string, { schema: Json }> }>;
}
interface Doc {
  openapi: string;
  servers: Array<{ url: string }>;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Json>; headers: Record<string, Json>; responses: Record<string, Operation['responses'][string]> };
}

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
const VERBS = ['get', 'head', 'post', 'put', 'patch', 'delete', 'options', 'trace'];

let svc: TestService;
let api: Doc;
let ingest: Doc;
let token: string;

const origin = (url: string) => new URL(url).origin;

beforeAll(async () => {
  svc = await startTestService('openapi_document');
  api = (await (await fetch(`${origin(svc.apiUrl)}/openapi/v1.json`)).json()) as Doc;
  ingest = (await (await fetch(`${origin(svc.ingestUrl)}/openapi/v1.json`)).json()) as Doc;
  const org = await createOrg(svc.service.ctx, 'Document');
  token = (await mintApiKey(svc.service.ctx, { orgId: org.id, scopes: MINTABLE_SCOPES })).token;
});
afterAll(async () => {
  await svc?.stop();
});

const operationsOf = (doc: Doc) =>
  Object.entries(doc.paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => ({ path, method, op })));

/** Every schema object below `node`, with where it is. */
function* schemas(node: unknown, at: string): Generator<{ at: string; schema: Json }> {
  if (node === null || typeof node !== 'object') return;
  if (Array.isArray(node)) {
    for (const [i, item] of node.entries()) yield* schemas(item, `${at}/${i}`);
    return;
  }
  const object = node as Json;
  if (typeof object.type === 'string' || Array.isArray(object.type) || 'anyOf' in object) yield { at, schema: object };
  for (const [key, value] of Object.entries(object)) yield* schemas(value, `${at}/${key}`);
}

/** The named properties of every object schema below `node`. */
function* properties(node: unknown, at: string): Generator<{ at: string; name: string; schema: Json }> {
  for (const { at: where, schema } of schemas(node, at)) {
    for (const [name, property] of Object.entries((schema.properties ?? {}) as Record<string, Json>)) {
      // A nullable field is anyOf [the field, null]: look at the field.
      const branches = (property.anyOf as Json[] | undefined)?.filter((b) => b.type !== 'null') ?? [property];
      for (const branch of branches) yield { at: `${where}/properties/${name}`, name, schema: branch };
    }
  }
}

const responseBodies = (doc: Doc) =>
  operationsOf(doc).flatMap(({ path, method, op }) =>
    Object.entries(op.responses).flatMap(([status, r]) => Object.values(r.content ?? {}).map((m) => ({ at: `${method} ${path} ${status}`, schema: m.schema }))),
  );
const requestBodies = (doc: Doc) =>
  operationsOf(doc).flatMap(({ path, method, op }) => Object.values(op.requestBody?.content ?? {}).map((m) => ({ at: `${method} ${path} body`, schema: m.schema })));

describe('the published documents', () => {
  it('validate as OpenAPI 3.1 (the public API and the ingest listener)', async () => {
    for (const doc of [api, ingest]) {
      expect(doc.openapi).toBe('3.1.0');
      const result = await new Validator().validate(doc as unknown as Parameters<Validator['validate']>[0]);
      expect(result.errors ?? [], JSON.stringify(result.errors)).toEqual([]);
      expect(result.valid).toBe(true);
    }
  });

  it('carry no $schema below the root, and every schema compiles under ajv 2020-12 strict mode', () => {
    for (const doc of [api, ingest]) {
      expect(JSON.stringify(doc)).not.toContain('"$schema"');
      const ajv = new Ajv2020({ strict: true, allowUnionTypes: true });
      addFormats(ajv);
      ajv.addKeyword({ keyword: 'x-extensible-enum', schemaType: 'boolean' });
      ajv.addSchema({ $id: 'doc', $defs: doc.components.schemas });
      const withRefs = (schema: Json) => JSON.parse(JSON.stringify(schema).replaceAll('#/components/schemas/', 'doc#/$defs/')) as Json;
      for (const { at, schema } of [...responseBodies(doc), ...requestBodies(doc)]) expect(() => ajv.compile(withRefs(schema)), at).not.toThrow();
    }
  });

  it('document the headers of every answer', () => {
    const refs = (r: { headers?: Record<string, { $ref: string }> }) => Object.keys(r.headers ?? {});
    const every = ['X-Request-ID', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'];
    for (const doc of [api, ingest]) {
      for (const name of [...every, 'Retry-After', 'Location', 'Allow', 'WWW-Authenticate']) expect(doc.components.headers[name], name).toMatchObject({ required: true });
      for (const { path, method, op } of operationsOf(doc)) {
        for (const [status, r] of Object.entries(op.responses)) {
          // A list's 200 that also answers its export (docs/api.md "Export") names the file.
          const get = (doc.paths[path] as { get?: { responses: Record<string, { content?: object }> } }).get;
          const exported = status === '200' && 'text/csv' in (get?.responses['200']?.content ?? {}) ? ['Content-Disposition'] : [];
          const expected = [...every, ...({ 201: ['Location'], 401: ['WWW-Authenticate'], 429: ['Retry-After'], 503: ['Retry-After'] }[status] ?? []), ...exported];
          expect(refs(r), `${method} ${path} ${status}`).toEqual(expected);
        }
      }
      expect(refs(doc.components.responses.MethodNotAllowed!)).toEqual([...every, 'Allow']);
      expect(refs(doc.components.responses.Options!)).toEqual([...every, 'Allow']);
      expect(refs(doc.components.responses.UnknownRoute!)).toEqual(every);
    }
    expect(api.components.headers['WWW-Authenticate']).toMatchObject({ schema: { const: 'Bearer realm="tracking-api"' } });
  });

  it('HEAD wherever GET: the same scopes, parameters and statuses, without a body', () => {
    let heads = 0;
    for (const [path, item] of Object.entries(api.paths)) {
      expect(Boolean(item.head), path).toBe(Boolean(item.get));
      if (!item.get) continue;
      const { head, get } = item as { head: Operation; get: Operation };
      expect(head['x-required-scopes']).toEqual(get['x-required-scopes']);
      expect(head.parameters).toEqual(get.parameters);
      expect(Object.keys(head.responses)).toEqual(Object.keys(get.responses));
      for (const r of Object.values(head.responses)) expect(r.content).toBeUndefined();
      heads++;
    }
    // 14 of the contract, 3 of the webhook endpoints, 1 of the audit log, 2 of the imports, 4 of the alerts, 3 of the counts.
    expect(heads).toBe(27);
  });

  it("each operation lists exactly what its pipeline answers: no 405 (undeclared methods only), 400 everywhere (unknown query keys), 413 where a body is read, 415 where one is parsed", () => {
    const statuses = (doc: Doc, path: string, method: string) => Object.keys(doc.paths[path]![method]!.responses).map(Number);
    expect(statuses(api, '/orgs/me', 'get')).toEqual([200, 400, 401, 422, 429, 500, 503]);
    expect(statuses(api, '/assets', 'get')).toEqual([200, 400, 401, 403, 429, 500, 503]);
    expect(statuses(api, '/assets', 'post')).toEqual([201, 400, 401, 403, 409, 413, 415, 429, 500, 503]);
    expect(statuses(api, '/assets/{asset_id}', 'patch')).toEqual([200, 400, 401, 403, 404, 413, 415, 429, 500, 503]);
    expect(statuses(api, '/assets/{asset_id}', 'delete')).toEqual([204, 400, 401, 403, 404, 413, 429, 500, 503]);
    expect(statuses(api, '/locations/{location_id}', 'delete')).toEqual([204, 400, 401, 403, 404, 409, 413, 429, 500, 503]);
    expect(statuses(api, '/locations/{location_id}', 'patch')).toEqual([200, 400, 401, 403, 404, 409, 413, 415, 429, 500, 503]);
    expect(statuses(api, '/reports/asset-locations', 'get')).toEqual([200, 400, 401, 403, 429, 500, 503]);
    expect(statuses(api, '/assets/{asset_id}/history', 'get')).toEqual([200, 400, 401, 403, 404, 429, 500, 503]);
    expect(statuses(ingest, '/scans', 'post')).toEqual([202, 400, 401, 403, 409, 413, 415, 429, 500, 503]);
    for (const doc of [api, ingest]) {
      for (const { path, method, op } of operationsOf(doc)) {
        const listed = Object.keys(op.responses).map(Number);
        expect(listed, `${method} ${path}`).not.toContain(405);
        if (path.includes('{')) expect(listed, `${method} ${path}`).toContain(404);
        expect(listed.includes(415), `${method} ${path}`).toBe(op.requestBody !== undefined);
        expect(listed.includes(413), `${method} ${path}`).toBe(['post', 'patch', 'delete'].includes(method));
      }
    }
  });

  it('the pipeline answers those statuses for real (each response checked against the document by the guard)', async () => {
    const before = checkedResponses();
    const auth = { authorization: `Bearer ${token}` };
    const send = async (base: string, method: string, path: string, headers: Record<string, string> = {}, body?: string) =>
      (await fetch(base + path.replace(/\{[a-z_]+\}/g, '2147483000'), { method: method.toUpperCase(), headers, body })).status;
    const huge = JSON.stringify({ name: 'x'.repeat(1024 * 1024) });
    let sent = 0;
    for (const [doc, base] of [
      [api, svc.apiUrl],
      [ingest, svc.ingestUrl],
    ] as const) {
      for (const { path, method, op } of operationsOf(doc)) {
        // The media type the document gives the body (an import's file: its first, text/csv).
        const type = op.requestBody ? Object.keys(op.requestBody.content)[0]! : 'application/json';
        const body = op.requestBody ? '{}' : undefined;
        const json: Record<string, string> = op.requestBody ? { 'content-type': type } : {};
        expect(await send(base, method, path), `${method} ${path} without a key`).toBe(401);
        expect(await send(base, method, `${path}?surprise=1`, { ...auth, ...json }, body), `${method} ${path}?surprise=1`).toBe(400);
        if (op.requestBody) expect(await send(base, method, path, { ...auth, 'content-type': 'text/plain' }, '{}'), `${method} ${path} text/plain`).toBe(415);
        // The 1 MiB limit; an import's file has its own, 50 MiB (test/imports/imports.e2e.test.ts sends one past it).
        const oneMiB = ['post', 'patch', 'delete'].includes(method) && op.responses['413']!.description.includes('1 MiB');
        if (oneMiB) expect(await send(base, method, path, { ...auth, 'content-type': type }, huge), `${method} ${path} 1 MiB`).toBe(413);
        sent += 2 + (op.requestBody ? 1 : 0) + (oneMiB ? 1 : 0);
      }
      // Undeclared methods, OPTIONS and unknown paths answer as components.responses says.
      for (const path of Object.keys(doc.paths)) {
        expect(await send(base, 'put', path, auth), `PUT ${path}`).toBe(405);
        expect(await send(base, 'options', path), `OPTIONS ${path}`).toBe(204);
        sent += 2;
      }
      expect(await send(base, 'get', '/no-such-route', auth)).toBe(404);
      sent++;
    }
    expect(checkedResponses() - before).toBe(sent);
  });

  it('timestamps are date-time, ids int64 (no maximum in bodies and views; 2147483647 on path and query ids), keys carry their pattern, tag values theirs', () => {
    const TIMESTAMP = /(_at|^valid_from|^valid_to|^asset_last_seen)$/;
    const ID = /(^|_)id$/;
    const KEY = /(^|_)external_key$/;
    let checked = 0;
    for (const doc of [api, ingest]) {
      for (const { at, schema } of [...responseBodies(doc), ...requestBodies(doc)]) {
        for (const { at: where, name, schema: field } of properties(schema, at)) {
          if (TIMESTAMP.test(name) && field.type === 'string') {
            expect(field.format, where).toBe('date-time');
            checked++;
          }
          if (ID.test(name) && field.type === 'integer') {
            expect(field, where).toMatchObject({ format: 'int64', minimum: 1 });
            expect(field.maximum, where).toBeUndefined();
            checked++;
          }
          if (KEY.test(name) && field.type === 'string') {
            expect(field, where).toMatchObject({ pattern: '^[A-Za-z0-9-]+$', minLength: 1, maxLength: 255 });
            checked++;
          }
          if (name === 'value' && field.type === 'string') {
            expect(field, where).toMatchObject({ pattern: '^[^\\x00-\\x08\\x0B\\x0C\\x0E-\\x1F\\x7F]*$', minLength: 1, maxLength: 255 });
            checked++;
          }
        }
      }
      for (const { path, op } of operationsOf(doc)) {
        for (const p of op.parameters ?? []) {
          const schema = (p.schema as Json).items ? ((p.schema as Json).items as Json) : (p.schema as Json);
          // The audit log's filters name ids of several kinds (API key and user ids, a scan point's), as text.
          if (path === '/audit-events' && ['actor_id', 'resource_id'].includes(String(p.name))) {
            expect(schema, String(p.name)).toMatchObject({ type: 'string' });
            continue;
          }
          // docs/api.md "Alerts": an alert's id is text, <rule>-<asset>-<n>.
          if (p.name === 'alert_id') {
            expect(schema, String(p.name)).toMatchObject({ type: 'string' });
            continue;
          }
          if (ID.test(String(p.name))) expect(schema, String(p.name)).toMatchObject({ type: 'integer', format: 'int64', minimum: 1, maximum: 2147483647 });
        }
      }
    }
    expect(checked).toBeGreaterThan(150);
    // docs/api.md "Lists: paging, sorting, filters, search": a comma list of the endpoint's sort fields, each with an optional '-'.
    const sort = api.paths['/assets']!.get!.parameters!.find((p) => p.name === 'sort')!.schema as { pattern: string };
    expect(sort.pattern).toBe('^-?(?:external_key|name|created_at|updated_at)(?:,-?(?:external_key|name|created_at|updated_at))*$');
    for (const value of ['name', '-updated_at,name', 'external_key,-created_at,name']) expect(value).toMatch(new RegExp(sort.pattern));
    for (const value of ['', 'colour', '--name', 'name,', ',name', 'name;created_at']) expect(value).not.toMatch(new RegExp(sort.pattern));
    // docs/api.md "Ids": body id fields carry no maximum; the server checks them.
    expect(api.paths['/locations']!.post!.requestBody!.content['application/json']!.schema).toMatchObject({
      properties: { parent_id: { anyOf: [{ type: 'integer', format: 'int64', minimum: 1 }, { type: 'null' }] } },
    });
    expect(ingest.paths['/scans']!.post!.requestBody!.content['application/json']!.schema).toMatchObject({
      properties: { location: { properties: { id: { type: 'integer', format: 'int64', minimum: 1 } } } },
    });
  });

  it('envelopes are closed like the views they carry (only metadata, error params and audit changes are open)', () => {
    let closed = 0;
    for (const doc of [api, ingest]) {
      const bodies = [...responseBodies(doc), { at: 'Error', schema: doc.components.schemas.Error! }];
      for (const { at, schema } of bodies) {
        for (const { at: where, schema: object } of schemas(schema, at)) {
          if (object.type !== 'object') continue;
          // The objects with free keys: an asset's metadata, an error's params, an audit entry's changes.
          if (/\/properties\/(metadata|params)$|\/properties\/changes\/anyOf\/0$/.test(where)) expect(object.additionalProperties, where).not.toBe(false);
          else {
            expect(object.additionalProperties, where).toBe(false);
            closed++;
          }
        }
      }
    }
    expect(closed).toBeGreaterThan(50);
  });

  it('the ingest listener has its own document: POST /scans under /ingest/v1, with x-required-scopes', () => {
    expect(ingest.servers).toEqual([{ url: '/ingest/v1' }]);
    expect(Object.keys(ingest.paths)).toEqual(['/scans']);
    expect(ingest.paths['/scans']!.post!['x-required-scopes']).toEqual(['scans:write']);
    expect(api.servers).toEqual([{ url: '/api/v1' }]);
    for (const { path, method, op } of operationsOf(api)) {
      if (path === '/orgs/me') continue;
      // An import needs the scope of the resource it names: either of two (docs/api.md, "Import").
      expect(op['x-required-scopes'], `${method} ${path}`).toHaveLength(path.startsWith('/imports') ? 2 : 1);
    }
    expect(api.paths['/reports/asset-locations']!.get!['x-required-scopes']).toEqual(['tracking:read']);
    expect(api.paths['/assets/{asset_id}/history']!.head!['x-required-scopes']).toEqual(['tracking:read']);
    expect(Object.keys(api.paths).filter((p) => VERBS.some((v) => v in api.paths[p]!))).toHaveLength(Object.keys(api.paths).length);
  });

  // Found by Schemathesis (test/contract): it sent `"location": {}` as schema-valid and got 400.
  it('a handheld location is exactly one of its three forms (docs/scan-ingestion.md "Handheld submissions"), and the document says so', async () => {
    const body = ingest.paths['/scans']!.post!.requestBody!.content['application/json']!.schema as { properties: Record<string, Json> };
    expect(body.properties.location).toMatchObject({ type: 'object', additionalProperties: false, minProperties: 1, maxProperties: 1 });
    const submit = (location: unknown) =>
      fetch(`${svc.ingestUrl}/scans`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ submission_id: `s-${JSON.stringify(location)}`, device_id: 'd', location, reads: [{ tag_type: 'rfid', value: 'x' }] }),
      });
    const none = await submit({});
    expect(none.status).toBe(400);
    expect(((await none.json()) as { error: { fields: Json[] } }).error.fields).toMatchObject([{ field: 'location', code: 'required' }]);
    const two = await submit({ id: 1, external_key: 'A' });
    expect(two.status).toBe(400);
    expect(((await two.json()) as { error: { fields: Json[] } }).error.fields.map((f) => f.code)).toEqual(['ambiguous_fields', 'ambiguous_fields']);
  });

  // Found by Schemathesis: PATCH bodies declared the read-only fields with no schema at all, so a
  // generator sent random values and got read_only. JSON Schema's readOnly is that rule.
  it('PATCH bodies mark the read-only fields readOnly (accept-if-matches), the writable ones not', () => {
    for (const path of ['/assets/{asset_id}', '/locations/{location_id}']) {
      const body = api.paths[path]!.patch!.requestBody!.content['application/merge-patch+json']!.schema as { properties: Record<string, Json> };
      const marked = Object.entries(body.properties).filter(([, p]) => p.readOnly === true).map(([name]) => name);
      const expected = ['id', 'external_key', ...(path.startsWith('/assets') ? ['location_id', 'location_external_key'] : []), 'created_at', 'updated_at', 'deleted_at', 'tags'];
      expect(marked.sort(), path).toEqual(expected.sort());
    }
  });
});
