import type pg from 'pg';
import { closeAppSessionsOfEmail } from './app-sessions.js';

/**
 * Failed sign-ins per email address (docs/web-app.md, "Sign-in and lockout"), in
 * `service.sign_in_attempts`. An attempt is counted before its password is checked, in one
 * statement that also refuses it while the address must wait or is locked, so parallel attempts
 * are counted one by one (the row lock orders them) and cannot outrun the count. Addresses nobody
 * has are counted the same way, so the answers say nothing about who has an account.
 */
export const SIGN_IN_LIMITS = {
  /** Consecutive failures answered at once. */
  freeFailures: 5,
  /** From then on, at most one attempt per this many seconds. */
  delaySeconds: 1,
  /** The attempt that brings the count to this, if it fails, locks the address. */
  lockAfterFailures: 10,
  /** A lock ends when an admin unlocks, or after this long. */
  lockSeconds: 3600,
} as const;

export type AttemptVerdict = { allowed: true } | { allowed: false; locked: true } | { allowed: false; locked: false; retryAfterSeconds: number };

export async function takeSignInAttempt(pool: pg.Pool, email: string): Promise<AttemptVerdict> {
  const { freeFailures, delaySeconds, lockAfterFailures, lockSeconds } = SIGN_IN_LIMITS;
  const taken = await pool.query(
    `INSERT INTO service.sign_in_attempts AS a (email, failures, next_attempt_at, locked_at)
     VALUES ($1, 1, now() + CASE WHEN 1 >= $2 THEN make_interval(secs => $3) ELSE interval '0' END, NULL)
     ON CONFLICT (email) DO UPDATE SET
       failures = CASE WHEN a.locked_at IS NULL THEN a.failures + 1 ELSE 1 END,
       next_attempt_at = now() + CASE WHEN (CASE WHEN a.locked_at IS NULL THEN a.failures + 1 ELSE 1 END) >= $2
                                      THEN make_interval(secs => $3) ELSE interval '0' END,
       locked_at = NULL
     WHERE (a.locked_at IS NULL OR a.locked_at <= now() - make_interval(secs => $5))
       AND (a.locked_at IS NOT NULL OR (a.next_attempt_at <= now() AND a.failures < $4))
     RETURNING failures`,
    [email, freeFailures, delaySeconds, lockAfterFailures, lockSeconds],
  );
  if (taken.rowCount === 1) return { allowed: true };
  // One row whatever happened in between (a success may have cleared the count): no row is not locked.
  const state = await pool.query<{ locked: boolean; wait: number }>(
    `SELECT coalesce(a.locked_at IS NOT NULL, false) AS locked,
            coalesce(greatest(1, ceil(extract(epoch FROM a.next_attempt_at - now())))::int, $2) AS wait
     FROM (SELECT 1) AS one LEFT JOIN service.sign_in_attempts a ON a.email = $1`,
    [email, delaySeconds],
  );
  const row = state.rows[0]!;
  if (row.locked) return { allowed: false, locked: true };
  return { allowed: false, locked: false, retryAfterSeconds: row.wait };
}

/**
 * The attempt failed: the count stays, and the address is locked once it reaches the threshold.
 * A lock also ends every session of the address, and so their tokens (docs/web-app.md, "Session
 * tokens"): whoever guessed may have had it already.
 */
export async function signInFailed(pool: pg.Pool, email: string): Promise<void> {
  const locked = await pool.query('UPDATE service.sign_in_attempts SET locked_at = now() WHERE email = $1 AND locked_at IS NULL AND failures >= $2', [
    email,
    SIGN_IN_LIMITS.lockAfterFailures,
  ]);
  if (locked.rowCount === 1) await closeAppSessionsOfEmail(pool, email);
}

/** The attempt succeeded (or an admin unlocks): the count starts again. */
export async function clearSignInAttempts(pool: pg.Pool, email: string): Promise<void> {
  await pool.query('DELETE FROM service.sign_in_attempts WHERE email = $1', [email]);
}

/** The SQL condition "this address is locked now", on a row of `service.sign_in_attempts` named `a`. */
export const LOCKED_NOW_SQL = `(a.locked_at IS NOT NULL AND a.locked_at > now() - make_interval(secs => ${SIGN_IN_LIMITS.lockSeconds}))`;

/** Whether the address is locked now; single sign-on refuses it too, without counting an attempt (docs/web-app.md, "Single sign-on"). */
export async function signInLocked(pool: pg.Pool, email: string): Promise<boolean> {
  const result = await pool.query(`SELECT 1 FROM service.sign_in_attempts a WHERE a.email = $1 AND ${LOCKED_NOW_SQL}`, [email]);
  return result.rowCount === 1;
}
