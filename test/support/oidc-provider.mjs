// A real OpenID provider for the single sign-on tests (docs/web-app.md, "Single sign-on"):
// oidc-provider (a certified OpenID Connect implementation), run with `node` as a process of its
// own by test/support/oidc-provider.ts. Its settings come as JSON in OIDC_TEST_PROVIDER:
//
//   { clientId, clientSecret, redirectUri,
//     accounts: { <login>: { email, email_verified } },
//     forgedIdTokens: [<login>, …] }
//
// It listens on a free port of 127.0.0.1, issues as http://localhost:<port>, and prints
// `{"issuer": …}` on one line once it serves. One confidential client, the authorization code
// flow only, PKCE required. People sign in on its development login page (any password), whose
// login names an account; consent is taken as given. The ID token carries `email` and
// `email_verified` (scope `email`). For the logins of `forgedIdTokens`, the token endpoint's ID
// token is signed again with a key that is not in the provider's JWKS (same `alg` and `kid`), as
// an attacker between the provider and the service would: the service must refuse it.

import http from 'node:http';
import * as jose from 'jose';
import Provider from 'oidc-provider';

const settings = JSON.parse(process.env.OIDC_TEST_PROVIDER ?? '{}');
const accounts = settings.accounts ?? {};
const forged = new Set(settings.forgedIdTokens ?? []);

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://localhost:${server.address().port}`;

const KID = 'test-signing-key';
const { privateKey } = await jose.generateKeyPair('RS256', { extractable: true });
const signingJwk = { ...(await jose.exportJWK(privateKey)), kid: KID, alg: 'RS256', use: 'sig' };
const foreignKey = (await jose.generateKeyPair('RS256')).privateKey;

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: settings.clientId,
      client_secret: settings.clientSecret,
      redirect_uris: [settings.redirectUri],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    },
  ],
  jwks: { keys: [signingJwk] },
  pkce: { required: () => true },
  scopes: ['openid', 'email'],
  claims: { openid: ['sub'], email: ['email', 'email_verified'] },
  // The scope's claims in the ID token too, as most providers put them there.
  conformIdTokenClaims: false,
  features: { devInteractions: { enabled: true } },
  async findAccount(_ctx, id) {
    const account = accounts[id];
    if (!account) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, ...account };
      },
    };
  },
  // Consent is taken as given (a first-party client): a grant of the requested scope.
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    if (!ctx.oidc.session.accountId) return undefined;
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope('openid email');
    await grant.save();
    return grant;
  },
});

// After the token endpoint has answered: the forged accounts' ID tokens, signed again by a stranger.
provider.use(async (ctx, next) => {
  await next();
  const body = ctx.body;
  if (ctx.path !== '/token' || ctx.status !== 200 || typeof body?.id_token !== 'string') return;
  const claims = jose.decodeJwt(body.id_token);
  if (!forged.has(claims.sub)) return;
  const header = jose.decodeProtectedHeader(body.id_token);
  ctx.body = { ...body, id_token: await new jose.SignJWT(claims).setProtectedHeader(header).sign(foreignKey) };
});

server.on('request', provider.callback());
process.on('SIGTERM', () => server.close(() => process.exit(0)));
process.stdout.write(`${JSON.stringify({ issuer })}\n`);
