import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../shared/db/embedded.js';
import { applyAllMigrations } from '../../shared/db/migrate.js';
import { createPool } from '../../shared/db/pool.js';

export const TEMPLATE_DATABASE = 'tracking_template';

declare module 'vitest' {
  export interface ProvidedContext {
    postgresAdminUrl: string;
    templateDatabase: string;
  }
}

/**
 * One Postgres for the whole run (embedded, in a temporary folder, or TEST_DATABASE_URL's server),
 * and one migrated template database that every test file clones into its own database.
 */
export default async function setup(project: TestProject) {
  let server: EmbeddedPostgres | null = null;
  let dataDir: string | null = null;
  let adminUrl = process.env.TEST_DATABASE_URL;
  if (!adminUrl) {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tracking-test-'));
    server = await startEmbeddedPostgres({ dataDir, database: 'postgres', unsafeFast: true });
    adminUrl = server.url;
  }
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${TEMPLATE_DATABASE}`);
  await admin.query(`CREATE DATABASE ${TEMPLATE_DATABASE}`);
  await admin.end();

  const templateUrl = new URL(adminUrl);
  templateUrl.pathname = `/${TEMPLATE_DATABASE}`;
  const pool = createPool(templateUrl.toString(), { max: 2 });
  await applyAllMigrations(pool);
  await pool.end();

  project.provide('postgresAdminUrl', adminUrl);
  project.provide('templateDatabase', TEMPLATE_DATABASE);

  return async () => {
    await server?.stop();
    if (dataDir) await fs.rm(dataDir, { recursive: true, force: true });
  };
}
