import { exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import type pg from 'pg';
import { newUlid } from '../ulid.js';
import { ConfigError } from '../errors.js';
import type { Logger } from '../logger.js';
import { KEY_ENCRYPTION_VARIABLE, KeyNotHeldError, type KeyEncryptionKey, type KeyRing } from './key-encryption.js';

/**
 * Token signing keys, kept in `service.signing_keys` (secrets are not events). One key is active
 * and signs new tokens; retired keys keep verifying what they signed. The private half is stored
 * sealed under a key-encryption key that is not in the database (`key-encryption.ts`): a copy of
 * the table verifies tokens but cannot mint one.
 */

export const SIGNING_ALGORITHM = 'EdDSA';
export const SIGNING_KEYS_CHANNEL = 'signing_keys_changed';
/** Serialises every writer of the table: key creation races aside, rotations and re-encryptions. */
const SIGNING_KEYS_LOCK = `SELECT pg_advisory_xact_lock(hashtext('service.signing_keys'))`;

export interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
}

interface SigningKeyRow {
  kid: string;
  /** Only on rows written before encryption, until the first start with a key seals them. */
  private_jwk: JWK | null;
  private_key_encrypted: Buffer | null;
  encryption_key_id: string | null;
  public_jwk: JWK;
  created_at: Date;
  retired_at: Date | null;
}

const PRIVATE_COLUMNS = 'kid, private_jwk, private_key_encrypted, encryption_key_id';

function keyRingRequired(): ConfigError {
  return new ConfigError(
    `Invalid configuration: ${KEY_ENCRYPTION_VARIABLE}: required to create or use the token signing keys, which are stored encrypted (32 random bytes in base64, e.g. from: openssl rand -base64 32)`,
  );
}

function seal(keys: KeyRing, kid: string, privateJwk: JWK, key?: KeyEncryptionKey): { private_key_encrypted: Buffer; encryption_key_id: string } {
  // Stryker disable next-line StringLiteral: equivalent, Buffer.from with an empty encoding is utf8
  const sealed = keys.seal(kid, Buffer.from(JSON.stringify(privateJwk), 'utf8'), key);
  return { private_key_encrypted: sealed.sealed, encryption_key_id: sealed.keyId };
}

/** The private JWK of a row, opened with `keys`. A key this process does not hold is a configuration error. */
function privateJwkOf(row: Pick<SigningKeyRow, 'kid' | 'private_jwk' | 'private_key_encrypted' | 'encryption_key_id'>, keys: KeyRing | null): JWK {
  if (!keys) throw keyRingRequired();
  // Stryker disable next-line ConditionalExpression,LogicalOperator: equivalent, the table's CHECK makes the two columns null together, so either half (or both with &&) decides alike; the whole test replaced by false is killed (a plain row signs, signing-key-store.int.test.ts) but falls under this line-wide disable
  if (row.private_key_encrypted === null || row.encryption_key_id === null) return row.private_jwk!;
  try {
    return JSON.parse(keys.open(row.kid, { keyId: row.encryption_key_id, sealed: row.private_key_encrypted }).toString('utf8')) as JWK;
  } catch (error) {
    if (error instanceof KeyNotHeldError) throw new ConfigError(error.message);
    throw error;
  }
}

/** A new Ed25519 signing key pair with its kid, and both halves as JWKs: what a stored key is made of. */
export async function generateSigningKey(): Promise<SigningKey & { publicKey: CryptoKey; privateJwk: JWK; publicJwk: JWK }> {
  const { privateKey, publicKey } = await generateKeyPair(SIGNING_ALGORITHM, { crv: 'Ed25519', extractable: true });
  const kid = `sk_${newUlid().toLowerCase()}`;
  const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: SIGNING_ALGORITHM };
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: SIGNING_ALGORITHM };
  return { kid, privateKey, publicKey, privateJwk, publicJwk };
}

async function newKeyRow(keys: KeyRing) {
  const { kid, privateJwk, publicJwk } = await generateSigningKey();
  return { kid, publicJwk, ...seal(keys, kid, privateJwk) };
}

async function activeRow(client: pg.ClientBase | pg.Pool): Promise<SigningKeyRow | null> {
  const result = await client.query<SigningKeyRow>(
    `SELECT ${PRIVATE_COLUMNS}, public_jwk, created_at, retired_at FROM service.signing_keys WHERE retired_at IS NULL`,
  );
  return result.rows[0] ?? null;
}

/**
 * The active signing key, created on first use. Concurrent first starts race on the partial
 * unique index: exactly one insert wins and every caller reads the winner. Without `keys`, or
 * with keys that do not open it, this throws a one-line ConfigError naming the variable.
 */
