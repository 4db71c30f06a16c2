import { SignJWT, compactVerify, errors as joseErrors, type CryptoKey } from 'jose';
import { z } from 'zod';
import { SIGNING_ALGORITHM, type SigningKey } from './signing-keys.js';
import { ADMIN_SCOPE, TOKEN_AUDIENCE } from './scopes.js';
import { MEMBER_ROLES, type Membership } from './member-roles.js';

/**
 * The two kinds of bearer token, both JWTs signed with the installation's signing key:
 * - API keys: exactly `iss` (ENVIRONMENT), `aud`, `sub` (key id), `org_id`, `scopes`, `iat`, and
 *   `exp` only when an expiry was chosen;
 * - sessions: `sub` is the person's email, `token_use: "session"`, `sid` the app session it
 *   belongs to and `gen` that session's token generation when it was minted, `org_id` when the
 *   session has an organization, and always an `exp`. A person's token also names their user
 *   (`uid`) and their membership of `org_id` as it was at mint: `role` and `mrev`, the revision of
 *   the user's stream that last set it; such a token ends when the membership changes
 *   (docs/web-app.md, "Session tokens"). `scopes` is `["keys:admin"]` for an admin's token and for
 *   the CLI's unscoped sessions (no membership named), `[]` otherwise.
 */

export const SESSION_TOKEN_USE = 'session';

/** Tolerated clock difference between the minting host and this one. */
const CLOCK_SKEW_SECONDS = 60;

export interface ApiKeyTokenInput {
  environment: string;
  keyId: string;
  orgId: number;
  scopes: readonly string[];
  issuedAt: number;
  expiresAt: number | null;
}

export async function signApiKeyToken(key: SigningKey, input: ApiKeyTokenInput): Promise<string> {
  const jwt = new SignJWT({ sub: input.keyId, org_id: input.orgId, scopes: [...input.scopes] })
    .setProtectedHeader({ alg: SIGNING_ALGORITHM, kid: key.kid, typ: 'JWT' })
    .setIssuer(input.environment)
    .setAudience(TOKEN_AUDIENCE)
    .setIssuedAt(input.issuedAt);
  if (input.expiresAt !== null) jwt.setExpirationTime(input.expiresAt);
  return jwt.sign(key.privateKey);
}

export interface SessionTokenInput {
  environment: string;
  /** The person's email address. */
  user: string;
  sessionId: string;
  tokenGeneration: number;
  orgId: number | null;
  /** The person's user id; null for a CLI session of an email that is no user. */
  userId: string | null;
  /** The membership of `orgId` the token is bound to; null: none (the CLI's unscoped session, or no organization). */
  membership: Membership | null;
  issuedAt: number;
  expiresAt: number;
}

export async function signSessionToken(key: SigningKey, input: SessionTokenInput): Promise<string> {
  const admin = input.membership === null || input.membership.role === 'admin';
  const claims: Record<string, unknown> = { sub: input.user, token_use: SESSION_TOKEN_USE, sid: input.sessionId, gen: input.tokenGeneration, scopes: admin ? [ADMIN_SCOPE] : [] };
  if (input.orgId !== null) claims.org_id = input.orgId;
  if (input.userId !== null) claims.uid = input.userId;
  if (input.membership !== null) {
    claims.role = input.membership.role;
    claims.mrev = input.membership.revision;
  }
  return new SignJWT(claims)
    .setProtectedHeader({ alg: SIGNING_ALGORITHM, kid: key.kid, typ: 'JWT' })
    .setIssuer(input.environment)
    .setAudience(TOKEN_AUDIENCE)
    .setIssuedAt(input.issuedAt)
    .setExpirationTime(input.expiresAt)
    .sign(key.privateKey);
}

const seconds = z.number().int().nonnegative();

const claimsSchema = z.object({
  iss: z.string(),
  aud: z.union([z.string(), z.array(z.string())]),
  sub: z.string().min(1),
  iat: seconds,
  exp: seconds.optional(),
  scopes: z.array(z.string()),
  org_id: z.number().int().positive().optional(),
  token_use: z.literal(SESSION_TOKEN_USE).optional(),
  sid: z.string().min(1).max(64).optional(),
  gen: seconds.optional(),
  uid: z.string().min(1).max(64).optional(),
  role: z.enum(MEMBER_ROLES).optional(),
  mrev: z.string().regex(/^[0-9]{1,20}$/).optional(),
});

