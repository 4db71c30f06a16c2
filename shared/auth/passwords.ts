import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/**
 * Password hashes: scrypt (Node's own, OpenSSL's implementation), N = 2^15, r = 8, p = 1, a
 * 16-byte random salt, a 32-byte key; about 32 MiB and 50 to 100 ms per hash. The hash names its
 * parameters (`scrypt$N$r$p$salt$key`, base64url), so raising them later still verifies old
 * hashes. scrypt runs on libuv's thread pool, so a hash does not block the event loop.
 */

const PARAMETERS = { N: 2 ** 15, r: 8, p: 1 } as const;
const KEY_LENGTH = 32;
const SALT_LENGTH = 16;

function derive(password: string, salt: Buffer, options: { N: number; r: number; p: number }, keyLength: number): Promise<Buffer> {
  // Exactly the memory scrypt needs for these parameters (OpenSSL: 128·r·(N + p + 2) bytes), so a
  // hash naming larger ones is still verified, and nothing beyond is allowed.
  const scryptOptions: ScryptOptions = { ...options, maxmem: 128 * options.r * (options.N + options.p + 2) };
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, keyLength, scryptOptions, (error, key) => (error ? reject(error) : resolve(key)));
  });
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_LENGTH);
  const key = await derive(password, salt, PARAMETERS, KEY_LENGTH);
  return ['scrypt', PARAMETERS.N, PARAMETERS.r, PARAMETERS.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/** Whether `password` is the one `hash` was made from; false for a hash this module cannot read. */
export async function verifyPassword(password: string, hash: string): Promise<boolean> {
  const parts = hash.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [N, r, p] = parts.slice(1, 4).map(Number) as [number, number, number];
  if (![N, r, p].every((n) => Number.isSafeInteger(n) && n > 0)) return false;
  const salt = Buffer.from(parts[4]!, 'base64url');
  const expected = Buffer.from(parts[5]!, 'base64url');
  if (expected.length === 0) return false;
  const key = await derive(password, salt, { N, r, p }, expected.length);
  return timingSafeEqual(key, expected);
}

let dummy: Promise<string> | null = null;

/**
 * A hash of a random password, made once per process: a sign-in for an email nobody has, or a
 * user without a password yet, is checked against it, so it costs the same time as a wrong
 * password (docs/web-app.md, "Sign-in and lockout").
 */
export function dummyPasswordHash(): Promise<string> {
  dummy ??= hashPassword(randomBytes(32).toString('base64url'));
  return dummy;
}
