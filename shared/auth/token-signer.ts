import type pg from 'pg';
import type { KeyEncryption } from './key-encryption-source.js';
import { activeSigningKey, type SigningKey } from './signing-keys.js';
import { signApiKeyToken, signSessionToken, type ApiKeyTokenInput, type SessionTokenInput } from './tokens.js';

/**
 * Signs API key and session tokens with the active signing key, as the issuer `environment`
 * (ENVIRONMENT): the command port's `tokens` (`shared/domain/port.ts`, declared there by shape).
 * Where the key comes from is the signer's: the signing keys in Postgres for the service, a key
 * made in memory for a test.
 */
export interface TokenSigner {
  signApiKeyToken(claims: Omit<ApiKeyTokenInput, 'environment'>): Promise<{ token: string; kid: string }>;
  signSessionToken(claims: Omit<SessionTokenInput, 'environment'>): Promise<{ token: string; kid: string }>;
}

/** A signer over `activeKey`, asked for the key at each token. */
export function tokenSigner(config: { readonly ENVIRONMENT: string }, activeKey: () => Promise<SigningKey>): TokenSigner {
  return {
    async signApiKeyToken(claims) {
      const key = await activeKey();
      return { token: await signApiKeyToken(key, { ...claims, environment: config.ENVIRONMENT }), kid: key.kid };
    },
    async signSessionToken(claims) {
      const key = await activeKey();
      return { token: await signSessionToken(key, { ...claims, environment: config.ENVIRONMENT }), kid: key.kid };
    },
  };
}

/**
 * The service's signer: the active key of `service.signing_keys` (created on first use), opened
 * with the key-encryption keys the process holds at the time of each token.
 */
export function signingKeyTokens(pool: pg.Pool, keyEncryption: Pick<KeyEncryption, 'keys'>, config: { readonly ENVIRONMENT: string }): TokenSigner {
  return tokenSigner(config, () => activeSigningKey(pool, keyEncryption.keys));
}
