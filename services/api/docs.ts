import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/**
 * `GET /docs` on the public listener: an interactive reference of the OpenAPI document the same
 * listener serves (`/openapi/v1.json`), rendered by Swagger UI from the `swagger-ui-dist` package.
 * Every asset comes from this listener, so the page works offline and loads nothing from another
 * host (its Content-Security-Policy says so to the browser too). Like the OpenAPI document, it
 * needs no key: it shows the contract, not data; "Try it out" sends the token entered under
 * "Authorize" with each call.
 */

export const DOCS_PATH = '/docs';
export const OPENAPI_DOCUMENT_URL = '/openapi/v1.json';

const swaggerUiDir = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
const { version: swaggerUiVersion } = createRequire(import.meta.url)('swagger-ui-dist/package.json') as { version: string };

/** Starts Swagger UI on the page's own element, with the document the element names. */
const INITIALIZER = `window.addEventListener('load', function () {
  var root = document.getElementById('swagger-ui');
  window.ui = SwaggerUIBundle({
    url: root.getAttribute('data-openapi-url'),
    domNode: root,
    deepLinking: true,
    // Swagger UI would otherwise send the document to validator.swagger.io for a badge.
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    plugins: [SwaggerUIBundle.plugins.DownloadUrl],
    layout: 'BaseLayout',
  });
});
`;

const STYLE = `body { margin: 0; background: #fafafa; }
.docs-note { font-family: sans-serif; font-size: 14px; max-width: 1420px; margin: 0 auto; padding: 16px 20px 0; color: #3b4151; }
`;

/**
 * The asset URLs name the renderer's version and our own assets' content, so a browser may keep
 * them for good: an upgrade or a change here is a new URL.
 */
const ASSETS_PATH = `${DOCS_PATH}/assets/${createHash('sha256').update(`${swaggerUiVersion}\0${INITIALIZER}\0${STYLE}`).digest('hex').slice(0, 16)}`;

const HTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Asset and Location Tracking API: reference</title>
<link rel="icon" type="image/png" href="${ASSETS_PATH}/favicon-32x32.png" sizes="32x32">
<link rel="stylesheet" href="${ASSETS_PATH}/swagger-ui.css">
<link rel="stylesheet" href="${ASSETS_PATH}/docs.css">
</head>
<body>
<p class="docs-note">The machine-readable document: <a href="${OPENAPI_DOCUMENT_URL}">${OPENAPI_DOCUMENT_URL}</a> (also <a href="/openapi/v1.yaml">YAML</a>). Calls need an API key: "Authorize", then the token.</p>
<div id="swagger-ui" data-openapi-url="${OPENAPI_DOCUMENT_URL}"></div>
<noscript><p class="docs-note">This reference needs JavaScript.</p></noscript>
<script src="${ASSETS_PATH}/swagger-ui-bundle.js"></script>
<script src="${ASSETS_PATH}/docs.js"></script>
</body>
</html>
`;

/** Same-origin only: the page, its scripts and styles, the document it reads and the calls it tries. */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  // Swagger UI sets style attributes from its scripts.
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

interface Asset {
  type: string;
  /** The file of swagger-ui-dist, or text of our own. */
  source: { file: string } | { text: string };
}

const ASSETS: Record<string, Asset> = {
  'swagger-ui-bundle.js': { type: 'application/javascript; charset=utf-8', source: { file: 'swagger-ui-bundle.js' } },
  'swagger-ui.css': { type: 'text/css; charset=utf-8', source: { file: 'swagger-ui.css' } },
  'favicon-32x32.png': { type: 'image/png', source: { file: 'favicon-32x32.png' } },
  'docs.js': { type: 'application/javascript; charset=utf-8', source: { text: INITIALIZER } },
  'docs.css': { type: 'text/css; charset=utf-8', source: { text: STYLE } },
};

interface LoadedAsset {
  body: Buffer;
  gzipped: Buffer | null;
}

const compress = promisify(gzip);

/** Read (and compressed) on first request, not at start: most processes never serve the page. */
const loaded = new Map<string, Promise<LoadedAsset>>();
function load(name: string, asset: Asset): Promise<LoadedAsset> {
  let entry = loaded.get(name);
  if (!entry) {
    entry = (async () => {
      const body = 'file' in asset.source ? await fs.readFile(path.join(swaggerUiDir, asset.source.file)) : Buffer.from(asset.source.text);
      const gzipped = asset.type.startsWith('image/') ? null : await compress(body);
      return { body, gzipped };
    })();
    entry.catch(() => loaded.delete(name));
    loaded.set(name, entry);
  }
  return entry;
}

function acceptsGzip(request: FastifyRequest): boolean {
  const header = request.headers['accept-encoding'];
  return typeof header === 'string' && /\bgzip\b/.test(header);
}

async function sendPage(_request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  return reply
    .type('text/html; charset=utf-8')
    .header('Content-Security-Policy', CONTENT_SECURITY_POLICY)
    .header('X-Content-Type-Options', 'nosniff')
    .header('Cache-Control', 'no-cache')
    .send(HTML);
}

/** `GET /docs` and its assets on a listener that also serves the OpenAPI document, without a key. */
export function registerDocs(app: FastifyInstance): void {
  app.get(DOCS_PATH, sendPage);
  app.get(`${DOCS_PATH}/`, sendPage);
  for (const [name, asset] of Object.entries(ASSETS)) {
    app.get(`${ASSETS_PATH}/${name}`, async (request, reply) => {
      const { body, gzipped } = await load(name, asset);
      reply
        .type(asset.type)
        .header('X-Content-Type-Options', 'nosniff')
        .header('Cache-Control', 'public, max-age=31536000, immutable')
        .header('Vary', 'Accept-Encoding');
      if (gzipped && acceptsGzip(request)) return reply.header('Content-Encoding', 'gzip').send(gzipped);
      return reply.send(body);
    });
  }
}
