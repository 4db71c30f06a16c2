import fs from 'node:fs/promises';
import path from 'node:path';
import type pg from 'pg';
import { ConfigError } from '../errors.js';
import type { Logger } from '../logger.js';
import { registerSecret } from '../redaction.js';
import {
  KEY_ENCRYPTION_VARIABLE,
  KeyEncryptionError,
  KeyRing,
  formatKeyEncryptionKey,
  generateKeyEncryptionKey,
  parseKeyEncryptionKey,
  parseKeyEncryptionKeys,
  type KeyEncryptionKey,
} from './key-encryption.js';
import { encryptionKeyIdsInUse } from './signing-keys.js';

/**
 * Where this process's key-encryption keys come from: the `SIGNING_KEY_ENCRYPTION_KEY` variable,
 * or, for the embedded default without it, a file in DATA_DIR created on first start (mode 0600).
 *
 * The file rotates without a window in which a crash loses the key the database needs:
 * `rotate-encryption-key` writes the new key to `<file>.next` before its transaction commits,
 * copies the old key to `<file>.previous`, and only then renames `.next` over the file. Every
 * start reads all three, so whichever of them the rows were sealed with is held; a start that
 * finds the rows sealed with `.next` finishes the interrupted rotation. `.previous` stays until
 * the next rotation, for a process that sealed a new signing key with the old key mid-rotation.
 */

export type KeySource = { kind: 'variable' } | { kind: 'file'; path: string };

export interface KeyEncryption {
  /** Null when no key is configured (DATABASE_URL without the variable). */
  keys: KeyRing | null;
  source: KeySource;
}

export const KEY_FILE_NAME = 'signing-key-encryption.key';

export function keyFilePath(dataDir: string): string {
  return path.join(path.resolve(dataDir), KEY_FILE_NAME);
}

const FILE_ORIGIN = `${KEY_ENCRYPTION_VARIABLE} (unset: the key file ${KEY_FILE_NAME} in DATA_DIR stands in for it)`;
/** Serialises the key files' creation, promotion and rotation between processes on one database. */
const FILE_LOCK = 'signing-key-encryption key files';

async function readKeyFile(file: string): Promise<KeyEncryptionKey | null> {
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  try {
    const key = parseKeyEncryptionKey(text);
    registerSecret(text.trim());
    return key;
  } catch (error) {
    // Stryker disable next-line ConditionalExpression: equivalent, parseKeyEncryptionKey throws only KeyEncryptionError and registerSecret throws nothing
    if (error instanceof KeyEncryptionError) {
      throw new ConfigError(`Invalid configuration: ${KEY_ENCRYPTION_VARIABLE}: unset, and the key file ${path.basename(file)} in DATA_DIR ${error.message}`);
    }
    throw error;
  }
}

// Stryker disable next-line BlockStatement: a directory fsync only makes a rename survive a power loss, which no test can cause
async function syncDirectory(dir: string): Promise<void> {
  const handle = await fs.open(dir, 'r');
  // Stryker disable next-line BlockStatement: see above, the fsync is for a power loss only
  try {
    // Stryker disable BlockStatement: (the finally below) an unclosed directory handle is closed by the garbage collector; nothing a test sees
    await handle.sync();
  } finally {
    await handle.close();
  }
  // Stryker restore BlockStatement
}

/** A complete, synced temporary file next to `file`, mode 0600. */
async function writeTemporary(file: string, key: KeyEncryptionKey): Promise<string> {
  const temporary = `${file}.tmp-${process.pid}-${Date.now()}`;
  const handle = await fs.open(temporary, 'w', 0o600);
  try {
    await handle.writeFile(`${formatKeyEncryptionKey(key)}\n`);
    // Stryker disable BlockStatement: (the finally below) an unclosed file handle is closed by the garbage collector; the file is written and synced either way, nothing a test sees
    await handle.sync();
  } finally {
    await handle.close();
  }
  // Stryker restore BlockStatement
  return temporary;
}

/** Replaces `file` with `key` in one step: readers see the old content or the new, never a part. */
async function replaceKeyFile(file: string, key: KeyEncryptionKey): Promise<void> {
  const temporary = await writeTemporary(file, key);
  await fs.rename(temporary, file);
  await syncDirectory(path.dirname(file));
}

/** Creates `file` with a new key unless it exists; never overwrites one. True when it created it. */
async function createKeyFileIfAbsent(file: string): Promise<boolean> {
  const temporary = await writeTemporary(file, generateKeyEncryptionKey());
  try {
    await fs.link(temporary, file);
    await syncDirectory(path.dirname(file));
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return false;
  } finally {
    // Stryker disable next-line ObjectLiteral,BooleanLiteral: equivalent, the temporary always exists here (a link adds a name, it does not move it), so force changes nothing
    await fs.rm(temporary, { force: true });
  }
}

