import { createPrivateKey } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { SignJWT, compactVerify, exportJWK, generateKeyPair, importJWK, importPKCS8, type JWK } from 'jose';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../shared/config.js';
import { ConfigError } from '../../shared/errors.js';
import { rotateSigningKeyEncryption } from '../../shared/auth/encryption-key-rotation.js';
import { KeyRing, formatKeyEncryptionKey, generateKeyEncryptionKey, type KeyEncryptionKey } from '../../shared/auth/key-encryption.js';
import { KEY_FILE_NAME, loadKeyEncryption, type KeyEncryption } from '../../shared/auth/key-encryption-source.js';
import {
  activeSigningKey,
  loadVerificationKey,
  reencryptSigningKeys,
  rotateSigningKey,
  sealPlaintextSigningKeys,
  type SigningKey,
} from '../../shared/auth/signing-keys.js';
import { createPool, type Pool } from '../../shared/db/pool.js';
import { createLogger } from '../../shared/logger.js';
import { closeContext, openContext, startService } from '../../services/service.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

// Issue 16: a database dump cannot mint tokens. The signing keys' private halves are sealed with a
// key-encryption key that is not in the database (docs/operations.md, "Secrets: the signing keys and their encryption").

const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

afterAll(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

async function database(label: string): Promise<{ db: TestDatabase; pool: Pool }> {
  const db = await createTestDatabase(label);
  const pool = createPool(db.url, { max: 4 });
  cleanups.push(async () => {
    await pool.end();
    await db.drop();
  });
  return { db, pool };
}

async function temporaryDir(): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tracking-kek-'));
  cleanups.push(() => fs.rm(dir, { recursive: true, force: true }));
  return dir;
}

function ringOf(...keys: KeyEncryptionKey[]): KeyRing {
  return new KeyRing(keys);
}

async function signAndVerify(pool: Pool, key: SigningKey): Promise<void> {
  const token = await new SignJWT({ sub: 'probe' }).setProtectedHeader({ alg: 'EdDSA', kid: key.kid }).sign(key.privateKey);
  const publicKey = await loadVerificationKey(pool, key.kid);
  await compactVerify(token, publicKey!);
}

