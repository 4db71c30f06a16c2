import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { startTestService, type TestService } from '../support/service.js';

/** INTERFACES.md "Machine-readable contract" and spec "Authentication"/"Limits"/"Versioning". */

interface Operation {
  operationId: string;
  'x-required-scopes': string[];
  parameters?: Array<{ name: string; in: string; schema: { maximum?: number; type?: string; items?: { maximum?: number } } }>;
  requestBody?: { content: Record<string, { schema: { properties?: Record<string, unknown>; required?: string[] } }> };
  responses: Record<string, unknown>;
}
type Doc = {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: { Error: { properties: { error: { properties: { type: Record<string, unknown> } } } } } };
};

let svc: TestService;
let doc: Doc;
const base = () => svc.apiUrl.replace(/\/api\/v1$/, '');

beforeAll(async () => {
  svc = await startTestService('openapi');
  const response = await fetch(`${base()}/openapi/v1.json`);
  expect(response.status).toBe(200);
  doc = (await response.json()) as Doc;
});
afterAll(async () => {
  await svc?.stop();
});

const operations = () => Object.entries(doc.paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => ({ path, method, op })));

describe('GET /openapi/v1.json and /openapi/v1.yaml', () => {
  it('served without a key; the YAML is the same document', async () => {
    expect(doc.openapi).toBe('3.1.0');
    const yaml = await fetch(`${base()}/openapi/v1.yaml`);
    expect(yaml.status).toBe(200);
    expect(yaml.headers.get('content-type')).toContain('yaml');
    expect(YAML.parse(await yaml.text())).toEqual(doc);
  });

  it('every operation carries x-required-scopes; the empty list only on GET /orgs/me', () => {
    const ops = operations();
    expect(ops.length).toBeGreaterThan(10);
    for (const { path, method, op } of ops) {
      expect(Array.isArray(op['x-required-scopes']), `${method} ${path}`).toBe(true);
      if (op['x-required-scopes'].length === 0) expect(`${method} ${path}`).toBe('get /orgs/me');
    }
    expect(doc.paths['/assets']!.get!['x-required-scopes']).toEqual(['assets:read']);
    expect(doc.paths['/assets']!.post!['x-required-scopes']).toEqual(['assets:write']);
    expect(doc.paths['/locations/{location_id}/tags']!.get!['x-required-scopes']).toEqual(['locations:read']);
  });

  it('spec "Versioning" 4: error.type is marked x-extensible-enum: true', () => {
    const type = doc.components.schemas.Error.properties.error.properties.type;
    expect(type['x-extensible-enum']).toBe(true);
    expect(type.enum).toContain('validation_error');
  });

  it('spec "Limits": path and query id parameters carry maximum 2147483647', () => {
    let checked = 0;
    for (const { op } of operations()) {
      for (const p of op.parameters ?? []) {
        if (p.in === 'path') {
          expect(p.schema.maximum, p.name).toBe(2147483647);
          checked++;
        }
        if (p.in === 'query' && /(^|_)id$/.test(p.name)) {
          expect(p.schema.maximum ?? p.schema.items?.maximum, p.name).toBe(2147483647);
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThan(10);
  });

  it('request bodies come from the validating zod schemas (POST /assets requires name only; PATCH uses merge-patch)', () => {
    const create = doc.paths['/assets']!.post!.requestBody!.content['application/json']!.schema;
    expect(create.required).toEqual(['name']);
    expect(Object.keys(create.properties!)).toEqual(expect.arrayContaining(['external_key', 'name', 'metadata', 'tags']));
    expect(doc.paths['/assets/{asset_id}']!.patch!.requestBody!.content['application/merge-patch+json']).toBeDefined();
    expect(doc.paths['/assets']!.post!.responses['201']).toBeDefined();
  });
});
