import { useEffect, useState } from 'preact/hooks';

/**
 * Client-side navigation between the console's pages: the server answers every page path with
 * the same document (services/api/console.ts), and links inside it change the page without a
 * reload.
 */

const listeners = new Set<() => void>();

export function navigate(to: string, options: { replace?: boolean } = {}): void {
  if (options.replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  for (const listener of listeners) listener();
}

/** The current path, re-rendering on navigation and on back/forward. */
export function usePath(): string {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const update = () => setPath(location.pathname);
    listeners.add(update);
    addEventListener('popstate', update);
    return () => {
      listeners.delete(update);
      removeEventListener('popstate', update);
    };
  }, []);
  return path;
}

/** Same-origin links of the page navigate in place; a modified click (new tab) stays the browser's. */
export function interceptLinks(): void {
  document.addEventListener('click', (event) => {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    const link = (event.target as Element | null)?.closest?.('a');
    if (!link || link.target || link.hasAttribute('download')) return;
    const url = new URL(link.href, location.href);
    // The server's own routes (the API, its docs, the app's navigations such as single sign-on) are loaded, not routed here.
    if (url.origin !== location.origin || url.pathname.startsWith('/api/') || url.pathname.startsWith('/app/api/') || url.pathname.startsWith('/docs')) return;
    event.preventDefault();
    navigate(url.pathname + url.search + url.hash);
  });
}

/** The token of a link's fragment (`/setup#token=…`), which browsers send to no server. */
export function fragmentToken(): string | null {
  const params = new URLSearchParams(location.hash.replace(/^#/, ''));
  return params.get('token');
}
