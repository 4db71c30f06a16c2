import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { NEW_KEY_ENCRYPTION_VARIABLE, rotateSigningKeyEncryption } from '../../shared/auth/encryption-key-rotation.js';
import { KeyRing, formatKeyEncryptionKey, generateKeyEncryptionKey } from '../../shared/auth/key-encryption.js';
import { KEY_FILE_NAME, keyFilePath, loadKeyEncryption, rotateKeyFile } from '../../shared/auth/key-encryption-source.js';
import { activeSigningKey, encryptionKeyIdsInUse, reencryptSigningKeys } from '../../shared/auth/signing-keys.js';
import { loadConfig } from '../../shared/config.js';
import { ConfigError } from '../../shared/errors.js';
import { createPool, type Pool } from '../../shared/db/pool.js';
import { redactSecrets } from '../../shared/redaction.js';
import { capturedLog } from '../support/logs.js';
import { refusal } from '../support/rejection.js';
import { createTestDatabase } from '../support/database.js';

// Where the key-encryption keys come from (docs/operations.md, "Secrets: the signing keys and their encryption"): the variable, or the
// embedded default's key file, created once, rotated without a window that loses the key the rows need.

const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  vi.restoreAllMocks();
  while (cleanups.length > 0) await cleanups.pop()!();
});

async function database(label: string): Promise<Pool> {
  const db = await createTestDatabase(label);
  const pool = createPool(db.url, { max: 6 });
  cleanups.push(async () => {
    await pool.end();
    await db.drop();
  });
  return pool;
}

async function dataDir(): Promise<{ dir: string; file: string; config: ReturnType<typeof loadConfig> }> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tracking-kek-source-'));
  cleanups.push(() => fs.rm(dir, { recursive: true, force: true }));
  return { dir, file: path.join(dir, KEY_FILE_NAME), config: loadConfig({ DATA_DIR: dir, LOG_LEVEL: 'silent' }) };
}

const exists = (file: string) => fs.stat(file).then(() => true, () => false);

describe('key-encryption keys from the variable', () => {
  it('the variable, one key or several (the first seals); without it and without the embedded default, none', async () => {
    const pool = await database('kek_source_variable');
    const [a, b] = [generateKeyEncryptionKey(), generateKeyEncryptionKey()];
    const { dir, file } = await dataDir();
    const config = loadConfig({ DATA_DIR: dir, LOG_LEVEL: 'silent', SIGNING_KEY_ENCRYPTION_KEY: `${formatKeyEncryptionKey(b)},${formatKeyEncryptionKey(a)}` });
    for (const embedded of [true, false]) {
      const loaded = await loadKeyEncryption(config, { embedded, pool });
      expect(loaded.source).toEqual({ kind: 'variable' });
      expect(loaded.keys!.ids).toEqual([b.id, a.id]);
      expect(loaded.keys!.current.id).toBe(b.id);
      expect(loaded.keys!.origin).toBe('SIGNING_KEY_ENCRYPTION_KEY');
    }
    expect(await loadKeyEncryption(loadConfig({ DATA_DIR: dir, LOG_LEVEL: 'silent' }), { embedded: false, pool })).toEqual({ keys: null, source: { kind: 'variable' } });
    // Neither made a key file.
    expect(await exists(file)).toBe(false);
  });
});

