import { exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import type pg from 'pg';
import { ulid } from 'ulid';

/**
 * Token signing keys, kept in `service.signing_keys` (secrets are not events). One key is active
 * and signs new tokens; retired keys keep verifying what they signed.
 */

export const SIGNING_ALGORITHM = 'EdDSA';
export const SIGNING_KEYS_CHANNEL = 'signing_keys_changed';

export interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
}

interface SigningKeyRow {
  kid: string;
  private_jwk: JWK;
  public_jwk: JWK;
  created_at: Date;
  retired_at: Date | null;
}

async function newKeyRow(): Promise<{ kid: string; privateJwk: JWK; publicJwk: JWK }> {
  const { privateKey, publicKey } = await generateKeyPair(SIGNING_ALGORITHM, { crv: 'Ed25519', extractable: true });
  const kid = `sk_${ulid().toLowerCase()}`;
  const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: SIGNING_ALGORITHM };
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: SIGNING_ALGORITHM };
  return { kid, privateJwk, publicJwk };
}

async function activeRow(client: pg.ClientBase | pg.Pool): Promise<SigningKeyRow | null> {
  const result = await client.query<SigningKeyRow>(
    'SELECT kid, private_jwk, public_jwk, created_at, retired_at FROM service.signing_keys WHERE retired_at IS NULL',
  );
  return result.rows[0] ?? null;
}

/**
 * The active signing key, created on first use. Concurrent first starts race on the partial
 * unique index: exactly one insert wins and every caller reads the winner.
 */
export async function activeSigningKey(pool: pg.Pool): Promise<SigningKey> {
  let row = await activeRow(pool);
  if (!row) {
    const fresh = await newKeyRow();
    await pool.query(
      `INSERT INTO service.signing_keys (kid, algorithm, private_jwk, public_jwk) VALUES ($1, $2, $3, $4)
       ON CONFLICT ((true)) WHERE retired_at IS NULL DO NOTHING`,
      [fresh.kid, SIGNING_ALGORITHM, fresh.privateJwk, fresh.publicJwk],
    );
    row = await activeRow(pool);
    if (!row) throw new Error('no active signing key after creating one');
  }
  return { kid: row.kid, privateKey: (await importJWK(row.private_jwk, SIGNING_ALGORITHM)) as CryptoKey };
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
export async function rotateSigningKey(pool: pg.Pool): Promise<RotationResult> {
  const fresh = await newKeyRow();
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    // Serialises rotations so two at once give two successive keys, never an error.
    await client.query(`SELECT pg_advisory_xact_lock(hashtext('service.signing_keys'))`);
    const retired = await client.query<{ kid: string }>(
      'UPDATE service.signing_keys SET retired_at = now() WHERE retired_at IS NULL RETURNING kid',
    );
    const inserted = await client.query<{ created_at: Date }>(
      `INSERT INTO service.signing_keys (kid, algorithm, private_jwk, public_jwk) VALUES ($1, $2, $3, $4) RETURNING created_at`,
      [fresh.kid, SIGNING_ALGORITHM, fresh.privateJwk, fresh.publicJwk],
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
