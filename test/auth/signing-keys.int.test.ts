import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { activeSigningKey, reencryptSigningKeys, rotateSigningKey, sealingWithKeyRing } from '../../shared/auth/signing-keys.js';
import { ConfigError } from '../../shared/errors.js';
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

  it('a writer sealing with a ring waits for a re-encryption under way, and refuses a ring without the keys in use', async () => {
    await activeSigningKey(pools[0]!, keyRing());
    const inUse = keyRing().current.id;
    const reencrypting = await pools[1]!.connect();
    const writer = await pools[2]!.connect();
    try {
      // What a re-encryption holds for its whole transaction (underSigningKeysLock).
      await reencrypting.query('BEGIN');
      await reencrypting.query(`SELECT pg_advisory_xact_lock(hashtext('service.signing_keys'))`);
      await writer.query('BEGIN');
      let sealed = false;
      const sealing = sealingWithKeyRing(writer, keyRing()).then(() => (sealed = true));
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(sealed).toBe(false);
      await reencrypting.query('COMMIT');
      await sealing;
      expect(sealed).toBe(true);
      // Held until the writer's commit: a re-encryption now waits for it.
      const other = await pools[3]!.connect();
      try {
        const lock = await other.query<{ taken: boolean }>(`SELECT pg_try_advisory_xact_lock(hashtext('service.signing_keys')) AS taken`);
        expect(lock.rows[0]!.taken).toBe(false);
      } finally {
        other.release();
      }
      await writer.query('COMMIT');

      const stranger = new KeyRing([generateKeyEncryptionKey()]);
      await writer.query('BEGIN');
      const refusal = await sealingWithKeyRing(writer, stranger).catch((error: unknown) => error);
      await writer.query('ROLLBACK');
      expect(refusal).toBeInstanceOf(ConfigError);
      expect((refusal as Error).message).toContain(`the signing keys are encrypted with ${inUse}, which is not among the configured keys (${stranger.ids.join(', ')})`);
    } finally {
      await reencrypting.query('ROLLBACK').catch(() => undefined);
      reencrypting.release();
      writer.release();
    }
  });

  // Last: it moves every signing key of this file's database to another key-encryption key.
  it("a re-encryption names the keys no longer needed in sorted order, other tables' included", async () => {
    await activeSigningKey(pools[0]!, keyRing());
    const next = generateKeyEncryptionKey();
    const others = { name: 'other_secrets', keyIdsInUse: async () => ['kek_zzzzzzzzzzzzzzzz', next.id, 'kek_0000000000000000'], reencrypt: async () => 3 };
    const result = await reencryptSigningKeys(pools[0]!, keyRing(), next, [others]);
    expect(result.previous_encryption_key_ids).toEqual(['kek_0000000000000000', keyRing().current.id, 'kek_zzzzzzzzzzzzzzzz'].sort());
    expect(result.previous_encryption_key_ids[0]).toBe('kek_0000000000000000');
    expect(result).toMatchObject({ encryption_key_id: next.id, others: { other_secrets: 3 }, signing_keys: 7 });
  });
});
