import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY, type TestService } from '../support/service.js';
import type { Json } from '../people/app-client.js';

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
export async function signIn(page: Page, email: string, password = PASSWORD): Promise<void> {
  await page.goto('/sign-in');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { level: 1, name: 'Where things are' }).waitFor();
}
