import pg from 'pg';
import { UNIQUE_VIOLATION } from '../../shared/db/pool.js';
import { columnArrays, prepared } from '../../shared/db/prepared.js';
import { ScansRecorded, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import { decodeReads, matchValue, type DecodedRead } from '../../shared/domain/scans/read-codec.js';
import { microsToTimestamp } from '../../shared/time.js';
import type { RecordedEvent } from '../../shared/event-store/port.js';
import type { Projection } from '../../shared/projection/projection.js';

/**
 * Tracking read models (migrations/read-model/300_tracking.sql) from scan events: every read
 * once (`scan_reads`, keyed by the read's own identity, so a read delivered twice changes nothing
 * the second time), an asset's visits (`asset_visits`), its current location (`asset_locations`)
 * and the reads that placed nothing (`unknown_reads`).
 *
 * History is a function of the set of reads, whatever order they arrive in: reads are ordered by
 * (observed time, log order). Reads that come after an asset's last read (the usual case) only
 * extend its last visit or add visits after it, computed here from that last visit; a late read
 * makes the asset's visits from the one it falls in onwards be recomputed from its reads.
 * A batch costs a fixed number of statements, whatever its size.
 */

interface Read extends DecodedRead {
  orgId: number;
  locationId: number | null;
  readerId: string | null;
  seq: number;
}

interface Visit {
  locationId: number;
  firstUs: number;
  firstSeq: number;
  lastUs: number;
  lastSeq: number;
}

const later = (aUs: number, aSeq: number, bUs: number, bSeq: number) => aUs > bUs || (aUs === bUs && aSeq > bSeq);

async function allocateSeqs(tx: pg.PoolClient, count: number): Promise<number> {
  const result = await tx.query<{ last: string }>(prepared(`SELECT setval('scan_read_seq', nextval('scan_read_seq') + $1 - 1) AS last`, [count]));
  return Number(result.rows[0]!.last) - count + 1;
}

/**
 * SQL: a timestamptz from microseconds since the epoch (a bigint), exactly: observed times travel
 * as integers, cheaper to send and to read than timestamp text.
 */
const fromMicros = (us: string) => `(timestamptz 'epoch' + ${us} * interval '1 microsecond')`;

/**
 * Inserts the reads not seen before; returns them. Reads are told apart by their `seq` (unique in
 * the batch), and only when some were seen before does the answer list the new ones: the usual
 * batch costs no row back per read.
 */
/** Inserts reads into scan_reads: the statement (without a conflict clause) and its parameters. */
const INSERT_READS = `INSERT INTO scan_reads (org_id, read_key, asset_id, location_id, observed_at, seq)
       SELECT r.org_id, r.read_key, r.asset_id, r.location_id, ${fromMicros('r.observed_us')}, r.seq
         FROM unnest($1::int[], $2::uuid[], $3::int[], $4::int[], $5::bigint[], $6::bigint[]) AS r(org_id, read_key, asset_id, location_id, observed_us, seq)`;
const readColumns = (reads: Read[]) => columnArrays(reads, (r) => [r.orgId, r.readKey, r.assetId, r.assetId === null ? null : r.locationId, r.observedUs, r.seq]);

async function insertNewReads(tx: pg.PoolClient, reads: Read[]): Promise<Read[]> {
  const values = readColumns(reads);
  const insert = `${INSERT_READS}
       ON CONFLICT (org_id, read_key) DO NOTHING`;
  const result = await tx.query<{ inserted: number; seqs: string[] | null }>(
    prepared(
      `WITH inserted AS (${insert} RETURNING seq)
       SELECT count(*)::int AS inserted, CASE WHEN count(*) < cardinality($6::bigint[]) THEN array_agg(seq) END AS seqs FROM inserted`,
      values,
    ),
  );
  const { inserted, seqs } = result.rows[0]!;
  if (inserted === reads.length) return reads;
  const fresh = new Set((seqs ?? []).map(Number));
  return reads.filter((r) => fresh.has(r.seq));
}

/**
 * What an unknown read is counted under (unknown_reads' key): a reader's reads by reader (and
 * capture point), the others by tag value.
 */
function unknownGroup(read: Read): [orgId: number, cause: string, readerId: string | null, capturePoint: string | null, tagType: string | null, value: string | null] {
  const byTag = read.cause !== 'unknown_reader' && read.cause !== 'unassigned_capture_point';
  return [
    read.orgId,
    read.cause!,
    byTag ? null : read.readerId,
    read.cause === 'unassigned_capture_point' ? (read.capturePoint ?? null) : null,
    byTag ? read.tag_type : null,
    byTag ? matchValue(read.tag_type, read.value) : null,
  ];
}

async function countUnknown(tx: pg.PoolClient, reads: Read[]): Promise<void> {
  const groups = new Map<string, { group: ReturnType<typeof unknownGroup>; count: number; first: number; last: number }>();
  for (const read of reads) {
    const group = unknownGroup(read);
    const key = group.map((part) => part ?? '').join('\u0000');
    const counted = groups.get(key);
    if (counted) {
      counted.count++;
      counted.first = Math.min(counted.first, read.observedUs);
      counted.last = Math.max(counted.last, read.observedUs);
    } else {
      groups.set(key, { group, count: 1, first: read.observedUs, last: read.observedUs });
    }
  }
  await tx.query(
    prepared(
      `INSERT INTO unknown_reads AS u (org_id, cause, reader_id, capture_point, tag_type, value, count, first_seen, last_seen)
       SELECT * FROM unnest($1::int[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::timestamptz[], $9::timestamptz[])
       ON CONFLICT (org_id, cause, reader_id, capture_point, tag_type, value) DO UPDATE
         SET count = u.count + EXCLUDED.count,
             first_seen = least(u.first_seen, EXCLUDED.first_seen),
             last_seen = greatest(u.last_seen, EXCLUDED.last_seen)`,
      columnArrays([...groups.values()], (g) => [...g.group, g.count, microsToTimestamp(g.first), microsToTimestamp(g.last)]),
    ),
  );
}

/** The last visit of each asset (by org and asset id), as microseconds. */
async function lastVisits(tx: pg.PoolClient, assets: Array<[number, number]>): Promise<Map<string, Visit>> {
  const result = await tx.query<{ org_id: number; asset_id: number; location_id: number; first_us: string; first_seq: string; last_us: string; last_seq: string }>(
    prepared(
      `SELECT t.org_id, t.asset_id, v.location_id,
              (extract(epoch FROM v.first_at) * 1000000)::bigint::text AS first_us, v.first_seq::text AS first_seq,
              (extract(epoch FROM v.last_at) * 1000000)::bigint::text AS last_us, v.last_seq::text AS last_seq
         FROM unnest($1::int[], $2::int[]) AS t(org_id, asset_id)
         CROSS JOIN LATERAL (SELECT * FROM asset_visits v WHERE v.org_id = t.org_id AND v.asset_id = t.asset_id
                              ORDER BY v.first_at DESC, v.first_seq DESC LIMIT 1) v`,
      columnArrays(assets, (a) => a),
    ),
  );
  return new Map(
    result.rows.map((row) => [
      `${row.org_id}/${row.asset_id}`,
      { locationId: row.location_id, firstUs: Number(row.first_us), firstSeq: Number(row.first_seq), lastUs: Number(row.last_us), lastSeq: Number(row.last_seq) },
    ]),
  );
}

/** Writes visits (new ones, or the last one extended: same key, later end). */
async function upsertVisits(tx: pg.PoolClient, rows: Array<{ orgId: number; assetId: number; visit: Visit }>): Promise<void> {
  if (rows.length === 0) return;
  await tx.query(
    prepared(
      `INSERT INTO asset_visits (org_id, asset_id, location_id, first_at, first_seq, last_at, last_seq)
       SELECT v.org_id, v.asset_id, v.location_id, ${fromMicros('v.first_us')}, v.first_seq, ${fromMicros('v.last_us')}, v.last_seq
         FROM unnest($1::int[], $2::int[], $3::int[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[]) AS v(org_id, asset_id, location_id, first_us, first_seq, last_us, last_seq)
       ON CONFLICT (org_id, asset_id, first_at, first_seq) DO UPDATE SET last_at = EXCLUDED.last_at, last_seq = EXCLUDED.last_seq`,
      columnArrays(rows, ({ orgId, assetId, visit: v }) => [orgId, assetId, v.locationId, v.firstUs, v.firstSeq, v.lastUs, v.lastSeq]),
    ),
  );
}

/**
 * Late reads: each asset's visits from the one its earliest new read falls in (or follows) are
 * recomputed from its reads, as maximal runs at one location.
 */
async function recomputeVisits(tx: pg.PoolClient, from: Array<{ orgId: number; assetId: number; us: number; seq: number }>): Promise<void> {
  if (from.length === 0) return;
  const starts = await tx.query<{ org_id: number; asset_id: number; from_at: string; from_seq: string }>(
    prepared(
      `SELECT t.org_id, t.asset_id, COALESCE(v.first_at, t.at)::text AS from_at, COALESCE(v.first_seq, t.seq)::text AS from_seq
         FROM unnest($1::int[], $2::int[], $3::timestamptz[], $4::bigint[]) AS t(org_id, asset_id, at, seq)
         LEFT JOIN LATERAL (SELECT v.first_at, v.first_seq FROM asset_visits v
                             WHERE v.org_id = t.org_id AND v.asset_id = t.asset_id AND (v.first_at, v.first_seq) <= (t.at, t.seq)
                             ORDER BY v.first_at DESC, v.first_seq DESC LIMIT 1) v ON TRUE`,
      columnArrays(from, (f) => [f.orgId, f.assetId, microsToTimestamp(f.us), f.seq]),
    ),
  );
  const params = columnArrays(starts.rows, (s) => [s.org_id, s.asset_id, s.from_at, s.from_seq]);
  await tx.query(
    prepared(
      `DELETE FROM asset_visits v USING unnest($1::int[], $2::int[], $3::timestamptz[], $4::bigint[]) AS s(org_id, asset_id, from_at, from_seq)
        WHERE v.org_id = s.org_id AND v.asset_id = s.asset_id AND (v.first_at, v.first_seq) >= (s.from_at, s.from_seq)`,
      params,
    ),
  );
  await tx.query(
    prepared(
      insertVisitsOfReads(`unnest($1::int[], $2::int[], $3::timestamptz[], $4::bigint[]) AS s(org_id, asset_id, from_at, from_seq)
         JOIN scan_reads r ON r.org_id = s.org_id AND r.asset_id = s.asset_id AND (r.observed_at, r.seq) >= (s.from_at, s.from_seq)`),
      params,
    ),
  );
}

/**
 * The statement that writes, as visits, the maximal runs at one location of the reads that `from`
 * yields (a FROM item with rows `r` of scan_reads), per asset in (observed time, log order).
 */
function insertVisitsOfReads(from: string): string {
  return `INSERT INTO asset_visits (org_id, asset_id, location_id, first_at, first_seq, last_at, last_seq)
       SELECT org_id, asset_id, location_id,
              (array_agg(observed_at ORDER BY observed_at, seq))[1], (array_agg(seq ORDER BY observed_at, seq))[1],
              (array_agg(observed_at ORDER BY observed_at DESC, seq DESC))[1], (array_agg(seq ORDER BY observed_at DESC, seq DESC))[1]
         FROM (SELECT r.*, count(*) FILTER (WHERE r.location_id IS DISTINCT FROM r.previous)
                             OVER (PARTITION BY r.org_id, r.asset_id ORDER BY r.observed_at, r.seq) AS run
                 FROM (SELECT r.org_id, r.asset_id, r.location_id, r.observed_at, r.seq,
                              lag(r.location_id) OVER (PARTITION BY r.org_id, r.asset_id ORDER BY r.observed_at, r.seq) AS previous
                         FROM ${from}) r) runs
        GROUP BY org_id, asset_id, run, location_id`;
}

/** Current locations of these assets from their newest visits; counts the assets located for the first time. */
async function updateCurrentLocations(tx: pg.PoolClient, assets: Array<[number, number]>): Promise<void> {
  await tx.query(
    prepared(
      `WITH upserted AS (
         INSERT INTO asset_locations (org_id, asset_id, location_id, last_seen, dwell_started_at)
         SELECT t.org_id, t.asset_id, v.location_id, v.last_at, v.first_at
           FROM unnest($1::int[], $2::int[]) AS t(org_id, asset_id)
           CROSS JOIN LATERAL (SELECT * FROM asset_visits v WHERE v.org_id = t.org_id AND v.asset_id = t.asset_id
                                ORDER BY v.first_at DESC, v.first_seq DESC LIMIT 1) v
         ON CONFLICT (org_id, asset_id) DO UPDATE
           SET location_id = EXCLUDED.location_id, last_seen = EXCLUDED.last_seen, dwell_started_at = EXCLUDED.dwell_started_at
         -- xmax is 0 on a row the statement inserted, not on one it updated.
         RETURNING org_id, xmax = 0 AS created)
       INSERT INTO asset_location_counts AS c (org_id, located)
       SELECT org_id, count(*) FROM upserted WHERE created GROUP BY org_id
       ON CONFLICT (org_id) DO UPDATE SET located = c.located + EXCLUDED.located`,
      columnArrays(assets, (a) => a),
    ),
  );
}

/** Places each asset's new reads: extends its visits in memory when they all follow its last read. */
async function placeReads(tx: pg.PoolClient, placed: Read[]): Promise<void> {
  const byAsset = new Map<string, Read[]>();
  for (const read of placed) {
    const key = `${read.orgId}/${read.assetId}`;
    const list = byAsset.get(key);
    if (list) list.push(read);
    else byAsset.set(key, [read]);
  }
  const assets = [...byAsset.values()].map((reads) => [reads[0]!.orgId, reads[0]!.assetId!] as [number, number]);
  const last = await lastVisits(tx, assets);
  const writes: Array<{ orgId: number; assetId: number; visit: Visit }> = [];
  const late: Array<{ orgId: number; assetId: number; us: number; seq: number }> = [];
  for (const [key, reads] of byAsset) {
    reads.sort((a, b) => a.observedUs - b.observedUs || a.seq - b.seq);
    const orgId = reads[0]!.orgId;
    const assetId = reads[0]!.assetId!;
    const previous = last.get(key);
    const first = reads[0]!;
    if (previous && !later(first.observedUs, first.seq, previous.lastUs, previous.lastSeq)) {
      late.push({ orgId, assetId, us: first.observedUs, seq: first.seq });
      continue;
    }
    let visit: Visit | null = previous ? { ...previous } : null;
    let changed = false;
    for (const read of reads) {
      if (visit && visit.locationId === read.locationId) {
        visit.lastUs = read.observedUs;
        visit.lastSeq = read.seq;
        changed = true;
        continue;
      }
      if (visit && changed) writes.push({ orgId, assetId, visit });
      visit = { locationId: read.locationId!, firstUs: read.observedUs, firstSeq: read.seq, lastUs: read.observedUs, lastSeq: read.seq };
      changed = true;
    }
    if (visit && changed) writes.push({ orgId, assetId, visit });
  }
  await upsertVisits(tx, writes);
  await recomputeVisits(tx, late);
  await updateCurrentLocations(tx, assets);
}

// -------------------------------------------------------------------------------------------
// Deferred (a rebuild or a replay from an empty schema). The batches only record the reads, into
// `scan_reads` without its indexes (an insert into the random order of the read-key index is most
// of a bulk load's cost: 10-12 µs per read against 3), and the reads that placed nothing into a
// staging table. At the end: the indexes are built once, a read recorded twice (a redelivery
// further on in the log) keeps its first recording, as live, and the unknown reads are counted,
// those first recordings only; the visits and current locations are then computed from all the
// reads, a sort instead of a visit lookup per asset and batch.

/** Definitions of the scan_reads indexes dropped for the bulk load, to build them again. */
const DEFERRED_INDEXES = 'tracking_deferred_indexes';
/** The unknown reads of the bulk load, with their unknown_reads group. */
const DEFERRED_UNKNOWN = 'tracking_deferred_unknown';

async function beginDeferred(tx: pg.PoolClient): Promise<void> {
  await tx.query(
    `CREATE UNLOGGED TABLE ${DEFERRED_INDEXES} AS
     SELECT i.indexrelid::regclass::text AS index_name, c.conname AS constraint_name, i.indisunique AS is_unique,
            CASE WHEN c.oid IS NULL THEN pg_get_indexdef(i.indexrelid) ELSE pg_get_constraintdef(c.oid) END AS definition
       FROM pg_index i LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid AND c.conrelid = i.indrelid
      WHERE i.indrelid = 'scan_reads'::regclass`,
  );
  const { rows } = await tx.query<{ index_name: string; constraint_name: string | null }>(`SELECT index_name, constraint_name FROM ${DEFERRED_INDEXES}`);
  for (const row of rows) {
    await tx.query(row.constraint_name === null ? `DROP INDEX ${row.index_name}` : `ALTER TABLE scan_reads DROP CONSTRAINT ${pg.escapeIdentifier(row.constraint_name)}`);
  }
  await tx.query(
    `CREATE UNLOGGED TABLE ${DEFERRED_UNKNOWN} (org_id integer, read_key uuid, seq bigint, cause text, reader_id text, capture_point text,
                                                tag_type text, value text, observed_at timestamptz)`,
  );
}

/** A deferred batch's reads (distinct within the batch), recorded as they come. */
async function recordDeferred(tx: pg.PoolClient, reads: Read[]): Promise<void> {
  await tx.query(prepared(INSERT_READS, readColumns(reads)));
  const unknown = reads.filter((r) => r.assetId === null);
  if (unknown.length === 0) return;
  await tx.query(
    prepared(
      `INSERT INTO ${DEFERRED_UNKNOWN} (org_id, read_key, seq, cause, reader_id, capture_point, tag_type, value, observed_at)
       SELECT u.org_id, u.read_key, u.seq, u.cause, u.reader_id, u.capture_point, u.tag_type, u.value, ${fromMicros('u.observed_us')}
         FROM unnest($1::int[], $2::uuid[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::bigint[])
              AS u(org_id, read_key, seq, cause, reader_id, capture_point, tag_type, value, observed_us)`,
      columnArrays(unknown, (r) => {
        const [orgId, cause, readerId, capturePoint, tagType, value] = unknownGroup(r);
        return [orgId, r.readKey, r.seq, cause, readerId, capturePoint, tagType, value, r.observedUs];
      }),
    ),
  );
}

async function completeDeferred(tx: pg.PoolClient): Promise<void> {
  const { rows: indexes } = await tx.query<{ definition: string; constraint_name: string | null }>(
    `SELECT definition, constraint_name FROM ${DEFERRED_INDEXES} ORDER BY is_unique DESC, index_name`,
  );
  const build = async () => {
    for (const index of indexes) {
      await tx.query(
        index.constraint_name === null ? index.definition : `ALTER TABLE scan_reads ADD CONSTRAINT ${pg.escapeIdentifier(index.constraint_name)} ${index.definition}`,
      );
    }
  };
  await tx.query('SAVEPOINT deferred_indexes');
  try {
    await build();
  } catch (error) {
    if ((error as { code?: string }).code !== UNIQUE_VIOLATION) throw error;
    // Reads recorded more than once: each keeps its first recording (its lowest seq).
    await tx.query('ROLLBACK TO SAVEPOINT deferred_indexes');
    await tx.query(
      `DELETE FROM scan_reads s USING (SELECT org_id, read_key, min(seq) AS first FROM scan_reads GROUP BY org_id, read_key HAVING count(*) > 1) d
        WHERE s.org_id = d.org_id AND s.read_key = d.read_key AND s.seq <> d.first`,
    );
    await build();
  }
  await tx.query(
    `INSERT INTO unknown_reads (org_id, cause, reader_id, capture_point, tag_type, value, count, first_seen, last_seen)
     SELECT u.org_id, u.cause, u.reader_id, u.capture_point, u.tag_type, u.value, count(*), min(u.observed_at), max(u.observed_at)
       FROM ${DEFERRED_UNKNOWN} u
      WHERE EXISTS (SELECT 1 FROM scan_reads r WHERE r.org_id = u.org_id AND r.read_key = u.read_key AND r.seq = u.seq)
      GROUP BY u.org_id, u.cause, u.reader_id, u.capture_point, u.tag_type, u.value`,
  );
  await tx.query(`DROP TABLE ${DEFERRED_INDEXES}, ${DEFERRED_UNKNOWN}`);
  // One sort of every read: room for it in memory.
  await tx.query(`SET LOCAL work_mem = '256MB'`);
  await tx.query(insertVisitsOfReads('scan_reads r WHERE r.asset_id IS NOT NULL'));
  await tx.query(
    `INSERT INTO asset_locations (org_id, asset_id, location_id, last_seen, dwell_started_at)
     SELECT DISTINCT ON (v.org_id, v.asset_id) v.org_id, v.asset_id, v.location_id, v.last_at, v.first_at
       FROM asset_visits v ORDER BY v.org_id, v.asset_id, v.first_at DESC, v.first_seq DESC`,
  );
  await tx.query(
    `INSERT INTO asset_location_counts AS c (org_id, located) SELECT org_id, count(*) FROM asset_locations GROUP BY org_id
     ON CONFLICT (org_id) DO UPDATE SET located = EXCLUDED.located`,
  );
}

export const trackingProjection: Projection = {
  name: 'tracking',
  tables: ['scan_reads', 'asset_visits', 'asset_locations', 'asset_location_counts', 'unknown_reads'],
  sequences: ['scan_read_seq'],
  eventTypes: [ScansRecorded.type],
  beginDeferred,
  completeDeferred,
  async apply(events: RecordedEvent[], tx: pg.PoolClient, options?: { deferred?: boolean }): Promise<void> {
    const reads: Read[] = [];
    const seen = new Set<string>();
    for (const event of events) {
      if (event.type !== ScansRecorded.type) continue;
      const data = event.data as ScansRecordedData;
      const readerId = data.source.kind === 'reader' ? data.source.reader_id : null;
      for (const decoded of decodeReads(data)) {
        const key = `${data.org_id}/${decoded.readKey}`;
        if (seen.has(key)) continue;
        seen.add(key);
        // The decoded read is this loop's own: completed in place (a copy per read would cost more than its decoding).
        const read = decoded as Read;
        read.orgId = data.org_id;
        read.locationId = data.location_id;
        read.readerId = readerId;
        read.seq = 0;
        reads.push(read);
      }
    }
    if (reads.length === 0) return;
    const base = await allocateSeqs(tx, reads.length);
    reads.forEach((read, i) => (read.seq = base + i));
    if (options?.deferred === true) return recordDeferred(tx, reads);
    const fresh = await insertNewReads(tx, reads);
    const unknown = fresh.filter((r) => r.assetId === null);
    if (unknown.length > 0) await countUnknown(tx, unknown);
    const placed = fresh.filter((r) => r.assetId !== null && r.locationId !== null);
    if (placed.length > 0) await placeReads(tx, placed);
  },
};
