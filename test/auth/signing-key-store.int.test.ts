import { SignJWT, compactVerify, exportJWK, generateKeyPair } from 'jose';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { KeyEncryptionError, KeyRing, generateKeyEncryptionKey } from '../../shared/auth/key-encryption.js';
import {
  KID_PATTERN,
  SIGNING_KEYS_CHANNEL,
  activeSigningKey,
  encryptionKeyIdsInUse,
  loadVerificationKey,
  loadVerificationKeys,
  reencryptSigningKeys,
  rotateSigningKey,
  sealPlaintextSigningKeys,
} from '../../shared/auth/signing-keys.js';
import { ConfigError } from '../../shared/errors.js';
import { createPool, type Pool } from '../../shared/db/pool.js';
import { capturedLog } from '../support/logs.js';
import { refusal } from '../support/rejection.js';
import { createTestDatabase } from '../support/database.js';

// The signing keys' table (service.signing_keys): the public halves that verify, rotation and its
// notification, and the refusals that keep the table openable by one configuration.

const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

async function database(label: string): Promise<{ pool: Pool; url: string }> {
  const db = await createTestDatabase(label);
  const pool = createPool(db.url, { max: 4 });
  cleanups.push(async () => {
    await pool.end();
    await db.drop();
  });
  return { pool, url: db.url };
}

const ring = () => new KeyRing([generateKeyEncryptionKey()]);

async function rows(pool: Pool) {
  return (await pool.query<{ kid: string; retired: boolean; encryption_key_id: string | null }>(
    'SELECT kid, retired_at IS NOT NULL AS retired, encryption_key_id FROM service.signing_keys ORDER BY created_at, kid',
  )).rows;
}

