import type pg from 'pg';
import { LOCKED_NOW_SQL } from '../../shared/auth/sign-in-attempts.js';
import type { MemberRole } from '../../shared/domain/people/events.js';
import type { SessionTokenState } from '../../shared/auth/session-token-states.js';
import { prepared } from '../../shared/db/prepared.js';

/** Read side of people: members of an organization, a user's memberships (read model, plus sign-in state). */

export interface MemberView {
  id: string;
  email: string;
  role: MemberRole;
  created_at: string;
  last_sign_in_at: string | null;
  locked: boolean;
  /** `invited` until the person has chosen a password (through a setup link or an invitation), then `active`. */
  status: 'invited' | 'active';
}

export interface MembershipView {
  org_id: number;
  org_name: string;
  role: MemberRole;
}

/** `users list --org` and the members endpoint: the organization's members, oldest membership first. */
export async function listMembers(db: pg.Pool, orgId: number): Promise<MemberView[]> {
  const result = await db.query<{ id: string; email: string; role: MemberRole; created_at: Date; last_sign_in_at: Date | null; locked: boolean; password_set: boolean }>(
    `SELECT u.id, u.email, m.role, m.created_at, s.last_sign_in_at, coalesce(${LOCKED_NOW_SQL}, false) AS locked, u.password_set_at IS NOT NULL AS password_set
     FROM memberships m
     JOIN users u ON u.id = m.user_id
     LEFT JOIN service.user_sign_ins s ON s.user_id = u.id
     LEFT JOIN service.sign_in_attempts a ON a.email = u.email
     WHERE m.org_id = $1 ORDER BY m.created_at, m.user_id`,
    [orgId],
  );
  return result.rows.map((row) => ({
    id: row.id,
    email: row.email,
    role: row.role,
    created_at: row.created_at.toISOString(),
    last_sign_in_at: row.last_sign_in_at?.toISOString() ?? null,
    locked: row.locked,
    status: row.password_set ? 'active' : 'invited',
  }));
}

export interface PendingInvitationView {
  id: string;
  email: string;
  role: MemberRole;
  issued_at: string;
  expires_at: string;
  /** Who issued it: a user's email, or `cli`. */
  issued_by: string;
  expired: boolean;
}

/**
 * The organization's invitations neither accepted nor cancelled, newest first; an expired one is
 * listed (marked) until it is cancelled, so an admin sees whose link ran out.
 */
export async function listPendingInvitations(db: pg.Pool, orgId: number): Promise<PendingInvitationView[]> {
  const result = await db.query<{ id: string; email: string; role: MemberRole; issued_at: Date; expires_at: Date; issued_by: { kind: string; email?: string }; expired: boolean }>(
    `SELECT id, email, role, issued_at, expires_at, issued_by, expires_at <= now() AS expired
       FROM invitations WHERE org_id = $1 AND accepted_at IS NULL AND cancelled_at IS NULL
      ORDER BY issued_at DESC, id DESC`,
    [orgId],
  );
  return result.rows.map((row) => ({
    id: row.id,
    email: row.email,
    role: row.role,
    issued_at: row.issued_at.toISOString(),
    expires_at: row.expires_at.toISOString(),
    issued_by: row.issued_by.kind === 'user' ? row.issued_by.email! : 'cli',
    expired: row.expired,
  }));
}

/**
 * The invitations of an address (lower-cased) neither accepted nor cancelled, in every
 * organization, newest first: those single sign-on may accept (it decides each again from its
 * stream, which also drops the expired ones).
 */
export async function pendingInvitationIdsOf(db: pg.Pool, email: string): Promise<string[]> {
  const result = await db.query<{ id: string }>(
    `SELECT id FROM invitations WHERE email = $1 AND accepted_at IS NULL AND cancelled_at IS NULL ORDER BY issued_at DESC, id DESC`,
    [email],
  );
  return result.rows.map((row) => row.id);
}

export async function findMember(db: pg.Pool, orgId: number, userId: string): Promise<MemberView | null> {
  return (await listMembers(db, orgId)).find((m) => m.id === userId) ?? null;
}

/** The organizations a user belongs to, by id. */
export async function membershipsOf(db: pg.Pool, userId: string): Promise<MembershipView[]> {
  const result = await db.query<MembershipView>(
    `SELECT m.org_id, o.name AS org_name, m.role FROM memberships m JOIN orgs o ON o.id = m.org_id WHERE m.user_id = $1 ORDER BY m.org_id`,
    [userId],
  );
  return result.rows;
}

export async function findUser(db: pg.Pool, userId: string): Promise<{ id: string; email: string } | null> {
  const result = await db.query<{ id: string; email: string }>('SELECT id, email FROM users WHERE id = $1', [userId]);
  return result.rows[0] ?? null;
}

/**
 * Of these app sessions (by the SHA-256 of their cookie), those still open whose user still
 * belongs to their current organization, with it: what a live stream opened by one needs to go on
 * (one statement for all the streams of a process).
 */
export async function sessionsStillInTheirOrg(db: pg.Pool, idsSha256: readonly string[]): Promise<Array<{ id_sha256: string; org_id: number }>> {
  const result = await db.query<{ id_sha256: string; org_id: number }>(
    `SELECT s.id_sha256, s.org_id FROM service.app_sessions s JOIN memberships m ON m.user_id = s.user_id AND m.org_id = s.org_id
      WHERE s.id_sha256 = ANY($1::text[]) AND s.expires_at > now()`,
    [idsSha256],
  );
  return result.rows;
}

/**
 * A session token's session and the membership it names (docs/web-app.md, "Session tokens"): one
 * statement, run once a second at most per token's session and organization on each api process.
 */
export async function findSessionTokenState(db: pg.Pool, sessionId: string, orgId: number | null): Promise<SessionTokenState | null> {
  const result = await db.query<{ kind: 'cookie' | 'cli'; user_id: string | null; email: string | null; expires_at: Date; token_generation: number; role: MemberRole | null; revision: string | null }>(
    prepared(
      `SELECT s.kind, s.user_id, s.email, s.expires_at, s.token_generation, m.role, m.revision::text AS revision
         FROM service.app_sessions s LEFT JOIN memberships m ON m.user_id = s.user_id AND m.org_id = $2
        WHERE s.id = $1`,
      [sessionId, orgId],
    ),
  );
  const row = result.rows[0];
  if (!row) return null;
  return {
    kind: row.kind,
    userId: row.user_id,
    email: row.email,
    expiresAt: row.expires_at,
    tokenGeneration: row.token_generation,
    membership: row.role !== null && row.revision !== null ? { role: row.role, revision: row.revision } : null,
  };
}
