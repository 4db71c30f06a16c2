import { createHash, randomBytes } from 'node:crypto';
import type pg from 'pg';

/**
 * The web application's sessions (docs/web-app.md, "Session cookie and CSRF"), in
 * `service.app_sessions`: operational state, not events. The cookie holds 32 random bytes; the
 * table holds their SHA-256, so a copy of the table opens no session. Each session has its own
 * CSRF token, which the page reads from `GET /app/api/me` and sends back in a header.
 */

/** A session lasts this long after sign-in, whatever happens in between. */
export const APP_SESSION_SECONDS = 12 * 3600;

export interface AppSession {
  idSha256: string;
  userId: string;
  orgId: number | null;
  csrfToken: string;
  expiresAt: Date;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** A new session; the value is the cookie's. */
export async function openAppSession(pool: pg.Pool, userId: string, orgId: number | null): Promise<{ value: string; session: AppSession }> {
  const value = randomBytes(32).toString('base64url');
  const csrfToken = randomBytes(32).toString('base64url');
  const result = await pool.query<{ expires_at: Date }>(
    `WITH gone AS (DELETE FROM service.app_sessions WHERE user_id = $2 AND expires_at <= now())
     INSERT INTO service.app_sessions (id_sha256, user_id, org_id, csrf_token, expires_at)
     VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5)) RETURNING expires_at`,
    [sha256(value), userId, orgId, csrfToken, APP_SESSION_SECONDS],
  );
  return { value, session: { idSha256: sha256(value), userId, orgId, csrfToken, expiresAt: result.rows[0]!.expires_at } };
}

/** The live session a cookie value names, or null. */
export async function findAppSession(pool: pg.Pool, value: string): Promise<AppSession | null> {
  if (!/^[A-Za-z0-9_-]{43}$/.test(value)) return null;
  const result = await pool.query<{ id_sha256: string; user_id: string; org_id: number | null; csrf_token: string; expires_at: Date }>(
    'SELECT id_sha256, user_id, org_id, csrf_token, expires_at FROM service.app_sessions WHERE id_sha256 = $1 AND expires_at > now()',
    [sha256(value)],
  );
  const row = result.rows[0];
  return row ? { idSha256: row.id_sha256, userId: row.user_id, orgId: row.org_id, csrfToken: row.csrf_token, expiresAt: row.expires_at } : null;
}

export async function switchAppSessionOrg(pool: pg.Pool, idSha256: string, orgId: number): Promise<void> {
  await pool.query('UPDATE service.app_sessions SET org_id = $2 WHERE id_sha256 = $1', [idSha256, orgId]);
}

export async function closeAppSession(pool: pg.Pool, idSha256: string): Promise<void> {
  await pool.query('DELETE FROM service.app_sessions WHERE id_sha256 = $1', [idSha256]);
}

/** Every other session of the user ends (a password change). */
export async function closeOtherAppSessions(pool: pg.Pool, userId: string, keep: string): Promise<void> {
  await pool.query('DELETE FROM service.app_sessions WHERE user_id = $1 AND id_sha256 <> $2', [userId, keep]);
}

export async function recordSignIn(pool: pg.Pool, userId: string): Promise<void> {
  await pool.query(
    `INSERT INTO service.user_sign_ins (user_id, last_sign_in_at) VALUES ($1, now())
     ON CONFLICT (user_id) DO UPDATE SET last_sign_in_at = EXCLUDED.last_sign_in_at`,
    [userId],
  );
}