export async function activeSigningKey(pool: pg.Pool, keys: KeyRing | null): Promise<SigningKey> {
  let row = await activeRow(pool);
  // Stryker disable next-line ConditionalExpression: equivalent, creating a key when one is active inserts nothing (ON CONFLICT DO NOTHING) and reads the same active key, only a key pair is made for nothing
  if (!row) {
    if (!keys) throw keyRingRequired();
    const fresh = await newKeyRow(keys);
    await pool.query(
      `INSERT INTO service.signing_keys (kid, algorithm, private_key_encrypted, encryption_key_id, public_jwk) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT ((true)) WHERE retired_at IS NULL DO NOTHING`,
      [fresh.kid, SIGNING_ALGORITHM, fresh.private_key_encrypted, fresh.encryption_key_id, fresh.publicJwk],
    );
    row = await activeRow(pool);
    if (!row) throw new Error('no active signing key after creating one');
  }
  return { kid: row.kid, privateKey: (await importJWK(privateJwkOf(row, keys), SIGNING_ALGORITHM)) as CryptoKey };
}

/** Every signing key's public half, by kid (retired ones included: their tokens stay valid). */
export async function loadVerificationKeys(pool: pg.Pool): Promise<Map<string, CryptoKey>> {
  const result = await pool.query<Pick<SigningKeyRow, 'kid' | 'public_jwk'>>('SELECT kid, public_jwk FROM service.signing_keys');
  const keys = new Map<string, CryptoKey>();
  for (const row of result.rows) keys.set(row.kid, (await importJWK(row.public_jwk, SIGNING_ALGORITHM)) as CryptoKey);
  return keys;
}

/** Shape of our `kid`s; anything else is not looked up. */
export const KID_PATTERN = /^sk_[0-9a-z]{26}$/;

/** One signing key's public half, or null when this installation has no such key. */
export async function loadVerificationKey(pool: pg.Pool, kid: string): Promise<CryptoKey | null> {
  const result = await pool.query<Pick<SigningKeyRow, 'public_jwk'>>('SELECT public_jwk FROM service.signing_keys WHERE kid = $1', [kid]);
  const row = result.rows[0];
  return row ? ((await importJWK(row.public_jwk, SIGNING_ALGORITHM)) as CryptoKey) : null;
}

export interface RotationResult {
  kid: string;
  previous_kid: string | null;
  algorithm: string;
  created_at: string;
}