describe('the embedded default: the key file', () => {
  it('the first start creates it (0600, logged), later starts read it; many first starts at once agree on one key', async () => {
    const pools = await Promise.all([database('kek_source_first')]);
    const { file, config } = await dataDir();
    const [pool] = pools;
    const others = Array.from({ length: 4 }, () => createPool((pool!.options as { connectionString: string }).connectionString, { max: 2 }));
    cleanups.push(async () => void (await Promise.all(others.map((p) => p.end()))));
    const { log, lines } = capturedLog();
    const loaded = await Promise.all([pool!, ...others].map((p) => loadKeyEncryption(config, { embedded: true, pool: p, log })));
    expect(new Set(loaded.map((l) => l.keys!.current.id)).size).toBe(1);
    expect(loaded[0]!.source).toEqual({ kind: 'file', path: file });
    expect((await fs.stat(file)).mode & 0o777).toBe(0o600);
    expect((await fs.readFile(file, 'utf8')).trim()).toBe(formatKeyEncryptionKey(loaded[0]!.keys!.current));
    expect(await fs.readdir(path.dirname(file))).toEqual([KEY_FILE_NAME]);
    const created = lines().filter((line) => line.msg === 'created the key file that encrypts the token signing keys: back it up apart from the database');
    expect(created).toHaveLength(1);
    expect(created[0]).toMatchObject({ file, level: 30 });
    // Read from the file, the key is a secret the logs never show.
    expect(redactSecrets(`key ${formatKeyEncryptionKey(loaded[0]!.keys!.current)}`)).not.toContain(formatKeyEncryptionKey(loaded[0]!.keys!.current));
    expect(loaded[0]!.keys!.origin).toBe('SIGNING_KEY_ENCRYPTION_KEY (unset: the key file signing-key-encryption.key in DATA_DIR stands in for it)');

    await activeSigningKey(pool!, loaded[0]!.keys);
    const again = await loadKeyEncryption(config, { embedded: true, pool: pool!, log });
    expect(again.keys!.current.id).toBe(loaded[0]!.keys!.current.id);
    expect(lines().filter((line) => line.msg === created[0]!.msg)).toHaveLength(1);
  });

  it('with no signing key sealed yet, an existing file is kept, not replaced', async () => {
    const pool = await database('kek_source_existing');
    const { file, config } = await dataDir();
    const mine = generateKeyEncryptionKey();
    await fs.writeFile(file, `${formatKeyEncryptionKey(mine)}\n`, { mode: 0o600 });
    const loaded = await loadKeyEncryption(config, { embedded: true, pool });
    expect(loaded.keys!.ids).toEqual([mine.id]);
    expect((await fs.readFile(file, 'utf8')).trim()).toBe(formatKeyEncryptionKey(mine));
  });

  it('a malformed key file is a one-line configuration error that never quotes it; an unreadable one is not', async () => {
    const pool = await database('kek_source_malformed');
    const { file, config } = await dataDir();
    await fs.writeFile(file, 'not a key, but secret text\n', { mode: 0o600 });
    const error = await refusal(loadKeyEncryption(config, { embedded: true, pool }));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toBe(
      'Invalid configuration: SIGNING_KEY_ENCRYPTION_KEY: unset, and the key file signing-key-encryption.key in DATA_DIR must be 32 random bytes in base64 or base64url (e.g. the output of: openssl rand -base64 32)',
    );
    for (const name of [`${file}.next`, `${file}.previous`]) {
      await fs.rm(file);
      await fs.writeFile(file, formatKeyEncryptionKey(generateKeyEncryptionKey()), { mode: 0o600 });
      await fs.writeFile(name, 'garbage', { mode: 0o600 });
      expect((await refusal(loadKeyEncryption(config, { embedded: true, pool }))).message).toContain(`the key file ${path.basename(name)} in DATA_DIR must be`);
      await fs.rm(name);
    }
    // Not a file at all: the system's error, as it is.
    await fs.rm(file);
    await fs.mkdir(file);
    const unreadable = await refusal(loadKeyEncryption(config, { embedded: true, pool }));
    expect(unreadable).not.toBeInstanceOf(ConfigError);
    expect((unreadable as NodeJS.ErrnoException).code).toBe('EISDIR');
  });

  it('the key file stands in for the variable in errors: a file that does not open the keys says so', async () => {
    const pool = await database('kek_source_wrong_file');
    const { file, config } = await dataDir();
    const first = await loadKeyEncryption(config, { embedded: true, pool });
    await activeSigningKey(pool, first.keys);
    await fs.writeFile(file, formatKeyEncryptionKey(generateKeyEncryptionKey()));
    const wrong = await loadKeyEncryption(config, { embedded: true, pool });
    const error = await refusal(activeSigningKey(pool, wrong.keys));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toMatch(/^Invalid configuration: SIGNING_KEY_ENCRYPTION_KEY \(unset: the key file signing-key-encryption\.key in DATA_DIR stands in for it\): /);
    expect(error.message).toContain(first.keys!.current.id);
  });

  it('once signing keys are sealed, a missing key file is an error, never a new key', async () => {
    const pool = await database('kek_source_missing');
    const { file, config } = await dataDir();
    const first = await loadKeyEncryption(config, { embedded: true, pool });
    await activeSigningKey(pool, first.keys);
    await fs.rm(file);
    const error = await refusal(loadKeyEncryption(config, { embedded: true, pool }));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toBe('Invalid configuration: SIGNING_KEY_ENCRYPTION_KEY: unset, and the key file signing-key-encryption.key in DATA_DIR is missing');
    expect(await fs.readdir(path.dirname(file))).toEqual([]);
  });

  it('a key file that cannot be created (other than already there) is the system error, and leaves no temporary', async () => {
    const pool = await database('kek_source_no_space');
    const { dir, config } = await dataDir();
    const full = Object.assign(new Error('ENOSPC: no space left on device, link'), { code: 'ENOSPC' });
    vi.spyOn(fs, 'link').mockRejectedValueOnce(full);
    expect(await refusal(loadKeyEncryption(config, { embedded: true, pool }))).toBe(full);
    expect(await fs.readdir(dir)).toEqual([]);
  });

  it('the key files are made under a lock that other processes on the database share', async () => {
    const pool = await database('kek_source_lock');
    const { file, config } = await dataDir();
    const other = await pool.connect();
    await other.query(`SELECT pg_advisory_lock(hashtext('signing-key-encryption key files'))`);
    let settled = false;
    const loading = loadKeyEncryption(config, { embedded: true, pool }).finally(() => (settled = true));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(settled).toBe(false);
    expect(await exists(file)).toBe(false);
    await other.query(`SELECT pg_advisory_unlock(hashtext('signing-key-encryption key files'))`);
    other.release();
    expect((await loading).keys!.ids).toHaveLength(1);
  });

  it('keyFilePath: DATA_DIR resolved, the file name appended', () => {
    expect(keyFilePath('some/dir')).toBe(path.join(process.cwd(), 'some/dir', KEY_FILE_NAME));
    expect(keyFilePath('/var/lib/tracking')).toBe(`/var/lib/tracking/${KEY_FILE_NAME}`);
  });
});

