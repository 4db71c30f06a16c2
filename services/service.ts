import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { ConfigError, type Config } from '../shared/config.js';
import { applyAllMigrations } from '../shared/db/migrate.js';
import { createPool, type Pool } from '../shared/db/pool.js';
import { singleUrlTarget, type DatabaseTarget } from '../shared/db/connections.js';
import { loadKeyEncryption, type KeyEncryption } from '../shared/auth/key-encryption-source.js';
import { sealPlaintextSigningKeys } from '../shared/auth/signing-keys.js';
import { PostgresEventStore } from '../shared/event-store/postgres.js';
import type { EventStore } from '../shared/event-store/port.js';
import { buildCatalogue } from '../shared/domain/catalogue.js';
import type { Logger } from '../shared/logger.js';
import { allProjections } from '../projections/index.js';
import { readModelQueries } from '../projections/reads.js';
import { buildApiServer } from '../shared/http/server.js';
import { createAuthentication, type Authentication } from '../shared/auth/index.js';
import { registerOpenApi } from '../shared/http/openapi.js';
import { apiRoutes } from './api/routes.js';
import type { ServiceContext } from '../shared/context.js';
import { buildOpsServer } from './ops/server.js';
import { CheckpointWatcher } from '../shared/projection/checkpoints.js';
import { ProjectorRuntime } from './projector/runtime.js';

export interface RunningService {
  ctx: ServiceContext;
  /** Base URLs of the listeners this process opened. */
  urls: { api?: string; ops?: string };
  stop(): Promise<void>;
}

function urlOf(app: FastifyInstance, host: string): string {
  const address = app.server.address() as AddressInfo;
  const shownHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return `http://${shownHost.includes(':') ? `[${shownHost}]` : shownHost}:${address.port}`;
}

/**
 * Migrations (and the grants that follow them) and the sealing of signing keys stored before
 * encryption at rest, through the migration connection; then this process's key-encryption keys.
 */
async function prepareDatabase(config: Config, database: DatabaseTarget, pool: Pool, log: Logger): Promise<KeyEncryption> {
  const migrationPool = database.migrationUrl === database.url ? pool : createPool(database.migrationUrl, { max: 1, applicationName: 'tracking-migrations' });
  try {
    await applyAllMigrations(migrationPool);
    const keyEncryption = await loadKeyEncryption(config, { embedded: database.embedded, pool: migrationPool, log });
    if (keyEncryption.keys) await sealPlaintextSigningKeys(migrationPool, keyEncryption.keys, log);
    return keyEncryption;
  } finally {
    if (migrationPool !== pool) await migrationPool.end();
  }
}

/**
 * Opens the shared resources every role and CLI command needs. `database` is a connection URL
 * for everything, or the connections of `shared/db/connections.ts`.
 */
export async function openContext(config: Config, database: string | DatabaseTarget, log: Logger): Promise<ServiceContext> {
  const target = typeof database === 'string' ? singleUrlTarget(database) : database;
  const databaseUrl = target.url;
  // The logger censors the keys and the URLs' passwords (shared/logger.ts).
  log.debug({ config, database: target }, 'opening the service context');
  const pool = createPool(databaseUrl, { max: config.PG_POOL_SIZE, searchPath: 'read_model' });
  try {
    const keyEncryption = await prepareDatabase(config, target, pool, log);
    let store: EventStore;
    if (config.EVENT_STORE === 'postgres') {
      store = new PostgresEventStore(pool, databaseUrl, { catalogue: buildCatalogue() });
    } else {
      throw new ConfigError('Invalid configuration: EVENT_STORE: the kurrentdb adapter is not available in this build; use postgres');
    }
    const checkpoints = new CheckpointWatcher(pool, databaseUrl, allProjections());
    await checkpoints.start();
    return { config, log, pool, databaseUrl, database: target, keyEncryption, store, checkpoints, reads: readModelQueries(pool) };
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

/** Starts the roles in `config.ROLES` against `database` (see `openContext`). */
export async function startService(config: Config, database: string | DatabaseTarget, log: Logger): Promise<RunningService> {
  const ctx = await openContext(config, database, log);
  const urls: RunningService['urls'] = {};
  let projector: ProjectorRuntime | null = null;
  let api: FastifyInstance | null = null;
  let auth: Authentication | null = null;
  const ops = buildOpsServer(ctx);

  const stop = async () => {
    // Stop taking requests and let in-flight ones finish, then finish the projection batch in
    // flight, then close the connections.
    await api?.close();
    await ops.close();
    await auth?.stop();
    await projector?.stop();
    await closeContext(ctx);
  };

  try {
    if (config.ROLES.includes('projector')) {
      projector = new ProjectorRuntime({
        store: ctx.store,
        pool: ctx.pool,
        projections: allProjections(),
        log: log.child({ role: 'projector' }),
        onCheckpoint: (name, position) => ctx.checkpoints.advance(name, position),
      });
      projector.start();
    }
    if (config.ROLES.includes('api')) {
      auth = await createAuthentication(ctx);
      const routes = apiRoutes(ctx);
      api = buildApiServer(ctx, {
        authenticator: auth.authenticator,
        rateLimiter: auth.rateLimiter,
        routes,
        registerPublic: (app) => registerOpenApi(app, routes),
      });
      await api.listen({ host: config.HOST, port: config.PORT });
      urls.api = `${urlOf(api, config.HOST)}/api/v1`;
    }
    await ops.listen({ host: config.HOST, port: config.OPS_PORT });
    urls.ops = urlOf(ops, config.HOST);
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
  return { ctx, urls, stop };
}
