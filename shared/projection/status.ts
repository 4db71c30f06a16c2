import type pg from 'pg';
import { formatPosition, type EventStore } from '../event-store/port.js';
import { readCheckpoint } from './checkpoints.js';
import { rebuildsRunning } from './rebuild-locks.js';
import { setAsideCounts } from './set-aside.js';

export interface ProjectionStatus {
  name: string;
  /** Where the projection is (the text form of a log position). */
  checkpoint: string;
  /** The last position of the log readers can see. */
  head: string;
  /** Events of the log after the checkpoint (all types: the checkpoint moves past the ones it ignores). */
  lag_events: number;
  /** How long the oldest event after the checkpoint has waited, in seconds; 0 when caught up. */
  lag_seconds: number;
  /** Whether a rebuild of the projection is running (asked for with `rebuilds`). */
  rebuilding?: boolean;
  /** Streams it has set aside: events it could not apply (asked for with `setAside`). */
  set_aside_streams?: number;
}

/**
 * Checkpoint, head and lag of each projection of a read-model schema. Everything about the log
 * comes through the event-store port, so it reads the same with either adapter. `countLimit`
 * bounds the lag count (readiness only needs to know the oldest waiting event); `rebuilds` adds
 * whether a rebuild of each is running, `setAside` how many streams each has set aside.
 */
export async function projectionStatuses(
  store: EventStore,
  pool: pg.Pool,
  names: readonly string[],
  options: { schema?: string; countLimit?: number; rebuilds?: boolean; setAside?: boolean } = {},
): Promise<ProjectionStatus[]> {
  const schema = options.schema ?? 'read_model';
  const head = await store.headPosition();
  const rebuilding = options.rebuilds ? await rebuildsRunning(pool, schema, names) : null;
  const setAside = options.setAside ? await setAsideCounts(pool, schema) : null;
  return Promise.all(
    names.map(async (name) => {
      const checkpoint = await readCheckpoint(pool, schema, name);
      const lag = await store.lagAfter(checkpoint, { countLimit: options.countLimit });
      const waited = lag.oldestRecordedAt ? Math.max(0, (Date.now() - lag.oldestRecordedAt.getTime()) / 1000) : 0;
      return {
        name,
        checkpoint: formatPosition(checkpoint),
        head: formatPosition(head),
        lag_events: lag.events,
        lag_seconds: Math.round(waited * 1000) / 1000,
        ...(rebuilding ? { rebuilding: rebuilding.has(name) } : {}),
        ...(setAside ? { set_aside_streams: setAside.get(name) ?? 0 } : {}),
      };
    }),
  );
}
