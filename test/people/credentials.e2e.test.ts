import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { hashPassword } from '../../shared/auth/passwords.js';
import { createUser, setPasswordWithSetupLink } from '../../shared/domain/people/commands.js';
import { userStream } from '../../shared/domain/people/events.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { AppClient, tokenOf } from './app-client.js';
import { PEOPLE_SWEEP, sweepPeopleState } from '../../services/api/app/people-sweep.js';

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

describe('the sweep of what nothing else deletes', () => {
  it(
    'deletes expired sessions, idle sign-in counts without a lock in force, and credentials no PasswordSet names once an hour old; keeps the rest; one sweeper at a time',
    async () => {
      const { pool } = svc.service.ctx;
      const userId = await userWithPassword('sweep@example.com', FIRST);
      const [named] = await credentialsOf(userId);
      const hash = await hashPassword('an orphaned password');
      const aged = (interval: string) => `now() - interval '${interval}'`;
      // An orphan of the same user (a crash before its event), one of a user whose creation never
      // appended, one too young to judge; the named one is old too.
      await pool.query(
        `INSERT INTO service.user_credentials (credential_id, user_id, password_hash, created_at) VALUES
           ('cred_orphan', $1, $2, ${aged('2 hours')}), ('cred_nobody', 'usr_never_created', $2, ${aged('2 hours')}),
           ('cred_young', 'usr_being_created', $2, ${aged('5 minutes')})`,
        [userId, hash],
      );
      await pool.query(`UPDATE service.user_credentials SET created_at = ${aged('3 days')} WHERE credential_id = $1`, [named!.credential_id]);
      await pool.query(
        `INSERT INTO service.app_sessions (id_sha256, user_id, org_id, csrf_token, expires_at, id) VALUES
           ('expired', $1, NULL, 'c', ${aged('1 second')}, 'ses_expired'), ('unexpired', $1, NULL, 'c', now() + interval '1 hour', 'ses_unexpired')`,
        [userId],
      );
      await pool.query(
        `INSERT INTO service.sign_in_attempts (email, failures, next_attempt_at, locked_at) VALUES
           ('idle@example.com', 7, ${aged('25 hours')}, NULL),
           ('recent@example.com', 7, ${aged('23 hours')}, NULL),
           ('lock-over@example.com', 10, ${aged('3 days')}, ${aged('3 days')}),
           ('locked@example.com', 10, ${aged('25 hours')}, ${aged('10 minutes')})`,
      );

      // While another process sweeps, this one does not.
      const other = await pool.connect();
      await other.query("BEGIN; SELECT pg_advisory_xact_lock(hashtext('service.people_sweep'))");
      expect(await sweepPeopleState(svc.service.ctx)).toBeNull();
      await other.query('ROLLBACK');
      other.release();

      expect(await sweepPeopleState(svc.service.ctx)).toEqual({ sessions: 1, sign_in_attempts: 2, credentials: 2 });
      expect((await pool.query('SELECT credential_id FROM service.user_credentials ORDER BY 1')).rows.map((r) => r.credential_id)).toEqual(
        expect.arrayContaining([named!.credential_id, 'cred_young']),
      );
      expect((await pool.query("SELECT count(*)::int AS n FROM service.user_credentials WHERE credential_id IN ('cred_orphan', 'cred_nobody')")).rows[0].n).toBe(0);
      expect((await pool.query('SELECT id_sha256 FROM service.app_sessions WHERE user_id = $1', [userId])).rows.map((r) => r.id_sha256)).toEqual(['unexpired']);
      expect((await pool.query('SELECT email FROM service.sign_in_attempts ORDER BY email')).rows.map((r) => r.email)).toEqual(
        expect.arrayContaining(['locked@example.com', 'recent@example.com']),
      );
      expect((await pool.query("SELECT count(*)::int AS n FROM service.sign_in_attempts WHERE email IN ('idle@example.com', 'lock-over@example.com')")).rows[0].n).toBe(0);
      // The user still signs in with the named credential; a second run finds nothing.
      expect((await new AppClient(svc.apiUrl).signIn('sweep@example.com', FIRST)).status).toBe(200);
      expect(await sweepPeopleState(svc.service.ctx, { ...PEOPLE_SWEEP, batch: 1 })).toEqual({ sessions: 0, sign_in_attempts: 0, credentials: 0 });
    },
    SLOW,
  );
});
