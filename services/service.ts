import type { FastifyInstance } from 'fastify';
import type { Config, RoleName } from '../shared/config.js';
import type { ServiceContext } from '../shared/service-context.js';
import type { DatabaseTarget } from '../shared/db/connections.js';
import { DatabaseWatch } from '../shared/db/reachability.js';
import { observeAppends } from '../shared/event-store/observed.js';
import type { Logger } from '../shared/logger.js';
import { apiRole } from './api/role.js';
import { closeContext, openContext } from './open-context.js';
import { ingestRole } from './ingest/role.js';
import { appendObserver } from './ops/metrics.js';
import { buildOpsServer } from './ops/server.js';
import { projectorRole } from './projector/role.js';
import { listenerUrl, type Role, type RoleFactory } from './role.js';
import { webhooksRole } from './webhooks/role.js';

export { closeContext, openContext } from './open-context.js';

/** The roles `ROLES` can name, in the order a process starts them (and stops them in reverse). */
const ROLE_FACTORIES: ReadonlyArray<readonly [RoleName, RoleFactory]> = [
  ['projector', projectorRole],
  ['api', apiRole],
  ['ingest', ingestRole],
  ['webhooks', webhooksRole],
];

export interface RunningService {
  ctx: ServiceContext;
  /** Base URLs of the listeners this process opened. */
  urls: { console?: string; api?: string; docs?: string; ingest?: string; ops?: string };
  stop(): Promise<void>;
}

/** Starts the roles in `config.ROLES` against `database` (see `openContext`), and the ops listener. */
export async function startService(config: Config, database: string | DatabaseTarget, log: Logger): Promise<RunningService> {
  const opened = await openContext(config, database, log);
  // Every append of this process is timed for /metrics (the CLI's context is left as it is).
  const ctx: ServiceContext = { ...opened, store: observeAppends(opened.store, appendObserver) };
  const roles: Role[] = ROLE_FACTORIES.filter(([name]) => config.ROLES.includes(name)).map(([, factory]) => factory(ctx));
  const started: Role[] = [];
  let ops: FastifyInstance | null = null;
  // Whether the database is still there (a supervisor restarts a process whose /healthz fails).
  const watch = new DatabaseWatch(ctx.databaseUrl, log.child({ role: 'ops' }), config.DB_OUTAGE_UNHEALTHY_SECONDS * 1000);
  watch.start();

  const stop = async () => {
    // Stop taking requests and let in-flight ones finish (api before the projector its commands
    // wait for), then close the connections.
    await ops?.close();
    for (const role of [...started].reverse()) await role.stop();
    await watch.stop();
    await closeContext(ctx);
  };

  const urls: RunningService['urls'] = {};
  try {
    for (const role of roles) {
      await role.start();
      started.push(role);
      Object.assign(urls, role.urls());
    }
    ops = buildOpsServer(ctx, { database: watch, extraChecks: roles.flatMap((role) => (role.readiness ? [() => role.readiness!()] : [])),
      liveness: roles.flatMap((role) => (role.liveness ? [() => role.liveness!()] : [])),
    });
    await ops.listen({ host: config.HOST, port: config.OPS_PORT });
    urls.ops = listenerUrl(ops, config.HOST);
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
  return { ctx, urls, stop };
}
