import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { databaseRoleNames } from '../../shared/db/database-roles.js';

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

/** A fresh, migrated database for one test file (cloned from the run's template). */
export async function createTestDatabase(label = 'test'): Promise<TestDatabase> {
  const adminUrl = inject('postgresAdminUrl');
  const template = inject('templateDatabase');
  const name = `${label.replace(/[^a-z0-9_]/gi, '_').toLowerCase()}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)} TEMPLATE ${pg.escapeIdentifier(template)}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    async drop() {
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      try {
        // A pool's end() resolves before its sockets have closed: a forced drop at once would
        // send a FATAL to a connection still closing, an unhandled error in the test's process.
        // So the drop waits for those first (a moment), and forces only what stays connected.
        for (let attempt = 0; ; attempt++) {
          try {
            await client.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)}${attempt < 50 ? '' : ' WITH (FORCE)'}`);
            break;
          } catch (error) {
            // 55006: the database is still being accessed by other users.
            if ((error as { code?: string }).code !== '55006' || attempt >= 50) throw error;
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
        }
        // Database roles are cluster-wide: a test that set up the database's own leaves none behind.
        for (const dbRole of Object.values(databaseRoleNames(name))) await client.query(`DROP ROLE IF EXISTS ${pg.escapeIdentifier(dbRole)}`);
      } finally {
        await client.end();
      }
    },
  };
}
