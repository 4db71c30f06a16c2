import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import client from 'prom-client';
import type { ServiceContext } from '../../shared/service-context.js';
import type { DatabaseWatch } from '../../shared/db/reachability.js';
import { accessLogOptions } from '../../shared/http/access-log.js';
import { requestIdOptions, registerRequestId } from '../../shared/http/request-id.js';
import { closeKeepAliveOnShutdown } from '../../shared/http/shutdown.js';
import { registerErrorHandling } from '../../shared/http/errors-plugin.js';
import { allProjections } from '../../projections/index.js';
import { projectionStatuses } from '../../shared/projection/status.js';
import { metricsRegistry, projectionLagRegistry } from './metrics.js';

/** A projection is "caught up within a bound" when no event has waited longer than this for it. */
export const READY_LAG_SECONDS = 30;

/** /healthz, /readyz and /metrics on the ops port, never on the public one. */
export function buildOpsServer(
  ctx: ServiceContext,
  options: {
    database?: Pick<DatabaseWatch, 'health'>;
    extraChecks?: ReadonlyArray<() => Promise<Record<string, string>>>;
    /** The roles' own liveness (e.g. a Kafka consumer stopped for too long): name → what is wrong. */
    liveness?: ReadonlyArray<() => Record<string, string>>;
  } = {},
): FastifyInstance {
  const { database, extraChecks = [], liveness = [] } = options;
  // Probes and scrapes are frequent: the ops listener logs warnings and errors only.
  const app: FastifyInstance = Fastify({ loggerInstance: ctx.log.child({ role: 'ops' }, { level: 'warn' }) as FastifyBaseLogger, ...requestIdOptions, ...accessLogOptions });
  registerRequestId(app);
  closeKeepAliveOnShutdown(app);
  // The API's error envelope here too: an unknown path is `404 not_found` with its request id.
  registerErrorHandling(app);
  const projectionNames = allProjections().map((p) => p.name);
  // The process's metrics and this context's projection lag, on one page.
  const metrics = client.Registry.merge([metricsRegistry, projectionLagRegistry(ctx, projectionNames)]);

  // Liveness: the process is up, its database has not been gone for longer than
  // DB_OUTAGE_UNHEALTHY_SECONDS, and no role says it is stuck (a Kafka consumer that has not
  // consumed for KAFKA_CONSUMER_UNHEALTHY_SECONDS): a supervisor restarting it is then the remedy.
  app.get('/healthz', async (_request, reply) => {
    const checks: Record<string, string> = {};
    const health = database?.health();
    if (health && !health.healthy) checks.database = `unreachable for ${Math.round(health.unreachableSeconds)} s`;
    for (const check of liveness) Object.assign(checks, check());
    if (Object.keys(checks).length === 0) return { status: 'ok' };
    return reply.code(503).send({ status: 'unhealthy', checks });
  });

  app.get('/readyz', async (_request, reply) => {
    const checks: Record<string, string> = {};
    let ready = true;
    // Streams a projection set aside: ready (everything else flows), but degraded until retried.
    const setAside: Record<string, number> = {};
    try {
      await ctx.pool.query('SELECT 1');
      checks.database = 'ok';
    } catch {
      checks.database = 'unreachable';
      ready = false;
    }
    try {
      await ctx.store.headPosition();
      checks.event_store = 'ok';
    } catch {
      checks.event_store = 'unreachable';
      ready = false;
    }
    if (checks.database === 'ok' && checks.event_store === 'ok') {
      try {
        // How long the oldest event each projection has not applied yet has waited.
        for (const status of await projectionStatuses(ctx.store, ctx.pool, allProjections(), { countLimit: 0, setAside: true, archive: true })) {
          const behind = status.lag_seconds > READY_LAG_SECONDS;
          // Behind the scan archive: the projector's follower refuses to run it until a rebuild.
          checks[`projection:${status.name}`] = status.needs_rebuild ? `needs \`projections rebuild\`: ${status.needs_rebuild}` : behind ? `behind by ${Math.round(status.lag_seconds)}s` : 'ok';
          if (behind || status.needs_rebuild) ready = false;
          if (status.set_aside_streams) setAside[status.name] = status.set_aside_streams;
        }
      } catch {
        checks.projections = 'unknown';
        ready = false;
      }
    }
    for (const check of extraChecks) {
      for (const [name, status] of Object.entries(await check().catch((error: Error) => ({ dependency: `failed: ${error.message}` })))) {
        checks[name] = status;
        if (status !== 'ok') ready = false;
      }
    }
    const degraded = Object.keys(setAside).length > 0;
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready', checks, degraded, set_aside_streams: setAside });
  });

  app.get('/metrics', async (_request, reply) => {
    return reply.type(metrics.contentType).send(await metrics.metrics());
  });
  return app;
}
