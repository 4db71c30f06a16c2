import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { expect } from 'vitest';

/**
 * The console's browser: Debian's Chromium (`apt-get install chromium`; `.ci/run` installs it),
 * driven by playwright-core, which downloads no browser of its own. One browser per test file,
 * a fresh profile each time, and flags that keep it off the network (this machine has none).
 */

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Why the browser tests cannot run here, or null. */
export function chromiumMissing(): string | null {
  return fs.existsSync(CHROMIUM) ? null : `Chromium is not installed at ${CHROMIUM} (apt-get install chromium)`;
}

export interface TestBrowser {
  browser: Browser;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<TestBrowser> {
  // launch() gives Chromium a fresh --user-data-dir of its own (Playwright refuses the flag here).
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  return {
    browser,
    async close() {
      await browser.close();
    },
  };
}

/**
 * A browser context (its own cookies) that records what must never happen on a page: a
 * dialog (alert, confirm: an XSS payload that ran), a script error, a CSP violation.
 */
export async function openContext(browser: Browser, baseURL: string, options: { mobile?: boolean } = {}): Promise<{ context: BrowserContext; page: Page; problems: string[] }> {
  const context = await browser.newContext({
    baseURL,
    permissions: ['clipboard-read', 'clipboard-write'],
    ...(options.mobile ? { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true } : { viewport: { width: 1280, height: 900 } }),
  });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('dialog', (dialog) => {
    problems.push(`a ${dialog.type()} dialog opened: ${dialog.message()}`);
    void dialog.dismiss();
  });
  page.on('pageerror', (error) => problems.push(`script error: ${error.message}`));
  page.on('console', (message) => {
    const text = message.text();
    if (/Content.Security.Policy|Trusted Type/i.test(text)) problems.push(`CSP: ${text}`);
  });
  return { context, page, problems };
}

const axeSource = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: Array<{ target: unknown[] }>;
}

/**
 * axe-core run inside the page (injected by the test, not served by the console); the page must
 * have no serious or critical violation. Trusted Types would refuse axe's own script, so it is
 * added through the DevTools protocol, outside the page's CSP.
 */
export async function expectAccessible(page: Page, label: string): Promise<void> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Runtime.evaluate', { expression: axeSource });
  const { result } = (await cdp.send('Runtime.evaluate', {
    expression: `axe.run(document, { resultTypes: ['violations'] }).then((r) => JSON.stringify(r.violations))`,
    awaitPromise: true,
    returnByValue: true,
  })) as { result: { value: string } };
  await cdp.detach();
  const violations = (JSON.parse(result.value) as AxeViolation[]).filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect(
    violations.map((v) => `${v.impact} ${v.id}: ${v.help} (${v.nodes.map((n) => JSON.stringify(n.target)).join(', ')})`),
    `axe-core on ${label}`,
  ).toEqual([]);
}

/** A screenshot for docs/console.md, when SCREENSHOTS=1 (docs/img/console/<name>.png). */
export async function screenshot(page: Page, name: string): Promise<void> {
  if (process.env.SCREENSHOTS !== '1') return;
  const dir = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../docs/img/console');
  fs.mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: path.join(dir, `${name}.png`), fullPage: true });
}
