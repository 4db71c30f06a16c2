import type pg from 'pg';
import { inTransaction } from '../../shared/db/pool.js';
import { PARTITIONS_LOCK, dropPartition, listPartitions, type Partition, type PartitionedTable } from './partitions.js';
import { KEY_HORIZON_DAYS } from './projection.js';

/**
 * Retention of the tracking read models (docs/operations.md "Retention"): each target is a table
 * partitioned by time; a run drops its partitions that lie wholly before the target's cutoff, in
 * one short transaction, never a row at a time. `tracking retention status` shows what each
 * holds and what the next run drops; `tracking retention run` drops it.
 *
 * A new kind of data to age out (the scan events of the log, once archived) is one more
 * RetentionTarget in `retentionTargets`: the CLI prints one more row.
 */

const DAY_MS = 86_400_000;

/** One row of `tracking retention status` / `run`. */
export interface RetentionRow {
  /** The table (or, for a target that is not one, what it names). */
  target: string;
  holds: string;
  /** How long it is kept: `90 days`, `unlimited`… */
  kept: string;
  /** Data before this instant goes at the next run (whole partitions only); null: nothing goes. */
  cutoff: string | null;
  partitions: number;
  bytes: number;
  /** The span the partitions cover (start of the oldest, end of the newest), or null when empty. */
  from: string | null;
  to: string | null;
  /** The partitions the next run drops (status) or that this run dropped (run), and their bytes. */
  drops: string[];
  drop_bytes: number;
  /** Reads observed before the cutoff of a previous run that arrived since (they moved only the report); null where it does not apply. */
  aged_reads: number | null;
}

export interface RetentionTarget {
  name: string;
  status(db: pg.Pool, nowMs: number): Promise<RetentionRow>;
  run(db: pg.Pool, nowMs: number): Promise<RetentionRow>;
}

export interface RetentionSettings {
  /** Null: unlimited. */
  SCAN_RETENTION_DAYS: number | null;
  HISTORY_RETENTION_DAYS: number | null;
}

const iso = (ms: number | null | undefined) => (ms === null || ms === undefined ? null : new Date(ms).toISOString());

async function sizes(db: pg.Pool | pg.ClientBase, partitions: readonly Partition[]): Promise<Map<string, number>> {
  if (partitions.length === 0) return new Map();
  const { rows } = await db.query<{ name: string; bytes: string }>(
    'SELECT name, pg_total_relation_size(to_regclass(name)) AS bytes FROM unnest($1::text[]) AS name',
    [partitions.map((p) => p.name)],
  );
  return new Map(rows.map((r) => [r.name, Number(r.bytes)]));
}

/**
 * A table partitioned by time, kept `days` (null: unlimited) before now. `cutoffOf` names the
 * row of tracking_retention_cutoffs that tells the projector where the table was cut.
 */
function partitionedTarget(table: PartitionedTable, holds: string, kept: string, cutoffMs: (nowMs: number) => number | null, recordCutoff: boolean): RetentionTarget {
  const describe = async (db: pg.Pool | pg.ClientBase, partitions: Partition[], drops: Partition[], cutoff: number | null): Promise<RetentionRow> => {
    const bytes = await sizes(db, [...partitions, ...drops]);
    const sum = (list: Partition[]) => list.reduce((total, p) => total + (bytes.get(p.name) ?? 0), 0);
    return {
      target: table,
      holds,
      kept,
      cutoff: iso(cutoff),
      partitions: partitions.length,
      bytes: sum(partitions),
      from: iso(partitions[0]?.fromMs),
      to: iso(partitions.length === 0 ? null : Math.max(...partitions.map((p) => p.toMs))),
      drops: drops.map((p) => p.name),
      drop_bytes: sum(drops),
      aged_reads: recordCutoff ? await agedReads(db, table) : null,
    };
  };
  const droppable = (partitions: Partition[], cutoff: number | null) => (cutoff === null ? [] : partitions.filter((p) => p.toMs <= cutoff));
  return {
    name: table,
    async status(db, nowMs) {
      const partitions = await listPartitions(db, [table]);
      const cutoff = cutoffMs(nowMs);
      return describe(db, partitions, droppable(partitions, cutoff), cutoff);
    },
    async run(db, nowMs) {
      const cutoff = cutoffMs(nowMs);
      const { before, dropped, measured } = await inTransaction(db, async (client) => {
        await client.query(`SET LOCAL lock_timeout = '30s'`);
        await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [PARTITIONS_LOCK]);
        const before = await listPartitions(client, [table]);
        const dropped = droppable(before, cutoff);
        // Measured before they go.
        const measured = await describe(client, before, dropped, cutoff);
        for (const partition of dropped) await dropPartition(client, partition);
        if (recordCutoff && dropped.length > 0) {
          await client.query(
            `INSERT INTO tracking_retention_cutoffs AS c (target, cutoff) VALUES ($1, $2)
             ON CONFLICT (target) DO UPDATE SET cutoff = greatest(c.cutoff, EXCLUDED.cutoff), updated_at = now()`,
            [table, iso(Math.max(...dropped.map((p) => p.toMs)))],
          );
        }
        return { before, dropped, measured };
      });
      const kept = before.filter((p) => !dropped.includes(p));
      return { ...measured, partitions: kept.length, bytes: measured.bytes - measured.drop_bytes, from: iso(kept[0]?.fromMs), to: kept.length === 0 ? null : measured.to };
    },
  };
}

async function agedReads(db: pg.Pool | pg.ClientBase, table: string): Promise<number> {
  const { rows } = await db.query<{ n: string }>('SELECT coalesce(sum(aged_reads), 0)::text AS n FROM tracking_retention_cutoffs WHERE target = $1', [table]);
  return Number(rows[0]!.n);
}

const daysText = (days: number | null) => (days === null ? 'unlimited' : `${days} days`);

/** The retention targets of this deployment, in the order the CLI shows them. */
export function retentionTargets(settings: RetentionSettings): RetentionTarget[] {
  const before = (days: number | null) => (nowMs: number) => (days === null ? null : nowMs - days * DAY_MS);
  return [
    partitionedTarget(
      'scan_read_chunks',
      'per-read detail: every read of each asset, by observed time (what splits a visit exactly)',
      daysText(settings.SCAN_RETENTION_DAYS),
      before(settings.SCAN_RETENTION_DAYS),
      true,
    ),
    partitionedTarget('asset_visits', 'visits (asset history), by the time of their last read', daysText(settings.HISTORY_RETENTION_DAYS), before(settings.HISTORY_RETENTION_DAYS), true),
    // The projector drops these itself as the log's time moves on; a run also drops them when no read has come for days.
    partitionedTarget(
      'scan_read_keys',
      'keys of the reads delivered recently, by the time the log recorded them (duplicate detection)',
      `${KEY_HORIZON_DAYS} days of the log`,
      (nowMs) => nowMs - (KEY_HORIZON_DAYS + 1) * DAY_MS,
      false,
    ),
  ];
}

export async function retentionStatus(db: pg.Pool, settings: RetentionSettings, nowMs = Date.now()): Promise<RetentionRow[]> {
  const rows: RetentionRow[] = [];
  for (const target of retentionTargets(settings)) rows.push(await target.status(db, nowMs));
  return rows;
}

export async function runRetention(db: pg.Pool, settings: RetentionSettings, nowMs = Date.now()): Promise<RetentionRow[]> {
  const rows: RetentionRow[] = [];
  for (const target of retentionTargets(settings)) rows.push(await target.run(db, nowMs));
  return rows;
}
