import net from 'node:net';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { contractOf } from '../support/openapi-guard.js';
import { startTestService } from '../support/service.js';

// README "Running it in production": once the service stops, new requests get 503 while in-flight
// ones finish. Such a 503 is an answer of the contract like any other (docs/api.md "Errors": the
// envelope, X-Request-ID and Retry-After), not Fastify's own body.

async function refused(port: number): Promise<boolean> {
  const socket = net.connect(port, '127.0.0.1');
  try {
    await once(socket, 'connect');
    return false;
  } catch {
    return true;
  } finally {
    socket.destroy();
  }
}

describe('a request that arrives while the service stops', () => {
  it('gets 503 service_unavailable in the error envelope, with Retry-After and its request id, as the document says', async () => {
    const svc = await startTestService('shutdown_refusal');
    const api = new URL(svc.apiUrl);
    const contract = contractOf(await (await fetch(new URL('/openapi/v1.json', api))).text());
    // A request begun before the stop keeps its connection open (not idle); it ends after.
    const socket = net.connect(Number(api.port), '127.0.0.1');
    await once(socket, 'connect');
    let raw = '';
    socket.on('data', (chunk: Buffer) => (raw += chunk.toString()));
    socket.write(`GET /api/v1/orgs/me HTTP/1.1\r\nHost: ${api.host}\r\n`);
    const stopped = svc.stop();
    // Once the listener takes no new connections, it is closing.
    while (!(await refused(Number(api.port)))) await new Promise((resolve) => setTimeout(resolve, 10));
    socket.write('X-Request-ID: late-request\r\n\r\n');
    await once(socket, 'end');
    await stopped;

    const [head, body] = raw.split('\r\n\r\n') as [string, string];
    const [statusLine, ...lines] = head.split('\r\n');
    const headers = new Headers(lines.map((line) => line.split(/:\s*/, 2) as [string, string]));
    expect(statusLine).toBe('HTTP/1.1 503 Service Unavailable');
    expect(headers.get('retry-after')).toBe('1');
    expect(headers.get('x-request-id')).toBe('late-request');
    expect(headers.get('connection')).toBe('close');
    expect(JSON.parse(body)).toEqual({
      error: {
        type: 'service_unavailable',
        title: 'Service unavailable',
        status: 503,
        detail: 'The service is shutting down; retry later',
        instance: '/api/v1/orgs/me',
        request_id: 'late-request',
      },
    });
    expect(contract.check('GET', '/api/v1/orgs/me', { status: 503, headers, body })).toEqual([]);
  });
});
