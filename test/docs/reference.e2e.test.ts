import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../support/service.js';

/**
 * `GET /docs` (issue 15): an interactive reference of the service's own OpenAPI document on the
 * public listener, without a key, that works offline: every asset it names is on this listener.
 */

let svc: TestService;
let origin: string;

beforeAll(async () => {
  svc = await startTestService('docs-reference', { ROLES: 'api' });
  origin = new URL(svc.apiUrl).origin;
});
afterAll(async () => {
  await svc?.stop();
});

/** Every URL the page's markup names: src, href, and data-* attributes that hold a URL. */
function urlsIn(html: string): string[] {
  return [...html.matchAll(/\s(?:src|href|data-[a-z-]*url)\s*=\s*"([^"]*)"/gi)].map((m) => m[1]!);
}

describe('GET /docs', () => {
  it('answers an HTML page without a key', async () => {
    const response = await fetch(`${origin}/docs`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/html\b/);
    expect(await response.text()).toContain('<div id="swagger-ui"');
  });

  it('names only same-origin URLs, all served, and no other host anywhere in the page', async () => {
    const html = await (await fetch(`${origin}/docs`)).text();
    expect(html).not.toMatch(/(https?:)?\/\/[a-z0-9.-]+\.[a-z]{2,}/i);
    const urls = urlsIn(html);
    expect(urls.length).toBeGreaterThanOrEqual(4);
    const assets = urls.filter((url) => url.startsWith('/docs/'));
    expect(assets.some((url) => url.endsWith('.js'))).toBe(true);
    expect(assets.some((url) => url.endsWith('.css'))).toBe(true);
    for (const url of urls) {
      const resolved = new URL(url, `${origin}/docs`);
      expect(resolved.origin, url).toBe(origin);
      const response = await fetch(resolved);
      expect(response.status, url).toBe(200);
      const body = await response.text();
      if (url.endsWith('.css')) {
        // Stylesheets load nothing from elsewhere either (fonts, images, imports).
        expect(body, url).not.toMatch(/@import|url\(\s*['"]?(https?:)?\/\//i);
      }
    }
  });

  it("points at the service's own OpenAPI document", async () => {
    const html = await (await fetch(`${origin}/docs`)).text();
    const documentUrl = /data-openapi-url="([^"]+)"/.exec(html)?.[1];
    expect(documentUrl).toBe('/openapi/v1.json');
    const response = await fetch(new URL(documentUrl!, `${origin}/docs`));
    expect(response.status).toBe(200);
    const document = (await response.json()) as { openapi: string; servers: Array<{ url: string }>; paths: Record<string, unknown> };
    expect(document.openapi).toBe('3.1.0');
    expect(document.servers).toEqual([{ url: '/api/v1' }]);
    expect(Object.keys(document.paths)).toContain('/assets');
    // The page's own script hands that attribute to the renderer.
    const script = urlsIn(html).find((url) => /\/docs\.js$/.test(url))!;
    expect(await (await fetch(`${origin}${script}`)).text()).toContain("getAttribute('data-openapi-url')");
  });

  it('tells the browser to load nothing from another origin', async () => {
    const response = await fetch(`${origin}/docs`);
    const policy = response.headers.get('content-security-policy') ?? '';
    expect(policy).toContain("default-src 'none'");
    for (const directive of policy.split(';').map((d) => d.trim())) {
      expect(directive, directive).not.toMatch(/https?:|\*/);
    }
  });

  it('sends the renderer compressed when the client accepts gzip, and whole otherwise', async () => {
    const html = await (await fetch(`${origin}/docs`)).text();
    const bundle = urlsIn(html).find((url) => url.endsWith('swagger-ui-bundle.js'))!;
    const plain = await fetch(`${origin}${bundle}`, { headers: { 'Accept-Encoding': 'identity' } });
    expect(plain.headers.get('content-encoding')).toBeNull();
    const whole = Buffer.from(await plain.arrayBuffer());
    expect(whole.length).toBeGreaterThan(100_000);

    // Node's fetch would decompress by itself: read the raw bytes through the http module.
    const { request } = await import('node:http');
    const raw = await new Promise<{ encoding: string | undefined; body: Buffer }>((resolve, reject) => {
      request(`${origin}${bundle}`, { headers: { 'Accept-Encoding': 'gzip' } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ encoding: res.headers['content-encoding'], body: Buffer.concat(chunks) }));
        res.on('error', reject);
      })
        .on('error', reject)
        .end();
    });
    expect(raw.encoding).toBe('gzip');
    expect(raw.body.length).toBeLessThan(whole.length / 2);
    expect(gunzipSync(raw.body).equals(whole)).toBe(true);
  });

  it('answers an unknown asset with the error envelope', async () => {
    const response = await fetch(`${origin}/docs/assets/0000000000000000/nope.js`);
    expect(response.status).toBe(404);
    expect(((await response.json()) as { error: { type: string } }).error.type).toBe('not_found');
  });
});
