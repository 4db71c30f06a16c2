import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import * as oidc from 'openid-client';
import { singleSignOnEnabled, type Config } from '../../../shared/config.js';
import { ConfigError } from '../../../shared/errors.js';
import type { ServiceContext } from '../../../shared/service-context.js';
import { openAppSession, recordSignIn } from '../../../shared/auth/app-sessions.js';
import { clearSignInAttempts, signInLocked } from '../../../shared/auth/sign-in-attempts.js';
import { orgExists, signOnWithVerifiedEmail, type DomainJoin } from '../../../shared/domain/people/commands.js';
import { DomainRefusal } from '../../../shared/domain/refusal.js';
import { verifiedSignOnEmail } from '../../../shared/domain/people/decider.js';
import { runInCommandContext } from '../../../shared/event-store/command-context.js';
import { membershipsOf, pendingInvitationIdsOf } from '../../../projections/people/queries.js';
import { APP_API_PREFIX, appRoute, behindTls, sessionCookie, type AppRoute } from './pipeline.js';

/**
 * Single sign-on with OpenID Connect (docs/web-app.md, "Single sign-on"): the authorization code
 * flow with PKCE (S256), `state` and `nonce`, the code in the callback's query. openid-client
 * does the protocol: discovery, the authorization URL, the code exchange with the client secret,
 * and every check of the answer and its ID token (signature against the provider's keys, issuer,
 * audience, expiry, nonce). This module keeps the pending flow in a cookie of the browser that
 * started it, and turns a verified email into an app session exactly as a password sign-in does.
 *
 * `/oidc/start` and `/oidc/callback` are top-level navigations that answer redirects and, when a
 * sign-in is refused, a page that says why, not the app's JSON; so they are plain routes beside
 * the app pipeline. A navigation sends no CSRF header: the callback's protection is its `state`,
 * which must equal the one in the cookie set by `/oidc/start` in the same browser.
 */

export const OIDC_START_PATH = `${APP_API_PREFIX}/oidc/start`;
export const OIDC_CALLBACK_PATH = `${APP_API_PREFIX}/oidc/callback`;

/** The pending flow's cookie: sent back on the callback, a top-level GET from the provider's site, hence SameSite=Lax. */
const FLOW_COOKIE = 'oidc_flow';
const FLOW_COOKIE_PATH = `${APP_API_PREFIX}/oidc`;
/** How long a person may take at the provider. */
export const FLOW_SECONDS = 600;
const SCOPE = 'openid email';

interface PendingFlow {
  state: string;
  nonce: string;
  codeVerifier: string;
  /** Milliseconds since the epoch. */
  expiresAt: number;
}

export interface SingleSignOnSettings {
  issuer: URL;
  clientId: string;
  clientSecret: string;
  callbackUrl: string;
  domainJoin: DomainJoin | null;
}

/** The settings of `config`, or null when single sign-on is off (config.ts has checked that they go together). */
export function singleSignOnSettings(config: Config): SingleSignOnSettings | null {
  if (!singleSignOnEnabled(config)) return null;
  return {
    issuer: new URL(config.OIDC_ISSUER!),
    clientId: config.OIDC_CLIENT_ID!,
    clientSecret: config.OIDC_CLIENT_SECRET!,
    callbackUrl: `${config.PUBLIC_URL!}${OIDC_CALLBACK_PATH}`,
    domainJoin: config.OIDC_ALLOWED_DOMAINS && config.OIDC_DEFAULT_ORG !== undefined ? { domains: config.OIDC_ALLOWED_DOMAINS, orgId: config.OIDC_DEFAULT_ORG } : null,
  };
}