describe('rotating the key file', () => {
  async function started(label: string) {
    const pool = await database(label);
    const where = await dataDir();
    const first = await loadKeyEncryption(where.config, { embedded: true, pool });
    const signing = await activeSigningKey(pool, first.keys);
    return { pool, ...where, first, signing, oldText: formatKeyEncryptionKey(first.keys!.current) };
  }

  /** A rotation whose re-encryption commits, then fails as if the COMMIT's reply were lost. */
  async function rotationLosingItsCommitReply(pool: Pool, file: string, next: ReturnType<typeof generateKeyEncryptionKey>): Promise<void> {
    await refusal(
      rotateKeyFile(pool, file, next, {
        async reencrypt(keys, key) {
          await reencryptSigningKeys(pool, keys, key);
          throw new Error('connection lost after COMMIT');
        },
      }),
    );
  }

  it('a re-encryption that fails before committing leaves the file and removes .next', async () => {
    const { pool, file, first, oldText } = await started('kek_rotate_fails');
    const next = generateKeyEncryptionKey();
    let sawNext = false;
    const error = await refusal(
      rotateKeyFile(pool, file, next, {
        async reencrypt(keys) {
          // .next is durable before the re-encryption runs, and the ring is the file's.
          sawNext = (await fs.readFile(`${file}.next`, 'utf8')).trim() === formatKeyEncryptionKey(next);
          expect(keys.ids).toEqual([first.keys!.current.id]);
          throw new Error('lost the database');
        },
      }),
    );
    expect(error.message).toBe('lost the database');
    expect(sawNext).toBe(true);
    expect(await exists(`${file}.next`)).toBe(false);
    expect(await exists(`${file}.previous`)).toBe(false);
    expect((await fs.readFile(file, 'utf8')).trim()).toBe(oldText);
    expect(await encryptionKeyIdsInUse(pool)).toEqual([first.keys!.current.id]);
  });

  it('a re-encryption that committed and then failed (a lost COMMIT reply) keeps .next; the next start finishes the move', async () => {
    const { pool, file, config, first, signing, oldText } = await started('kek_rotate_lost_reply');
    const next = generateKeyEncryptionKey();
    await rotationLosingItsCommitReply(pool, file, next);
    expect((await fs.readFile(`${file}.next`, 'utf8')).trim()).toBe(formatKeyEncryptionKey(next));
    expect((await fs.readFile(file, 'utf8')).trim()).toBe(oldText);
    // The keys a start reads include .next: the rows open either way, and the start promotes it.
    const recovered = await loadKeyEncryption(config, { embedded: true, pool });
    expect(recovered.keys!.current.id).toBe(next.id);
    expect((await fs.readFile(`${file}.previous`, 'utf8')).trim()).toBe(oldText);
    expect(await exists(`${file}.next`)).toBe(false);
    expect((await activeSigningKey(pool, recovered.keys)).kid).toBe(signing.kid);
    expect(first.keys!.current.id).not.toBe(next.id);
  });

  it('.next and .previous are read at every start: rows sealed with either open', async () => {
    const { pool, file, config, first, signing, oldText } = await started('kek_rotate_previous');
    const rotation = await rotateSigningKeyEncryption({ pool, config, keyEncryption: first });
    // A process that sealed with the old key mid-rotation: the rows need .previous.
    const afterRotation = await loadKeyEncryption(config, { embedded: true, pool });
    await reencryptSigningKeys(pool, afterRotation.keys!, first.keys!.current);
    const loaded = await loadKeyEncryption(config, { embedded: true, pool });
    expect(loaded.keys!.current.id).toBe(rotation.encryption_key_id);
    expect(loaded.keys!.ids).toEqual([rotation.encryption_key_id, first.keys!.current.id]);
    expect((await activeSigningKey(pool, loaded.keys)).kid).toBe(signing.kid);
    expect((await fs.readFile(`${file}.previous`, 'utf8')).trim()).toBe(oldText);
    // The same key in two files is one key of the ring.
    await fs.copyFile(file, `${file}.previous`);
    expect((await loadKeyEncryption(config, { embedded: true, pool })).keys!.ids).toEqual([rotation.encryption_key_id]);
  });

  it('a stray .next that no row is sealed with is held but not promoted', async () => {
    const { pool, file, config, first, oldText } = await started('kek_rotate_stray_next');
    const stray = generateKeyEncryptionKey();
    await fs.writeFile(`${file}.next`, formatKeyEncryptionKey(stray), { mode: 0o600 });
    const loaded = await loadKeyEncryption(config, { embedded: true, pool });
    expect(loaded.keys!.ids).toEqual([first.keys!.current.id, stray.id]);
    expect((await fs.readFile(file, 'utf8')).trim()).toBe(oldText);
    expect(await exists(`${file}.next`)).toBe(true);
    expect(await exists(`${file}.previous`)).toBe(false);
  });

  it('a .next the rows are sealed with is promoted even when the file itself is gone', async () => {
    const { pool, file, config, signing } = await started('kek_rotate_next_only');
    const next = generateKeyEncryptionKey();
    await rotationLosingItsCommitReply(pool, file, next);
    await fs.rm(file);
    const loaded = await loadKeyEncryption(config, { embedded: true, pool });
    expect(loaded.keys!.ids).toEqual([next.id]);
    expect((await fs.readFile(file, 'utf8')).trim()).toBe(formatKeyEncryptionKey(next));
    expect((await fs.readdir(path.dirname(file))).sort()).toEqual([KEY_FILE_NAME]);
    expect((await activeSigningKey(pool, loaded.keys)).kid).toBe(signing.kid);
  });

  it('rotating to the key the file already holds keeps no .previous', async () => {
    const { pool, dir, file, first, oldText } = await started('kek_rotate_same');
    const config = loadConfig({ DATA_DIR: dir, LOG_LEVEL: 'silent', [NEW_KEY_ENCRYPTION_VARIABLE]: oldText });
    const result = await rotateSigningKeyEncryption({ pool, config, keyEncryption: first });
    expect(result).toEqual({ signing_keys: 1, others: {}, encryption_key_id: first.keys!.current.id, previous_encryption_key_ids: [], key_file: file });
    expect(await fs.readdir(path.dirname(file))).toEqual([KEY_FILE_NAME]);
    expect((await fs.readFile(file, 'utf8')).trim()).toBe(oldText);
  });

  it('a failure after which the database cannot say which keys the rows need keeps .next', async () => {
    const { pool, file, oldText } = await started('kek_rotate_db_gone');
    const next = generateKeyEncryptionKey();
    const error = await refusal(
      rotateKeyFile(pool, file, next, {
        async reencrypt() {
          // The connection holding the files' lock dies with the re-encryption.
          await pool.query(
            `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND pid <> pg_backend_pid()`,
          );
          throw new Error('lost the database');
        },
      }),
    );
    expect(error.message).toBe('lost the database');
    expect((await fs.readFile(`${file}.next`, 'utf8')).trim()).toBe(formatKeyEncryptionKey(next));
    expect((await fs.readFile(file, 'utf8')).trim()).toBe(oldText);
  });

  it('from the variable: re-encrypts under NEW_SIGNING_KEY_ENCRYPTION_KEY, which is required', async () => {
    const pool = await database('kek_rotate_variable');
    const keys = new KeyRing([generateKeyEncryptionKey()]);
    const signing = await activeSigningKey(pool, keys);
    const keyEncryption = { keys, source: { kind: 'variable' } as const };
    const missing = await refusal(rotateSigningKeyEncryption({ pool, config: loadConfig({ LOG_LEVEL: 'silent' }), keyEncryption }));
    expect(missing).toBeInstanceOf(ConfigError);
    expect(missing.message).toBe(
      'Invalid configuration: NEW_SIGNING_KEY_ENCRYPTION_KEY: required: the key to re-encrypt the signing keys with (32 random bytes in base64, e.g. from: openssl rand -base64 32)',
    );
    expect(await encryptionKeyIdsInUse(pool)).toEqual([keys.current.id]);
    const given = generateKeyEncryptionKey();
    const config = loadConfig({ LOG_LEVEL: 'silent', [NEW_KEY_ENCRYPTION_VARIABLE]: formatKeyEncryptionKey(given) });
    expect(await rotateSigningKeyEncryption({ pool, config, keyEncryption })).toEqual({
      signing_keys: 1,
      others: {},
      encryption_key_id: given.id,
      previous_encryption_key_ids: [keys.current.id],
      key_file: null,
    });
    expect((await activeSigningKey(pool, new KeyRing([given]))).kid).toBe(signing.kid);
  });

  it('NEW_SIGNING_KEY_ENCRYPTION_KEY, when set, is the key the file rotates to', async () => {
    const { pool, dir, file, first } = await started('kek_rotate_given');
    const given = generateKeyEncryptionKey();
    const config = loadConfig({ DATA_DIR: dir, LOG_LEVEL: 'silent', [NEW_KEY_ENCRYPTION_VARIABLE]: formatKeyEncryptionKey(given) });
    const result = await rotateSigningKeyEncryption({ pool, config, keyEncryption: first });
    expect(result).toEqual({ signing_keys: 1, others: {}, encryption_key_id: given.id, previous_encryption_key_ids: [first.keys!.current.id], key_file: file });
    expect((await fs.readFile(file, 'utf8')).trim()).toBe(formatKeyEncryptionKey(given));
    // The new key is a secret the logs never show.
    expect(redactSecrets(formatKeyEncryptionKey(given))).not.toContain(formatKeyEncryptionKey(given));
  });

  it('from the variable: without SIGNING_KEY_ENCRYPTION_KEY there is nothing to rotate from', async () => {
    const pool = await database('kek_rotate_no_variable');
    const config = loadConfig({ LOG_LEVEL: 'silent', [NEW_KEY_ENCRYPTION_VARIABLE]: formatKeyEncryptionKey(generateKeyEncryptionKey()) });
    const error = await refusal(rotateSigningKeyEncryption({ pool, config, keyEncryption: { keys: null, source: { kind: 'variable' } } }));
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toBe('Invalid configuration: SIGNING_KEY_ENCRYPTION_KEY: required: it is the key the signing keys are encrypted with now');
    expect(NEW_KEY_ENCRYPTION_VARIABLE).toBe('NEW_SIGNING_KEY_ENCRYPTION_KEY');
  });
});
