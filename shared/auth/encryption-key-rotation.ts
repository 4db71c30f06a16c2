import type pg from 'pg';
import { ConfigError } from '../errors.js';
import { KEY_ENCRYPTION_VARIABLE, generateKeyEncryptionKey, parseKeyEncryptionKey } from './key-encryption.js';
import { rotateKeyFile, type KeyEncryption } from './key-encryption-source.js';
import { reencryptSigningKeys, type ReencryptionResult, type SealedSecrets } from './signing-keys.js';

export const NEW_KEY_ENCRYPTION_VARIABLE = 'NEW_SIGNING_KEY_ENCRYPTION_KEY';

export interface EncryptionKeyRotation extends ReencryptionResult {
  /** The embedded default's key file, now holding the new key; null when the keys come from the variable. */
  key_file: string | null;
}

/**
 * `keys rotate-encryption-key`: re-encrypts every signing key, and the secrets of `others` (the
 * webhook endpoints'), under a new key-encryption key, in one transaction.
 * - With `SIGNING_KEY_ENCRYPTION_KEY` set, the new key comes from `NEW_SIGNING_KEY_ENCRYPTION_KEY`;
 *   the operator then makes it the variable's value everywhere (docs/operations.md, "Secrets: the signing keys and their encryption").
 * - For the embedded default's key file, the new key is `NEW_SIGNING_KEY_ENCRYPTION_KEY` when set,
 *   else a fresh one, and the file is replaced once the re-encryption has committed.
 */
export async function rotateSigningKeyEncryption(ctx: {
  pool: pg.Pool;
  config: { NEW_SIGNING_KEY_ENCRYPTION_KEY?: string };
  keyEncryption: KeyEncryption;
}, others: readonly SealedSecrets[] = []): Promise<EncryptionKeyRotation> {
  const given = ctx.config.NEW_SIGNING_KEY_ENCRYPTION_KEY ? parseKeyEncryptionKey(ctx.config.NEW_SIGNING_KEY_ENCRYPTION_KEY) : null;
  const { keys, source } = ctx.keyEncryption;
  if (source.kind === 'file') {
    const next = given ?? generateKeyEncryptionKey();
    const result = await rotateKeyFile(ctx.pool, source.path, next, { reencrypt: (ring, key) => reencryptSigningKeys(ctx.pool, ring, key, others) });
    return { ...result, key_file: source.path };
  }
  if (!keys) throw new ConfigError(`Invalid configuration: ${KEY_ENCRYPTION_VARIABLE}: required: it is the key the signing keys are encrypted with now`);
  if (!given) {
    throw new ConfigError(
      `Invalid configuration: ${NEW_KEY_ENCRYPTION_VARIABLE}: required: the key to re-encrypt the signing keys with (32 random bytes in base64, e.g. from: openssl rand -base64 32)`,
    );
  }
  return { ...(await reencryptSigningKeys(ctx.pool, keys, given, others)), key_file: null };
}
