import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { hashPassword } from '../../shared/auth/passwords.js';
import { createUser, setPasswordWithSetupLink } from '../../shared/domain/people/commands.js';
import { userStream } from '../../shared/domain/people/events.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { AppClient, tokenOf } from './app-client.js';

/**
 * Password hashes are not events (docs/design.md, "Secrets are not events"): over real HTTP
 * against a started service, the log names credentials, and a password change deletes the old
 * hash from `service.user_credentials`. A user whose password was set before `PasswordSet`
 * version 2 (the hash in the event) still signs in.
 */

const SLOW = 120_000;
const FIRST = 'the first password';
const SECOND = 'the second password';

let svc: TestService;
let orgId: number;

beforeAll(async () => {
  svc = await startTestService('people_credentials');
  orgId = (await createOrg(svc.service.ctx, 'Acme')).id;
}, SLOW);

afterAll(async () => {
  await svc?.stop();
});

async function userWithPassword(email: string, password: string): Promise<string> {
  const created = await createUser(svc.service.ctx, { email, orgId, role: 'admin', by: { kind: 'cli' }, publicUrl: new URL(svc.apiUrl).origin });
  await setPasswordWithSetupLink(svc.service.ctx, { token: tokenOf(created.setup_url), password });
  return created.id;
}

const credentialsOf = async (userId: string) =>
  (await svc.service.ctx.pool.query<{ credential_id: string; password_hash: string }>('SELECT credential_id, password_hash FROM service.user_credentials WHERE user_id = $1', [userId])).rows;

const eventsWithScrypt = async () =>
  (await svc.service.ctx.pool.query<{ stream_id: string; type: string }>("SELECT stream_id, type FROM event_store.events WHERE data::text LIKE '%scrypt%'")).rows;

describe('password credentials', () => {
  it(
    'after a password change the log holds no scrypt hash at all, the old hash row is gone, and only the new password signs in',
    async () => {
      const userId = await userWithPassword('ada@example.com', FIRST);
      const [first] = await credentialsOf(userId);
      expect(first!.password_hash).toMatch(/^scrypt\$/);

      const ada = new AppClient(svc.apiUrl);
      expect((await ada.signIn('ada@example.com', FIRST)).status).toBe(200);
      expect((await ada.request('POST', '/password', { current_password: FIRST, new_password: SECOND })).status).toBe(204);

      expect(await eventsWithScrypt()).toEqual([]);
      const credentials = await credentialsOf(userId);
      expect(credentials).toHaveLength(1);
      expect(credentials[0]!.credential_id).not.toBe(first!.credential_id);
      // The user's latest PasswordSet names the credential that is left.
      const passwordSets = (await svc.service.ctx.store.readStream(userStream(userId))).filter((e) => e.type === 'PasswordSet');
      expect(passwordSets.map((e) => [e.data, e.metadata.schema_version])).toEqual([
        [{ user_id: userId, credential_id: first!.credential_id, set_at: expect.any(String), via: { kind: 'setup', setup_id: expect.any(String) } }, 2],
        [{ user_id: userId, credential_id: credentials[0]!.credential_id, set_at: expect.any(String), via: { kind: 'change' } }, 2],
      ]);

      expect((await new AppClient(svc.apiUrl).signIn('ada@example.com', FIRST)).status).toBe(401);
      expect((await new AppClient(svc.apiUrl).signIn('ada@example.com', SECOND)).status).toBe(200);
    },
    SLOW,
  );

  it(
    'a password set before PasswordSet version 2 (its hash in the event) still signs in; changing it moves it to a credential',
    async () => {
      const created = await createUser(svc.service.ctx, { email: 'grace@example.com', orgId, role: 'admin', by: { kind: 'cli' }, publicUrl: new URL(svc.apiUrl).origin });
      // As a service before this change appended it: a store without today's catalogue.
      const before = new PostgresEventStore(svc.service.ctx.pool, svc.db.url);
      try {
        const data = { user_id: created.id, password_hash: await hashPassword(FIRST), set_at: new Date().toISOString(), via: { kind: 'change' } };
        await before.appendToStream(userStream(created.id), [{ type: 'PasswordSet', data, metadata: { schema_version: 1 } }], 'stream_exists');
      } finally {
        await before.close();
      }
      expect(await credentialsOf(created.id)).toEqual([]);

      const grace = new AppClient(svc.apiUrl);
      const signedIn = await grace.signIn('grace@example.com', FIRST);
      expect(signedIn.status).toBe(200);
      // The people projection applies version 1 too.
      const passwordSetAt = async () => (await svc.service.ctx.pool.query('SELECT password_set_at FROM read_model.users WHERE id = $1', [created.id])).rows[0]?.password_set_at;
      await expect.poll(passwordSetAt, { timeout: 10_000 }).toBeInstanceOf(Date);

      expect((await grace.request('POST', '/password', { current_password: FIRST, new_password: SECOND })).status).toBe(204);
      expect(await credentialsOf(created.id)).toHaveLength(1);
      expect((await new AppClient(svc.apiUrl).signIn('grace@example.com', FIRST)).status).toBe(401);
      expect((await new AppClient(svc.apiUrl).signIn('grace@example.com', SECOND)).status).toBe(200);
    },
    SLOW,
  );
});
