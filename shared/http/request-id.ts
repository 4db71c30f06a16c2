import { getRandomValues } from 'node:crypto';
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import { ulid } from 'ulid';

// ulid's default source asks the crypto module for one byte per character, on every request; the
// same crypto randomness drawn 4 KiB at a time costs a fraction of that on the hot path.
const randomPool = new Uint8Array(4096);
let randomOffset = randomPool.length;
function pooledRandom(): number {
  if (randomOffset >= randomPool.length) {
    getRandomValues(randomPool);
    randomOffset = 0;
  }
  return randomPool[randomOffset++]! / 256;
}

/** A new ULID request id. */
export function newRequestId(): string {
  return ulid(undefined, pooledRandom);
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
