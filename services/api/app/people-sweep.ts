import type pg from 'pg';
import type { Logger } from 'pino';
import { loadUser } from '../../../shared/domain/people/commands.js';
import type { CommandPort } from '../../../shared/domain/port.js';
import { SIGN_IN_LIMITS } from '../../../shared/auth/sign-in-attempts.js';

/**
 * The web application's operational rows that nothing else would ever delete (docs/web-app.md,
 * "What is kept, and for how long"):
 * - app sessions past their expiry (a user who never signs in again leaves theirs behind);
 * - failed-sign-in counts with no attempt for a day and no lock in force, for every address alike
 *   (one that has an account or not: the answers must not tell them apart);
 * - password credentials no `PasswordSet` names, left by a process that died between storing a
 *   new hash and appending the event that names it (or forgetting the replaced one): older than
 *   an hour, and confirmed against the user's stream before they go.
 * One api process at a time sweeps (a transaction-scoped advisory lock); each statement deletes at
 * most `batch` rows, so a backlog is worked off over several runs instead of in one long lock.
 */

export interface PeopleSweepLimits {
  everyMs: number;
  batch: number;
  idleAttemptsSeconds: number;
  credentialGraceSeconds: number;
}

export const PEOPLE_SWEEP: PeopleSweepLimits = {
  everyMs: 10 * 60 * 1000,
  batch: 5000,
  /** Failures are forgotten after this long without an attempt (when no lock is in force). */
  idleAttemptsSeconds: 24 * 3600,
  /** A credential younger than this may still be on its way to its event. */
  credentialGraceSeconds: 3600,
};

export interface SweepCounts {
  sessions: number;
  sign_in_attempts: number;
  credentials: number;
}

const LOCK = `SELECT pg_try_advisory_xact_lock(hashtext('service.people_sweep')) AS ok`;

export async function sweepPeopleState(ctx: Pick<CommandPort, 'store'> & { pool: pg.Pool }, limits: PeopleSweepLimits = PEOPLE_SWEEP): Promise<SweepCounts | null> {
  const client = await ctx.pool.connect();
  try {
    await client.query('BEGIN');
    if (!(await client.query<{ ok: boolean }>(LOCK)).rows[0]!.ok) {
      await client.query('ROLLBACK');
      return null;
    }
    const sessions = await client.query(
      `DELETE FROM service.app_sessions WHERE id_sha256 IN (SELECT id_sha256 FROM service.app_sessions WHERE expires_at <= now() LIMIT $1)`,
      [limits.batch],
    );
    const attempts = await client.query(
      `DELETE FROM service.sign_in_attempts WHERE email IN (
         SELECT email FROM service.sign_in_attempts
          WHERE next_attempt_at <= now() - make_interval(secs => $2)
            AND (locked_at IS NULL OR locked_at <= now() - make_interval(secs => $3))
          LIMIT $1)`,
      [limits.batch, limits.idleAttemptsSeconds, SIGN_IN_LIMITS.lockSeconds],
    );
    // Suspects: users with more than one credential, or whose one credential belongs to nobody
    // the read model knows; only what their stream says decides.
    const suspects = await client.query<{ user_id: string }>(
      `SELECT c.user_id FROM service.user_credentials c
        GROUP BY c.user_id
       HAVING bool_or(c.created_at <= now() - make_interval(secs => $2))
          AND (count(*) > 1 OR NOT EXISTS (SELECT FROM users u WHERE u.id = c.user_id))
        LIMIT $1`,
      [limits.batch, limits.credentialGraceSeconds],
    );
    let credentials = 0;
    for (const { user_id: userId } of suspects.rows) {
      const { state } = await loadUser(ctx, userId);
      const keep = state.status === 'created' && state.password?.kind === 'credential' ? state.password.credentialId : null;
      const gone = await client.query(
        `DELETE FROM service.user_credentials WHERE user_id = $1 AND credential_id IS DISTINCT FROM $2 AND created_at <= now() - make_interval(secs => $3)`,
        [userId, keep, limits.credentialGraceSeconds],
      );
      credentials += gone.rowCount ?? 0;
    }
    await client.query('COMMIT');
    return { sessions: sessions.rowCount ?? 0, sign_in_attempts: attempts.rowCount ?? 0, credentials };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/** Runs the sweep every `everyMs`, until stopped; a failed run is logged and the next one tries again. */
export function startPeopleSweep(ctx: Pick<CommandPort, 'store'> & { pool: pg.Pool }, log: Logger, limits: PeopleSweepLimits = PEOPLE_SWEEP): { stop(): Promise<void> } {
  let running: Promise<void> = Promise.resolve();
  const run = () => {
    running = sweepPeopleState(ctx, limits).then(
      (counts) => {
        if (counts && counts.sessions + counts.sign_in_attempts + counts.credentials > 0) log.info({ swept: counts }, 'expired sessions, idle sign-in counts and orphan credentials deleted');
      },
      (error: unknown) => log.warn({ err: error }, 'the sweep of expired sessions and orphan credentials failed; the next run tries again'),
    );
  };
  const timer = setInterval(run, limits.everyMs).unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
