import type pg from 'pg';
import { allProjections } from '../../projections/index.js';
import type { RetentionRow, RetentionTarget } from '../../projections/tracking/retention.js';
import { archiveScanEvents, archiveStatus, type ArchiveStatus } from '../../shared/archive/scan-archive.js';
import type { Logger } from '../../shared/logger.js';

/**
 * The scan archive as one more row of `retention status|run` (docs/operations.md "Retention"):
 * the scan events of the Postgres log recorded before now − SCAN_RETENTION_DAYS move into the
 * archive (shared/archive/scan-archive.ts). It lives here, where the CLI composes the targets: the
 * tracking read model's retention (projections/) knows nothing of the event store's archive.
 *
 * The row's columns, for this target: `partitions` the archive's segments and `bytes` their size
 * on disk; `from`/`to` the oldest and newest recording time archived; `drops` what the next run
 * moves (status) or what this run moved (run), as `<n> scan events`, and `drop_bytes` the log's
 * bytes of those events (the rows' size in the table); `aged_reads` does not apply.
 */

export const ARCHIVE_TARGET = 'event_store.events (scans)';
const HOLDS = 'scan events in the log; a run moves those recorded before the cutoff into the scan archive (ARCHIVE_DIR)';
const DAY_MS = 86_400_000;

export interface ArchiveTargetSettings {
  EVENT_STORE: 'postgres' | 'kurrentdb';
  /** Null: unlimited (nothing moves). */
  SCAN_RETENTION_DAYS: number | null;
  /** `archiveDir(config)`. */
  dir: string;
  log?: Logger;
}

/**
 * Every follower of the log an archive run must not pass: the projections of this build, and any
 * other with a checkpoint in the current read model (the webhooks subscriber, a projection of another
 * version still running). A checkpoint row nobody advances any more (a projection removed) holds
 * the archive back where it stands: delete that row.
 */
export async function followers(db: pg.Pool): Promise<string[]> {
  const { rows } = await db.query<{ name: string }>('SELECT name FROM read_model.projection_checkpoints');
  return [...new Set([...allProjections().map((p) => p.name), ...rows.map((r) => r.name)])].sort();
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const eventsText = (n: number) => (n === 0 ? [] : [`${n} scan events`]);

function rowOf(status: ArchiveStatus, kept: string, cutoff: number | null, moved: { events: number; bytes: number } | null): RetentionRow {
  return {
    target: ARCHIVE_TARGET,
    holds: `${HOLDS}: ${status.dir}`,
    kept,
    cutoff: iso(cutoff),
    partitions: status.archived.segments,
    bytes: status.archived.bytes,
    from: status.archived.oldestRecordedAt,
    to: status.archived.newestRecordedAt,
    drops: eventsText(moved?.events ?? 0),
    drop_bytes: moved?.bytes ?? 0,
    aged_reads: null,
  };
}

export function scanArchiveTarget(settings: ArchiveTargetSettings): RetentionTarget {
  const days = settings.SCAN_RETENTION_DAYS;
  const kept = days === null ? 'unlimited' : `${days} days in the log, then in the archive`;
  const cutoffOf = (nowMs: number) => (days === null ? null : nowMs - days * DAY_MS);
  if (settings.EVENT_STORE !== 'postgres') {
    const row: RetentionRow = {
      target: ARCHIVE_TARGET,
      holds: `scan events stay in the ${settings.EVENT_STORE} event store: the scan archive is for the Postgres event store only; nothing moves`,
      kept: 'all (the event store keeps them)',
      cutoff: null,
      partitions: 0,
      bytes: 0,
      from: null,
      to: null,
      drops: [],
      drop_bytes: 0,
      aged_reads: null,
    };
    return { name: ARCHIVE_TARGET, status: async () => ({ ...row }), run: async () => ({ ...row }) };
  }
  const statusOf = async (db: pg.Pool, cutoff: number | null) =>
    archiveStatus({ pool: db, dir: settings.dir, projections: await followers(db), ...(cutoff === null ? {} : { olderThan: new Date(cutoff) }) });
  return {
    name: ARCHIVE_TARGET,
    async status(db, nowMs) {
      const cutoff = cutoffOf(nowMs);
      const status = await statusOf(db, cutoff);
      return rowOf(status, kept, cutoff, status.next ? { events: status.next.events, bytes: status.next.tableBytes } : null);
    },
    async run(db, nowMs) {
      const cutoff = cutoffOf(nowMs);
      if (cutoff === null) return rowOf(await statusOf(db, null), kept, null, null);
      // What the log holds of it before the move: the bytes this run frees.
      const before = await statusOf(db, cutoff);
      const planned = before.next!;
      // Nothing to move: the directory is not touched (not even created). An interrupted run's
      // events are still in the log, so a run that has something to finish always finds them.
      if (planned.events === 0) return rowOf(before, kept, cutoff, { events: 0, bytes: 0 });
      const result = await archiveScanEvents({ pool: db, dir: settings.dir, olderThan: new Date(cutoff), projections: await followers(db), log: settings.log });
      // The run may have stopped short of the plan (a checkpoint moved meanwhile, a new append): its share.
      const bytes = planned.events === 0 ? 0 : Math.round((planned.tableBytes * result.events) / planned.events);
      return rowOf(await statusOf(db, null), kept, cutoff, { events: result.events, bytes });
    },
  };
}
