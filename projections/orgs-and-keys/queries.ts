import type pg from 'pg';
import type { ApiKeyState } from '../../shared/auth/api-key-states.js';
import type { Actor } from '../../shared/domain/actor.js';

/** Read side of organizations and API keys (read model, plus the operational last-used time). */

export interface OrgView {
  id: number;
  name: string;
  created_at: string;
}

export interface ApiKeyView {
  id: string;
  name: string;
  prefix: string;
  scopes: string[];
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
  revoked_at: string | null;
  /** Who minted and who revoked it: `{"kind":"user","user_id","email"}` or `{"kind":"cli"}`; null when not recorded. */
  minted_by: Actor | null;
  revoked_by: Actor | null;
}

/** The fields of `keys list --json` (docs/cli.md, "keys list": exactly these). */
export const KEY_LIST_FIELDS = ['id', 'name', 'prefix', 'scopes', 'created_at', 'last_used_at', 'expires_at', 'revoked_at'] as const;

const iso = (value: Date | null) => (value === null ? null : value.toISOString());

export async function findOrg(db: pg.Pool | pg.ClientBase, orgId: number): Promise<OrgView | null> {
  const result = await db.query<{ id: number; name: string; created_at: Date }>(
    'SELECT id, name, created_at FROM orgs WHERE id = $1',
    [orgId],
  );
  const row = result.rows[0];
  return row ? { id: row.id, name: row.name, created_at: row.created_at.toISOString() } : null;
}

export async function listOrgs(db: pg.Pool): Promise<OrgView[]> {
  const result = await db.query<{ id: number; name: string; created_at: Date }>('SELECT id, name, created_at FROM orgs ORDER BY id');
  return result.rows.map((row) => ({ id: row.id, name: row.name, created_at: row.created_at.toISOString() }));
}

export async function listApiKeys(db: pg.Pool, orgId: number): Promise<ApiKeyView[]> {
  const result = await db.query<{
    id: string;
    name: string;
    prefix: string;
    scopes: string[];
    created_at: Date;
    last_used_at: Date | null;
    expires_at: Date | null;
    revoked_at: Date | null;
    minted_by: Actor | null;
    revoked_by: Actor | null;
  }>(
    `SELECT k.id, k.name, k.prefix, k.scopes, k.created_at, u.last_used_at, k.expires_at, k.revoked_at, k.minted_by, k.revoked_by
     FROM api_keys k LEFT JOIN service.api_key_usage u ON u.key_id = k.id
     WHERE k.org_id = $1 ORDER BY k.created_at, k.id`,
    [orgId],
  );
  return result.rows.map((row) => ({
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    scopes: row.scopes,
    created_at: row.created_at.toISOString(),
    last_used_at: iso(row.last_used_at),
    expires_at: iso(row.expires_at),
    revoked_at: iso(row.revoked_at),
    minted_by: row.minted_by,
    revoked_by: row.revoked_by,
  }));
}

export async function findApiKeyStates(db: pg.Pool, keyIds: readonly string[]): Promise<Map<string, ApiKeyState>> {
  const result = await db.query<{ id: string; org_id: number; name: string; scopes: string[]; expires_at: Date | null; revoked_at: Date | null }>(
    'SELECT id, org_id, name, scopes, expires_at, revoked_at FROM api_keys WHERE id = ANY($1::text[])',
    [keyIds],
  );
  return new Map(
    result.rows.map((row) => [row.id, { id: row.id, orgId: row.org_id, name: row.name, scopes: row.scopes, expiresAt: row.expires_at, revokedAt: row.revoked_at }]),
  );
}
