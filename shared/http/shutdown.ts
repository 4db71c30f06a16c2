import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors.js';

/**
 * Graceful close for a listener: once closing starts, new requests get 503 (Fastify's
 * return503OnClosing) and responses to requests already in flight carry `Connection: close`,
 * so a client's keep-alive socket ends with its last response instead of holding the shutdown
 * open until the keep-alive timeout.
 */
export function closeKeepAliveOnShutdown(app: FastifyInstance): void {
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onSend', async (_request, reply, payload) => {
    if (closing) reply.header('Connection', 'close');
    return payload;
  });
}

/**
 * For a listener of the public contract (instead of Fastify's return503OnClosing, whose bare
 * `{"error":"Service Unavailable",…}` has neither the envelope nor X-Request-ID): once closing
 * starts, a request that still arrives on an open connection is refused with `503
 * service_unavailable` in the error envelope, with Retry-After, after the hooks registered before
 * this one (request id, rate-limit headers) have run.
 */
export function refuseRequestsWhileClosing(app: FastifyInstance): void {
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onRequest', async () => {
    if (closing) throw new ApiError('service_unavailable', 'The service is shutting down; retry later', { 'Retry-After': '1' });
  });
}
