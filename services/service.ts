import type { FastifyInstance } from 'fastify';
import { ConfigError, type Config, type RoleName } from '../shared/config.js';
import type { ServiceContext } from '../shared/context.js';
import { applyAllMigrations } from '../shared/db/migrate.js';
import { createPool } from '../shared/db/pool.js';
import { buildCatalogue } from '../shared/domain/catalogue.js';
import type { EventStore } from '../shared/event-store/port.js';
import { PostgresEventStore } from '../shared/event-store/postgres.js';
import type { Logger } from '../shared/logger.js';
import { CheckpointWatcher } from '../shared/projection/checkpoints.js';
import { allProjections } from '../projections/index.js';
import { readModelQueries } from '../projections/reads.js';
import { apiRole } from './api/role.js';
import { ingestRole } from './ingest/role.js';
import { buildOpsServer } from './ops/server.js';
import { projectorRole } from './projector/role.js';
import { listenerUrl, type Role, type RoleFactory } from './role.js';

/** The roles `ROLES` can name, in the order a process starts them (and stops them in reverse). */
const ROLE_FACTORIES: ReadonlyArray<readonly [RoleName, RoleFactory]> = [
  ['projector', projectorRole],
  ['api', apiRole],
  ['ingest', ingestRole],
];

export interface RunningService {
  ctx: ServiceContext;
  /** Base URLs of the listeners this process opened. */
  urls: { api?: string; ingest?: string; ops?: string };
  stop(): Promise<void>;
}

/** Opens the shared resources every role and CLI command needs. */
export async function openContext(config: Config, databaseUrl: string, log: Logger): Promise<ServiceContext> {
  const pool = createPool(databaseUrl, { max: config.PG_POOL_SIZE, searchPath: 'read_model' });
  try {
    await applyAllMigrations(pool);
    let store: EventStore;
    if (config.EVENT_STORE === 'postgres') {
      store = new PostgresEventStore(pool, databaseUrl, { catalogue: buildCatalogue() });
    } else {
      throw new ConfigError('Invalid configuration: EVENT_STORE: the kurrentdb adapter is not available in this build; use postgres');
    }
    const checkpoints = new CheckpointWatcher(pool, databaseUrl, allProjections());
    await checkpoints.start();
    return { config, log, pool, databaseUrl, store, checkpoints, reads: readModelQueries(pool) };
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

/** Starts the roles in `config.ROLES` against `databaseUrl`, and the ops listener. */
export async function startService(config: Config, databaseUrl: string, log: Logger): Promise<RunningService> {
  const ctx = await openContext(config, databaseUrl, log);
  const roles: Role[] = ROLE_FACTORIES.filter(([name]) => config.ROLES.includes(name)).map(([, factory]) => factory(ctx));
  const started: Role[] = [];
  let ops: FastifyInstance | null = null;

  const stop = async () => {
    // Stop taking requests and let in-flight ones finish (api before the projector its commands
    // wait for), then close the connections.
    await ops?.close();
    for (const role of [...started].reverse()) await role.stop();
    await closeContext(ctx);
  };

  const urls: RunningService['urls'] = {};
  try {
    for (const role of roles) {
      await role.start();
      started.push(role);
      Object.assign(urls, role.urls());
    }
    ops = buildOpsServer(ctx, roles.flatMap((role) => (role.readiness ? [() => role.readiness!()] : [])));
    await ops.listen({ host: config.HOST, port: config.OPS_PORT });
    urls.ops = listenerUrl(ops, config.HOST);
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
  return { ctx, urls, stop };
}
