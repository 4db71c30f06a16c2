import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineRoute } from '../../shared/http/routes.js';
import { CHECK_ORDER } from '../../shared/http/pipeline.js';
import { BEARER_STEPS } from '../../shared/http/access.js';
import { queryParams } from '../../shared/http/validation.js';
import { seededRandom } from '../../shared/random.js';
import { bearer, createOrg, mintApiKey, personWithToken } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { signedInUser } from '../operator/sse-client.js';
import type { AppClient } from '../people/app-client.js';
import { startProbeServer, type ProbeServer } from '../auth/harness.js';

// The one request pipeline checks every request in one order (docs/design.md, "One request
// pipeline"): route, method, access (each strategy's own steps), content type, path parameters,
// query, body. Each trial breaks a random set of steps at once; the answer must be the refusal of
// the earliest broken step, whichever strategy admits the caller, and an unbroken request passes.

const SEED = Number(process.env.TEST_SEED ?? Date.now());
const TRIALS = 40;

type Step = 'method' | 'authentication' | 'authorization' | 'content type' | 'path parameters' | 'query' | 'body';
const ORDER: readonly Step[] = ['method', 'authentication', 'authorization', 'content type', 'path parameters', 'query', 'body'];

function someOf<T>(items: readonly T[], random: () => number): Set<T> {
  return new Set(items.filter(() => random() < 0.35));
}

let svc: TestService;
let probe: ProbeServer;
let orgId: number;

const probeRoute = defineRoute({
  method: 'POST',
  path: '/probe/things/{thing_id}',
  operationId: 'probeThing',
  summary: 'test probe',
  tag: 'probe',
  scope: 'assets:write',
  query: { dry_run: queryParams.bool() },
  body: z.strictObject({ name: z.string().min(1) }),
  responses: { 200: { description: 'what the handler was given' } },
  async handler({ params, query, body }) {
    return { status: 200, body: { params, query, body } };
  },
});

beforeAll(async () => {
  svc = await startTestService('http_check_order');
  probe = await startProbeServer(svc.service.ctx, [probeRoute]);
  orgId = (await createOrg(svc.service.ctx, 'Ordered')).id;
}, 120_000);

afterAll(async () => {
  await probe?.close();
  await svc?.stop();
});

interface Answer {
  status: number;
  type: string;
  detail: string;
  field?: string;
}

async function answerOf(response: Response): Promise<Answer> {
  const body = (await response.json()) as { error?: { type: string; detail: string; fields?: Array<{ field: string }> } };
  return { status: response.status, type: body.error?.type ?? 'ok', detail: body.error?.detail ?? '', field: body.error?.fields?.[0]?.field };
}

describe('the pipeline states its order once', () => {
  it('CHECK_ORDER and the bearer strategy name the steps these trials break, in this order', () => {
    expect(CHECK_ORDER).toEqual(['route', 'method', 'access', 'content type', 'path parameters', 'query', 'body']);
    expect(BEARER_STEPS).toEqual(['authentication', 'rate limit', 'scope (API key) or role (session token)']);
  });
});

