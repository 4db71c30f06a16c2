import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A request a webhook receiver got. */
export interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  json: { type: string; timestamp: string; data: Record<string, unknown> };
  at: number;
}

/** How the receiver answers one request: a status (after a delay), or a redirect. */
export type Answer = { status: number; delayMs?: number; location?: string };

/**
 * A real HTTP receiver in the test process, as a partner runs one: it records every request and
 * answers as `answer` says (200 by default). `close` and `listen` again on the same port model a
 * receiver that is down for a while.
 */
export async function webhookReceiver(port = 0) {
  const received: Received[] = [];
  const answers = new Map<string, (request: Received) => Answer>();
  const sockets = new Set<import('node:net').Socket>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const got: Received = { path: req.url ?? '', headers: req.headers, body, json: JSON.parse(body) as Received['json'], at: Date.now() };
      received.push(got);
      const { status, delayMs = 0, location } = (answers.get(got.path) ?? ((): Answer => ({ status: 200 })))(got);
      setTimeout(() => {
        if (res.destroyed) return;
        res.writeHead(status, location ? { location } : {});
        res.end('ok');
      }, delayMs);
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const boundPort = (server.address() as AddressInfo).port;
  return {
    received,
    port: boundPort,
    url: (path = '/hook') => `http://127.0.0.1:${boundPort}${path}`,
    /** How requests to `path` are answered from now on (200 at once by default). */
    answer(path: string, next: (request: Received) => Answer) {
      answers.set(path, next);
    },
    /** The requests to `path`, in the order they came. */
    to(path: string) {
      return received.filter((r) => r.path === path);
    },
    /** Stops listening and drops every connection (kept-alive ones too). */
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
    async listen() {
      await new Promise<void>((resolve) => server.listen(boundPort, '127.0.0.1', resolve));
    },
  };
}

export type WebhookReceiver = Awaited<ReturnType<typeof webhookReceiver>>;
