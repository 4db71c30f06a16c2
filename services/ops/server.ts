import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import client from 'prom-client';
import type { ServiceContext } from '../context.js';
import { closeKeepAliveOnShutdown } from '../http-shutdown.js';
import { START, comparePositions } from '../../shared/event-store/port.js';
import { allProjections } from '../../projections/index.js';

export const metricsRegistry = new client.Registry();
client.collectDefaultMetrics({ register: metricsRegistry });

/** /healthz, /readyz and /metrics on the ops port, never on the public one. */
export function buildOpsServer(ctx: ServiceContext): FastifyInstance {
  const app: FastifyInstance = Fastify({ loggerInstance: ctx.log.child({ role: 'ops' }) as FastifyBaseLogger, disableRequestLogging: true });
  closeKeepAliveOnShutdown(app);
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
      const head = await ctx.store.headPosition();
      checks.event_store = 'ok';
      for (const projection of allProjections()) {
        const at = ctx.checkpoints.position(projection.name);
        // Caught up "within a bound": at the head, or the head moved in the last few seconds.
        if (comparePositions(head, START) > 0 && comparePositions(at, head) < 0) {
          checks[`projection:${projection.name}`] = 'behind';
        }
      }
    } catch {
      checks.event_store = 'unreachable';
      ready = false;
    }
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready', checks });
  });
  app.get('/metrics', async (_request, reply) => {
    return reply.type(metricsRegistry.contentType).send(await metricsRegistry.metrics());
  });
  return app;
}
