/**
 * What authentication costs a request. Two api listeners in one process serve the same tiny
 * route through the same pipeline; one authenticates for real (signature verified once per
 * token, then the revocation state and expiry checked per request), the other hands every
 * request a fixed principal. Requests are sent one at a time over keep-alive HTTP.
 *
 * Reported, for an API key and for a person's session token (whose session and membership are
 * checked per request, from memory for up to a second): the in-process time of `authenticate()`
 * (p50/p99) against the whole request's time (client-observed, p50/p99) on the authenticated
 * listener, and the latency of the unauthenticated listener as the baseline. Target:
 * authentication under 5% of the request.
 * Also: the cost of a first sight of a token (signature verification), for information.
 */
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { buildApiServer } from '../../services/api/server.js';
import { createAuthentication } from '../../shared/auth/index.js';
import { loadVerificationKeys } from '../../shared/auth/signing-keys.js';
import { verifyToken } from '../../shared/auth/tokens.js';
import { defineRoute, type RouteDefinition } from '../../shared/http/routes.js';
import type { Authenticator, Principal } from '../../shared/auth/principal.js';
import { startService } from '../../services/service.js';
import { loadConfig } from '../../shared/config.js';
import { createLogger } from '../../shared/logger.js';
import { createOrg, mintApiKey, mintSession } from '../support/auth.js';
import { createUser } from '../../shared/domain/people/commands.js';
import type { BenchContext, BenchRow } from './types.js';

const REQUESTS = Number(process.env.BENCH_AUTH_REQUESTS ?? 20_000);
const WARMUP = 2_000;
const TARGET_SHARE = 0.05;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const us = (ms: number) => `${(ms * 1000).toFixed(1)} µs`;

