import { afterAll, beforeAll, expect, it } from 'vitest';
import { postgresCredentials } from '../../shared/auth/credentials.js';
import { createPool, type Pool } from '../../shared/db/pool.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

// The command port's credentials over `service.user_credentials` (docs/design.md, "Secrets are
// not events"), called directly: what the in-memory credentials promise, in Postgres.

let db: TestDatabase;
let pool: Pool;

beforeAll(async () => {
  db = await createTestDatabase('auth_credentials');
  pool = createPool(db.url, { max: 2, searchPath: 'read_model' });
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

it('a credential is read only for its own user; forgetting keeps the one named, or none; other users are untouched', async () => {
  const credentials = postgresCredentials(pool);
  await credentials.store({ credentialId: 'cred_a1', userId: 'usr_a', passwordHash: 'scrypt$a1' });
  await credentials.store({ credentialId: 'cred_a2', userId: 'usr_a', passwordHash: 'scrypt$a2' });
  await credentials.store({ credentialId: 'cred_b1', userId: 'usr_b', passwordHash: 'scrypt$b1' });
  expect(await credentials.read('usr_a', 'cred_a1')).toBe('scrypt$a1');
  expect(await credentials.read('usr_b', 'cred_a1')).toBeNull();
  expect(await credentials.read('usr_a', 'cred_none')).toBeNull();

  await credentials.forgetAllBut('usr_a', 'cred_a2');
  expect(await credentials.read('usr_a', 'cred_a1')).toBeNull();
  expect(await credentials.read('usr_a', 'cred_a2')).toBe('scrypt$a2');
  expect(await credentials.read('usr_b', 'cred_b1')).toBe('scrypt$b1');

  await credentials.forgetAllBut('usr_a', null);
  const { rows } = await pool.query<{ credential_id: string }>('SELECT credential_id FROM service.user_credentials ORDER BY credential_id');
  expect(rows.map((r) => r.credential_id)).toEqual(['cred_b1']);
  // A credential id is stored once.
  await expect(credentials.store({ credentialId: 'cred_b1', userId: 'usr_a', passwordHash: 'scrypt$x' })).rejects.toThrow();
});
