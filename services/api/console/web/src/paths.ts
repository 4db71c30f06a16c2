/**
 * The paths of the console's pages (docs/console.md): the server answers each with the console's
 * document (services/api/console/serve.ts), and any other page path with the same document and
 * status 404, which the console shows as its Not found page.
 */
export const CONSOLE_PAGES = ['/', '/sign-in', '/setup', '/invite', '/password', '/keys', '/members', '/assets', '/assets/:asset_id', '/locations', '/import', '/readers', '/unknown-reads', '/live', '/webhooks', '/audit', '/alerts', '/scan', '/counts', '/counts/:count_id'] as const;

const PATTERNS = CONSOLE_PAGES.map((page) => new RegExp(`^${page.replace(/:[a-z_]+/g, '\\d+')}$`));

/** Whether `path` is one of the console's pages. */
export function isConsolePage(path: string): boolean {
  return PATTERNS.some((pattern) => pattern.test(path));
}
