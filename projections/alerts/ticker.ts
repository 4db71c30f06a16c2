import type pg from 'pg';
import { ALERTS_CLOCK_STREAM, AlertClockTicked } from '../../shared/domain/alerts/events.js';
import type { EventStore } from '../../shared/event-store/port.js';
import type { Logger } from '../../shared/logger.js';

/**
 * The alerts ticker (docs/design.md "Alerts: time as an event"): once a second, a process running
 * the `alerts` subscriber asks whether any deadline of a time-based rule is at or before now (a min
 * over an index of the subscriber's state) and, when one is, appends one AlertClockTicked
 * `{until_us: now}`. The subscriber raises the alert when it follows the tick, so a rebuild or a
 * replay, which append nothing, raise it at the same place in the log. Ticks of several processes
 * are harmless; while nothing is due, nothing is appended.
 */

export interface AlertsTickerOptions {
  store: EventStore;
  pool: pg.Pool;
  log: Logger;
  /** The read-model schema the subscriber writes. */
  schema?: string;
  intervalMs?: number;
  /** Microseconds since the epoch (the service's clock). */
  nowUs?: () => number;
}

/** Whether a deadline is due at `nowUs`: one index lookup. */
export async function earliestDeadline(pool: pg.Pool, schema = 'read_model'): Promise<number | null> {
  const { rows } = await pool.query<{ us: string | null }>(`SELECT min(next_deadline_us)::text AS us FROM "${schema}".alerts_engine_assets WHERE next_deadline_us IS NOT NULL`);
  return rows[0]?.us == null ? null : Number(rows[0].us);
}

/** One check: appends a tick when something is due; whether it did. */
export async function tickIfDue(options: AlertsTickerOptions): Promise<boolean> {
  const nowUs = (options.nowUs ?? (() => Date.now() * 1000))();
  const due = await earliestDeadline(options.pool, options.schema);
  if (due === null || due > nowUs) return false;
  await options.store.appendToStream(ALERTS_CLOCK_STREAM, [{ type: AlertClockTicked.type, data: { until_us: nowUs, at: new Date(Math.floor(nowUs / 1000)).toISOString() } }]);
  return true;
}

/** Starts the ticker; `stop` waits for a check in flight. */
export function startAlertsTicker(options: AlertsTickerOptions): { stop: () => Promise<void> } {
  let running: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    running = tickIfDue(options).catch((error: unknown) => options.log.warn({ err: error }, 'alerts ticker: check failed'));
  }, options.intervalMs ?? 1000);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
