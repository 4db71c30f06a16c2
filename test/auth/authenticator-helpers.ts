import type { FastifyRequest } from 'fastify';
import { exportJWK, generateKeyPair } from 'jose';
import { expect, vi } from 'vitest';
import type { TokenAuthenticator } from '../../shared/auth/authenticator.js';
import type { SigningKey } from '../../shared/auth/signing-keys.js';
import type { Pool } from '../../shared/db/pool.js';
import { UnauthorizedError } from '../../shared/errors.js';
import type { Principal } from '../../shared/auth/principal.js';

/** What the tests of the authenticator, called directly (no HTTP), share. */

export function request(headers: Record<string, string | string[] | undefined>): FastifyRequest {
  return { headers } as unknown as FastifyRequest;
}

export const bearer = (token: string) => request({ authorization: `Bearer ${token}` });

/** The detail of the 401 an authentication answers, or the principal. */
export async function outcome(authenticator: TokenAuthenticator, req: FastifyRequest): Promise<Principal | string> {
  try {
    return await authenticator.authenticate(req);
  } catch (error) {
    if (error instanceof UnauthorizedError) {
      expect(error.status).toBe(401);
      return error.detail;
    }
    throw error;
  }
}

/** Date only: timers stay real, so notifications and the usage flush keep running. */
export function freezeClock(at = Date.now()): { set(ms: number): void; now: number } {
  vi.useFakeTimers({ toFake: ['Date'], now: at });
  return {
    now: at,
    set: (ms: number) => vi.setSystemTime(ms),
  };
}

export async function until(condition: () => Promise<boolean>, withinMs = 3000): Promise<boolean> {
  const start = performance.now();
  while (performance.now() - start < withinMs) {
    if (await condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return false;
}

/** A signing key outside the database, with a kid of ours; `insert` stores its public half. */
export async function foreignSigningKey(): Promise<SigningKey & { insert(pool: Pool): Promise<void> }> {
  const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  const kid = `sk_${Array.from({ length: 26 }, () => '0123456789abcdefghjkmnpqrstvwxyz'[Math.floor(Math.random() * 32)]).join('')}`;
  return {
    kid,
    privateKey,
    async insert(pool) {
      // A retired row (one active key at most): it still verifies, as retired keys do.
      await pool.query(
        `INSERT INTO service.signing_keys (kid, algorithm, private_jwk, public_jwk, retired_at) VALUES ($1, 'EdDSA', $2, $3, now())`,
        [kid, { kty: 'OKP', crv: 'Ed25519', kid }, { ...(await exportJWK(publicKey)), kid, alg: 'EdDSA' }],
      );
    },
  };
}

/** Counts the pool's statements matching `pattern` from now on. */
export function queriesLike(pool: Pool, pattern: RegExp): () => number {
  const spy = vi.spyOn(pool, 'query');
  return () => spy.mock.calls.filter(([text]) => pattern.test(typeof text === 'string' ? text : (text as { text: string }).text)).length;
}

export const nowSeconds = () => Math.floor(Date.now() / 1000);