/** Runs `work` holding the key files' lock, on the connection that holds it (the pool may have no other). */
async function withFileLock<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock(hashtext($1))', [FILE_LOCK]);
    try {
      return await work(client);
    } finally {
      await client.query('SELECT pg_advisory_unlock(hashtext($1))', [FILE_LOCK]).catch(() => undefined);
    }
  } finally {
    client.release();
  }
}

/** Moves `.next` into place: the old key is kept as `.previous`. */
async function promoteNext(file: string, current: KeyEncryptionKey | null, next: KeyEncryptionKey): Promise<void> {
  if (current && current.id !== next.id) await replaceKeyFile(`${file}.previous`, current);
  await fs.rename(`${file}.next`, file);
  await syncDirectory(path.dirname(file));
}

/** Finishes a rotation that committed and stopped before its file moved into place. */
async function settleKeyFiles(client: pg.ClientBase, file: string): Promise<void> {
  const next = await readKeyFile(`${file}.next`);
  if (!next) return;
  if ((await encryptionKeyIdsInUse(client)).includes(next.id)) await promoteNext(file, await readKeyFile(file), next);
}

async function keyRingFromFiles(file: string): Promise<KeyRing> {
  const found = await Promise.all([file, `${file}.next`, `${file}.previous`].map(readKeyFile));
  const [current] = found;
  if (!current) throw new ConfigError(`Invalid configuration: ${KEY_ENCRYPTION_VARIABLE}: unset, and the key file ${KEY_FILE_NAME} in DATA_DIR is missing`);
  const keys = found.filter((key): key is KeyEncryptionKey => key !== null);
  // Stryker disable next-line MethodExpression,ConditionalExpression: equivalent, a KeyRing indexes its keys by id, so a key read from two files is one entry of ids, holds and open, and the first stays current
  return new KeyRing(keys.filter((key, i) => keys.findIndex((other) => other.id === key.id) === i), FILE_ORIGIN);
}

/**
 * This process's key-encryption keys: from the variable when it is set; otherwise, for the
 * embedded default, from the key file in DATA_DIR, created on first start; otherwise none.
 * `pool` must reach a database whose migrations are applied.
 */
export async function loadKeyEncryption(config: { SIGNING_KEY_ENCRYPTION_KEY?: string; DATA_DIR: string }, options: { embedded: boolean; pool: pg.Pool; log?: Logger }): Promise<KeyEncryption> {
  if (config.SIGNING_KEY_ENCRYPTION_KEY) {
    return { keys: new KeyRing(parseKeyEncryptionKeys(config.SIGNING_KEY_ENCRYPTION_KEY)), source: { kind: 'variable' } };
  }
  if (!options.embedded) return { keys: null, source: { kind: 'variable' } };
  const file = keyFilePath(config.DATA_DIR);
  const keys = await withFileLock(options.pool, async (client) => {
    // Only a first start makes a key: once keys are sealed, a missing file is an error to report,
    // not a reason to make another key the rows were never sealed with.
    if ((await encryptionKeyIdsInUse(client)).length === 0 && (await createKeyFileIfAbsent(file))) {
      options.log?.info({ file }, 'created the key file that encrypts the token signing keys: back it up apart from the database');
    }
    await settleKeyFiles(client, file);
    return keyRingFromFiles(file);
  });
  return { keys, source: { kind: 'file', path: file } };
}

export interface KeyFileRotation<T> {
  /** Re-encrypts the stored signing keys under `next`, opening them with `keys`; commits before it returns. */
  reencrypt(keys: KeyRing, next: KeyEncryptionKey): Promise<T>;
}

/**
 * The file side of rotating the embedded default's key: `.next` is durable before the
 * re-encryption commits, and replaces the file only after it has.
 */
export async function rotateKeyFile<T>(pool: pg.Pool, file: string, next: KeyEncryptionKey, rotation: KeyFileRotation<T>): Promise<T> {
  return withFileLock(pool, async (client) => {
    await settleKeyFiles(client, file);
    const keys = await keyRingFromFiles(file);
    await replaceKeyFile(`${file}.next`, next);
    registerSecret(formatKeyEncryptionKey(next));
    let result: T;
    try {
      result = await rotation.reencrypt(keys, next);
    } catch (error) {
      // Only a key no row needs may go: after a lost COMMIT reply the rows may need it.
      const inUse = await encryptionKeyIdsInUse(client).catch(() => [next.id]);
      // Stryker disable next-line ObjectLiteral,BooleanLiteral: equivalent, .next was written just before, under the files' lock, so force changes nothing
      if (!inUse.includes(next.id)) await fs.rm(`${file}.next`, { force: true });
      throw error;
    }
    await promoteNext(file, keys.current, next);
    return result;
  });
}