/** At the api role's start: an OIDC_DEFAULT_ORG that names no organization stops it, as any invalid setting. */
export async function checkSingleSignOnAtStart(ctx: Pick<ServiceContext, 'store' | 'config'>): Promise<void> {
  const orgId = ctx.config.OIDC_DEFAULT_ORG;
  if (orgId !== undefined && !(await orgExists(ctx, orgId))) {
    throw new ConfigError(`Invalid configuration: OIDC_DEFAULT_ORG: organization ${orgId} does not exist`);
  }
}

/**
 * The provider as discovered from its issuer, once; a failed discovery (the provider down) is
 * tried again by the next sign-in, so the service starts and serves whatever the provider does.
 */
class RelyingParty {
  private discovered: Promise<oidc.Configuration> | null = null;

  constructor(private readonly settings: SingleSignOnSettings) {}

  configuration(): Promise<oidc.Configuration> {
    this.discovered ??= oidc
      .discovery(this.settings.issuer, this.settings.clientId, undefined, oidc.ClientSecretBasic(this.settings.clientSecret), {
        execute: [
          // The ID token's signature is checked against the provider's published keys. OpenID
          // Connect lets a client that got it straight from the token endpoint over TLS skip that;
          // we do not: it also holds where TLS ends before this process (a proxy), and for a
          // provider on a loopback address over plain http.
          oidc.enableNonRepudiationChecks,
          // http:// only for a provider on a loopback address (config.ts).
          ...(this.settings.issuer.protocol === 'http:' ? [oidc.allowInsecureRequests] : []),
        ],
        timeout: 10,
      })
      .catch((error: unknown) => {
        this.discovered = null;
        throw error;
      });
    return this.discovered;
  }
}

/** A sign-in refused: the page says why, in a line for the person. */
class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'Refusal';
  }
}

const RESTART = 'start again from the sign-in page';

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** The refusal page's look, the console's in a few lines; allowed by its hash, as no other style is. */
const REFUSAL_STYLE = [
  "body { margin: 0; font-family: system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; line-height: 1.45; color: #1d2430; background: #f6f7f9; }",
  'header { padding: 0.6rem 1rem; background: #17202e; color: #fff; font-weight: 700; }',
  'main { max-width: 28rem; margin: 2rem auto; padding: 0 1rem; }',
  'h1 { font-size: 1.6rem; }',
  '#reason { color: #a3222b; border-left: 4px solid #a3222b; background: #fdf0f1; padding: 0.5rem 0.75rem; }',
  'a { color: #1a56b8; }',
].join('\n');
const REFUSAL_STYLE_HASH = createHash('sha256').update(REFUSAL_STYLE).digest('base64');

/** The page of a refused sign-in: plain HTML, no script, nothing loaded from anywhere. */
function sendRefusal(reply: FastifyReply, refusal: Refusal): FastifyReply {
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign-in refused</title>
<style>${REFUSAL_STYLE}</style>
</head>
<body>
<header>Tracking console</header>
<main>
<h1>Sign-in refused</h1>
<p id="reason">${escapeHtml(refusal.message)}</p>
<p><a href="/sign-in">Back to sign-in</a></p>
</main>
</body>
</html>
`;
  return reply
    .code(refusal.status)
    .headers({
      'Content-Security-Policy': `default-src 'none'; style-src 'sha256-${REFUSAL_STYLE_HASH}'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
      'X-Content-Type-Options': 'nosniff',
      'Referrer-Policy': 'no-referrer',
    })
    .type('text/html; charset=utf-8')
    .send(html);
}

function flowCookie(request: FastifyRequest, config: Config, flow: PendingFlow | null): string {
  const value = flow ? Buffer.from(JSON.stringify(flow)).toString('base64url') : '';
  const attributes = [`Path=${FLOW_COOKIE_PATH}`, 'HttpOnly', 'SameSite=Lax', `Max-Age=${flow ? FLOW_SECONDS : 0}`];
  if (behindTls(request, config)) attributes.push('Secure');
  return [`${FLOW_COOKIE}=${value}`, ...attributes].join('; ');
}

