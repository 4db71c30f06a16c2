import { ConfigError, type Config } from '../shared/config.js';
import type { ServiceContext } from '../shared/context.js';
import { openDatabase } from '../shared/db/database.js';
import type { Pool } from '../shared/db/pool.js';
import { buildCatalogue } from '../shared/domain/catalogue.js';
import type { EventStore } from '../shared/event-store/port.js';
import { PostgresEventStore } from '../shared/event-store/postgres.js';
import type { Logger } from '../shared/logger.js';
import { CheckpointWatcher } from '../shared/projection/checkpoints.js';
import { allProjections } from '../projections/index.js';
import { readModelQueries } from '../projections/reads.js';

// Opening the context loads no HTTP code (Fastify, routes, OpenAPI): the CLI opens it too.

/** The event store, read-your-writes waiting and read-model queries, over an open database pool. */
export async function openContextOn(pool: Pool, config: Config, databaseUrl: string, log: Logger): Promise<ServiceContext> {
  let store: EventStore;
  if (config.EVENT_STORE === 'postgres') {
    store = new PostgresEventStore(pool, databaseUrl, { catalogue: buildCatalogue() });
  } else {
    throw new ConfigError('Invalid configuration: EVENT_STORE: the kurrentdb adapter is not available in this build; use postgres');
  }
  const checkpoints = new CheckpointWatcher(pool, databaseUrl, allProjections());
  await checkpoints.start();
  return { config, log, pool, databaseUrl, store, checkpoints, reads: readModelQueries(pool) };
}

/** Opens the shared resources every role and CLI command needs. */
export async function openContext(config: Config, databaseUrl: string, log: Logger): Promise<ServiceContext> {
  const pool = await openDatabase(databaseUrl, { max: config.PG_POOL_SIZE });
  try {
    return await openContextOn(pool, config, databaseUrl, log);
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw error;
  }
}

export async function closeContext(ctx: ServiceContext): Promise<void> {
  await ctx.checkpoints.stop();
  await ctx.store.close();
  await ctx.pool.end();
}
