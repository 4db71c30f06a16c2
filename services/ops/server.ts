import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import client from 'prom-client';
import type { ServiceContext } from '../../shared/context.js';
import { requestIdOptions, registerRequestId } from '../../shared/http/request-id.js';
import { closeKeepAliveOnShutdown } from '../../shared/http/shutdown.js';
import { allProjections } from '../../projections/index.js';
import { projectionStatuses } from '../../shared/projection/status.js';

export const metricsRegistry = new client.Registry();
client.collectDefaultMetrics({ register: metricsRegistry });

/** A projection is "caught up within a bound" when no event has waited longer than this for it. */
export const READY_LAG_SECONDS = 30;

/** /healthz, /readyz and /metrics on the ops port, never on the public one. */
export function buildOpsServer(ctx: ServiceContext, extraChecks: ReadonlyArray<() => Promise<Record<string, string>>> = []): FastifyInstance {
  // Probes and scrapes are frequent: the ops listener logs warnings and errors only.
  const app: FastifyInstance = Fastify({ loggerInstance: ctx.log.child({ role: 'ops' }, { level: 'warn' }) as FastifyBaseLogger, ...requestIdOptions });
  registerRequestId(app);
  closeKeepAliveOnShutdown(app);
  const projectionNames = allProjections().map((p) => p.name);

  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async (_request, reply) => {
    const checks: Record<string, string> = {};
    let ready = true;
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
        for (const status of await projectionStatuses(ctx.store, ctx.pool, projectionNames, { countLimit: 0 })) {
          const behind = status.lag_seconds > READY_LAG_SECONDS;
          checks[`projection:${status.name}`] = behind ? `behind by ${Math.round(status.lag_seconds)}s` : 'ok';
          if (behind) ready = false;
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
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready', checks });
  });

  app.get('/metrics', async (_request, reply) => {
    return reply.type(metricsRegistry.contentType).send(await metricsRegistry.metrics());
  });
  return app;
}