function readFlowCookie(request: FastifyRequest): PendingFlow | null {
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const [name, ...rest] = part.split('=');
    if (name?.trim() !== FLOW_COOKIE) continue;
    try {
      const flow = JSON.parse(Buffer.from(rest.join('=').trim(), 'base64url').toString('utf8')) as Partial<PendingFlow>;
      const text = (v: unknown) => typeof v === 'string' && v.length > 0 && v.length <= 256;
      if (text(flow.state) && text(flow.nonce) && text(flow.codeVerifier) && typeof flow.expiresAt === 'number') return flow as PendingFlow;
    } catch {
      // Not ours: no flow.
    }
  }
  return null;
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** What went wrong in the code exchange, for the person; openid-client has checked it. */
function exchangeRefusal(error: unknown): Refusal {
  if (error instanceof oidc.AuthorizationResponseError) {
    return new Refusal(403, `Your identity provider did not sign you in (${error.error_description ?? error.error}): ${RESTART}`);
  }
  if (error instanceof oidc.ResponseBodyError) {
    return new Refusal(400, `Your identity provider refused this sign-in (${error.error_description ?? error.error}): ${RESTART}`);
  }
  // No answer: the network (fetch's own TypeError), or none within the timeout.
  if ((error instanceof TypeError && error.message === 'fetch failed') || (error instanceof oidc.ClientError && ['OAUTH_TIMEOUT', 'OAUTH_ABORT'].includes(error.code ?? ''))) {
    return new Refusal(502, 'Your identity provider could not be reached: try again later');
  }
  if (error instanceof oidc.ClientError) {
    const cause = error.cause as { message?: string; cause?: { claim?: string } } | undefined;
    if (error.code === 'OAUTH_JWT_CLAIM_COMPARISON_FAILED' && cause?.cause?.claim === 'nonce') {
      return new Refusal(400, `The ID token was not issued for the sign-in this browser started (its nonce does not match): ${RESTART}`);
    }
    return new Refusal(400, `The answer of your identity provider could not be verified (${cause?.message ?? error.message}): ${RESTART}`);
  }
  throw error;
}

/** The app's endpoint the sign-in page asks whether to offer "Sign in with SSO" (docs/web-app.md). */
export function signInOptionsRoute(config: Config): AppRoute {
  const sso = singleSignOnEnabled(config);
  return appRoute({
    method: 'GET',
    path: '/sign-in/options',
    access: 'public',
    async handler() {
      return { status: 200, body: { data: { sso } } };
    },
  });
}

