import { expect } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import type { TestService } from '../support/service.js';

/** HTTP helpers for the location e2e tests. */

export interface Reply {
  status: number;
  headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- response JSON is asserted field by field
  body: any;
}

export interface Client {
  orgId: number;
  token: string;
  request(method: string, path: string, body?: unknown, contentType?: string): Promise<Reply>;
  get(path: string): Promise<Reply>;
  post(path: string, body: unknown): Promise<Reply>;
  patch(path: string, body: unknown): Promise<Reply>;
  del(path: string): Promise<Reply>;
  /** POST /locations expecting 201; returns the view. */
  create(body: Record<string, unknown>): Promise<LocationJson>;
}

export interface LocationJson {
  id: number;
  external_key: string;
  name: string;
  description: string | null;
  parent_id: number | null;
  parent_external_key: string | null;
  is_active: boolean;
  valid_from: string | null;
  valid_to: string | null;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
  tags: Array<Record<string, unknown>>;
}

export async function newClient(
  svc: TestService,
  name: string,
  scopes: readonly string[] = ['locations:read', 'locations:write', 'assets:read', 'assets:write'],
): Promise<Client> {
  const ctx = svc.service.ctx;
  const org = await createOrg(ctx, name);
  const key = await mintApiKey(ctx, { orgId: org.id, scopes });
  return clientFor(svc, org.id, key.token);
}

export function clientFor(svc: TestService, orgId: number, token: string): Client {
  const request = async (method: string, path: string, body?: unknown, contentType?: string): Promise<Reply> => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (body !== undefined) headers['content-type'] = contentType ?? (method === 'PATCH' ? 'application/merge-patch+json' : 'application/json');
    const response = await fetch(`${svc.apiUrl}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : undefined };
  };
  const client: Client = {
    orgId,
    token,
    request,
    get: (path) => request('GET', path),
    post: (path, body) => request('POST', path, body),
    patch: (path, body) => request('PATCH', path, body),
    del: (path) => request('DELETE', path),
    async create(body) {
      const reply = await request('POST', '/locations', body);
      expect(reply.status, JSON.stringify(reply.body)).toBe(201);
      return reply.body.data as LocationJson;
    },
  };
  return client;
}

/** The `fields` of a 400 validation_error as `field:code` strings. */
export function fieldCodes(reply: Reply): string[] {
  expect(reply.status, JSON.stringify(reply.body)).toBe(400);
  expect(reply.body.error.type).toBe('validation_error');
  return (reply.body.error.fields as Array<{ field: string; code: string }>).map((f) => `${f.field}:${f.code}`);
}

let counter = 0;
/** A key unique within the test file. */
export function uniqueKey(prefix = 'L'): string {
  counter += 1;
  return `${prefix}-${Date.now().toString(36)}-${counter}`;
}
