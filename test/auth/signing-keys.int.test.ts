import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { activeSigningKey, rotateSigningKey } from '../../shared/auth/signing-keys.js';
import { KeyRing, generateKeyEncryptionKey } from '../../shared/auth/key-encryption.js';
import { createPool, type Pool } from '../../shared/db/pool.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

let db: TestDatabase;
const pools: Pool[] = [];
// Made on first use inside a test: auth code run outside tests would make every mutant of it run every test.
let ring: KeyRing | null = null;
const keyRing = () => (ring ??= new KeyRing([generateKeyEncryptionKey()]));

beforeAll(async () => {
  db = await createTestDatabase('auth_signing_keys');
  // Separate pools stand for separate processes starting at once.
  for (let i = 0; i < 6; i++) pools.push(createPool(db.url, { max: 2 }));
});

afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  await db.drop();
});

async function activeKids(): Promise<string[]> {
  const result = await pools[0]!.query<{ kid: string }>('SELECT kid FROM service.signing_keys WHERE retired_at IS NULL');
  return result.rows.map((r) => r.kid);
}

describe('signing keys', () => {
  it('concurrent first starts agree on one active key', async () => {
    const keys = await Promise.all(pools.flatMap((pool) => [activeSigningKey(pool, keyRing()), activeSigningKey(pool, keyRing())]));
    const kids = new Set(keys.map((k) => k.kid));
    expect(kids.size).toBe(1);
    expect(await activeKids()).toEqual([...kids]);
  });

  it('concurrent rotations leave exactly one active key and retire the others', async () => {
    const before = (await activeSigningKey(pools[0]!, keyRing())).kid;
    const rotations = await Promise.all(pools.map((pool) => rotateSigningKey(pool, keyRing())));
    const active = await activeKids();
    expect(active).toHaveLength(1);
    expect(rotations.map((r) => r.kid)).toContain(active[0]);
    // Each rotation retired the key the previous one created: a chain back to the first key.
    expect(rotations.map((r) => r.previous_kid)).toContain(before);
    const all = await pools[0]!.query<{ n: number; retired: number }>('SELECT count(*)::int AS n, count(retired_at)::int AS retired FROM service.signing_keys');
    expect(all.rows[0]).toEqual({ n: 7, retired: 6 });
  });
});