/** A token whose signature, issuer, audience and issue time check out (expiry is checked per use). */
export type VerifiedToken =
  | { kind: 'api_key'; keyId: string; orgId: number; scopes: string[]; expiresAt: number | null }
  | {
      kind: 'session';
      user: string;
      sessionId: string;
      tokenGeneration: number;
      userId: string | null;
      orgId: number | null;
      membership: Membership | null;
      scopes: string[];
      expiresAt: number;
    };

export class InvalidTokenError extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'InvalidTokenError';
  }
}

/** The compact JWS shape: three base64url segments. */
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/**
 * Checks signature (EdDSA only, by `kid` among this installation's keys), `iss`, `aud`, claim
 * shapes and that `iat` is not in the future. Throws InvalidTokenError for anything else.
 */
export async function verifyToken(
  token: string,
  keyFor: (kid: string) => Promise<CryptoKey | undefined>,
  environment: string,
  nowSeconds: number,
): Promise<VerifiedToken> {
  if (!COMPACT_JWS.test(token)) throw new InvalidTokenError('not a compact JWS');
  let payload: Uint8Array;
  try {
    const result = await compactVerify(
      token,
      async (header) => {
        if (typeof header.kid !== 'string') throw new InvalidTokenError('no kid');
        const key = await keyFor(header.kid);
        if (!key) throw new InvalidTokenError('unknown kid');
        return key;
      },
      { algorithms: [SIGNING_ALGORITHM] },
    );
    payload = result.payload;
  } catch (error) {
    // Stryker disable next-line ConditionalExpression: equivalent, an InvalidTokenError (from the key lookup) is none of the wrapped kinds, so the last line rethrows it as it is
    if (error instanceof InvalidTokenError) throw error;
    if (error instanceof joseErrors.JOSEError || error instanceof TypeError || error instanceof SyntaxError) {
      throw new InvalidTokenError(error.message);
    }
    throw error;
  }
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder().decode(payload));
  } catch {
    throw new InvalidTokenError('payload is not JSON');
  }
  const parsed = claimsSchema.safeParse(json);
  if (!parsed.success) throw new InvalidTokenError('unexpected claims');
  const claims = parsed.data;
  if (claims.iss !== environment) throw new InvalidTokenError('wrong issuer');
  const audiences = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  if (!audiences.includes(TOKEN_AUDIENCE)) throw new InvalidTokenError('wrong audience');
  if (claims.iat > nowSeconds + CLOCK_SKEW_SECONDS) throw new InvalidTokenError('issued in the future');
  if (claims.token_use === SESSION_TOKEN_USE) {
    if (claims.exp === undefined) throw new InvalidTokenError('session without exp');
    // A token from before sessions were named by their tokens belongs to none: it is refused.
    if (claims.sid === undefined || claims.gen === undefined) throw new InvalidTokenError('session token without its session');
    const membership = membershipOf(claims);
    if (membership !== null && claims.org_id === undefined) throw new InvalidTokenError('a membership of no organization');
    return {
      kind: 'session',
      user: claims.sub,
      sessionId: claims.sid,
      tokenGeneration: claims.gen,
      userId: claims.uid ?? null,
      orgId: claims.org_id ?? null,
      membership,
      scopes: claims.scopes,
      expiresAt: claims.exp,
    };
  }
  if (claims.org_id === undefined) throw new InvalidTokenError('api key without org_id');
  return { kind: 'api_key', keyId: claims.sub, orgId: claims.org_id, scopes: claims.scopes, expiresAt: claims.exp ?? null };
}

/** What `keys list` shows instead of a token. JWT headers are the same for every token of one
 * signing key, so the prefix is taken from the signature, the part that differs per token. */
export function tokenPrefix(token: string): string {
  const signature = token.split('.')[2] ?? '';
  return signature.slice(0, 12);
}

/** The membership a session token's claims bind it to: both `role` and `mrev`, or neither. */
function membershipOf(claims: { role?: Membership['role']; mrev?: string }): Membership | null {
  if (claims.role === undefined && claims.mrev === undefined) return null;
  if (claims.role === undefined || claims.mrev === undefined) throw new InvalidTokenError('half a membership');
  return { role: claims.role, revision: claims.mrev };
}
