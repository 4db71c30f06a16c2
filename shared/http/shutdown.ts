import type { FastifyInstance } from 'fastify';

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
