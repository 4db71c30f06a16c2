import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { Webhook } from 'standardwebhooks';
import { RefusedTargetError, bareHost, checkedLookup, refusedAddress } from './targets.js';

/**
 * One attempt of one delivery (docs/api.md "Webhooks"): a POST of the event's body, signed as
 * Standard Webhooks do (`webhook-id`, `webhook-timestamp`, `webhook-signature`, one `v1,<sig>`
 * per secret, space-separated while two sign). A 2xx within the timeout is a success; anything
 * else (another status, a redirect, which is never followed, a refused or unreachable target, a
 * timeout) is a failure.
 */

export interface Attempt {
  ok: boolean;
  status: number | null;
  durationMs: number;
  error: string | null;
}

export interface SendOptions {
  allowPrivate: boolean;
  timeoutMs: number;
}

/** Most a receiver's answer is read of (it is not kept): past it the connection is dropped. */
const MAX_ANSWER_BYTES = 64 * 1024;

const agents = {
  http: new http.Agent({ keepAlive: true, maxSockets: 64 }),
  https: new https.Agent({ keepAlive: true, maxSockets: 64 }),
};

/** The signature header for a body: one `v1,<base64>` per secret. */
export function signatureHeader(secrets: readonly string[], webhookId: string, at: Date, body: string): string {
  return secrets.map((secret) => new Webhook(secret).sign(webhookId, at, body)).join(' ');
}

export function sendWebhook(target: string, webhookId: string, body: string, secrets: readonly string[], options: SendOptions): Promise<Attempt> {
  const started = performance.now();
  const done = (ok: boolean, status: number | null, error: string | null): Attempt => ({ ok, status, durationMs: Math.round(performance.now() - started), error });
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return Promise.resolve(done(false, null, 'the endpoint url is not a URL'));
  }
  const host = bareHost(url);
  if (!options.allowPrivate && net.isIP(host)) {
    const refused = refusedAddress(host);
    if (refused) return Promise.resolve(done(false, null, `target refused: ${refused}`));
  }
  const at = new Date();
  const headers = {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(body)),
    'user-agent': 'tracking-webhooks/1',
    'webhook-id': webhookId,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': signatureHeader(secrets, webhookId, at, body),
  };
  const client = url.protocol === 'https:' ? https : http;
  return new Promise<Attempt>((resolve) => {
    let settled = false;
    const finish = (attempt: Attempt) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(attempt);
    };
    const request = client.request(
      url,
      {
        method: 'POST',
        headers,
        agent: url.protocol === 'https:' ? agents.https : agents.http,
        // Resolved here, checked, and connected to exactly the checked address.
        lookup: checkedLookup(options.allowPrivate),
      },
      (response) => {
        const status = response.statusCode ?? 0;
        let read = 0;
        response.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > MAX_ANSWER_BYTES) response.destroy();
        });
        const settle = () => {
          if (status >= 200 && status < 300) finish(done(true, status, null));
          else if (status >= 300 && status < 400) finish(done(false, status, `redirect to ${response.headers.location ?? '(no location)'} not followed`));
          else finish(done(false, status, `HTTP ${status}`));
        };
        response.on('end', settle);
        response.on('close', settle);
        response.on('error', settle);
      },
    );
    const timer = setTimeout(() => {
      finish(done(false, null, `no answer within ${options.timeoutMs} ms`));
      request.destroy();
    }, options.timeoutMs);
    request.on('error', (error: Error & { code?: string }) => {
      finish(done(false, null, error instanceof RefusedTargetError ? `target refused: ${error.message}` : `${error.code ?? error.name}: ${error.message}`));
    });
    request.end(body);
  });
}
