import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../shared/config.js';
import type { Logger } from '../shared/logger.js';
import { allProjections } from '../projections/index.js';
import { buildApiServer } from '../shared/http/server.js';
import { createAuthentication, type Authentication } from '../shared/auth/index.js';
import { registerOpenApi } from '../shared/http/openapi.js';
import { apiRoutes } from './api/routes.js';
import type { ServiceContext } from '../shared/context.js';
import { buildOpsServer } from './ops/server.js';
import { DatabaseWatch } from '../shared/db/reachability.js';
import { ProjectorRuntime } from './projector/runtime.js';
import { closeContext, openContext } from './context.js';

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

/** Starts the roles in `config.ROLES` against `databaseUrl`. */
export async function startService(config: Config, databaseUrl: string, log: Logger): Promise<RunningService> {
  const ctx = await openContext(config, databaseUrl, log);
  const urls: RunningService['urls'] = {};
  let projector: ProjectorRuntime | null = null;
  let api: FastifyInstance | null = null;
  let auth: Authentication | null = null;
  const database = new DatabaseWatch(databaseUrl, log.child({ role: 'ops' }), config.DB_OUTAGE_UNHEALTHY_SECONDS * 1000);
  database.start();
  const ops = buildOpsServer(ctx, database);

  const stop = async () => {
    // Stop taking requests and let in-flight ones finish, then finish the projection batch in
    // flight, then close the connections.
    await api?.close();
    await ops.close();
    await auth?.stop();
    await projector?.stop();
    await database.stop();
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
