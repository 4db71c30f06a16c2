import type pg from 'pg';
import { expect } from 'vitest';
import { allProjections } from '../../projections/index.js';
import { ScansRecorded, locationScansStream, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import { encodeReads, type RawRead } from '../../shared/domain/scans/read-codec.js';
import type { EventStore, Position } from '../../shared/event-store/port.js';
import { createLogger } from '../../shared/logger.js';
import { replayProjections } from '../../shared/projection/replay.js';
import { parseSegmentName } from '../../shared/projection/segments.js';

/**
 * What the tests of segmented processors across processes and hosts share (docs/design.md
 * "Segmented processors"): random reads appended as reader events, who holds which segment, and
 * every read model compared with one projected by a single process (a replay up to now, one
 * segment each, into a fresh schema).
 */

/** The live leases of a split projection's segments: segment index → holder's pid (from the owner `host:pid:id`). */
export async function segmentHolders(pool: pg.Pool, projection = 'tracking'): Promise<Map<number, number>> {
  const { rows } = await pool.query<{ name: string; owner: string }>(
    `SELECT name, owner FROM read_model.projection_leases WHERE left(name, length($1) + 1) = $1 || '#' AND expires_at > now()`,
    [projection],
  );
  return new Map(rows.map((row) => [parseSegmentName(row.name)!.index, Number(row.owner.split(':').at(-2))]));
}

/** The lease epochs of a split projection's segments: segment index → epoch (it grows with every claim). */
export async function segmentEpochs(pool: pg.Pool, projection = 'tracking'): Promise<Map<number, number>> {
  const { rows } = await pool.query<{ name: string; epoch: string }>(
    `SELECT name, epoch::text FROM read_model.projection_leases WHERE left(name, length($1) + 1) = $1 || '#'`,
    [projection],
  );
  return new Map(rows.map((row) => [parseSegmentName(row.name)!.index, Number(row.epoch)]));
}

/** How many segments each pid holds. */
export function shares(holders: Map<number, number>): Map<number, number> {
  const counts = new Map<number, number>();
  for (const pid of holders.values()) counts.set(pid, (counts.get(pid) ?? 0) + 1);
  return counts;
}

/** Reads visible in the tracking read model of `orgId`: placed reads and unknown ones. */
export async function visibleReads(pool: pg.Pool, orgId: number, schema = 'read_model'): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    `SELECT ((SELECT coalesce(sum(reads), 0) FROM ${schema}.scan_read_chunks WHERE org_id = $1)
           + (SELECT coalesce(sum(count), 0) FROM ${schema}.unknown_reads WHERE org_id = $1))::int AS n`,
    [orgId],
  );
  return rows[0]!.n;
}

/** A random reader's reads: `assets` tagged assets (and unknown tags), `locations` places, times that go mostly forward. */
export class RandomReads {
  private us = Date.UTC(2026, 10, 1) * 1000;
  private readonly delivered: RawRead[] = [];
  /** Distinct reads delivered so far (a read delivered again counts once). */
  readonly distinct = new Set<string>();

  constructor(
    private readonly rnd: () => number,
    private readonly orgId: number,
    private readonly assets: number,
    private readonly locations: number,
  ) {}

  /** One event's worth: 1 to `max` reads at one location, some late, some delivered again. */
  event(max: number): { locationId: number; reads: RawRead[] } {
    const locationId = 1 + Math.floor(this.rnd() * this.locations);
    const reads: RawRead[] = [];
    const n = 1 + Math.floor(this.rnd() * max);
    for (let i = 0; i < n; i++) {
      const again = this.delivered.length > 0 && this.rnd() < 0.05 ? this.delivered[Math.floor(this.rnd() * this.delivered.length)]! : null;
      if (again && again.capturePoint === `door-${locationId}`) {
        reads.push(again);
        continue;
      }
      this.us += Math.floor(this.rnd() * 5_000_000);
      const late = this.rnd() < 0.1 ? Math.floor(this.rnd() * 600_000_000) : 0;
      const unknown = this.rnd() < 0.05;
      const value = unknown ? `E2801160600002090000F${String(Math.floor(this.rnd() * 5)).padStart(3, '0')}` : tagOf(1 + Math.floor(this.rnd() * this.assets));
      const read: RawRead = { tag_type: 'rfid', value, observedUs: this.us - late, rssi: -60, capturePoint: `door-${locationId}` };
      reads.push(read);
      this.delivered.push(read);
      this.distinct.add(`${read.value} ${read.observedUs} ${read.capturePoint}`);
    }
    return { locationId, reads };
  }

