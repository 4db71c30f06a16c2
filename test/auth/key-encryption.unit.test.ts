import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  KeyEncryptionError,
  KeyNotHeldError,
  KeyRing,
  formatKeyEncryptionKey,
  generateKeyEncryptionKey,
  parseKeyEncryptionKey,
  parseKeyEncryptionKeys,
} from '../../shared/auth/key-encryption.js';

// Encryption at rest of the signing keys (docs/operations.md, "Secrets: the signing keys and their encryption"): the key-encryption key's text forms,
// AES-256-GCM with the kid as associated data, and errors that name the variable without quoting a key.

describe('key-encryption key text', () => {
  const secret = randomBytes(32);

  it('accepts 32 bytes in base64 (padded or not) and base64url, all naming the same key', () => {
    const forms = [secret.toString('base64'), secret.toString('base64').replace(/=+$/, ''), secret.toString('base64url'), `  ${secret.toString('base64')}\n`];
    const ids = forms.map((form) => parseKeyEncryptionKey(form).id);
    expect(new Set(ids).size).toBe(1);
    expect(ids[0]).toMatch(/^kek_[0-9a-f]{16}$/);
    expect(parseKeyEncryptionKey(forms[0]!).secret.equals(secret)).toBe(true);
  });

  it.each([
    ['too short', randomBytes(16).toString('base64')],
    ['too long', randomBytes(48).toString('base64')],
    ['not base64', 'this is not a key at all, not even close!!!'],
    ['hex', randomBytes(32).toString('hex')],
  ])('refuses a key that is %s, without quoting it', (_case, text) => {
    let error: unknown;
    try {
      parseKeyEncryptionKey(text);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(KeyEncryptionError);
    expect((error as Error).message).not.toContain(text);
    expect((error as Error).message).toContain('32 random bytes');
  });

  it('a comma-separated list: the first key seals, duplicates are dropped', () => {
    const a = generateKeyEncryptionKey();
    const b = generateKeyEncryptionKey();
    const list = parseKeyEncryptionKeys(`${formatKeyEncryptionKey(b)}, ${formatKeyEncryptionKey(a)},${formatKeyEncryptionKey(b)}`);
    expect(list.map((k) => k.id)).toEqual([b.id, a.id]);
    expect(new KeyRing(list).current.id).toBe(b.id);
  });

  it('a list with empty or blank parts (a trailing comma, a space between two commas) keeps the keys it has', () => {
    const a = generateKeyEncryptionKey();
    const b = generateKeyEncryptionKey();
    const list = parseKeyEncryptionKeys(`,${formatKeyEncryptionKey(a)}, ,${formatKeyEncryptionKey(b)},`);
    expect(list.map((k) => k.id)).toEqual([a.id, b.id]);
  });

  it.each([[''], [' , ,'], [',']])('a list with no key at all (%j) is refused with the list form in the message', (text) => {
    expect(() => parseKeyEncryptionKeys(text)).toThrow(
      new KeyEncryptionError('must be 32 random bytes in base64 or base64url, or a comma-separated list of such keys'),
    );
  });

  it('a key ring with no key is refused', () => {
    expect(() => new KeyRing([])).toThrow(new Error('a key ring needs at least one key'));
  });
});

// A key sealed by an earlier release must still open: a fixed key, its id and a value it sealed.
// A changed id derivation or associated-data string breaks every database already encrypted.
describe('known-answer vector', () => {
  const keyText = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8'; // the bytes 0..31, base64url
  const sealedBefore = 'ATEhZs49wHsjrBvz0N4wO3kW87JugQChsqqYjLvcNIe0xG5XBLhZgqaq';

  it('the key id is the one rows sealed before recorded', () => {
    expect(parseKeyEncryptionKey(keyText).id).toBe('kek_69cee7dffcc4ef4e');
  });

  it('a value sealed before still opens', () => {
    const key = parseKeyEncryptionKey(keyText);
    const opened = new KeyRing([key]).open('sk_known', { keyId: 'kek_69cee7dffcc4ef4e', sealed: Buffer.from(sealedBefore, 'base64') });
    expect(opened.toString('utf8')).toBe('{"d":"known"}');
  });
});

describe('sealing a signing key', () => {
  const plaintext = Buffer.from(JSON.stringify({ kty: 'OKP', crv: 'Ed25519', d: 'private-part', x: 'public-part' }));

  it('opens what it sealed, with a fresh nonce each time and no plaintext in the sealed bytes', () => {
    const ring = new KeyRing([generateKeyEncryptionKey()]);
    const one = ring.seal('sk_1', plaintext);
    const two = ring.seal('sk_1', plaintext);
    expect(one.keyId).toBe(ring.current.id);
    expect(one.sealed.equals(two.sealed)).toBe(false);
    expect(one.sealed.subarray(1, 13).equals(two.sealed.subarray(1, 13))).toBe(false);
    expect(one.sealed.includes(Buffer.from('private-part'))).toBe(false);
    expect(ring.open('sk_1', one).equals(plaintext)).toBe(true);
  });

  it('binds the kid: a sealed key moved to another kid does not open', () => {
    const ring = new KeyRing([generateKeyEncryptionKey()]);
    const sealed = ring.seal('sk_1', plaintext);
    expect(() => ring.open('sk_2', sealed)).toThrow(/sk_2.*does not authenticate/);
  });

  it('refuses altered bytes', () => {
    const ring = new KeyRing([generateKeyEncryptionKey()]);
    const sealed = ring.seal('sk_1', plaintext);
    const altered = Buffer.from(sealed.sealed);
    altered[20] = altered[20]! ^ 1;
    expect(() => ring.open('sk_1', { ...sealed, sealed: altered })).toThrow(KeyEncryptionError);
  });

  it('a key it does not hold is a configuration error naming the variable and both key ids, never a key', () => {
    const sealer = new KeyRing([generateKeyEncryptionKey()]);
    const other = new KeyRing([generateKeyEncryptionKey()]);
    const sealed = sealer.seal('sk_1', plaintext);
    let error: unknown;
    try {
      other.open('sk_1', sealed);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(KeyNotHeldError);
    const message = (error as Error).message;
    expect(message.split('\n')).toHaveLength(1);
    expect(message).toMatch(/^Invalid configuration: SIGNING_KEY_ENCRYPTION_KEY: /);
    expect(message).toContain(sealer.current.id);
    expect(message).toContain(other.current.id);
    expect(message).not.toContain(formatKeyEncryptionKey(sealer.current));
    expect(message).not.toContain(formatKeyEncryptionKey(other.current));
  });

  it('the not-held error lists every held key id, comma-separated', () => {
    const sealer = new KeyRing([generateKeyEncryptionKey()]);
    const [a, b] = [generateKeyEncryptionKey(), generateKeyEncryptionKey()];
    const sealed = sealer.seal('sk_1', plaintext);
    expect(() => new KeyRing([a, b]).open('sk_1', sealed)).toThrow(
      `Invalid configuration: SIGNING_KEY_ENCRYPTION_KEY: signing key sk_1 is encrypted with ${sealer.current.id}, which is not among the configured keys (${a.id}, ${b.id})`,
    );
  });

  it.each([
    ['empty', Buffer.alloc(0)],
    ['only a format byte and a nonce', Buffer.concat([Buffer.from([1]), randomBytes(12)])],
    ['one byte short of a nonce and a tag', Buffer.concat([Buffer.from([1]), randomBytes(27)])],
    ['of another format byte', Buffer.concat([Buffer.from([2]), randomBytes(60)])],
    ['of format byte 0', Buffer.concat([Buffer.from([0]), randomBytes(60)])],
  ])('refuses a sealed value that is %s as an unknown format', (_case, bytes) => {
    const ring = new KeyRing([generateKeyEncryptionKey()]);
    expect(() => ring.open('sk_1', { keyId: ring.current.id, sealed: bytes })).toThrow(
      new KeyEncryptionError('signing key sk_1: unknown encrypted format'),
    );
  });

  it('a value of exactly a format byte, a nonce and a tag (an empty body) is of the known format and must authenticate', () => {
    const ring = new KeyRing([generateKeyEncryptionKey()]);
    const bytes = Buffer.concat([Buffer.from([1]), randomBytes(28)]);
    expect(() => ring.open('sk_1', { keyId: ring.current.id, sealed: bytes })).toThrow(
      `signing key sk_1: the encrypted key does not authenticate under ${ring.current.id} (altered, or copied from another row)`,
    );
  });

  it('a sealed empty plaintext is a format byte, a nonce and a tag, and opens', () => {
    const ring = new KeyRing([generateKeyEncryptionKey()]);
    const sealed = ring.seal('sk_1', Buffer.alloc(0));
    expect(sealed.sealed).toHaveLength(29);
    expect(ring.open('sk_1', sealed)).toHaveLength(0);
  });

  it('a ring of several keys opens what any of them sealed', () => {
    const old = generateKeyEncryptionKey();
    const next = generateKeyEncryptionKey();
    const sealed = new KeyRing([old]).seal('sk_1', plaintext);
    expect(new KeyRing([next, old]).open('sk_1', sealed).equals(plaintext)).toBe(true);
  });
});
