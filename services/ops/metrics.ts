import client from 'prom-client';
import type { ServiceContext } from '../../shared/service-context.js';
import type { AppendObserver } from '../../shared/event-store/observed.js';
import type { HttpObserver } from '../../shared/http/observer.js';
import { projectionStatuses } from '../../shared/projection/status.js';

/**
 * The process's Prometheus metrics, served on the ops listener's /metrics (README, "Metrics").
 * Every metric is created once per process, in this module or a module of its role (ingest), and
 * registered here; only the projection lag is per service context (`projectionLagRegistry`).
 */
export const metricsRegistry = new client.Registry();
client.collectDefaultMetrics({ register: metricsRegistry });

export type Listener = 'api' | 'ingest';

const httpDuration = new client.Histogram({
  name: 'tracking_http_request_duration_seconds',
  help: 'Time to answer a request, by listener (api, ingest), method, route pattern (unmatched when no route matched) and status code',
  labelNames: ['listener', 'method', 'route', 'status'] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [metricsRegistry],
});

const rateLimited = new client.Counter({
  name: 'tracking_http_rate_limited_total',
  help: 'Requests refused by the per-key rate limit (429), by listener',
  labelNames: ['listener'] as const,
  registers: [metricsRegistry],
});

const appendSeconds = new client.Histogram({
  name: 'tracking_event_store_append_seconds',
  help: 'Time of one append to the event store (one or several streams, atomically), by outcome (ok, wrong_expected_revision, error)',
  labelNames: ['outcome'] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
  registers: [metricsRegistry],
});

/** The label for requests no route matched: one series, whatever paths clients try. */
export const UNMATCHED_ROUTE = 'unmatched';

/** Request metrics of one listener (the request pipeline calls it; see shared/http/observer.ts). */
export function httpObserver(listener: Listener): HttpObserver {
  // One child per (method, route, status), made on first use: no label hashing per request.
  const children = new Map<string, client.Histogram.Internal<'listener' | 'method' | 'route' | 'status'>>();
  const limited = rateLimited.labels({ listener });
  return {
    responded(method, route, status, seconds) {
      const key = `${method} ${status} ${route ?? ''}`;
      let child = children.get(key);
      if (!child) {
        child = httpDuration.labels({ listener, method, route: route ?? UNMATCHED_ROUTE, status: String(status) });
        children.set(key, child);
      }
      child.observe(seconds);
    },
    rateLimited() {
      limited.inc();
    },
  };
}

export const appendObserver: AppendObserver = {
  appended(seconds, outcome) {
    appendSeconds.observe({ outcome }, seconds);
  },
};

/**
 * Counted up to this many events per projection and scrape: a projection far behind reads as this
 * many (its lag in seconds still says how far). Keeps a scrape cheap (an index range, bounded)
 * however far behind a projection is.
 */
export const LAG_COUNT_LIMIT = 100_000;
/** A scrape waits this long for the lag; past it, or when the database fails, the lag series are left out. */
const LAG_TIMEOUT_MS = 5_000;

interface Lag {
  events: number;
  seconds: number;
  setAside: number;
}

/**
 * Projection lag gauges (and set-aside streams) of one service context, computed when scraped (`collect`), from the same
 * status the CLI's `projections status` and /readyz read. Every process reports it whatever its
 * roles: all of them read the same log and checkpoints, and an api whose projector has stopped
 * then shows the lag growing. A registry of its own per context, merged into /metrics with the
 * process's (tests run several services in one process; production runs one).
 */
export function projectionLagRegistry(ctx: Pick<ServiceContext, 'store' | 'pool' | 'log'>, names: readonly string[]): client.Registry {
  const registry = new client.Registry();
  // One status query per scrape for both gauges (the registry collects them one after the other).
  let current: { at: number; statuses: Promise<Map<string, Lag> | null> } | null = null;
  const statuses = () => {
    if (current && Date.now() - current.at < 1_000) return current.statuses;
    current = { at: Date.now(), statuses: readLag() };
    return current.statuses;
  };
  const readLag = async () => {
    let timer: NodeJS.Timeout | undefined;
    try {
      const rows = await Promise.race([
        projectionStatuses(ctx.store, ctx.pool, names, { countLimit: LAG_COUNT_LIMIT, setAside: true }),
        new Promise<never>((_resolve, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer in ${LAG_TIMEOUT_MS} ms`)), LAG_TIMEOUT_MS);
        }),
      ]);
      return new Map(rows.map((row) => [row.name, { events: row.lag_events, seconds: row.lag_seconds, setAside: row.set_aside_streams ?? 0 }]));
    } catch (error) {
      // The scrape still answers (with every other metric); /readyz reports the database.
      ctx.log.warn({ err: error }, 'projection lag not available for this scrape');
      return null;
    } finally {
      clearTimeout(timer);
    }
  };
  const gauge = (name: string, help: string, value: (lag: Lag) => number) =>
    new client.Gauge({
      name,
      help,
      labelNames: ['projection'] as const,
      registers: [registry],
      async collect() {
        this.reset();
        const lag = await statuses();
        if (!lag) return;
        for (const [projection, row] of lag) this.set({ projection }, value(row));
      },
    });
  gauge('tracking_projection_lag_events', `Events of the log the projection has not applied yet (counted up to ${LAG_COUNT_LIMIT})`, (lag) => lag.events);
  gauge('tracking_projection_lag_seconds', 'How long the oldest event the projection has not applied yet has waited, in seconds (0: caught up)', (lag) => lag.seconds);
  gauge(
    'tracking_projection_set_aside_streams',
    'Streams the projection has set aside: an event of each it cannot apply, the later ones held behind it (npx tracking projections failures)',
    (lag) => lag.setAside,
  );
  return registry;
}
