import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { launchBrowser, type TestBrowser } from '../support/browser.js';
import { startTestService, TEST_SIGNING_KEY_ENCRYPTION_KEY, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';
import { signedInUser } from '../operator/sse-client.js';
import type { AppClient, Json } from '../people/app-client.js';

/** What the console's browser tests share: the repository, the password, markup to render as text, the CLI and the sign-in page. */

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');
export const PASSWORD = 'correct horse battery';
export const XSS = '<img src=x onerror=alert(1)>';
/** For emails, which have no spaces. */
export const XSS_NO_SPACE = '<img/src=x/onerror=alert(4)>';
export const SLOW = 180_000;

/** The CLI (`npx tracking … --json`) against the test service's database, its JSON answer. */
export function cliJson(svc: Pick<TestService, 'db'>, origin: string, ...args: string[]): Promise<Json> {
  return new Promise((resolve, reject) => {
    execFile(
      TSX,
      ['services/cli/main.ts', ...args, '--json'],
      {
        cwd: ROOT,
        env: { ...process.env, DATABASE_URL: svc.db.url, SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY, PUBLIC_URL: origin, LOG_LEVEL: 'warn', NODE_NO_WARNINGS: '1' },
        timeout: 60_000,
      },
      (error, stdout, stderr) => (error ? reject(new Error(`${args.join(' ')}: ${stderr}`)) : resolve(JSON.parse(stdout))),
    );
  });
}

/** Signs in on the page, as a person would, and waits for the first page after it. */
/**
 * The service refuses the page's first `times` streams of `pattern` as a busy service does (503,
 * the contract's error body); later ones pass. Gives how many it refused so far.
 */
export async function refuseStreams(page: Page, pattern: string, times: number): Promise<() => number> {
  let refused = 0;
  await page.route(pattern, async (route) => {
    if (refused >= times) return route.continue();
    refused += 1;
    await route.fulfill({ status: 503, contentType: 'application/json', headers: { 'retry-after': '1' }, body: JSON.stringify({ error: { type: 'service_unavailable', detail: 'The database did not answer; retry' } }) });
  });
  return () => refused;
}

export async function signIn(page: Page, email: string, password = PASSWORD): Promise<void> {
  await page.goto('/sign-in');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { level: 1, name: 'Where things are' }).waitFor();
}

/** What the tests of keeping master data in the console share (master data, restore, import). */
export interface KeepingWorld {
  svc: TestService;
  origin: string;
  browser: TestBrowser;
  /** Signed in as an operator and as a viewer of the one organization, "Acme". */
  operator: AppClient & { email: string };
  viewer: AppClient & { email: string };
  /** /api/v1 with a key that reads and writes assets and locations: what each test checks through. */
  api: ReturnType<typeof client>;
}

/**
 * A service on its own `database`, its organization's operator and viewer, a checking key and
 * Chromium, started before the file's tests and stopped after them; nothing when Chromium is
 * `missing`. The fields are there once the file's `beforeAll` has run.
 */
export function keepingWorld(database: string, missing: string | null): KeepingWorld {
  const world = {} as KeepingWorld;
  beforeAll(async () => {
    if (missing) return;
    const svc = await startTestService(database);
    const orgId = (await createOrg(svc.service.ctx, 'Acme')).id;
    const key = await mintApiKey(svc.service.ctx, { orgId, name: 'checker', scopes: ['assets:read', 'locations:read', 'assets:write', 'locations:write'] });
    Object.assign(world, {
      svc,
      origin: new URL(svc.apiUrl).origin,
      operator: await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'operator'),
      viewer: await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'viewer'),
      api: client(svc.apiUrl, key.token),
      browser: await launchBrowser(),
    });
  }, SLOW);
  afterAll(async () => {
    await world.browser?.close();
    await world.svc?.stop();
  });
  return world;
}
