import { applyAllMigrations } from './migrate.js';
import { createPool, type Pool } from './pool.js';

/**
 * The Postgres pool of a process (unqualified names resolve to the current read model), on a schema
 * brought up to date first. The service and every CLI command open the database through here.
 */
export async function openDatabase(databaseUrl: string, options: { max: number }): Promise<Pool> {
  const pool = createPool(databaseUrl, { max: options.max, searchPath: 'read_model' });
  try {
    await applyAllMigrations(pool);
    return pool;
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw error;
  }
}
