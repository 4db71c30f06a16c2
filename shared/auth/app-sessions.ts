import { createHash, randomBytes } from 'node:crypto';
import type pg from 'pg';
import { newUlid } from '../ulid.js';

/**
 * The web application's sessions (docs/web-app.md, "Session cookie and CSRF"), in
 * `service.app_sessions`: operational state, not events. The cookie holds 32 random bytes; the
 * table holds their SHA-256, so a copy of the table opens no session. Each session has its own
 * CSRF token, which the page reads from `GET /app/api/me` and sends back in a header.
 *
 * Every session token belongs to one session (docs/web-app.md, "Session tokens"): it names the
 * session's public `id` and its `tokenGeneration`. Whatever ends a session, or moves its
 * generation on, is told to every api process on APP_SESSION_CHANGED_CHANNEL (the session id), in
 * the statement that does it, so their caches drop it at once.
 */

/** A session lasts this long after sign-in, whatever happens in between. */
export const APP_SESSION_SECONDS = 12 * 3600;

/** Channel on which a session that ended, or whose tokens ended, is named (its id). */
export const APP_SESSION_CHANGED_CHANNEL = 'app_session_changed';

export interface AppSession {
  /** Public id, named by the session's tokens (`sid`). */
  id: string;
  idSha256: string;
  userId: string;
  orgId: number | null;
  csrfToken: string;
  expiresAt: Date;
  /** Tokens minted at another generation are ended. */
  tokenGeneration: number;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const newSessionId = () => `ses_${newUlid().toLowerCase()}`;

/** Deletes the sessions the statement's `gone` CTE returns, telling every api process. */
const NOTIFY_GONE = `SELECT count(pg_notify('${APP_SESSION_CHANGED_CHANNEL}', id))::int AS ended FROM gone`;

/** A new session; the value is the cookie's. */
export async function openAppSession(
  pool: pg.Pool,
  user: { userId: string; email: string },
  orgId: number | null,
): Promise<{ value: string; session: AppSession }> {
  const value = randomBytes(32).toString('base64url');
  const csrfToken = randomBytes(32).toString('base64url');
  const id = newSessionId();
  const result = await pool.query<{ expires_at: Date }>(
    `WITH gone AS (DELETE FROM service.app_sessions WHERE user_id = $2 AND expires_at <= now())
     INSERT INTO service.app_sessions (id_sha256, user_id, org_id, csrf_token, expires_at, id, email, kind)
     VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5), $6, $7, 'cookie') RETURNING expires_at`,
    [sha256(value), user.userId, orgId, csrfToken, APP_SESSION_SECONDS, id, user.email],
  );
  return { value, session: { id, idSha256: sha256(value), userId: user.userId, orgId, csrfToken, expiresAt: result.rows[0]!.expires_at, tokenGeneration: 0 } };
}

/**
 * A session of its own for the tokens the CLI mints (`sessions mint`): no cookie opens it, and it
 * ends with its token. `userId` is null for an email that is no user.
 */
export async function openCliSession(pool: pg.Pool, input: { userId: string | null; email: string; orgId: number | null; expiresAt: Date }): Promise<string> {
  const id = newSessionId();
  await pool.query(
    `INSERT INTO service.app_sessions (id_sha256, user_id, org_id, csrf_token, expires_at, id, email, kind)
     VALUES ($1, $2, $3, '', $4, $5, $6, 'cli')`,
    [sha256(randomBytes(32).toString('base64url')), input.userId, input.orgId, input.expiresAt, id, input.email],
  );
  return id;
}

interface SessionRow {
  id: string;
  id_sha256: string;
  user_id: string;
  org_id: number | null;
  csrf_token: string;
  expires_at: Date;
  token_generation: number;
}

const fromRow = (row: SessionRow): AppSession => ({
  id: row.id,
  idSha256: row.id_sha256,
  userId: row.user_id,
  orgId: row.org_id,
  csrfToken: row.csrf_token,
  expiresAt: row.expires_at,
  tokenGeneration: row.token_generation,
});

/** The unexpired cookie session a cookie value names, or null. */
export async function findAppSession(pool: pg.Pool, value: string): Promise<AppSession | null> {
  if (!/^[A-Za-z0-9_-]{43}$/.test(value)) return null;
  const result = await pool.query<SessionRow>(
    `SELECT id, id_sha256, user_id, org_id, csrf_token, expires_at, token_generation FROM service.app_sessions
      WHERE id_sha256 = $1 AND expires_at > now() AND kind = 'cookie'`,
    [sha256(value)],
  );
  const row = result.rows[0];
  return row ? fromRow(row) : null;
}

/** Another organization for the session: its tokens, which name the one they were minted in, end too. */
export async function switchAppSessionOrg(pool: pg.Pool, idSha256: string, orgId: number): Promise<void> {
  await pool.query(
    `WITH gone AS (UPDATE service.app_sessions SET org_id = $2, token_generation = token_generation + 1 WHERE id_sha256 = $1 RETURNING id) ${NOTIFY_GONE}`,
    [idSha256, orgId],
  );
}

/** Sign-out: the session and its tokens end. */
export async function closeAppSession(pool: pg.Pool, idSha256: string): Promise<void> {
  await pool.query(`WITH gone AS (DELETE FROM service.app_sessions WHERE id_sha256 = $1 RETURNING id) ${NOTIFY_GONE}`, [idSha256]);
}

/**
 * A password change: every other session of the user ends, and this one's tokens (minted before
 * the change) end while the session goes on; the page fetches a new token by itself.
 */
export async function closeOtherAppSessions(pool: pg.Pool, userId: string, keep: string): Promise<void> {
  await pool.query(
    `WITH closed AS (DELETE FROM service.app_sessions WHERE user_id = $1 AND id_sha256 <> $2 RETURNING id),
          renewed AS (UPDATE service.app_sessions SET token_generation = token_generation + 1 WHERE id_sha256 = $2 RETURNING id),
          gone AS (SELECT id FROM closed UNION ALL SELECT id FROM renewed)
     ${NOTIFY_GONE}`,
    [userId, keep],
  );
}

/** Every session of an address ends (a lock); returns how many did. */
export async function closeAppSessionsOfEmail(pool: pg.Pool | pg.PoolClient, email: string): Promise<number> {
  const result = await pool.query<{ ended: number }>(`WITH gone AS (DELETE FROM service.app_sessions WHERE email = $1 RETURNING id) ${NOTIFY_GONE}`, [email]);
  // count() answers one row, whatever the CTE deleted.
  return result.rows[0]!.ended;
}

export async function recordSignIn(pool: pg.Pool, userId: string): Promise<void> {
  await pool.query(
    `INSERT INTO service.user_sign_ins (user_id, last_sign_in_at) VALUES ($1, now())
     ON CONFLICT (user_id) DO UPDATE SET last_sign_in_at = EXCLUDED.last_sign_in_at`,
    [userId],
  );
}