describe('signing key store', () => {
  it('kids have our shape; every key, retired ones too, verifies what it signed; an unknown kid has no key', async () => {
    const { pool } = await database('signing_store_verify');
    const keys = ring();
    const first = await activeSigningKey(pool, keys);
    expect(first.kid).toMatch(KID_PATTERN);
    const rotation = await rotateSigningKey(pool, keys);
    const second = await activeSigningKey(pool, keys);
    expect(second.kid).toBe(rotation.kid);
    const verification = await loadVerificationKeys(pool);
    expect([...verification.keys()].sort()).toEqual([first.kid, second.kid].sort());
    for (const key of [first, second]) {
      const token = await new SignJWT({ sub: 'x' }).setProtectedHeader({ alg: 'EdDSA', kid: key.kid }).sign(key.privateKey);
      await compactVerify(token, verification.get(key.kid)!);
      await compactVerify(token, (await loadVerificationKey(pool, key.kid))!);
    }
    expect(await loadVerificationKey(pool, 'sk_01jdx4a8q0n7yv5k3m2b9c6d1e')).toBeNull();
    expect(await loadVerificationKeys((await database('signing_store_empty')).pool)).toEqual(new Map());
  });

  it('KID_PATTERN: sk_ and 26 lowercase base32 characters, nothing around it', () => {
    for (const kid of ['sk_01jdx4a8q0n7yv5k3m2b9c6d1e', 'sk_zzzzzzzzzzzzzzzzzzzzzzzzzz']) expect(KID_PATTERN.test(kid)).toBe(true);
    for (const kid of ['sk_01JDX4A8Q0N7YV5K3M2B9C6D1E', 'sk_01jdx4a8q0n7yv5k3m2b9c6d1', 'sk_01jdx4a8q0n7yv5k3m2b9c6d1ee', 'xsk_01jdx4a8q0n7yv5k3m2b9c6d1e', 'sk-01jdx4a8q0n7yv5k3m2b9c6d1e', 'sk_01jdx4a8q0n7yv5k3m2b9c6d1_', 'ak_01jdx4a8q0n7yv5k3m2b9c6d1e', '']) {
      expect([kid, KID_PATTERN.test(kid)]).toEqual([kid, false]);
    }
  });

  it('a rotation retires the active key, says which, and notifies running processes with the new kid', async () => {
    const { pool, url } = await database('signing_store_rotate');
    const listener = new pg.Client({ connectionString: url });
    await listener.connect();
    cleanups.push(() => listener.end());
    const heard: Array<{ channel: string; payload?: string }> = [];
    listener.on('notification', ({ channel, payload }) => heard.push({ channel, payload }));
    await listener.query(`LISTEN ${SIGNING_KEYS_CHANNEL}`);
    expect(SIGNING_KEYS_CHANNEL).toBe('signing_keys_changed');

    const keys = ring();
    const before = Date.now();
    // No key yet: the first rotation creates one and retires none.
    const first = await rotateSigningKey(pool, keys);
    expect(first).toEqual({ kid: expect.stringMatching(KID_PATTERN), previous_kid: null, algorithm: 'EdDSA', created_at: expect.any(String) });
    expect(Date.parse(first.created_at)).toBeGreaterThanOrEqual(before - 1000);
    expect(new Date(first.created_at).toISOString()).toBe(first.created_at);
    const second = await rotateSigningKey(pool, keys);
    expect(second.previous_kid).toBe(first.kid);
    expect(await rows(pool)).toEqual([
      { kid: first.kid, retired: true, encryption_key_id: keys.current.id },
      { kid: second.kid, retired: false, encryption_key_id: keys.current.id },
    ]);
    const start = Date.now();
    while (heard.length < 2 && Date.now() - start < 3000) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(heard).toEqual([
      { channel: 'signing_keys_changed', payload: first.kid },
      { channel: 'signing_keys_changed', payload: second.kid },
    ]);
  });

  it('without a key-encryption key nothing is created; with keys that cannot open the table no key is added', async () => {
    const { pool, url } = await database('signing_store_refusals');
    const required =
      'Invalid configuration: SIGNING_KEY_ENCRYPTION_KEY: required to create or use the token signing keys, which are stored encrypted (32 random bytes in base64, e.g. from: openssl rand -base64 32)';
    for (const work of [() => activeSigningKey(pool, null), () => rotateSigningKey(pool, null)]) {
      const error = await refusal(work());
      expect(error).toBeInstanceOf(ConfigError);
      expect(error.message).toBe(required);
    }
    expect(await rows(pool)).toEqual([]);

    const keys = ring();
    const active = await activeSigningKey(pool, keys);
    const other = new KeyRing([generateKeyEncryptionKey()], 'THE_ORIGIN');
    const error = await refusal(rotateSigningKey(pool, other));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toBe(
      `Invalid configuration: THE_ORIGIN: the signing keys are encrypted with ${keys.current.id}, which is not among the configured keys (${other.current.id})`,
    );
    // Nothing happened: the same single active key.
    expect(await rows(pool)).toEqual([{ kid: active.kid, retired: false, encryption_key_id: keys.current.id }]);
    // An existing key is not used without a ring either.
    const unusable = await refusal(activeSigningKey(pool, null));
    expect(unusable).toBeInstanceOf(ConfigError);
    expect(unusable.message).toBe(required);
    // The refused rotation left no transaction or lock behind: another process rotates at once.
    const elsewhere = new pg.Pool({ connectionString: url, max: 1, options: '-c lock_timeout=2000' });
    cleanups.push(() => elsewhere.end());
    const otherKeys = new KeyRing([generateKeyEncryptionKey(), keys.current]);
    const rotated = await rotateSigningKey(elsewhere, otherKeys);
    expect(rotated.previous_kid).toBe(active.kid);
    // The table now needs two keys; a ring of two others is told both, each list comma-separated.
    const two = new KeyRing([generateKeyEncryptionKey(), generateKeyEncryptionKey()], 'THE_ORIGIN');
    expect((await refusal(rotateSigningKey(pool, two))).message).toBe(
      `Invalid configuration: THE_ORIGIN: the signing keys are encrypted with ${[keys.current.id, otherKeys.current.id].sort().join(', ')}, which is not among the configured keys (${two.ids.join(', ')})`,
    );
    await pool.query('DELETE FROM service.signing_keys WHERE kid <> $1', [active.kid]);
    await pool.query('UPDATE service.signing_keys SET retired_at = NULL');
    // A ring that holds the table's key as well may rotate (and seals with its first key).
    const both = new KeyRing([generateKeyEncryptionKey(), keys.current]);
    await rotateSigningKey(pool, both);
    expect((await rows(pool)).map((row) => row.encryption_key_id)).toEqual([keys.current.id, both.current.id]);
    expect(await encryptionKeyIdsInUse(pool)).toEqual([keys.current.id, both.current.id].sort());
  });

  it('a sealed key that does not authenticate is an error of its own, not a configuration error', async () => {
    const { pool } = await database('signing_store_tampered');
    const keys = ring();
    const active = await activeSigningKey(pool, keys);
    await pool.query(`UPDATE service.signing_keys SET private_key_encrypted = set_byte(private_key_encrypted, 20, get_byte(private_key_encrypted, 20) # 1)`);
    const error = await refusal(activeSigningKey(pool, keys));
    expect(error).toBeInstanceOf(KeyEncryptionError);
    expect(error).not.toBeInstanceOf(ConfigError);
    expect(error.message).toContain(active.kid);
  });

  it('re-encryption moves every key to the new key-encryption key, or none: a key it cannot open stops it', async () => {
    const { pool, url } = await database('signing_store_reencrypt');
    const keys = ring();
    const first = await activeSigningKey(pool, keys);
    const second = await rotateSigningKey(pool, keys);
    const next = generateKeyEncryptionKey();
    expect(await reencryptSigningKeys(pool, keys, next)).toEqual({ signing_keys: 2, others: {}, encryption_key_id: next.id, previous_encryption_key_ids: [keys.current.id] });
    // Again to the same key: nothing left under another.
    const nextRing = new KeyRing([next]);
    expect(await reencryptSigningKeys(pool, nextRing, next)).toEqual({ signing_keys: 2, others: {}, encryption_key_id: next.id, previous_encryption_key_ids: [] });
    // Another table's secrets (the webhook endpoints') move in the same transaction: when they
    // cannot, the signing keys stay where they were too.
    const failing = { name: 'other_secrets', keyIdsInUse: async () => [], reencrypt: async () => Promise.reject(new Error('cannot open')) };
    await refusal(reencryptSigningKeys(pool, nextRing, generateKeyEncryptionKey(), [failing]));
    expect((await rows(pool)).map((row) => row.encryption_key_id)).toEqual([next.id, next.id]);
    // One row the ring cannot open: all rows stay as they were.
    await pool.query('UPDATE service.signing_keys SET encryption_key_id = $1 WHERE kid = $2', [keys.current.id, first.kid]);
    const error = await refusal(reencryptSigningKeys(pool, nextRing, generateKeyEncryptionKey()));
    expect(error).toBeInstanceOf(ConfigError);
    expect((await rows(pool)).map((row) => row.encryption_key_id).sort()).toEqual([keys.current.id, next.id].sort());
    // The last row (by kid) unopenable: the first one, already re-encrypted, goes back too.
    await pool.query('UPDATE service.signing_keys SET encryption_key_id = $1 WHERE kid = $2', [next.id, first.kid]);
    await pool.query('UPDATE service.signing_keys SET encryption_key_id = $1 WHERE kid = $2', [keys.current.id, second.kid]);
    expect(await refusal(reencryptSigningKeys(pool, nextRing, generateKeyEncryptionKey()))).toBeInstanceOf(ConfigError);
    expect(await rows(pool)).toEqual([
      { kid: first.kid, retired: true, encryption_key_id: next.id },
      { kid: second.kid, retired: false, encryption_key_id: keys.current.id },
    ]);
    // And it left no transaction or lock behind: another process re-encrypts at once.
    await pool.query('UPDATE service.signing_keys SET encryption_key_id = $1 WHERE kid = $2', [next.id, second.kid]);
    const other = new pg.Pool({ connectionString: url, max: 1, options: '-c lock_timeout=2000' });
    cleanups.push(() => other.end());
    expect(await reencryptSigningKeys(other, nextRing, next)).toMatchObject({ signing_keys: 2 });
  });

  it('sealing the plain keys: logged with the count and key id; a failed rewrite of the table is a warning, the keys stay sealed', async () => {
    const { pool, url } = await database('signing_store_seal');
    const pair = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
    const kid = 'sk_01legacy00000000000000000';
    await pool.query(`INSERT INTO service.signing_keys (kid, algorithm, private_jwk, public_jwk) VALUES ($1, 'EdDSA', $2, $3)`, [
      kid,
      { ...(await exportJWK(pair.privateKey)), kid, alg: 'EdDSA' },
      { ...(await exportJWK(pair.publicKey)), kid, alg: 'EdDSA' },
    ]);
    const { log, lines } = capturedLog();

    // A reader holding the table keeps VACUUM FULL from its lock; a lock timeout makes it fail.
    const reader = new pg.Client({ connectionString: url });
    await reader.connect();
    cleanups.push(() => reader.end());
    await reader.query('BEGIN; SELECT 1 FROM service.signing_keys');
    const impatient = new pg.Pool({ connectionString: url, max: 2, options: '-c lock_timeout=200' });
    cleanups.push(() => impatient.end());
    const keys = ring();
    // Before it is sealed, a plain row signs as it is.
    const legacy = await activeSigningKey(pool, keys);
    expect(legacy.kid).toBe(kid);
    await compactVerify(await new SignJWT({ sub: 'x' }).setProtectedHeader({ alg: 'EdDSA', kid }).sign(legacy.privateKey), pair.publicKey);
    expect(await sealPlaintextSigningKeys(impatient, keys, log)).toBe(1);
    await reader.query('ROLLBACK');
    expect(lines().map(({ level, msg }) => ({ level, msg }))).toEqual([
      { level: 40, msg: 'could not rewrite service.signing_keys after encrypting it; run VACUUM FULL on it as its owner' },
      { level: 30, msg: 'encrypted the signing keys stored before encryption at rest' },
    ]);
    expect(lines()[0]).toMatchObject({ err: { message: 'canceling statement due to lock timeout' } });
    expect(lines()[1]).toMatchObject({ keys: 1, encryption_key_id: keys.current.id });
    expect(await rows(pool)).toEqual([{ kid, retired: false, encryption_key_id: keys.current.id }]);
    // Nothing left to seal: nothing logged.
    expect(await sealPlaintextSigningKeys(pool, keys, log)).toBe(0);
    expect(lines()).toHaveLength(2);
    expect((await activeSigningKey(pool, keys)).kid).toBe(kid);

    // With no logger, sealing (and a failed rewrite) goes on silently.
    await pool.query(`INSERT INTO service.signing_keys (kid, algorithm, private_jwk, public_jwk, retired_at) VALUES ($1, 'EdDSA', $2, $3, now())`, [
      'sk_01legacy00000000000000001',
      { ...(await exportJWK(pair.privateKey)), kid: 'sk_01legacy00000000000000001', alg: 'EdDSA' },
      { ...(await exportJWK(pair.publicKey)), kid: 'sk_01legacy00000000000000001', alg: 'EdDSA' },
    ]);
    await reader.query('BEGIN; SELECT 1 FROM service.signing_keys');
    expect(await sealPlaintextSigningKeys(impatient, keys)).toBe(1);
    await reader.query('ROLLBACK');
    expect(lines()).toHaveLength(2);
  });

  it('a table that takes no new key: creating the first one is an error saying so', async () => {
    const { pool } = await database('signing_store_no_insert');
    await pool.query('CREATE RULE drop_inserts AS ON INSERT TO service.signing_keys DO INSTEAD NOTHING');
    const error = await refusal(activeSigningKey(pool, ring()));
    expect(error.message).toBe('no active signing key after creating one');
  });
});
