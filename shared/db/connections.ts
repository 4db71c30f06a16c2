import type { EmbeddedPostgres } from './embedded.js';
import { setUpEmbeddedDatabaseRoles } from './database-roles.js';

/**
 * Which connection does what. The service itself connects with `url`; migrations, grants and
 * the re-encryption of signing keys with `migrationUrl`; analysts are handed `analystUrl`.
 *
 * - Embedded default: the superuser creates the three database roles of `database-roles.ts`,
 *   then the service runs as the runtime role and migrates as the migrator; the superuser's URL
 *   goes no further.
 * - `DATABASE_URL` alone: everything as that user, as before these database roles existed.
 * - `DATABASE_URL` with `MIGRATION_DATABASE_URL` (and `ANALYST_DATABASE_URL`): the database roles
 *   created by hand (docs/operations.md, "Database roles").
 */
export interface DatabaseTarget {
  url: string;
  migrationUrl: string;
  /** Null when no analyst connection is configured. */
  analystUrl: string | null;
  /** The embedded default: its secrets (database role passwords, key-encryption key) live in DATA_DIR. */
  embedded: boolean;
}

/** One URL for everything (DATABASE_URL alone, or a test's database). */
export function singleUrlTarget(url: string): DatabaseTarget {
  return { url, migrationUrl: url, analystUrl: null, embedded: false };
}

/** The variables of config.ts that name the connections. */
export interface DatabaseSettings {
  DATA_DIR: string;
  DATABASE_URL?: string;
  MIGRATION_DATABASE_URL?: string;
  ANALYST_DATABASE_URL?: string;
}

/** The connections of this process: `embedded` is the server started for the embedded default, if any. */
export async function databaseTarget(config: DatabaseSettings, embedded: EmbeddedPostgres | null): Promise<DatabaseTarget> {
  if (embedded) {
    const databaseRoles = await setUpEmbeddedDatabaseRoles(embedded.url, config.DATA_DIR);
    return { url: databaseRoles.runtime, migrationUrl: databaseRoles.migration, analystUrl: databaseRoles.analyst, embedded: true };
  }
  if (!config.DATABASE_URL) throw new Error('DATABASE_URL is unset and no embedded server was started');
  return {
    url: config.DATABASE_URL,
    migrationUrl: config.MIGRATION_DATABASE_URL ?? config.DATABASE_URL,
    analystUrl: config.ANALYST_DATABASE_URL ?? null,
    embedded: false,
  };
}

/**
 * The connection to hand an analyst (`projections replay` prints it): the read-only analyst
 * role's, never the service's or the superuser's. Null when none is configured (DATABASE_URL
 * without ANALYST_DATABASE_URL): print that, not another URL.
 */
export function analystDatabaseUrl(ctx: { database: DatabaseTarget }): string | null {
  return ctx.database.analystUrl;
}