describe('bearer tokens on the public contract', () => {
  it(`answers the earliest broken step, API keys and session tokens alike (seed ${SEED}, ${TRIALS} trials)`, async () => {
    const random = seededRandom(SEED);
    const writer = await mintApiKey(svc.service.ctx, { orgId, scopes: ['assets:write'] });
    const reader = await mintApiKey(svc.service.ctx, { orgId, scopes: ['assets:read'] });
    const operator = await personWithToken(svc.service.ctx, orgId, 'operator');
    const viewer = await personWithToken(svc.service.ctx, orgId, 'viewer');
    const expected: Record<Step, (session: boolean) => Partial<Answer>> = {
      method: () => ({ status: 405, type: 'method_not_allowed', detail: 'Allowed methods: POST' }),
      authentication: () => ({ status: 401, type: 'unauthorized' }),
      authorization: (session) => ({ status: 403, type: 'forbidden', detail: session ? 'Your role (viewer) does not allow this' : 'Missing required scope: assets:write' }),
      'content type': () => ({ status: 415, type: 'unsupported_media_type', detail: 'Content-Type must be application/json' }),
      'path parameters': () => ({ status: 400, type: 'validation_error', field: 'thing_id' }),
      query: () => ({ status: 400, type: 'validation_error', field: 'bogus' }),
      body: () => ({ status: 400, type: 'validation_error', field: 'name' }),
    };
    for (let trial = 0; trial < TRIALS; trial++) {
      const broken = someOf(ORDER, random);
      const session = random() < 0.5;
      const allowed = session ? operator.token : writer.token;
      const refused = session ? viewer.token : reader.token;
      const headers: Record<string, string> = { 'content-type': broken.has('content type') ? 'text/plain' : 'application/json' };
      if (!broken.has('authentication')) Object.assign(headers, bearer(broken.has('authorization') ? refused : allowed));
      const url = `${probe.url}/probe/things/${broken.has('path parameters') ? '0' : '7'}${broken.has('query') ? '?bogus=1' : '?dry_run=true'}`;
      const response = await fetch(url, { method: broken.has('method') ? 'PUT' : 'POST', headers, body: JSON.stringify({ name: broken.has('body') ? '' : 'seven' }) });
      const first = ORDER.find((step) => broken.has(step));
      const context = `trial ${trial}: broken ${[...broken].join(', ') || 'nothing'} (${session ? 'session token' : 'API key'})`;
      const answer = await answerOf(response);
      if (first === undefined) {
        expect(answer, context).toMatchObject({ status: 200, type: 'ok' });
      } else {
        expect(answer, context).toMatchObject(expected[first](session));
      }
    }
  }, 120_000);

  it('hands the handler decoded values: path ids as numbers, query values as their type', async () => {
    const writer = await mintApiKey(svc.service.ctx, { orgId, scopes: ['assets:write'] });
    const response = await fetch(`${probe.url}/probe/things/42?dry_run=false`, {
      method: 'POST',
      headers: { ...bearer(writer.token), 'content-type': 'application/json; charset=utf-8' },
      body: JSON.stringify({ name: 'x' }),
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ params: { thing_id: 42 }, query: { dry_run: false }, body: { name: 'x' } });
  });
});

describe('cookie sessions on the web application', () => {
  type AppStep = 'method' | 'Origin' | 'session cookie' | 'CSRF header' | 'role' | 'content type' | 'body';
  const APP_ORDER: readonly AppStep[] = ['method', 'Origin', 'session cookie', 'CSRF header', 'role', 'content type', 'body'];
  const expected: Record<AppStep, Partial<Answer>> = {
    method: { status: 405, type: 'method_not_allowed', detail: 'Allowed methods: GET, HEAD, POST' },
    Origin: { status: 403, type: 'forbidden', detail: "Origin https://elsewhere.example is not this service's" },
    'session cookie': { status: 401, type: 'unauthorized', detail: 'Sign in first: no valid session cookie' },
    'CSRF header': { status: 403, type: 'forbidden', detail: 'Missing or wrong X-CSRF-Token header (GET /app/api/me gives the token)' },
    role: { status: 403, type: 'forbidden', detail: 'Your role (viewer) does not allow this' },
    'content type': { status: 415, type: 'unsupported_media_type', detail: 'Content-Type must be application/json' },
    body: { status: 400, type: 'validation_error', field: 'name' },
  };

  it(`answers the earliest broken step (seed ${SEED}, ${TRIALS} trials)`, async () => {
    const random = seededRandom(SEED + 1);
    const admin = await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'admin');
    const viewer = await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'viewer');
    for (let trial = 0; trial < TRIALS; trial++) {
      const broken = someOf(APP_ORDER, random);
      const client: AppClient = broken.has('role') ? viewer : admin;
      const headers: Record<string, string> = {
        origin: broken.has('Origin') ? 'https://elsewhere.example' : client.origin,
        'content-type': broken.has('content type') ? 'text/plain' : 'application/json',
        'x-csrf-token': broken.has('CSRF header') ? 'wrong' : client.csrf!,
      };
      if (!broken.has('session cookie')) headers.cookie = client.cookie!;
      const response = await fetch(`${client.origin}/app/api/keys`, {
        method: broken.has('method') ? 'PUT' : 'POST',
        headers,
        body: JSON.stringify({ name: broken.has('body') ? '' : `key ${trial}`, access: { assets: 'read' } }),
      });
      const first = APP_ORDER.find((step) => broken.has(step));
      const context = `trial ${trial}: broken ${[...broken].join(', ') || 'nothing'}`;
      const answer = await answerOf(response);
      expect(response.headers.get('cache-control'), context).toBe('no-store');
      if (first === undefined) expect(answer, context).toMatchObject({ status: 201, type: 'ok' });
      else expect(answer, context).toMatchObject(expected[first]);
    }
  }, 120_000);
});
