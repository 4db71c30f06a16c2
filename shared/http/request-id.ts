import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import { newUlid } from '../ulid.js';

/** A new ULID request id. */
export function newRequestId(): string {
  return newUlid();
}

/**
 * Request ids for every listener: a client's own `X-Request-ID` is echoed unchanged (and not
 * validated); otherwise the server makes a ULID. Fastify logs carry it as `reqId`, and the error
 * envelope's `request_id` is the same value.
 */
export const requestIdOptions: Pick<FastifyServerOptions, 'requestIdHeader' | 'genReqId'> = {
  requestIdHeader: false,
  genReqId: (request) => {
    const own = request.headers['x-request-id'];
    const value = Array.isArray(own) ? own[0] : own;
    return value !== undefined && value !== '' ? value : newRequestId();
  },
};

/** Puts the request id on every response of `app`. */
export function registerRequestId(app: FastifyInstance): void {
  app.addHook('onRequest', async (request, reply) => {
    reply.header('X-Request-ID', request.id);
  });
}
