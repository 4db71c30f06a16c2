import { type Config } from '../shared/config.js';
import { ConfigError } from '../shared/errors.js';
import { postgresCommandPorts, type ServiceContext } from '../shared/service-context.js';
import { loadKeyEncryption, type KeyEncryption } from '../shared/auth/key-encryption-source.js';
import { sealPlaintextSigningKeys } from '../shared/auth/signing-keys.js';
import { sealPlaintextWebhookSecrets } from './webhooks/secrets.js';
import { singleUrlTarget, type DatabaseTarget } from '../shared/db/connections.js';
import { applyAllMigrations } from '../shared/db/migrate.js';
import { createPool, type Pool } from '../shared/db/pool.js';
import { buildCatalogue } from '../shared/domain/catalogue.js';
import { EventStoreUnavailableError, type EventStore } from '../shared/event-store/port.js';
import { PostgresEventStore } from '../shared/event-store/postgres.js';
import { redactSecrets, redactUrl } from '../shared/redaction.js';
import type { Logger } from '../shared/logger.js';
import { CheckpointWatcher } from '../shared/projection/checkpoints.js';
import { segmentCount } from '../shared/projection/segments.js';
import { allProjections } from '../projections/index.js';
import { readModelQueries } from '../projections/read-model-queries.js';

// Opening the context loads no HTTP code (Fastify, routes, OpenAPI): the CLI opens it too.

/**
 * Connections a process's roles hold for as long as they run (docs/operations.md "Configuration",
 * `PG_POOL_SIZE`): a follower keeps its own connection while it holds a segment, and a projector
 * process may hold every segment of every projection (before another process joins, or after the
 * others stopped); the webhooks role follows the log with one subscriber.
 */
export function heldConnections(config: Pick<Config, 'ROLES' | 'PROJECTION_SEGMENTS'>): number {
  const projector = config.ROLES.includes('projector') ? allProjections().reduce((n, projection) => n + segmentCount(projection, config.PROJECTION_SEGMENTS), 0) : 0;
  return projector + (config.ROLES.includes('webhooks') ? 1 : 0);
}

/**
 * The process's pool on the current read model (unqualified names resolve there): PG_POOL_SIZE
 * for requests and work, and on top of them the connections its followers hold, so that a process
 * holding many segments never starves its own lease renewals, commands and requests.
 */
export function openPool(target: DatabaseTarget, config: Config): Pool {
  return createPool(target.url, { max: config.PG_POOL_SIZE + heldConnections(config), searchPath: 'read_model' });
}

/**
 * Migrations (and the grants that follow them; a current schema costs one statement) and the
 * sealing of signing keys and webhook secrets stored before encryption at rest, through the
 * migration connection;
 * then this process's key-encryption keys.
 */
export async function prepareDatabase(config: Config, database: DatabaseTarget, pool: Pool, log?: Logger): Promise<KeyEncryption> {
  const migrationPool = database.migrationUrl === database.url ? pool : createPool(database.migrationUrl, { max: 1, applicationName: 'tracking-migrations' });
  try {
    await applyAllMigrations(migrationPool);
    const keyEncryption = await loadKeyEncryption(config, { embedded: database.embedded, pool: migrationPool, log });
    if (keyEncryption.keys) {
      await sealPlaintextSigningKeys(migrationPool, keyEncryption.keys, log);
      await sealPlaintextWebhookSecrets(migrationPool, keyEncryption.keys, log);
    }
    return keyEncryption;
  } finally {
    if (migrationPool !== pool) await migrationPool.end();
  }
}

/** The event store, read-your-writes waiting, read-model queries, ids and the token signer, over a prepared pool. */
export async function openContextOn(
  pool: Pool,
  config: Config,
  target: DatabaseTarget,
  keyEncryption: KeyEncryption,
  log: Logger,
): Promise<ServiceContext> {
  const store = await openEventStore(config, pool, target);
  const checkpoints = new CheckpointWatcher(pool, target.url, allProjections());
  try {
    await checkpoints.start();
  } catch (error) {
    await store.close().catch(() => undefined);
    throw error;
  }
  return {
    config,
    log,
    pool,
    databaseUrl: target.url,
    database: target,
    keyEncryption,
    store,
    checkpoints,
    readModels: readModelQueries(pool),
    ...postgresCommandPorts(pool, keyEncryption, config),
  };
}

/**
 * The event log: in Postgres beside the read models, or in KurrentDB (read models, checkpoints
 * and service state stay in Postgres either way). A KurrentDB that cannot do what the port
 * promises, or a connection string the client refuses, is a configuration error naming
 * KURRENTDB_URL; one that cannot be reached stops the start too.
 */
async function openEventStore(config: Config, pool: Pool, target: DatabaseTarget): Promise<EventStore> {
  const catalogue = buildCatalogue();
  if (config.EVENT_STORE === 'postgres') return new PostgresEventStore(pool, target.url, { catalogue });
  // Loaded only here: the client (gRPC, a native module) costs a few hundred milliseconds to load.
  const [{ InvalidConnectionStringError, openKurrentDbEventStore }, { UnsupportedServerError }] = await Promise.all([
    import('../shared/event-store/kurrentdb.js'),
    import('../shared/event-store/kurrentdb-translation.js'),
  ]);
  const url = config.KURRENTDB_URL!;
  try {
    return await openKurrentDbEventStore(url, { catalogue });
  } catch (error) {
    if (error instanceof UnsupportedServerError) throw new ConfigError(`Invalid configuration: KURRENTDB_URL: ${redactUrl(url)}: ${error.message}`);
    if (error instanceof InvalidConnectionStringError) throw new ConfigError(`Invalid configuration: KURRENTDB_URL: ${error.message}`);
    if (error instanceof EventStoreUnavailableError) {
      const cause = error.cause instanceof Error ? `: ${redactSecrets(error.cause.message)}` : '';
      throw new EventStoreUnavailableError(`KurrentDB unreachable at KURRENTDB_URL (${redactUrl(url)})${cause}`, { cause: error.cause });
    }
    throw error;
  }
}

/**
 * Opens the shared resources every role and CLI command needs. `database` is a connection URL
 * for everything, or the connections of `shared/db/connections.ts`.
 */
export async function openContext(config: Config, database: string | DatabaseTarget, log: Logger): Promise<ServiceContext> {
  const target = typeof database === 'string' ? singleUrlTarget(database) : database;
  // The logger censors the keys and the URLs' passwords (shared/logger.ts).
  log.debug({ config, database: target }, 'opening the service context');
  const pool = openPool(target, config);
  try {
    const keyEncryption = await prepareDatabase(config, target, pool, log);
    return await openContextOn(pool, config, target, keyEncryption, log);
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
