import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../support/service.js';
import { chromiumMissing, expectAccessible, launchBrowser, openContext, type TestBrowser } from '../support/browser.js';
import { CONSOLE_CONTENT_SECURITY_POLICY, CONSOLE_DIST, CONSOLE_PAGES } from '../../services/api/console/serve.js';
import { DOCS_PATH, OPENAPI_DOCUMENT_URL } from '../../services/api/docs.js';
import { SLOW } from './harness.js';

/**
 * HEAD wherever GET answers, on the console's listener too (docs/api.md, "Requests and responses"), and the
 * console's own Not found page for a page path it does not have (docs/console.md, "How it is built"),
 * while the server's own paths keep the contract's JSON 404.
 */

let svc: TestService;
let origin: string;

beforeAll(async () => {
  svc = await startTestService('not-found');
  origin = new URL(svc.apiUrl).origin;
}, SLOW);

afterAll(async () => {
  await svc?.stop();
});

/** A request whose body is read whole, so that a HEAD answer that carried one would show it. */
async function call(method: string, target: string): Promise<{ status: number; headers: Headers; body: string }> {
  const response = await fetch(`${origin}${target}`, { method, redirect: 'manual' });
  return { status: response.status, headers: response.headers, body: await response.text() };
}

/** A path of every kind of GET the public listener answers outside /api/v1's pipeline. */
function getPaths(): string[] {
  const pages = CONSOLE_PAGES.map((page) => page.replace(/:[a-z_]+/g, '17'));
  const html = fs.readFileSync(path.join(CONSOLE_DIST, 'index.html'), 'utf8');
  const files = [...html.matchAll(/(?:src|href)="(\/static\/[^"]+)"/g)].map((match) => match[1]!);
  expect(files.length).toBeGreaterThan(0);
  return [...pages, ...files, DOCS_PATH, `${DOCS_PATH}/`, OPENAPI_DOCUMENT_URL, OPENAPI_DOCUMENT_URL.replace('.json', '.yaml'), '/app/api/me', '/api/v1/assets', '/api/v1/orgs/me'];
}

describe('HEAD wherever GET answers', () => {
  it('every kind of GET path answers HEAD with the same status and headers and no body', async () => {
    for (const target of getPaths()) {
      const get = await call('GET', target);
      const head = await call('HEAD', target);
      expect({ target, status: head.status }).toEqual({ target, status: get.status });
      expect({ target, body: head.body }).toEqual({ target, body: '' });
      for (const name of ['content-type', 'content-length', 'cache-control', 'content-security-policy']) {
        expect({ target, name, value: head.headers.get(name) }).toEqual({ target, name, value: get.headers.get(name) });
      }
      // A page, a document or a file: the GET said something.
      if (get.status === 200) expect(get.body.length).toBeGreaterThan(0);
    }
  });

  it('HEAD / answers as GET / does', async () => {
    const get = await call('GET', '/');
    const head = await call('HEAD', '/');
    expect(get.status).toBe(200);
    expect(head.status).toBe(200);
    expect(head.headers.get('content-type')).toBe('text/html; charset=utf-8');
  });
});

describe("the console's Not found page", () => {
  it('a page path the console does not have gets its document with 404, GET and HEAD', async () => {
    for (const target of ['/no-such-page', '/assets/not-a-number', '/locations/17/elsewhere', '/favicon.ico?x=1']) {
      const get = await call('GET', target);
      expect({ target, status: get.status }).toEqual({ target, status: 404 });
      expect(get.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(get.headers.get('content-security-policy')).toBe(CONSOLE_CONTENT_SECURITY_POLICY);
      expect(get.body).toContain('<script');
      const head = await call('HEAD', target);
      expect(head.status).toBe(404);
      expect(head.body).toBe('');
    }
  });

  it("the server's own paths, and other methods, keep the contract's JSON 404", async () => {
    const cases: [string, string, string][] = [
      ['GET', '/api/v1/no-such', 'Unknown API route: /api/v1/no-such'],
      ['GET', '/api', 'Not found: /api'],
      ['GET', '/app/api/no-such', 'Not found: /app/api/no-such'],
      ['GET', '/docs/no-such', 'Not found: /docs/no-such'],
      ['GET', '/openapi/v2.json', 'Not found: /openapi/v2.json'],
      ['GET', '/static/no-such.js', 'Not found: /static/no-such.js'],
      ['POST', '/no-such-page', 'Not found: /no-such-page'],
    ];
    for (const [method, target, detail] of cases) {
      const answer = await call(method, target);
      expect({ method, target, status: answer.status }).toEqual({ method, target, status: 404 });
      expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
      expect(JSON.parse(answer.body).error).toMatchObject({ type: 'not_found', detail });
    }
  });

  const missing = chromiumMissing();
  let browser: TestBrowser;
  beforeAll(async () => {
    if (!missing) browser = await launchBrowser();
  }, SLOW);
  afterAll(async () => {
    await browser?.close();
  });

  it.skipIf(missing !== null)('shows Not found to a person signed out, without sending them to sign in', { timeout: SLOW }, async () => {
    const { page, context, problems } = await openContext(browser.browser, origin);
    try {
      const response = await page.goto('/no-such-page');
      expect(response?.status()).toBe(404);
      await page.getByRole('heading', { name: 'Not found' }).waitFor();
      await page.getByRole('link', { name: 'Sign in' }).waitFor();
      expect(new URL(page.url()).pathname).toBe('/no-such-page');
      await expectAccessible(page, 'not-found');
      // A known page still sends them to sign in.
      await page.goto('/keys');
      await page.waitForURL('**/sign-in');
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
