import type pg from 'pg';
import { comparePositions, formatPosition, type EventStore } from '../event-store/port.js';
import { archivedThrough } from '../archive/scan-archive.js';
import { behindArchiveReason, readsArchivedEvents } from './archive-guard.js';
import { readCheckpoint } from './checkpoints.js';
import type { Projection } from './projection.js';
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
  /**
   * Why the projection must be rebuilt before a follower runs it: its checkpoint lies before the end of
   * the scan archive (archive-guard.ts); null when it need not (asked for with `archive`).
   */
  needs_rebuild?: string | null;
}

/**
 * Checkpoint, head and lag of each projection of a read-model schema. Everything about the log
 * comes through the event-store port, so it reads the same with either adapter. `countLimit`
 * bounds the lag count (readiness only needs to know the oldest waiting event); `rebuilds` adds
 * whether a rebuild of each is running, `setAside` how many streams each has set aside, `archive`
 * whether each is behind the scan archive (a name alone counts as reading every event type).
 */
export async function projectionStatuses(
  store: EventStore,
  pool: pg.Pool,
  projections: readonly (string | Pick<Projection, 'name' | 'eventTypes' | 'skipsArchivedEvents'>)[],
  options: { schema?: string; countLimit?: number; rebuilds?: boolean; setAside?: boolean; archive?: boolean } = {},
): Promise<ProjectionStatus[]> {
  const schema = options.schema ?? 'read_model';
  const names = projections.map((p) => (typeof p === 'string' ? p : p.name));
  const through = options.archive && store.name === 'postgres' ? await archivedThrough(pool) : null;
  const head = await store.headPosition();
  const rebuilding = options.rebuilds ? await rebuildsRunning(pool, schema, names) : null;
  const setAside = options.setAside ? await setAsideCounts(pool, schema) : null;
  return Promise.all(
    projections.map(async (projection) => {
      const name = typeof projection === 'string' ? projection : projection.name;
      const checkpoint = await readCheckpoint(pool, schema, name);
      const reads = typeof projection === 'string' || readsArchivedEvents(projection);
      const behind = through !== null && reads && comparePositions(checkpoint, through) < 0;
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
        ...(options.archive ? { needs_rebuild: behind ? behindArchiveReason(name, checkpoint, through!) : null } : {}),
      };
    }),
  );
}
