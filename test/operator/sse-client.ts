import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { randomUUID } from 'node:crypto';
import { CLI_ACTOR } from '../../shared/domain/actor.js';
import { createUser, setPasswordWithSetupLink } from '../../shared/domain/people/commands.js';
import type { ServiceContext } from '../../shared/service-context.js';
import { AppClient, tokenOf, type Json } from '../people/app-client.js';

/** A server-sent event as received, with when (performance.now()) its last byte arrived. */
export interface SseEvent {
  event: string;
  data: string;
  at: number;
}

/**
 * A Node client of a `text/event-stream` answer, as a page's EventSource would read it: it sends
 * the session cookie (and an Origin when asked), parses `event:`/`data:` blocks and comments, and
 * keeps every event with its arrival time.
 */
export class SseClient {
  readonly events: SseEvent[] = [];
  readonly comments: string[] = [];
  closed = false;
  private buffer = '';
  private waiters: Array<() => void> = [];

  private constructor(
    readonly status: number,
    readonly headers: http.IncomingHttpHeaders,
    readonly response: http.IncomingMessage,
    /** The answer's body when it is not a stream (an error envelope). */
    readonly body: Json,
  ) {}

  static open(url: string, headers: Record<string, string>): Promise<SseClient> {
    return new Promise((resolve, reject) => {
      const request = http.get(url, { headers: { accept: 'text/event-stream', ...headers } }, (response) => {
        if (!response.headers['content-type']?.startsWith('text/event-stream')) {
          let text = '';
          response.setEncoding('utf8');
          response.on('data', (c: string) => (text += c));
          response.on('end', () => resolve(new SseClient(response.statusCode!, response.headers, response, text ? JSON.parse(text) : null)));
          return;
        }
        const client = new SseClient(response.statusCode!, response.headers, response, null);
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => client.take(chunk));
        response.on('close', () => {
          client.closed = true;
          client.wake();
        });
        response.on('error', () => undefined);
        resolve(client);
      });
      request.on('error', reject);
    });
  }

  private take(chunk: string): void {
    const at = performance.now();
    this.buffer += chunk;
    let end: number;
    while ((end = this.buffer.indexOf('\n\n')) >= 0) {
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      let event = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) this.comments.push(line.slice(1).trim());
        else if (line.startsWith('event:')) event = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
      }
      if (data.length > 0) this.events.push({ event, data: data.join('\n'), at });
    }
    this.wake();
  }

  private wake(): void {
    for (const waiter of this.waiters.splice(0)) waiter();
  }

  /** The data of the events named `event`, parsed. */
  of(event: string): Json[] {
    return this.events.filter((e) => e.event === event).map((e) => JSON.parse(e.data));
  }

  /** Waits until `check` holds (it is asked again on every chunk), or fails after `timeoutMs`. */
  async until(check: () => boolean, timeoutMs = 10_000, what = 'the expected events'): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (!check()) {
      const left = deadline - performance.now();
      if (left <= 0) {
        const counts: Record<string, number> = {};
        for (const e of this.events) counts[e.event] = (counts[e.event] ?? 0) + 1;
        throw new Error(`timed out waiting for ${what}; got ${JSON.stringify(counts)}${this.closed ? ' (closed)' : ''}`);
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.response.destroy();
  }
}

export const PASSWORD = 'correct horse battery';

/** A signed-in user of `orgId` with `role`, made as the CLI's `users create` and its setup link would. */
export async function signedInUser(ctx: ServiceContext, apiUrl: string, orgId: number, role: 'admin' | 'operator' | 'viewer'): Promise<AppClient & { email: string }> {
  const email = `${role}-${randomUUID().slice(0, 8)}@example.com`;
  const created = await createUser(ctx, { email, orgId, role, by: CLI_ACTOR, publicUrl: new URL(apiUrl).origin });
  await setPasswordWithSetupLink(ctx, { token: tokenOf(created.setup_url), password: PASSWORD });
  const client = new AppClient(apiUrl);
  const answer = await client.signIn(email, PASSWORD, orgId);
  if (answer.status !== 200) throw new Error(`sign-in failed: ${JSON.stringify(answer.body)}`);
  return Object.assign(client, { email });
}

/** Opens the live read stream as `client`'s page would (cookie; no CSRF token on a GET). */
export async function openLive(client: AppClient, query = '', headers: Record<string, string> = {}): Promise<SseClient> {
  const stream = await SseClient.open(`${client.origin}/app/api/live/reads${query}`, { ...(client.cookie ? { cookie: client.cookie } : {}), ...headers });
  if (stream.status === 200) await stream.until(() => stream.events.some((e) => e.event === 'ready'), 10_000, 'the ready event');
  return stream;
}

/** The p-th percentile (0..100) of `values`, nearest rank. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
