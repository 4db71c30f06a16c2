import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';

/**
 * Encryption at rest of the token signing keys' private halves (`service.signing_keys`) and of
 * the webhook endpoints' signing secrets (`service.webhook_endpoints`).
 *
 * A key-encryption key (KEK) is 32 random bytes that never enter the database: the
 * `SIGNING_KEY_ENCRYPTION_KEY` variable in production, a 0600 file in `DATA_DIR` for the embedded
 * default. Each private JWK is sealed with AES-256-GCM under a fresh 96-bit nonce, with the
 * signing key's `kid` as additional authenticated data, so a sealed key copied onto another row
 * does not open. A row records which KEK sealed it by the KEK's id, a fingerprint derived from the
 * key itself, so several KEKs can be held at once while one replaces another, and a wrong key is
 * told apart from damaged data.
 */

export const KEY_ENCRYPTION_VARIABLE = 'SIGNING_KEY_ENCRYPTION_KEY';

const KEY_BYTES = 32;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
/** First byte of every sealed value: the layout `version | nonce | ciphertext | tag`. */
const FORMAT_V1 = 1;

export interface KeyEncryptionKey {
  /** `kek_` and 16 hex digits of an HMAC of the key: names it without revealing anything of it. */
  id: string;
  secret: Buffer;
}

/** A malformed key, or a sealed value that does not open. One line, never quoting a key. */
export class KeyEncryptionError extends Error {}

/** A sealed value whose key this process does not hold: a configuration problem, naming the variable. */
export class KeyNotHeldError extends KeyEncryptionError {}

export function keyEncryptionKeyId(secret: Buffer): string {
  return `kek_${createHmac('sha256', secret).update('tracking signing-key encryption key id').digest('hex').slice(0, 16)}`;
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** One key from its text form: 32 bytes in base64 or base64url (padding optional). */
export function parseKeyEncryptionKey(text: string): KeyEncryptionKey {
  const trimmed = text.trim();
  const secret = BASE64.test(trimmed) ? Buffer.from(trimmed, 'base64') : BASE64URL.test(trimmed) ? Buffer.from(trimmed, 'base64url') : null;
  if (!secret || secret.length !== KEY_BYTES) {
    // The message never quotes the value: it is a secret even when malformed.
    throw new KeyEncryptionError(`must be ${KEY_BYTES} random bytes in base64 or base64url (e.g. the output of: openssl rand -base64 32)`);
  }
  return { id: keyEncryptionKeyId(secret), secret };
}

/**
 * The variable's value: one key, or several separated by commas while one replaces another.
 * The first encrypts; every one of them decrypts.
 */
export function parseKeyEncryptionKeys(text: string): KeyEncryptionKey[] {
  const parts = text.split(',').map((part) => part.trim()).filter(Boolean);
  if (parts.length === 0) throw new KeyEncryptionError(`must be ${KEY_BYTES} random bytes in base64 or base64url, or a comma-separated list of such keys`);
  const keys = parts.map(parseKeyEncryptionKey);
  return keys.filter((key, i) => keys.findIndex((other) => other.id === key.id) === i);
}

export function generateKeyEncryptionKey(): KeyEncryptionKey {
  const secret = randomBytes(KEY_BYTES);
  return { id: keyEncryptionKeyId(secret), secret };
}

/** The text form written to key files (base64url, no padding). */
export function formatKeyEncryptionKey(key: KeyEncryptionKey): string {
  return key.secret.toString('base64url');
}

/**
 * What a sealed value is bound to: `associatedData` is authenticated with it (a value copied onto
 * another row does not open), `description` names it in errors.
 */
export interface SealedSubject {
  description: string;
  associatedData: string;
}

/** A token signing key's subject: bound to its kid. */
export function signingKeySubject(kid: string): SealedSubject {
  return { description: `signing key ${kid}`, associatedData: `tracking signing key v1:${kid}` };
}

function associatedData(subject: SealedSubject): Buffer {
  // Stryker disable next-line StringLiteral: equivalent, Buffer.from with an empty encoding is utf8
  return Buffer.from(subject.associatedData, 'utf8');
}

export interface SealedKey {
  keyId: string;
  sealed: Buffer;
}

/**
 * The KEKs this process holds. `current` seals; any of them opens what it sealed. `origin` says
 * in error messages where the keys came from (the variable, or the key file standing in for it).
 */
export class KeyRing {
  readonly current: KeyEncryptionKey;
  private readonly byId: Map<string, KeyEncryptionKey>;

  constructor(
    readonly keys: readonly KeyEncryptionKey[],
    readonly origin: string = KEY_ENCRYPTION_VARIABLE,
  ) {
    if (keys.length === 0) throw new Error('a key ring needs at least one key');
    this.current = keys[0]!;
    this.byId = new Map(keys.map((key) => [key.id, key]));
  }

  get ids(): string[] {
    return [...this.byId.keys()];
  }

  holds(keyId: string): boolean {
    return this.byId.has(keyId);
  }

  /** Seals a signing key's private half (bound to its kid). */
  seal(kid: string, plaintext: Buffer, key: KeyEncryptionKey = this.current): SealedKey {
    return this.sealFor(signingKeySubject(kid), plaintext, key);
  }

  open(kid: string, sealed: SealedKey): Buffer {
    return this.openFor(signingKeySubject(kid), sealed);
  }

  sealFor(subject: SealedSubject, plaintext: Buffer, key: KeyEncryptionKey = this.current): SealedKey {
    const nonce = randomBytes(NONCE_BYTES);
    // Stryker disable next-line ObjectLiteral: equivalent, a GCM cipher's tag is 16 bytes by default
    const cipher = createCipheriv('aes-256-gcm', key.secret, nonce, { authTagLength: TAG_BYTES });
    cipher.setAAD(associatedData(subject));
    const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    return { keyId: key.id, sealed: Buffer.concat([Buffer.from([FORMAT_V1]), nonce, body, cipher.getAuthTag()]) };
  }

  openFor(subject: SealedSubject, sealed: SealedKey): Buffer {
    const key = this.byId.get(sealed.keyId);
    if (!key) {
      throw new KeyNotHeldError(
        `Invalid configuration: ${this.origin}: ${subject.description} is encrypted with ${sealed.keyId}, which is not among the configured keys (${this.ids.join(', ')})`,
      );
    }
    const { sealed: bytes } = sealed;
    if (bytes.length < 1 + NONCE_BYTES + TAG_BYTES || bytes[0] !== FORMAT_V1) {
      throw new KeyEncryptionError(`${subject.description}: unknown encrypted format`);
    }
    const nonce = bytes.subarray(1, 1 + NONCE_BYTES);
    const tag = bytes.subarray(bytes.length - TAG_BYTES);
    const body = bytes.subarray(1 + NONCE_BYTES, bytes.length - TAG_BYTES);
    try {
      // Stryker disable next-line ObjectLiteral: equivalent, the tag passed is always the last 16 bytes, so a decipher with no fixed tag length checks the same 16
      const decipher = createDecipheriv('aes-256-gcm', key.secret, nonce, { authTagLength: TAG_BYTES });
      decipher.setAAD(associatedData(subject));
      decipher.setAuthTag(tag);
      return Buffer.concat([decipher.update(body), decipher.final()]);
    } catch {
      throw new KeyEncryptionError(`${subject.description}: the encrypted key does not authenticate under ${sealed.keyId} (altered, or copied from another row)`);
    }
  }
}
