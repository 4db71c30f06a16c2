import type pg from 'pg';
import { prepared } from '../db/prepared.js';

/**
 * The credentials of the command port (`shared/domain/port.ts`, `Credentials`) in
 * `service.user_credentials`: password hashes out of the event log, so that an old one can be
 * deleted (docs/design.md, "Secrets are not events"). Declared here by shape only (the domain is
 * above `auth/`); the service context hands it to the commands as their `credentials`.
 */
export function postgresCredentials(pool: pg.Pool) {
  return {
    async store(credential: { credentialId: string; userId: string; passwordHash: string }): Promise<void> {
      await pool.query(
        prepared('INSERT INTO service.user_credentials (credential_id, user_id, password_hash) VALUES ($1, $2, $3)', [
          credential.credentialId,
          credential.userId,
          credential.passwordHash,
        ]),
      );
    },

    async read(userId: string, credentialId: string): Promise<string | null> {
      const result = await pool.query<{ password_hash: string }>(
        prepared('SELECT password_hash FROM service.user_credentials WHERE credential_id = $1 AND user_id = $2', [credentialId, userId]),
      );
      return result.rows[0]?.password_hash ?? null;
    },

    async forgetAllBut(userId: string, keep: string | null): Promise<void> {
      await pool.query(prepared('DELETE FROM service.user_credentials WHERE user_id = $1 AND credential_id IS DISTINCT FROM $2', [userId, keep]));
    },
  };
}
