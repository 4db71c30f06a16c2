import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import client from 'prom-client';
import type { ServiceContext } from '../../shared/context.js';
import type { DatabaseWatch } from '../../shared/db/reachability.js';
import { requestIdOptions, registerRequestId } from '../../shared/http/request-id.js';
import { closeKeepAliveOnShutdown } from '../../shared/http/shutdown.js';
import { registerErrorHandling } from '../../shared/http/errors-plugin.js';
import { allProjections } from '../../projections/index.js';

export const metricsRegistry = new client.Registry();
client.collectDefaultMetrics({ register: metricsRegistry });

/** A projection is "caught up within a bound" when no event has waited longer than this for it. */
export const READY_LAG_SECONDS = 30;

/** /healthz, /readyz and /metrics on the ops port, never on the public one. */
export function buildOpsServer(ctx: ServiceContext, database?: Pick<DatabaseWatch, 'health'>): FastifyInstance {
  // Probes and scrapes are frequent: the ops listener logs warnings and errors only.
  const app: FastifyInstance = Fastify({ loggerInstance: ctx.log.child({ role: 'ops' }, { level: 'warn' }) as FastifyBaseLogger, ...requestIdOptions });
  registerRequestId(app);
  closeKeepAliveOnShutdown(app);
  // The API's error envelope here too: an unknown path is `404 not_found` with its request id.
  registerErrorHandling(app);
  const projectionNames = allProjections().map((p) => p.name);

  // Liveness: the process is up and its database has not been gone for longer than
  // DB_OUTAGE_UNHEALTHY_SECONDS (a supervisor restarting it is then the remedy).
  app.get('/healthz', async (_request, reply) => {
    const health = database?.health();
    if (!health || health.healthy) return { status: 'ok' };
    return reply.code(503).send({ status: 'unhealthy', checks: { database: `unreachable for ${Math.round(health.unreachableSeconds)} s` } });
  });

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
    if (checks.database === 'ok') {
      try {
        // Age of the oldest event each projection has not applied yet (one indexed probe each).
        const result = await ctx.pool.query<{ name: string; waiting_seconds: number | null }>(
          `SELECT p.name,
                  (SELECT EXTRACT(EPOCH FROM (clock_timestamp() - e.recorded_at))::float8
                     FROM event_store.events e
                    WHERE (e.tx_id, e.global_position) > (COALESCE(c.commit_position, '0'::xid8), COALESCE(c.prepare_position, 0))
                      AND e.tx_id < pg_snapshot_xmin(pg_current_snapshot())
                    ORDER BY e.tx_id, e.global_position LIMIT 1) AS waiting_seconds
             FROM unnest($1::text[]) AS p(name)
             LEFT JOIN read_model.projection_checkpoints c ON c.name = p.name`,
          [projectionNames],
        );
        for (const row of result.rows) {
          const behind = row.waiting_seconds !== null && row.waiting_seconds > READY_LAG_SECONDS;
          checks[`projection:${row.name}`] = behind ? `behind by ${Math.round(row.waiting_seconds!)}s` : 'ok';
          if (behind) ready = false;
        }
      } catch {
        checks.projections = 'unknown';
        ready = false;
      }
    }
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready', checks });
  });

  app.get('/metrics', async (_request, reply) => {
    return reply.type(metricsRegistry.contentType).send(await metricsRegistry.metrics());
  });
  return app;
}