/** The one line a refused start or command shows. */
async function configErrorOf(work: Promise<unknown>): Promise<string> {
  let error: unknown;
  try {
    await work;
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(ConfigError);
  const message = (error as Error).message;
  expect(message.split('\n')).toHaveLength(1);
  return message;
}

interface RawRow {
  kid: string;
  algorithm: string;
  private_jwk: JWK | null;
  private_key_encrypted: Buffer | null;
  encryption_key_id: string | null;
  public_jwk: JWK;
  created_at: Date;
  retired_at: Date | null;
}

async function rawRows(pool: Pool): Promise<RawRow[]> {
  return (await pool.query<RawRow>('SELECT * FROM service.signing_keys ORDER BY created_at, kid')).rows;
}

/** The `d` of every signing key, taken from the keys themselves with the key that sealed them. */
function privateParts(rows: RawRow[], keys: KeyRing): string[] {
  return rows.map((row) => {
    const jwk = JSON.parse(keys.open(row.kid, { keyId: row.encryption_key_id!, sealed: row.private_key_encrypted! }).toString()) as JWK;
    expect(jwk.d).toEqual(expect.any(String));
    return jwk.d!;
  });
}

describe('signing keys at rest', () => {
  it('the table, read raw, holds no private material: no JWK "d", no private bytes, in any column', async () => {
    const { pool } = await database('at_rest_raw');
    const keys = ringOf(generateKeyEncryptionKey());
    await activeSigningKey(pool, keys);
    await rotateSigningKey(pool, keys);
    const rows = await rawRows(pool);
    expect(rows).toHaveLength(2);
    const secrets = privateParts(rows, keys);

    // Everything a dump of the table holds, as text and as bytes.
    const asText = (await pool.query<{ line: string }>(`SELECT row_to_json(s)::text AS line FROM service.signing_keys s`)).rows.map((r) => r.line).join('\n');
    const asCopy = (
      await pool.query<{ line: string }>(`SELECT s::text AS line FROM service.signing_keys s`)
    ).rows.map((r) => r.line).join('\n');
    for (const dump of [asText, asCopy]) {
      expect(dump).not.toMatch(/"d"\s*:/);
      for (const d of secrets) {
        expect(dump).not.toContain(d);
        expect(dump).not.toContain(Buffer.from(d, 'base64url').toString('hex'));
      }
    }
    for (const row of rows) {
      expect(row.private_jwk).toBeNull();
      expect(row.encryption_key_id).toBe(keys.current.id);
      expect(row.public_jwk).not.toHaveProperty('d');
      for (const d of secrets) expect(row.private_key_encrypted!.includes(Buffer.from(d, 'base64url'))).toBe(false);
    }
  });

  it('a dump restored without the key cannot sign: no key, or another one, stops with one line naming the variable', async () => {
    const source = await database('at_rest_source');
    const keys = ringOf(generateKeyEncryptionKey());
    const original = await activeSigningKey(source.pool, keys);
    const rows = await rawRows(source.pool);

    // "Restore" the dump: the same rows in another database.
    const restored = await database('at_rest_restored');
    for (const row of rows) {
      await restored.pool.query(
        `INSERT INTO service.signing_keys (kid, algorithm, private_jwk, private_key_encrypted, encryption_key_id, public_jwk, created_at, retired_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
        [row.kid, row.algorithm, row.private_jwk, row.private_key_encrypted, row.encryption_key_id, row.public_jwk, row.created_at, row.retired_at],
      );
    }

    expect(await configErrorOf(activeSigningKey(restored.pool, null))).toMatch(/^Invalid configuration: SIGNING_KEY_ENCRYPTION_KEY: required/);
    const other = ringOf(generateKeyEncryptionKey());
    const wrong = await configErrorOf(activeSigningKey(restored.pool, other));
    expect(wrong).toMatch(/^Invalid configuration: SIGNING_KEY_ENCRYPTION_KEY: /);
    expect(wrong).toContain(keys.current.id);
    expect(await configErrorOf(rotateSigningKey(restored.pool, other))).toContain('SIGNING_KEY_ENCRYPTION_KEY');

    // The api role refuses to start on it, with or without a key of its own.
    for (const env of [{}, { SIGNING_KEY_ENCRYPTION_KEY: formatKeyEncryptionKey(other.current) }]) {
      const config = loadConfig({ PORT: '0', OPS_PORT: '0', LOG_LEVEL: 'silent', ROLES: 'api', ...env });
      expect(await configErrorOf(startService(config, restored.db.url, createLogger('silent')))).toContain('SIGNING_KEY_ENCRYPTION_KEY');
    }

    // Nothing in the raw column imports as a key, whatever format is tried.
    const sealed = rows[0]!.private_key_encrypted!;
    const attempts: Array<() => unknown> = [
      () => importJWK(JSON.parse(sealed.toString('utf8')) as JWK, 'EdDSA'),
      () => importJWK({ kty: 'OKP', crv: 'Ed25519', d: sealed.toString('base64url'), x: (rows[0]!.public_jwk as { x: string }).x }, 'EdDSA'),
      () => importPKCS8(sealed.toString('utf8'), 'EdDSA'),
      () => importPKCS8(`-----BEGIN PRIVATE KEY-----\n${sealed.toString('base64')}\n-----END PRIVATE KEY-----`, 'EdDSA'),
      () => createPrivateKey({ key: sealed, format: 'der', type: 'pkcs8' }),
    ];
    for (const attempt of attempts) await expect((async () => attempt())()).rejects.toThrow();

    // With the key that sealed them, the restored keys sign as before, under the same kid.
    const reopened = await activeSigningKey(restored.pool, keys);
    expect(reopened.kid).toBe(original.kid);
    await signAndVerify(restored.pool, reopened);
  });

  it('keys stored in plain before this version are sealed by the first starts that hold a key, once, however many start at once', async () => {
    const { db, pool } = await database('at_rest_legacy');
    // Two rows as the previous version wrote them: private JWK in plain.
    const legacy: Array<{ kid: string; d: string }> = [];
    for (const [i, retired] of [[0, true], [1, false]] as const) {
      const pair = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
      const kid = `sk_01legacy0000000000000000${i}`;
      const privateJwk = { ...(await exportJWK(pair.privateKey)), kid, alg: 'EdDSA' };
      await pool.query(
        `INSERT INTO service.signing_keys (kid, algorithm, private_jwk, public_jwk, retired_at) VALUES ($1, 'EdDSA', $2, $3, $4)`,
        [kid, privateJwk, { ...(await exportJWK(pair.publicKey)), kid, alg: 'EdDSA' }, retired ? new Date() : null],
      );
      legacy.push({ kid, d: privateJwk.d! });
    }
    const key = generateKeyEncryptionKey();
    const config = loadConfig({ LOG_LEVEL: 'silent', ROLES: 'projector', SIGNING_KEY_ENCRYPTION_KEY: formatKeyEncryptionKey(key) });
    // Three processes starting at once (each opens the context: migrations, then the sealing step),
    // and two more callers of the step itself.
    const [contexts, counts] = await Promise.all([
      Promise.all([1, 2, 3].map(() => openContext(config, db.url, createLogger('silent')))),
      Promise.all([1, 2].map(() => sealPlaintextSigningKeys(pool, ringOf(key)))),
    ]);
    await Promise.all(contexts.map((ctx) => closeContext(ctx)));
    expect(counts.every((n) => n === 0 || n === 2)).toBe(true);

    const rows = await rawRows(pool);
    expect(rows.map((r) => [r.kid, r.private_jwk, r.encryption_key_id])).toEqual(legacy.map((l) => [l.kid, null, key.id]));
    const dump = (await pool.query<{ line: string }>('SELECT row_to_json(s)::text AS line FROM service.signing_keys s')).rows.map((r) => r.line).join('\n');
    for (const { d } of legacy) expect(dump).not.toContain(d);
    expect(privateParts(rows, ringOf(key))).toEqual(legacy.map((l) => l.d));
    // Running the step again finds nothing to do; the active key still signs under its kid.
    expect(await sealPlaintextSigningKeys(pool, ringOf(key))).toBe(0);
    const active = await activeSigningKey(pool, ringOf(key));
    expect(active.kid).toBe(legacy[1]!.kid);
    await signAndVerify(pool, active);
  });
});

describe('rotating the key-encryption key', () => {
  function context(pool: Pool, keyEncryption: KeyEncryption, env: Record<string, string> = {}) {
    return { pool, keyEncryption, config: loadConfig({ LOG_LEVEL: 'silent', ...env }) };
  }

  it('from the variable: every signing key moves to NEW_SIGNING_KEY_ENCRYPTION_KEY in one transaction; the old key opens nothing', async () => {
    const { pool } = await database('kek_rotation_variable');
    const old = generateKeyEncryptionKey();
    const next = generateKeyEncryptionKey();
    const before = await activeSigningKey(pool, ringOf(old));
    await rotateSigningKey(pool, ringOf(old));
    const token = await new SignJWT({ sub: 'before' }).setProtectedHeader({ alg: 'EdDSA', kid: before.kid }).sign(before.privateKey);

    const missing = await configErrorOf(rotateSigningKeyEncryption(context(pool, { keys: ringOf(old), source: { kind: 'variable' } })));
    expect(missing).toMatch(/^Invalid configuration: NEW_SIGNING_KEY_ENCRYPTION_KEY: required/);

    const result = await rotateSigningKeyEncryption(
      context(pool, { keys: ringOf(old), source: { kind: 'variable' } }, { NEW_SIGNING_KEY_ENCRYPTION_KEY: formatKeyEncryptionKey(next) }),
    );
    expect(result).toEqual({ signing_keys: 2, others: {}, encryption_key_id: next.id, previous_encryption_key_ids: [old.id], key_file: null });
    expect((await rawRows(pool)).map((r) => r.encryption_key_id)).toEqual([next.id, next.id]);

    expect(await configErrorOf(activeSigningKey(pool, ringOf(old)))).toContain(next.id);
    await signAndVerify(pool, await activeSigningKey(pool, ringOf(next)));
    // During the switch, processes given both keys ("new,old") work whichever way the rows are.
    await signAndVerify(pool, await activeSigningKey(pool, ringOf(next, old)));
    // Tokens signed before the rotation verify as before: the public keys did not change.
    await compactVerify(token, (await loadVerificationKey(pool, before.kid))!);
  });

  it('the embedded key file: created 0600 on first start, replaced only after the re-encryption commits, old key kept as .previous', async () => {
    const { pool } = await database('kek_rotation_file');
    const dataDir = await temporaryDir();
    const config = loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent' });
    const file = path.join(dataDir, KEY_FILE_NAME);

    const first = await loadKeyEncryption(config, { embedded: true, pool });
    expect(first.source).toEqual({ kind: 'file', path: file });
    expect((await fs.stat(file)).mode & 0o777).toBe(0o600);
    const oldText = (await fs.readFile(file, 'utf8')).trim();
    const signing = await activeSigningKey(pool, first.keys);

    // A second start reads the same file.
    expect((await loadKeyEncryption(config, { embedded: true, pool })).keys!.current.id).toBe(first.keys!.current.id);

    const result = await rotateSigningKeyEncryption({ pool, config, keyEncryption: first });
    expect(result.key_file).toBe(file);
    expect(result.previous_encryption_key_ids).toEqual([first.keys!.current.id]);
    const newText = (await fs.readFile(file, 'utf8')).trim();
    expect(newText).not.toBe(oldText);
    expect((await fs.readFile(`${file}.previous`, 'utf8')).trim()).toBe(oldText);
    await expect(fs.stat(`${file}.next`)).rejects.toThrow();
    for (const name of [file, `${file}.previous`]) expect((await fs.stat(name)).mode & 0o777).toBe(0o600);
    expect((await rawRows(pool)).map((r) => r.encryption_key_id)).toEqual([result.encryption_key_id]);

    const after = await loadKeyEncryption(config, { embedded: true, pool });
    expect(after.keys!.current.id).toBe(result.encryption_key_id);
    expect((await activeSigningKey(pool, after.keys)).kid).toBe(signing.kid);
  });

  it('the embedded key file: a rotation that committed and crashed before moving its file is finished by the next start', async () => {
    const { pool } = await database('kek_rotation_crash');
    const dataDir = await temporaryDir();
    const config = loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent' });
    const file = path.join(dataDir, KEY_FILE_NAME);
    const first = await loadKeyEncryption(config, { embedded: true, pool });
    const signing = await activeSigningKey(pool, first.keys);

    // A stale .next no row uses (a rotation that failed before committing) changes nothing.
    const stale = generateKeyEncryptionKey();
    await fs.writeFile(`${file}.next`, formatKeyEncryptionKey(stale), { mode: 0o600 });
    const reloaded = await loadKeyEncryption(config, { embedded: true, pool });
    expect(reloaded.keys!.current.id).toBe(first.keys!.current.id);

    // The crash: .next written, the re-encryption committed, the process gone before the rename.
    const next = generateKeyEncryptionKey();
    await fs.writeFile(`${file}.next`, formatKeyEncryptionKey(next), { mode: 0o600 });
    await reencryptSigningKeys(pool, first.keys!, next);

    const recovered = await loadKeyEncryption(config, { embedded: true, pool });
    expect(recovered.keys!.current.id).toBe(next.id);
    expect((await fs.readFile(file, 'utf8')).trim()).toBe(formatKeyEncryptionKey(next));
    expect((await fs.readFile(`${file}.previous`, 'utf8')).trim()).toBe(formatKeyEncryptionKey(first.keys!.current));
    await expect(fs.stat(`${file}.next`)).rejects.toThrow();
    const reopened = await activeSigningKey(pool, recovered.keys);
    expect(reopened.kid).toBe(signing.kid);
    await signAndVerify(pool, reopened);
  });

  it('the embedded key file: a missing file once keys are sealed is reported, not replaced by a new key', async () => {
    const { pool } = await database('kek_file_missing');
    const dataDir = await temporaryDir();
    const config = loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent' });
    await activeSigningKey(pool, (await loadKeyEncryption(config, { embedded: true, pool })).keys);
    await fs.rm(path.join(dataDir, KEY_FILE_NAME));
    const message = await configErrorOf(loadKeyEncryption(config, { embedded: true, pool }));
    expect(message).toMatch(/^Invalid configuration: SIGNING_KEY_ENCRYPTION_KEY: unset, and the key file .* is missing$/);
    await expect(fs.stat(path.join(dataDir, KEY_FILE_NAME))).rejects.toThrow();
  });
});