/** Retires the active key and creates a new one; running api processes hear of it at once. */
export async function rotateSigningKey(pool: pg.Pool, keys: KeyRing | null): Promise<RotationResult> {
  if (!keys) throw keyRingRequired();
  const fresh = await newKeyRow(keys);
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    // Serialises rotations so two at once give two successive keys, never an error.
    await client.query(SIGNING_KEYS_LOCK);
    await requireHeld(client, keys);
    const retired = await client.query<{ kid: string }>(
      'UPDATE service.signing_keys SET retired_at = now() WHERE retired_at IS NULL RETURNING kid',
    );
    const inserted = await client.query<{ created_at: Date }>(
      `INSERT INTO service.signing_keys (kid, algorithm, private_key_encrypted, encryption_key_id, public_jwk) VALUES ($1, $2, $3, $4, $5)
       RETURNING created_at`,
      [fresh.kid, SIGNING_ALGORITHM, fresh.private_key_encrypted, fresh.encryption_key_id, fresh.publicJwk],
    );
    await client.query('SELECT pg_notify($1, $2)', [SIGNING_KEYS_CHANNEL, fresh.kid]);
    await client.query('COMMIT');
    return {
      kid: fresh.kid,
      previous_kid: retired.rows[0]?.kid ?? null,
      algorithm: SIGNING_ALGORITHM,
      created_at: inserted.rows[0]!.created_at.toISOString(),
    };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/**
 * Refuses to add a key under a key-encryption key set that cannot open the keys already stored:
 * the table would end up sealed under keys no single configuration holds.
 */
async function requireHeld(client: pg.ClientBase, keys: KeyRing): Promise<void> {
  const unheld = (await encryptionKeyIdsInUse(client)).filter((id) => !keys.holds(id));
  if (unheld.length > 0) {
    throw new ConfigError(
      `Invalid configuration: ${keys.origin}: the signing keys are encrypted with ${unheld.join(', ')}, which is not among the configured keys (${keys.ids.join(', ')})`,
    );
  }
}

/** Runs `work` in a transaction that holds the table's lock. */
async function underSigningKeysLock<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query(SIGNING_KEYS_LOCK);
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/**
 * The migration step of encryption at rest: seals the private keys still stored in plain (rows
 * written before this version) under the current key-encryption key. Idempotent, and safe when
 * several processes start at once (they take turns on the table's lock; the later ones find
 * nothing left). The table is then rewritten so the plain values leave its data files too.
 */
export async function sealPlaintextSigningKeys(pool: pg.Pool, keys: KeyRing, log?: Logger): Promise<number> {
  const sealed = await underSigningKeysLock(pool, async (client) => {
    const rows = await client.query<SigningKeyRow>(`SELECT ${PRIVATE_COLUMNS} FROM service.signing_keys WHERE private_jwk IS NOT NULL`);
    for (const row of rows.rows) {
      const encrypted = seal(keys, row.kid, row.private_jwk!);
      await client.query(
        'UPDATE service.signing_keys SET private_jwk = NULL, private_key_encrypted = $2, encryption_key_id = $3 WHERE kid = $1',
        [row.kid, encrypted.private_key_encrypted, encrypted.encryption_key_id],
      );
    }
    return rows.rowCount ?? 0;
  });
  if (sealed > 0) {
    // An UPDATE leaves the old row versions, plain keys included, in the table's files until
    // they are overwritten; VACUUM FULL writes new files without them. The table is a few rows.
    await pool.query('VACUUM FULL service.signing_keys').catch((error: unknown) => {
      log?.warn({ err: error }, 'could not rewrite service.signing_keys after encrypting it; run VACUUM FULL on it as its owner');
    });
    log?.info({ keys: sealed, encryption_key_id: keys.current.id }, 'encrypted the signing keys stored before encryption at rest');
  }
  return sealed;
}

/** Ids of the key-encryption keys that the stored signing keys need. */
export async function encryptionKeyIdsInUse(client: pg.ClientBase | pg.Pool): Promise<string[]> {
  const result = await client.query<{ id: string }>(
    'SELECT DISTINCT encryption_key_id AS id FROM service.signing_keys WHERE encryption_key_id IS NOT NULL ORDER BY 1',
  );
  return result.rows.map((row) => row.id);
}

/**
 * Another table of secrets sealed with the same key ring (a service's, e.g. the webhook
 * endpoints'): re-encrypted in the transaction that re-encrypts the signing keys, under their lock.
 */
export interface SealedSecrets {
  /** Its count's name in the result, e.g. `webhook_secrets`. */
  name: string;
  keyIdsInUse(client: pg.ClientBase): Promise<string[]>;
  /** Re-seals every stored secret under `next`, opening each with `keys`; the number of rows. */
  reencrypt(client: pg.ClientBase, keys: KeyRing, next: KeyEncryptionKey): Promise<number>;
}

/**
 * For a writer that seals a new secret of another table with `keys` (an endpoint's secret): in
 * its transaction, waits for a re-encryption running now and holds it off until commit, and
 * refuses a ring that does not hold the keys the signing keys are sealed with, so a process still
 * configured with a replaced key cannot seal under it after a rotation moved everything else.
 */
export async function sealingWithKeyRing(client: pg.ClientBase, keys: KeyRing): Promise<void> {
  await client.query(`SELECT pg_advisory_xact_lock_shared(hashtext('service.signing_keys'))`);
  await requireHeld(client, keys);
}

export interface ReencryptionResult {
  /** Signing keys re-encrypted (every one, active and retired). */
  signing_keys: number;
  /** Rows of the other tables re-encrypted in the same transaction, by name. */
  others: Record<string, number>;
  encryption_key_id: string;
  /** The key-encryption keys that no stored signing key needs any more. */
  previous_encryption_key_ids: string[];
}

/**
 * Re-encrypts every signing key, and the secrets of `others`, under `next`, opening each with
 * `keys`, in one transaction: either all of them move to the new key-encryption key or none does.
 */
export async function reencryptSigningKeys(pool: pg.Pool, keys: KeyRing, next: KeyEncryptionKey, others: readonly SealedSecrets[] = []): Promise<ReencryptionResult> {
  return underSigningKeysLock(pool, async (client) => {
    const inUse = new Set(await encryptionKeyIdsInUse(client));
    for (const other of others) for (const id of await other.keyIdsInUse(client)) inUse.add(id);
    const previous = [...inUse].filter((id) => id !== next.id).sort();
    const rows = await client.query<SigningKeyRow>(`SELECT ${PRIVATE_COLUMNS} FROM service.signing_keys ORDER BY kid`);
    for (const row of rows.rows) {
      const encrypted = seal(keys, row.kid, privateJwkOf(row, keys), next);
      await client.query(
        'UPDATE service.signing_keys SET private_jwk = NULL, private_key_encrypted = $2, encryption_key_id = $3 WHERE kid = $1',
        [row.kid, encrypted.private_key_encrypted, encrypted.encryption_key_id],
      );
    }
    const counts: Record<string, number> = {};
    for (const other of others) counts[other.name] = await other.reencrypt(client, keys, next);
    return { signing_keys: rows.rowCount ?? 0, others: counts, encryption_key_id: next.id, previous_encryption_key_ids: previous };
  });
}
