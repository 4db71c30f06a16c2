import { expect } from 'vitest';

/** A small HTTP client for the master-data contract tests (real HTTP, no mocks). */

export interface Reply<T = Record<string, unknown>> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface RequestOptions {
  token?: string;
  body?: unknown;
  /** Raw body text (sent as is). */
  raw?: string;
  contentType?: string | null;
}

export function client(apiUrl: string, defaultToken: string) {
  return async function call<T = Record<string, unknown>>(method: string, path: string, options: RequestOptions = {}): Promise<Reply<T>> {
    const headers: Record<string, string> = { authorization: `Bearer ${options.token ?? defaultToken}` };
    let payload: string | undefined;
    if (options.raw !== undefined || options.body !== undefined) {
      payload = options.raw ?? JSON.stringify(options.body);
      const type = options.contentType === undefined ? (method === 'PATCH' ? 'application/merge-patch+json' : 'application/json') : options.contentType;
      if (type !== null) headers['content-type'] = type;
    }
    const response = await fetch(apiUrl + path, { method, headers, body: payload });
    const text = await response.text();
    let body: unknown = {};
    if (text) {
      try {
        body = JSON.parse(text);
      } catch {
        body = { raw: text };
      }
    }
    return { status: response.status, headers: response.headers, body: body as T, text };
  };
}

export interface ErrorEnvelope {
  error: {
    type: string;
    title: string;
    status: number;
    detail: string;
    instance: string;
    request_id: string;
    fields?: Array<{ field: string; code: string; message: string; params?: Record<string, unknown> }>;
  };
}

/** Asserts a validation_error and returns its fields as [field, code] pairs. */
export function fieldCodes(reply: Reply): Array<[string, string]> {
  const body = reply.body as unknown as ErrorEnvelope;
  expect(reply.status, reply.text).toBe(400);
  expect(body.error.type).toBe('validation_error');
  return (body.error.fields ?? []).map((f) => [f.field, f.code]);
}

export function errorOf(reply: Reply): ErrorEnvelope['error'] {
  return (reply.body as unknown as ErrorEnvelope).error;
}
