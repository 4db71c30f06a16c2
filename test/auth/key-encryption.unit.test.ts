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

// Encryption at rest of the signing keys (docs/operations.md, "Secrets"): the key-encryption key's text forms,
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

  it('a ring of several keys opens what any of them sealed', () => {
    const old = generateKeyEncryptionKey();
    const next = generateKeyEncryptionKey();
    const sealed = new KeyRing([old]).seal('sk_1', plaintext);
    expect(new KeyRing([next, old]).open('sk_1', sealed).equals(plaintext)).toBe(true);
  });
});
