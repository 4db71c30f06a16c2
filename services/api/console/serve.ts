import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { CONSOLE_PAGES } from './web/src/paths.js';
import type { NotFoundPage } from '../../../shared/http/errors-plugin.js';

/**
 * The console (docs/console.md): the pages people use, on the public listener at `/`, same
 * origin as `/api/v1` and `/app/api`. They are one document and its hashed script and stylesheet,
 * built from services/api/console/web/ into services/api/console/web/dist (services/api/console/web/build.ts; `npm start` and the tests build it when stale).
 * Every page path answers that document, which shows the page the path names; the hashed files
 * under /static/ never change, so browsers keep them for good, and the document is revalidated.
 */

export { CONSOLE_PAGES };

export const CONSOLE_DIST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), 'web/dist');

/**
 * Only this origin's script and style, no inline script or style, no plugin, no framing; the
 * pages set text, never markup, and Trusted Types makes the browser refuse any HTML string
 * written into the DOM.
 */
export const CONSOLE_CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join('; ');

const PAGE_HEADERS: Record<string, string> = {
  'Content-Security-Policy': CONSOLE_CONTENT_SECURITY_POLICY,
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
  // The camera for the Scan page's barcode reading (docs/console.md, "Scan"), on this origin only.
  'Permissions-Policy': 'camera=(self), microphone=(), geolocation=(), payment=(), usb=()',
  // Revalidated on every visit, so a new build's file names are picked up at once.
  'Cache-Control': 'no-cache',
};

const IMMUTABLE = 'public, max-age=31536000, immutable';

export interface ConsoleOptions {
  /** Whether the page reaches us over TLS (then Strict-Transport-Security). */
  behindTls(request: FastifyRequest): boolean;
}

/**
 * Registers the console's pages and files, and answers its document with status 404 for a page
 * path it does not have (docs/console.md, "How it is built"): the page shows Not found. The server's own
 * paths keep the contract's JSON 404.
 */
export function registerConsole(app: FastifyInstance, options: ConsoleOptions): NotFoundPage {
  // Read once, on first request: a build made while the service runs is picked up by a restart.
  let document: Promise<string | null> | null = null;
  const readDocument = () => {
    document ??= fs.readFile(path.join(CONSOLE_DIST, 'index.html'), 'utf8').catch(() => null);
    return document;
  };

  async function sendPage(request: FastifyRequest, reply: FastifyReply, status = 200): Promise<FastifyReply> {
    const html = await readDocument();
    reply.headers(PAGE_HEADERS);
    if (options.behindTls(request)) reply.header('Strict-Transport-Security', 'max-age=31536000');
    if (html === null) {
      document = null;
      return reply.code(503).type('text/plain; charset=utf-8').send('The console is not built: `npm start` builds it, or `node --import tsx services/api/console/web/build.ts`.\n');
    }
    return reply.code(status).type('text/html; charset=utf-8').send(html);
  }
  // A page's id is digits (as the page itself reads it): any other path is Not found.
  for (const page of CONSOLE_PAGES) app.get(page.replace(/:([a-z_]+)/g, ':$1(^\\d+$)'), (request, reply) => sendPage(request, reply));

  void app.register(fastifyStatic, {
    root: path.join(CONSOLE_DIST, 'static'),
    prefix: '/static/',
    // web/build.ts writes .br and .gz beside each file: no compression per request.
    preCompressed: true,
    index: false,
    dotfiles: 'deny',
    cacheControl: false,
    etag: true,
    lastModified: false,
    setHeaders(response) {
      // Every name carries its content's hash: a new build is a new name.
      response.setHeader('Cache-Control', IMMUTABLE);
      response.setHeader('X-Content-Type-Options', 'nosniff');
      response.setHeader('Cross-Origin-Resource-Policy', 'same-origin');
    },
  });

  return (request, reply) => {
    if (request.method !== 'GET' && request.method !== 'HEAD') return null;
    const path = request.url.split('?')[0]!;
    if (SERVER_PATHS.some((prefix) => path === prefix || path.startsWith(`${prefix}/`) || path.startsWith(`${prefix}.`))) return null;
    return sendPage(request, reply, 404);
  };
}

/** The paths under which the server answers for itself, never the console (its API, the app's endpoints, the docs, the OpenAPI documents). */
const SERVER_PATHS = ['/api', '/app/api', '/docs', '/openapi', '/static'];
