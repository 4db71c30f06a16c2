/** A response body, asserted field by field in the tests. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response JSON is asserted field by field
export type Json = any;

/**
 * A browser-like client of the web application's endpoints for e2e tests: it keeps the session
 * cookie, sends the page's Origin, and the CSRF token (from /app/api/me) on state-changing requests.
 */
export class AppClient {
  cookie: string | null = null;
  csrf: string | null = null;
  readonly origin: string;

  constructor(readonly baseUrl: string) {
    this.origin = new URL(baseUrl).origin;
  }

  async request(
    method: string,
    path: string,
    body?: unknown,
    options: { csrf?: string | null; origin?: string | null; contentType?: string } = {},
  ): Promise<{ status: number; headers: Headers; body: Json }> {
    const headers: Record<string, string> = {};
    const origin = options.origin === undefined ? this.origin : options.origin;
    if (origin !== null) headers.origin = origin;
    if (this.cookie) headers.cookie = this.cookie;
    const csrf = options.csrf === undefined ? this.csrf : options.csrf;
    if (csrf && method !== 'GET') headers['x-csrf-token'] = csrf;
    if (body !== undefined) headers['content-type'] = options.contentType ?? 'application/json';
    const response = await fetch(`${this.origin}/app/api${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const setCookie = response.headers.get('set-cookie');
    if (setCookie) {
      const [pair] = setCookie.split(';');
      this.cookie = pair!.endsWith('=') ? null : pair!;
    }
    const text = await response.text();
    return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : null };
  }

  async signIn(email: string, password: string, orgId?: number) {
    const answer = await this.request('POST', '/sign-in', { email, password, ...(orgId ? { org_id: orgId } : {}) });
    if (answer.status === 200) this.csrf = answer.body.data.csrf_token;
    return answer;
  }
}

/** The token of a link (`…#token=<token>`). */
export function tokenOf(url: string): string {
  return decodeURIComponent(url.split('#token=')[1]!);
}