/** `/oidc/start` and `/oidc/callback`, when single sign-on is on. */
export function registerSingleSignOn(app: FastifyInstance, ctx: ServiceContext): void {
  const settings = singleSignOnSettings(ctx.config);
  if (!settings) return;
  const party = new RelyingParty(settings);
  const ownOrigin = new URL(settings.callbackUrl).origin;

  app.get(OIDC_START_PATH, async (request, reply) => {
    reply.header('Cache-Control', 'no-store');
    // As any app GET: one that names another origin is not a navigation of ours.
    const origin = request.headers.origin;
    if (origin !== undefined && origin.toLowerCase() !== ownOrigin) return sendRefusal(reply, new Refusal(403, `Origin ${origin} is not this service's`));
    let configuration: oidc.Configuration;
    try {
      configuration = await party.configuration();
    } catch (error) {
      request.log.warn({ err: error }, 'single sign-on: the identity provider could not be discovered');
      return sendRefusal(reply, new Refusal(502, 'Your identity provider could not be reached: try again later'));
    }
    const flow: PendingFlow = { state: oidc.randomState(), nonce: oidc.randomNonce(), codeVerifier: oidc.randomPKCECodeVerifier(), expiresAt: Date.now() + FLOW_SECONDS * 1000 };
    const authorization = oidc.buildAuthorizationUrl(configuration, {
      redirect_uri: settings.callbackUrl,
      scope: SCOPE,
      state: flow.state,
      nonce: flow.nonce,
      code_challenge: await oidc.calculatePKCECodeChallenge(flow.codeVerifier),
      code_challenge_method: 'S256',
    });
    reply.header('Set-Cookie', flowCookie(request, ctx.config, flow));
    return reply.redirect(authorization.href, 303);
  });

  app.get(OIDC_CALLBACK_PATH, async (request, reply) => {
    reply.header('Cache-Control', 'no-store');
    // One answer per flow, whatever it is: the pending flow's cookie goes.
    const cleared = flowCookie(request, ctx.config, null);
    reply.header('Set-Cookie', cleared);
    try {
      const session = await signIn(request);
      reply.header('Set-Cookie', [cleared, sessionCookie(request, ctx.config, session)]);
      return reply.redirect('/', 303);
    } catch (error) {
      if (!(error instanceof Refusal)) throw error;
      request.log.info({ status: error.status, reason: error.message }, 'single sign-on refused');
      return sendRefusal(reply, error);
    }
  });

  /** The callback's work: the flow checked, the code exchanged, the person admitted; the new session's cookie value. */
  async function signIn(request: FastifyRequest): Promise<string> {
    const flow = readFlowCookie(request);
    if (!flow || flow.expiresAt <= Date.now()) {
      throw new Refusal(400, `This sign-in was not started in this browser, or took longer than ${FLOW_SECONDS / 60} minutes: ${RESTART}`);
    }
    const current = new URL(settings!.callbackUrl);
    current.search = new URL(request.url, current).search;
    // Checked here too, so that an answer to another browser's sign-in is named as such.
    const state = current.searchParams.get('state');
    if (state === null || !sameText(state, flow.state)) {
      throw new Refusal(400, `The answer of your identity provider does not belong to the sign-in this browser started (its state does not match): ${RESTART}`);
    }
    let claims: oidc.IDToken | undefined;
    try {
      const configuration = await party.configuration();
      const tokens = await oidc.authorizationCodeGrant(configuration, current, {
        pkceCodeVerifier: flow.codeVerifier,
        expectedState: flow.state,
        expectedNonce: flow.nonce,
        idTokenExpected: true,
      });
      claims = tokens.claims();
    } catch (error) {
      throw exchangeRefusal(error);
    }
    if (!claims) throw new Refusal(400, `Your identity provider sent no ID token: ${RESTART}`);

    try {
      const email = verifiedSignOnEmail(claims.email, claims.email_verified);
      // A locked address stays locked, whichever way its person signs in (docs/web-app.md, "Sign-in and lockout").
      if (await signInLocked(ctx.pool, email)) throw new Refusal(403, 'Too many failed sign-ins: this account is locked until an administrator unlocks it');
      // Its events record this request's id; nobody is signed in yet, so the person their data names is who asked (docs/api.md "Audit log").
      const pendingInvitationIds = await pendingInvitationIdsOf(ctx.pool, email);
      const signedOn = await runInCommandContext({ actor: null, requestId: request.id }, () =>
        signOnWithVerifiedEmail(ctx, { email, pendingInvitationIds, domainJoin: settings!.domainJoin }),
      );
      await Promise.all([clearSignInAttempts(ctx.pool, email), recordSignIn(ctx.pool, signedOn.user_id)]);
      // The organization they just joined, if any; else their first, as a password sign-in.
      const memberships = await membershipsOf(ctx.pool, signedOn.user_id);
      const chosen = memberships.find((m) => m.org_id === signedOn.joined[0]?.org_id) ?? memberships[0];
      const { value } = await openAppSession(ctx.pool, { userId: signedOn.user_id, email: signedOn.email }, chosen?.org_id ?? null);
      return value;
    } catch (error) {
      if (error instanceof DomainRefusal && error.kind === 'forbidden') throw new Refusal(403, error.message);
      throw error;
    }
  }
}
