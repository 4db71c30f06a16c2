import type { IncomingMessage } from 'node:http';
import { ApiError, BadRequestError } from '../errors.js';

/**
 * Request bodies are read by the route pipeline at the body step of the contract's check order,
 * not before routing: a request refused earlier (404, 405, 401, 403, 415, a bad path id) is
 * answered as such whatever its body. A body that is never read, or read only up to the limit,
 * is still discarded up to a bound before the answer goes out, so a client that sends its whole
 * body before it reads (fetch does) reads the envelope instead of a connection closed under it
 * (EPIPE). Past the bound, the answer closes the connection.
 */

/** docs/api.md, "What text the service accepts": size and encoding. */
export const MAX_BODY_BYTES = 1024 * 1024;
/** How much of a body no one will read is discarded before answering, and for how long at most. */
const DISCARD_LIMIT_BYTES = 32 * MAX_BODY_BYTES;

/** `1 MiB`, `50 MiB`: a limit as the 413's detail words it. */
function mebibytes(bytes: number): string {
  return `${bytes / (1024 * 1024)} MiB`;
}
const DISCARD_TIMEOUT_MS = 10_000;

/** Whether the whole body has arrived (or the request is gone): nothing is left on the wire (some may be buffered). */
export function received(raw: IncomingMessage): boolean {
  return raw.complete || raw.readableEnded || raw.destroyed;
}

/**
 * Reads what is left of a body (up to `limit` bytes more, within the timeout) and throws it away.
 * True when the body ended; false when it was cut (the answer must then close the connection).
 */
export function discardRequestBody(raw: IncomingMessage, limit = DISCARD_LIMIT_BYTES): Promise<boolean> {
  if (received(raw)) return Promise.resolve(!raw.destroyed);
  return new Promise((resolve) => {
    let seen = 0;
    const timer = setTimeout(() => finish(false), DISCARD_TIMEOUT_MS);
    function onData(chunk: Buffer) {
      seen += chunk.length;
      if (seen > limit) finish(false);
    }
    function finish(ended: boolean) {
      clearTimeout(timer);
      raw.off('data', onData);
      raw.off('end', onEnd);
      raw.off('error', onError);
      raw.off('close', onError);
      if (!ended) raw.pause();
      resolve(ended);
    }
    const onEnd = () => finish(true);
    const onError = () => finish(false);
    raw.on('data', onData);
    raw.once('end', onEnd);
    raw.once('error', onError);
    raw.once('close', onError);
    raw.resume();
  });
}

/**
 * The body of a request, at most `maxBytes` (MAX_BODY_BYTES unless a route says otherwise: an
 * import's file); a larger one (declared or sent) is discarded up to the bound and answered `413
 * payload_too_large`. Never more than the limit is held.
 */
export async function readRequestBody(raw: IncomingMessage, maxBytes = MAX_BODY_BYTES): Promise<Buffer> {
  const tooLarge = async (): Promise<never> => {
    const ended = await discardRequestBody(raw);
    throw new ApiError('payload_too_large', `Request body must not exceed ${mebibytes(maxBytes)}`, ended ? {} : { Connection: 'close' });
  };
  if (Number(raw.headers['content-length']) > maxBytes) return tooLarge();
  if (raw.readableEnded) return Buffer.alloc(0);
  const chunks: Buffer[] = [];
  let length = 0;
  const outcome = await new Promise<'ok' | 'too_large' | 'cut'>((resolve) => {
    function onData(chunk: Buffer) {
      length += chunk.length;
      if (length > maxBytes) return finish('too_large');
      chunks.push(chunk);
    }
    function finish(result: 'ok' | 'too_large' | 'cut') {
      raw.off('data', onData);
      raw.off('end', onEnd);
      raw.off('error', onCut);
      raw.off('close', onCut);
      raw.pause();
      resolve(result);
    }
    const onEnd = () => finish('ok');
    const onCut = () => finish(raw.readableEnded ? 'ok' : 'cut');
    raw.on('data', onData);
    raw.once('end', onEnd);
    raw.once('error', onCut);
    raw.once('close', onCut);
    raw.resume();
  });
  if (outcome === 'too_large') return tooLarge();
  if (outcome === 'cut') throw new BadRequestError('Request body was not received whole');
  return Buffer.concat(chunks, length);
}