async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/api/v1`;
}

/** One request; its latency in ms. */
async function timedRequest(url: string, headers: Record<string, string>): Promise<number> {
  const t0 = performance.now();
  const response = await fetch(url, { headers });
  await response.arrayBuffer();
  const elapsed = performance.now() - t0;
  if (response.status !== 200) throw new Error(`bench request answered ${response.status}`);
  return elapsed;
}

export async function run(ctx: BenchContext): Promise<BenchRow[]> {
  const config = loadConfig({
    SIGNING_KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    ROLES: 'projector',
    PORT: '0',
    OPS_PORT: '0',
    LOG_LEVEL: 'silent',
    // The bench measures authentication, not the limiter refusing it.
    RATE_LIMIT_PER_MINUTE: String(1e9),
    RATE_LIMIT_BURST: String(1e9),
  });
  const service = await startService(config, ctx.url, createLogger('silent'));
  const auth = await createAuthentication(service.ctx);
  const servers: FastifyInstance[] = [];
  try {
    const org = await createOrg(service.ctx, 'Bench');
    const key = await mintApiKey(service.ctx, { orgId: org.id, name: 'bench', scopes: ['assets:read'] });
    // A person's session token, checked against its session and membership on every request.
    await createUser(service.ctx, { email: 'viewer@example.com', orgId: org.id, role: 'viewer', by: { kind: 'cli' }, publicUrl: 'http://127.0.0.1' });
    const session = await mintSession(service.ctx, { user: 'viewer@example.com', orgId: org.id });
    const ping: RouteDefinition[] = [
      defineRoute({
        method: 'GET',
        path: '/bench/ping',
        operationId: 'benchPing',
        summary: 'bench',
        tag: 'bench',
        scope: 'assets:read',
        responses: { 200: { description: 'pong' } },
        async handler() {
          return { status: 200, body: { data: { pong: true } } };
        },
      }),
    ];

    const authTimes: number[] = [];
    let recording = false;
    const timed: Authenticator = {
      async authenticate(request: FastifyRequest) {
        const t0 = performance.now();
        const principal = await auth.authenticator.authenticate(request);
        if (recording) authTimes.push(performance.now() - t0);
        return principal;
      },
    };
    const fixed: Principal = { kind: 'api_key', orgId: org.id, scopes: ['assets:read'], keyId: key.id, subject: key.id };
    const withAuth = buildApiServer(service.ctx, { authenticator: timed, rateLimiter: auth.rateLimiter, routes: ping });
    const withoutAuth = buildApiServer(service.ctx, { authenticator: { authenticate: async () => fixed }, rateLimiter: auth.rateLimiter, routes: ping });
    servers.push(withAuth, withoutAuth);
    const authUrl = `${await listen(withAuth)}/bench/ping`;
    const plainUrl = `${await listen(withoutAuth)}/bench/ping`;

    /** One credential's requests against both listeners; its rows. */
    async function measure(credential: string, token: string): Promise<BenchRow[]> {
      const headers = { authorization: `Bearer ${token}` };
      authTimes.length = 0;
      ctx.log(`auth: ${credential}: warming up (${WARMUP} requests each)`);
      for (let i = 0; i < WARMUP; i++) {
        await timedRequest(authUrl, headers);
        await timedRequest(plainUrl, headers);
      }
      // Alternating request by request, so that whatever else the machine does weighs on both alike.
      ctx.log(`auth: ${credential}: ${REQUESTS} sequential requests each, alternating between the listeners`);
      const authLatencies: number[] = [];
      const plainLatencies: number[] = [];
      recording = true;
      for (let i = 0; i < REQUESTS; i++) {
        authLatencies.push(await timedRequest(authUrl, headers));
        plainLatencies.push(await timedRequest(plainUrl, headers));
      }
      recording = false;
      // Each listener's own time: the sum of its requests' latencies.
      const authSeconds = authLatencies.reduce((sum, t) => sum + t, 0) / 1000;
      const plainSeconds = plainLatencies.reduce((sum, t) => sum + t, 0) / 1000;
      authLatencies.sort((x, y) => x - y);
      plainLatencies.sort((x, y) => x - y);
      authTimes.sort((x, y) => x - y);

      const authP50 = percentile(authTimes, 50);
      const authP99 = percentile(authTimes, 99);
      const requestP50 = percentile(authLatencies, 50);
      const requestP99 = percentile(authLatencies, 99);
      const plainP50 = percentile(plainLatencies, 50);
      const plainP99 = percentile(plainLatencies, 99);
      ctx.log(`auth: ${credential}: authenticate() p50 ${us(authP50)} p99 ${us(authP99)}`);
      ctx.log(`auth: ${credential}: request with auth p50 ${us(requestP50)} p99 ${us(requestP99)}; without auth p50 ${us(plainP50)} p99 ${us(plainP99)}`);
      ctx.log(`auth: ${credential}: share of the request p50 ${((authP50 / requestP50) * 100).toFixed(2)}%, p99 ${((authP99 / requestP99) * 100).toFixed(2)}%`);
      const baseline = { label: 'same route, auth skipped', events: plainLatencies.length, seconds: plainSeconds };
      return [
        {
          bench: 'auth',
          case: `${credential}: authenticate() p50 ${us(authP50)} = ${((authP50 / requestP50) * 100).toFixed(1)}% of request p50 ${us(requestP50)} (no-auth p50 ${us(plainP50)})`,
          events: authLatencies.length,
          seconds: authSeconds,
          baseline,
          target: { label: `< ${TARGET_SHARE * 100}% of request p50`, met: authP50 / requestP50 < TARGET_SHARE },
        },
        {
          bench: 'auth',
          case: `${credential}: authenticate() p99 ${us(authP99)} = ${((authP99 / requestP99) * 100).toFixed(1)}% of request p99 ${us(requestP99)} (no-auth p99 ${us(plainP99)})`,
          events: authLatencies.length,
          seconds: authSeconds,
          baseline,
          target: { label: `< ${TARGET_SHARE * 100}% of request p99`, met: authP99 / requestP99 < TARGET_SHARE },
        },
      ];
    }

    const rows = [...(await measure('API key', key.token)), ...(await measure("a viewer's session token", session.token))];

    // First sight of a token: the signature check that the per-token cache saves afterwards.
    const keys = await loadVerificationKeys(service.ctx.pool);
    const verifyTimes: number[] = [];
    const now = Math.floor(Date.now() / 1000);
    for (let i = 0; i < 2000; i++) {
      const t0 = performance.now();
      await verifyToken(key.token, async (kid) => keys.get(kid), config.ENVIRONMENT, now);
      verifyTimes.push(performance.now() - t0);
    }
    verifyTimes.sort((x, y) => x - y);
    ctx.log(`auth: first sight of a token (signature verification) p50 ${us(percentile(verifyTimes, 50))} p99 ${us(percentile(verifyTimes, 99))}`);

    return [
      ...rows,
      {
        bench: 'auth',
        case: `first sight of a token: signature verification p50 ${us(percentile(verifyTimes, 50))} p99 ${us(percentile(verifyTimes, 99))}`,
        events: verifyTimes.length,
        seconds: verifyTimes.reduce((s, t) => s + t, 0) / 1000,
      },
    ];
  } finally {
    for (const server of servers) await server.close();
    await auth.stop();
    await service.stop();
  }
}
