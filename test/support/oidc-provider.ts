import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';

/**
 * A real OpenID provider in a process of its own (./oidc-provider.mjs, oidc-provider), for the
 * single sign-on tests: its issuer, and how to stop it.
 */

const SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'oidc-provider.mjs');

export interface ProviderAccount {
  email?: string;
  email_verified?: boolean;
}

export interface ProviderSettings {
  clientId: string;
  clientSecret: string;
  /** The service's callback, `<PUBLIC_URL>/app/api/oidc/callback`. */
  redirectUri: string;
  /** By login (the name typed on the provider's login page, and the ID token's `sub`). */
  accounts: Record<string, ProviderAccount>;
  /** Logins whose ID tokens the token endpoint signs again with a key not in the provider's JWKS. */
  forgedIdTokens?: string[];
}

export interface TestProvider {
  /** `http://localhost:<port>` */
  issuer: string;
  stop(): Promise<void>;
}

export async function startOidcProvider(settings: ProviderSettings): Promise<TestProvider> {
  const child = spawn(process.execPath, [SCRIPT], {
    env: { ...process.env, OIDC_TEST_PROVIDER: JSON.stringify(settings), NODE_NO_WARNINGS: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const issuer = await new Promise<string>((resolve, reject) => {
    let stdout = '';
    const timer = setTimeout(() => reject(new Error(`the OpenID provider did not start within 30 s: ${stderr}`)), 30_000);
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const line = stdout.split('\n').find((l) => l.startsWith('{'));
      if (line) {
        clearTimeout(timer);
        resolve((JSON.parse(line) as { issuer: string }).issuer);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the OpenID provider exited (${code}) before it served: ${stderr}`));
    });
  });
  return {
    issuer,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** On the provider's development login page: the account's login, and any password. */
export async function signInAtProvider(page: Page, login: string): Promise<void> {
  await page.locator('input[name="login"]').fill(login);
  await page.locator('input[name="password"]').fill('any password');
  await page.getByRole('button', { name: 'Sign-in' }).click();
}
