import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { databaseRoleNames } from '../../shared/db/roles.js';

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
        await client.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
        // Roles are cluster-wide: a test that set up the database's own roles leaves none behind.
        for (const role of Object.values(databaseRoleNames(name))) await client.query(`DROP ROLE IF EXISTS ${pg.escapeIdentifier(role)}`);
      } finally {
        await client.end();
      }
    },
  };
}