  /** Appends one event of up to `max` reads, as a fixed reader's report; its position. */
  async append(store: EventStore, max: number): Promise<Position> {
    const { locationId, reads } = this.event(max);
    const { capturePoints, ...encoded } = encodeReads(reads, (read) => {
      const assetId = assetOfTag(read.value);
      return assetId === null ? { assetId: null, cause: 'unknown_tag' } : { assetId, cause: null };
    });
    const data: ScansRecordedData = {
      org_id: this.orgId,
      location_id: locationId,
      source: { kind: 'reader', reader_id: 'reader-1', capture_points: capturePoints },
      ...encoded,
      at: new Date().toISOString(),
    };
    return (await store.appendToStream(locationScansStream(this.orgId, locationId), [{ type: ScansRecorded.type, data }])).position;
  }
}

export const tagOf = (assetId: number) => `E28011606000020900000${String(assetId).padStart(3, '0')}`;
const assetOfTag = (tag: string) => (/^E28011606000020900000(\d{3})$/.test(tag) ? Number(tag.slice(-3)) : null);

/**
 * A table's rows in a stable order, as text. The tracking tables as the property test of segments
 * compares them (test/properties/tracking-segments.int.test.ts): chunks by their reads (chunk
 * boundaries follow batching), `seq` as its rank among the asset's reads (its values are drawn
 * from a shared sequence, in another order by each segment).
 */
async function tableRows(pool: pg.Pool, schema: string, table: string): Promise<string[]> {
  const s = `"${schema}"`;
  const ranked = `WITH reads AS (SELECT c.org_id, c.asset_id, r.observed_at, r.location_id, r.seq
                                   FROM ${s}.scan_read_chunks c, ${s}.tracking_chunk_reads(c.first_at, c.first_seq, c.data) r),
                       ranks AS (SELECT org_id, asset_id, seq, rank() OVER (PARTITION BY org_id, asset_id ORDER BY seq) AS rank FROM reads)`;
  const rankOf = (alias: string, t: string, column: string) =>
    `LEFT JOIN ranks ${alias} ON ${alias}.org_id = ${t}.org_id AND ${alias}.asset_id = ${t}.asset_id AND ${alias}.seq = ${t}.${column}`;
  const sql: Record<string, string> = {
    scan_read_chunks: `${ranked} SELECT concat_ws(' ', r.org_id, r.asset_id, r.observed_at, r.location_id, k.rank) AS row FROM reads r ${rankOf('k', 'r', 'seq')}`,
    asset_visits: `${ranked} SELECT concat_ws(' ', v.org_id, v.asset_id, v.location_id, v.first_at, f.rank, v.last_at, l.rank) AS row
                     FROM ${s}.asset_visits v ${rankOf('f', 'v', 'first_seq')} ${rankOf('l', 'v', 'last_seq')}`,
    asset_locations: `${ranked} SELECT concat_ws(' ', a.org_id, a.asset_id, a.location_id, a.last_seen, a.dwell_started_at, f.rank, l.rank) AS row
                        FROM ${s}.asset_locations a ${rankOf('f', 'a', 'first_seq')} ${rankOf('l', 'a', 'last_seq')}`,
  };
  const { rows } = await pool.query<{ row: string }>(sql[table] ?? `SELECT t::text AS row FROM ${s}.${table} t`);
  return rows.map((r) => r.row).sort();
}

/**
 * Every read model of the current schema equals, table by table, the one a single process
 * projects from the same log (a replay up to now into `into`, every projection as one segment):
 * nothing lost, nothing twice. The segments' own working state (`segmentStateTables`: the tracking
 * segments' key progress, the alerts segments' state) is left out: it differs with their number.
 */
export async function expectSameAsOneSegment(store: EventStore, pool: pg.Pool, into: string): Promise<void> {
  await replayProjections({ store, pool, log: createLogger('silent'), projections: allProjections(), until: new Date(), into, batchSize: 97 });
  for (const table of allProjections().flatMap((p) => p.tables)) {
    if (allProjections().some((p) => p.segmentStateTables?.includes(table))) continue;
    if (['scan_read_chunks', 'asset_visits', 'asset_locations', 'unknown_reads'].includes(table)) expect((await tableRows(pool, into, table)).length, table).toBeGreaterThan(0);
    expect(await tableRows(pool, 'read_model', table), table).toEqual(await tableRows(pool, into, table));
  }
}
