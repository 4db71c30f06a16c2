import type { CryptoKey } from 'jose';
import { generateSigningKey } from '../../../shared/auth/signing-keys.js';
import { tokenSigner, type TokenSigner } from '../../../shared/auth/token-signer.js';
import { verifyToken, type VerifiedToken } from '../../../shared/auth/tokens.js';

/**
 * The command port's token signer with a real Ed25519 signing key made in memory (as a stored
 * key is made, `generateSigningKey`), and the service's own signing code (`tokenSigner`): tokens
 * are what the service mints, with no database. `verify` checks one as the authenticator does.
 */
export interface InMemoryTokens extends TokenSigner {
  readonly kid: string;
  verify(token: string): Promise<VerifiedToken>;
}

export async function inMemoryTokens(environment = 'test'): Promise<InMemoryTokens> {
  const key = await generateSigningKey();
  const signer = tokenSigner({ ENVIRONMENT: environment }, async () => key);
  const verificationKeys = new Map<string, CryptoKey>([[key.kid, key.publicKey]]);
  return {
    ...signer,
    kid: key.kid,
    verify: (token) => verifyToken(token, async (kid) => verificationKeys.get(kid), environment, Math.floor(Date.now() / 1000)),
  };
}
