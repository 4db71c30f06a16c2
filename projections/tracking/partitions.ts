import type pg from 'pg';

/**
 * The time partitions of the tracking read model (docs/design.md "Tracking storage"). Every
 * partition's name says its range, so that the projector and `tracking retention` read ranges
 * from the catalog's names alone:
 *
 * - `<table>_mYYYYMM`: a calendar month (UTC), for observed times near now (the year before this
 *   one to the year after);
 * - `<table>_yYYYY`: a whole year, for observed times far from now (a reader with a wrong clock,
 *   history typed in by hand), so that reads spread over centuries make dozens of partitions,
 *   not thousands;
 * - `<table>_dYYYYMMDD`: a day, for the duplicate-detection keys (by the log's time).
 *
 * The projector creates them: the current and next month ahead, and, inside the transaction of
 * the batch that needs it, the partition of a read that has none. A request never does.
 */

/**
 * An advisory lock (by this name's hashtext) that each projector batch holds in shared mode and
 * a retention run in exclusive mode: no partition is dropped under a batch that has listed it.
 */
export const PARTITIONS_LOCK = 'tracking partitions';

export type PartitionedTable = 'scan_read_chunks' | 'asset_visits' | 'scan_read_keys';

export interface Partition {
  table: PartitionedTable;
  name: string;
  /** [fromMs, toMs): milliseconds since the epoch. */
  fromMs: number;
  toMs: number;
}

/** A UTC date from its fields, years 0-99 included (Date.UTC reads those as 1900-1999). */
function utc(year: number, month: number, day: number): number {
  const d = new Date(0);
  d.setUTCFullYear(year, month, day);
  return d.getTime();
}

const pad = (n: number, width: number) => String(n).padStart(width, '0');

const NAME = /^(scan_read_chunks|asset_visits|scan_read_keys)_(?:m(\d{4})(\d{2})|y(\d{4})|d(\d{4})(\d{2})(\d{2}))$/;

export function parsePartition(name: string): Partition | null {
  const match = NAME.exec(name);
  if (!match) return null;
  const table = match[1] as PartitionedTable;
  if (match[2] !== undefined) {
    const [y, m] = [Number(match[2]), Number(match[3]) - 1];
    return { table, name, fromMs: utc(y, m, 1), toMs: utc(y, m + 1, 1) };
  }
  if (match[4] !== undefined) {
    const y = Number(match[4]);
    return { table, name, fromMs: utc(y, 0, 1), toMs: utc(y + 1, 0, 1) };
  }
  const [y, m, d] = [Number(match[5]), Number(match[6]) - 1, Number(match[7])];
  return { table, name, fromMs: utc(y, m, d), toMs: utc(y, m, d + 1) };
}

function monthPartition(table: PartitionedTable, ms: number): Partition {
  const d = new Date(ms);
  return parsePartition(`${table}_m${pad(d.getUTCFullYear(), 4)}${pad(d.getUTCMonth() + 1, 2)}`)!;
}

function yearPartition(table: PartitionedTable, ms: number): Partition {
  return parsePartition(`${table}_y${pad(new Date(ms).getUTCFullYear(), 4)}`)!;
}

export function dayPartition(table: PartitionedTable, ms: number): Partition {
  const d = new Date(ms);
  return parsePartition(`${table}_d${pad(d.getUTCFullYear(), 4)}${pad(d.getUTCMonth() + 1, 2)}${pad(d.getUTCDate(), 2)}`)!;
}

/** Postgres's text of a midnight given in ms (years up to 10000, for the last bound). */
function literal(ms: number): string {
  const d = new Date(ms);
  return `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1, 2)}-${pad(d.getUTCDate(), 2)} 00:00:00+00`;
}

/** The partitions of these tables in the schema of the search path, oldest first. */
export async function listPartitions(db: pg.ClientBase | pg.Pool, tables: readonly PartitionedTable[]): Promise<Partition[]> {
  const { rows } = await db.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = ANY (SELECT to_regclass(t)::oid FROM unnest($1::text[]) AS t)`,
    [tables],
  );
  return rows
    .map((r) => parsePartition(r.name))
    .filter((p): p is Partition => p !== null)
    .sort((a, b) => a.fromMs - b.fromMs);
}

const overlaps = (p: Partition, fromMs: number, toMs: number) => p.fromMs < toMs && fromMs < p.toMs;

/**
 * The partition to create for an observed time that no partition covers: its month near now, its
 * year far from now (unless that year would overlap a month made when it was near: then the month).
 */
function partitionFor(table: PartitionedTable, ms: number, existing: readonly Partition[], nowMs: number): Partition {
  const year = new Date(ms).getUTCFullYear();
  const thisYear = new Date(nowMs).getUTCFullYear();
  if (year < thisYear - 1 || year > thisYear + 1) {
    const whole = yearPartition(table, ms);
    if (!existing.some((p) => p.table === table && overlaps(p, whole.fromMs, whole.toMs))) return whole;
  }
  return monthPartition(table, ms);
}

/**
 * Creates, in the transaction `tx`, the partitions that instants of `table` need (in ms) and do
 * not have; `existing` (as listPartitions gave it) is extended with them.
 */
export async function ensurePartitions(tx: pg.ClientBase, table: PartitionedTable, instantsMs: Iterable<number>, existing: Partition[], nowMs = Date.now()): Promise<void> {
  for (const ms of instantsMs) {
    if (existing.some((p) => p.table === table && p.fromMs <= ms && ms < p.toMs)) continue;
    const partition = table === 'scan_read_keys' ? dayPartition(table, ms) : partitionFor(table, ms, existing, nowMs);
    // As the tables' owner (the runtime role owns none). Chunks get a fillfactor of 80: they are
    // rewritten in place as reads are appended, room on the page for the new version (a HOT update).
    await tx.query('SELECT tracking_create_partition($1, $2, $3::timestamptz, $4::timestamptz)', [table, partition.name, literal(partition.fromMs), literal(partition.toMs)]);
    existing.push(partition);
  }
}

/** Drops a partition (as the tables' owner). */
export async function dropPartition(db: pg.ClientBase | pg.Pool, partition: Partition): Promise<void> {
  await db.query('SELECT tracking_drop_partition($1)', [partition.name]);
}
