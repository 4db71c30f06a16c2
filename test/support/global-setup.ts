import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres, stopEmbeddedPostgresAt, type EmbeddedPostgres } from '../../shared/db/embedded.js';
import { applyAllMigrations } from '../../shared/db/migrate.js';
import { createPool } from '../../shared/db/pool.js';
import { startMockKafka } from './mock-kafka.js';

export const TEMPLATE_DATABASE = 'tracking_template';

declare module 'vitest' {
  export interface ProvidedContext {
    postgresAdminUrl: string;
    templateDatabase: string;
    /** Bootstrap address of the run's Kafka-protocol broker (librdkafka's mock cluster, through kcat). */
    kafkaBrokers: string;
  }
}

const RUN_DIR_PREFIX = 'tracking-test-';
const OWNER_FILE = 'owner.pid';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * A run that was killed (a CI timeout, Ctrl-C twice) never reaches its teardown and leaves its
 * Postgres running. Stop and remove those of dead runs; a concurrent live run's server is left
 * alone (its owner pid is alive).
 */
async function removeAbandonedRuns(): Promise<void> {
  const tmp = os.tmpdir();
  for (const name of await fs.readdir(tmp).catch(() => [] as string[])) {
    if (!name.startsWith(RUN_DIR_PREFIX)) continue;
    const dir = path.join(tmp, name);
    const owner = Number(await fs.readFile(path.join(dir, OWNER_FILE), 'utf8').catch(() => '0'));
    if (owner > 0 && alive(owner)) continue;
    if (owner === 0) {
      // No owner file yet: a run may be starting right now; only collect it when clearly stale.
      const stat = await fs.stat(dir).catch(() => null);
      if (!stat || Date.now() - stat.mtimeMs < 10 * 60_000) continue;
    }
    await stopEmbeddedPostgresAt(dir).catch(() => undefined);
    await fs.rm(dir, { recursive: true, force: true }).catch(() => undefined);
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
    await removeAbandonedRuns();
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), RUN_DIR_PREFIX));
    await fs.writeFile(path.join(dataDir, OWNER_FILE), String(process.pid));
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
  const kafka = await startMockKafka();
  project.provide('kafkaBrokers', kafka.brokers);

  return async () => {
    await kafka.stop();
    await server?.stop();
    if (dataDir) await fs.rm(dataDir, { recursive: true, force: true });
  };
}
