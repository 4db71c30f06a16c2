import type pg from 'pg';
import { columnArrays, prepared } from '../../shared/db/prepared.js';
import { ScansRecorded, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import { matchValue, type DecodedRead } from '../../shared/domain/scans/read-codec.js';
import { segmentReads } from '../segment-reads.js';
import { microsToRfc3339, microsToTimestamp } from '../../shared/time.js';
import type { RecordedEvent } from '../../shared/event-store/port.js';
import type { ApplyOptions, Projection } from '../../shared/projection/projection.js';
import { segmentOfKey } from '../../shared/projection/segments.js';
import { compareReads, followReads, isAfter, revisitLateReads, type ReadPoint, type Visit } from './current-location.js';
import { PARTITIONS_LOCK, dropPartition, ensurePartitions, listPartitions, type Partition } from './partitions.js';
import { CHUNK_READS, chunksOf, decodeChunk, encodeChunk, monthStartUs, type Chunk, type ChunkRead } from './read-chunks.js';

/**
 * Tracking read models (migrations/read-model/300_tracking.sql, 320_tracking_compact.sql) from
 * scan events (docs/design.md "Tracking storage"):
 * - `scan_read_keys`: the key of every read delivered in the last KEY_HORIZON_DAYS of the log, so
 *   that a read delivered twice within them changes nothing the second time;
 * - `scan_read_chunks`: each asset's reads, compactly, up to 128 to a row (read-chunks.ts): the
 *   exact read times that a late read needs to split a visit;
 * - `asset_visits`, `asset_locations` (the current visit, with its log order) and
 *   `unknown_reads` (the reads that placed nothing, counted).
 *
 * History is a function of the set of reads, whatever order they arrive in: reads are ordered by
 * (observed time, log order), and the visits and the current location follow the rule of
 * current-location.ts. Reads that come after an asset's last read (the usual case) extend
 * its current visit or add visits after it, in memory from the current visit. A late read makes
 * the visits around it be recomputed from the reads between the read before it and the read after
 * it (read from the chunks), the visits holding those two keeping their far ends. A batch costs a
 * fixed number of statements, whatever its size.
 */

/** Days of the log within which a read delivered again is recognized (docs/design.md "Tracking storage"). */
export const KEY_HORIZON_DAYS = 7;
const DAY_MS = 86_400_000;

interface Read extends DecodedRead {
  orgId: number;
  locationId: number | null;
  readerId: string | null;
  seq: number;
  /** The log's time of the event that carried it, ms. */
  recordedMs: number;
}

async function allocateSeqs(tx: pg.PoolClient, count: number): Promise<number> {
  const result = await tx.query<{ last: string }>(prepared(`SELECT setval('scan_read_seq', nextval('scan_read_seq') + $1 - 1) AS last`, [count]));
  return Number(result.rows[0]!.last) - count + 1;
}

/**
 * SQL: a timestamptz from microseconds since the epoch (a bigint), exactly: observed times travel
 * as integers, cheaper to send and to read than timestamp text.
 */
const fromMicros = (us: string) => `(timestamptz 'epoch' + ${us} * interval '1 microsecond')`;
/** SQL: microseconds since the epoch of a timestamptz column, as text (exact beyond 2^53). */
const toMicros = (column: string) => `(extract(epoch FROM ${column}) * 1000000)::bigint::text`;

/** What a batch needs to know of the schema: its partitions, and where retention has cut. */
interface BatchState {
  partitions: Partition[];
  /** Reads observed before this (µs) change no visit and no chunk: their detail was dropped. */
  cutoffUs: number | null;
}

/**
 * The batch's partitions and retention cutoff. It creates, first, every partition the batch's
 * reads will need (their observed months for chunks and visits, their recorded days for keys):
 * creating one locks its parent table whole, so a batch that did it after reading or writing that
 * table could deadlock with another segment's batch doing the same the other way round. Created
 * here, before this transaction holds any lock on a parent, it only waits for the batches in
 * flight to commit. (The later calls of `ensurePartitions` then find them there; they stay for a
 * partition no read named, which an existing chunk or visit may still need.)
 */
async function batchState(tx: pg.PoolClient, reads: readonly Read[], recordings: readonly Recording[]): Promise<BatchState> {
  await tx.query(prepared('SELECT pg_advisory_xact_lock_shared(hashtext($1))', [PARTITIONS_LOCK]));
  const partitions = await listPartitions(tx, ['scan_read_chunks', 'asset_visits', 'scan_read_keys']);
  const { rows } = await tx.query<{ cutoff_us: string | null }>(prepared(`SELECT ${toMicros('max(cutoff)')} AS cutoff_us FROM tracking_retention_cutoffs`));
  const cutoff = rows[0]?.cutoff_us;
  // Ahead: this month's and the next month's partitions exist before a read needs them.
  const now = Date.now();
  const observed = new Set([now, now + 31 * DAY_MS]);
  const cutoffUs = cutoff == null ? null : Number(cutoff);
  for (const read of reads) {
    // Only a read that places its asset writes a chunk and a visit, and none before the cutoff.
    if (read.assetId === null || read.locationId === null || (cutoffUs !== null && read.observedUs < cutoffUs)) continue;
    observed.add(Math.floor(read.observedUs / 1000));
  }
  await ensurePartitions(tx, 'scan_read_chunks', observed, partitions);
  await ensurePartitions(tx, 'asset_visits', observed, partitions);
  await ensurePartitions(tx, 'scan_read_keys', new Set(recordings.map((r) => Math.floor(r.recordedMs / DAY_MS) * DAY_MS)), partitions);
  return { partitions, cutoffUs };
}

/** A read as delivered: every one is recorded, also a read delivered twice in one batch (so that keys do not depend on batching). */
interface Recording {
  readKey: string;
  recordedMs: number;
}

/**
 * Keeps the reads not delivered before within KEY_HORIZON_DAYS of the log (by the recorded time
 * of their events); records every read's key (a read delivered again renews its horizon). Drops
 * the days of keys that no later read can look at any more.
 */
async function newReads(tx: pg.PoolClient, reads: Read[], recordings: Recording[], state: BatchState, segment?: SegmentOf): Promise<Read[]> {
  const horizonMs = KEY_HORIZON_DAYS * DAY_MS;
  let oldestMs = Number.POSITIVE_INFINITY;
  let newestMs = Number.NEGATIVE_INFINITY;
  for (const read of reads) {
    oldestMs = Math.min(oldestMs, read.recordedMs);
    newestMs = Math.max(newestMs, read.recordedMs);
  }
  const seen = await tx.query<{ read_key: string; recorded_ms: string }>(
    prepared(
      `SELECT read_key::text, (extract(epoch FROM max(recorded_at)) * 1000)::bigint::text AS recorded_ms
         FROM scan_read_keys WHERE read_key = ANY($1::uuid[]) AND recorded_at >= $2::timestamptz GROUP BY read_key`,
      [reads.map((r) => r.readKey), new Date(oldestMs - horizonMs).toISOString()],
    ),
  );
  const known = new Map(seen.rows.map((r) => [r.read_key, Number(r.recorded_ms)]));
  const fresh = known.size === 0 ? reads : reads.filter((r) => !(known.get(r.readKey)! >= r.recordedMs - horizonMs));
  const throughMs = segment ? await keysRecordedThrough(tx, segment, newestMs) : newestMs;
  const expired = state.partitions.filter((p) => p.table === 'scan_read_keys' && p.toMs <= throughMs - horizonMs - DAY_MS);
  for (const partition of expired) await dropPartition(tx, partition);
  state.partitions = state.partitions.filter((p) => !expired.includes(p));
  await ensurePartitions(tx, 'scan_read_keys', new Set(recordings.map((r) => Math.floor(r.recordedMs / DAY_MS) * DAY_MS)), state.partitions);
  await tx.query(
    prepared(
      `INSERT INTO scan_read_keys (read_key, recorded_at) SELECT * FROM unnest($1::uuid[], $2::timestamptz[])`,
      columnArrays(recordings, (r) => [r.readKey, new Date(r.recordedMs).toISOString()]),
    ),
  );
  return fresh;
}

/** The segment a batch applies (docs/design.md "Segmented processors"). */
interface SegmentOf {
  index: number;
  count: number;
}

/**
 * Split into segments, a day of keys may go only once every segment has recorded past it: records
 * this segment's newest time, and gives the least of all segments' (segment 0 drops, the others
 * never: no two drop the same day), or minus infinity while some segment has recorded nothing.
 */
async function keysRecordedThrough(tx: pg.PoolClient, segment: SegmentOf, newestMs: number): Promise<number> {
  const { rows } = await tx.query<{ segments: string; through_ms: string | null }>(
    prepared(
      `WITH mine AS (
         INSERT INTO tracking_key_progress AS p (segment, segments, recorded_at) VALUES ($1, $2, $3::timestamptz)
         ON CONFLICT (segment) DO UPDATE SET segments = EXCLUDED.segments, recorded_at = greatest(p.recorded_at, EXCLUDED.recorded_at))
       SELECT count(*)::text AS segments, (extract(epoch FROM min(recorded_at)) * 1000)::bigint::text AS through_ms
         FROM tracking_key_progress WHERE segments = $2 AND segment <> $1`,
      [segment.index, segment.count, new Date(newestMs).toISOString()],
    ),
  );
  const others = rows[0]!;
  if (segment.index !== 0 || Number(others.segments) < segment.count - 1) return Number.NEGATIVE_INFINITY;
  return Math.min(newestMs, Number(others.through_ms ?? newestMs));
}

/**
 * What an unknown read is counted under (unknown_reads' key): a reader's reads by reader (and
 * capture point), the others by tag value.
 */
function unknownGroup(read: Pick<Read, 'orgId' | 'cause' | 'readerId' | 'capturePoint' | 'tag_type' | 'value'>): [orgId: number, cause: string, readerId: string | null, capturePoint: string | null, tagType: string | null, value: string | null] {
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

const unknownGroupKey = (group: ReturnType<typeof unknownGroup>) => group.map((part) => part ?? '').join('\u0000');

/**
 * The segment key of a read that placed nothing (docs/design.md "Segmented processors"): its row of
 * `unknown_reads`, so that each of those rows is written by one segment (rows upserted by several
 * would be locked in different orders: deadlocks). A read that placed an asset goes to its asset's
 * segment (projections/segment-reads.ts).
 */
function unknownSegmentKey(orgId: number, readerId: string | null, read: DecodedRead): string {
  return unknownGroupKey(unknownGroup({ orgId, readerId, cause: read.cause, capturePoint: read.capturePoint, tag_type: read.tag_type, value: read.value }));
}

async function countUnknown(tx: pg.PoolClient, reads: Read[]): Promise<void> {
  const groups = new Map<string, { group: ReturnType<typeof unknownGroup>; count: number; first: number; last: number }>();
  for (const read of reads) {
    const group = unknownGroup(read);
    const key = unknownGroupKey(group);
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

/** An asset's reads of one batch, with what is known of it before. */
interface AssetBatch {
  orgId: number;
  assetId: number;
  /** Kept reads (observed at or after the cutoff), sorted. */
  reads: ChunkRead[];
  /** The newest read observed before the cutoff, if any. */
  newestAged: ChunkRead | null;
  current: Visit | null;
  /** asset_locations.first_seen_at (µs), when the asset has a row. */
  firstSeenUs: number | null;
  /** Chunks that hold or precede the reads (rewritten), and the one after them (read only). */
  chunks: Chunk[];
  after: Chunk | null;
}

/** The current visit of each asset (asset_locations), by `org/asset`. */
async function currentVisits(tx: pg.PoolClient, assets: AssetBatch[]): Promise<void> {
  const result = await tx.query<{ org_id: number; asset_id: number; location_id: number; first_us: string; first_seq: string; last_us: string; last_seq: string; first_seen_us: string }>(
    prepared(
      `SELECT al.org_id, al.asset_id, al.location_id, ${toMicros('al.dwell_started_at')} AS first_us, al.first_seq::text AS first_seq,
              ${toMicros('al.last_seen')} AS last_us, al.last_seq::text AS last_seq, ${toMicros('al.first_seen_at')} AS first_seen_us
         FROM unnest($1::int[], $2::int[]) AS t(org_id, asset_id) JOIN asset_locations al ON al.org_id = t.org_id AND al.asset_id = t.asset_id`,
      columnArrays(assets, (a) => [a.orgId, a.assetId]),
    ),
  );
  const byKey = new Map(assets.map((a) => [`${a.orgId}/${a.assetId}`, a]));
  for (const row of result.rows) {
    const asset = byKey.get(`${row.org_id}/${row.asset_id}`)!;
    asset.current = {
      locationId: row.location_id,
      firstUs: Number(row.first_us),
      firstSeq: Number(row.first_seq),
      lastUs: Number(row.last_us),
      lastSeq: Number(row.last_seq),
    };
    asset.firstSeenUs = Number(row.first_seen_us);
  }
}

/**
 * The usual batch of an asset, its new reads all after its newest read and in that read's month,
 * goes at the end of the chunk that holds that read, when the chunk has room: the chunk's row
 * gets the new reads' bytes (encoded from that read on) appended, in one statement for all such
 * assets, nothing read into the process. The chunk is the asset's last that begins in that month
 * at or before the read; the update checks that it ends with the read (so it is the asset's last
 * chunk: no read comes after it) and has room, which gives the chunks `chunksOf` would cut from
 * all the reads, as a load and rewrite would. Returns the assets appended; the others (a full
 * chunk, a new month, a late read, a first read, a chunk that retention dropped) are loaded and
 * rewritten.
 */
async function appendToLastChunks(tx: pg.PoolClient, assets: AssetBatch[]): Promise<Set<AssetBatch>> {
  const candidates = assets.filter((a) => {
    const current = a.current;
    if (!current || a.newestAged || !isAfter(a.reads[0]!, current)) return false;
    const month = monthStartUs(current.lastUs);
    return a.reads.length <= CHUNK_READS && monthStartUs(a.reads.at(-1)!.us) === month;
  });
  if (candidates.length === 0) return new Set();
  const result = await tx.query<{ org_id: number; asset_id: number }>(
    prepared(
      `UPDATE scan_read_chunks c
          SET last_at = ${fromMicros('w.last_us')}, last_seq = w.last_seq, reads = c.reads + w.n, data = c.data || w.data
         FROM unnest($1::int[], $2::int[], $3::bigint[], $4::bigint[], $5::bigint[], $6::int[], $7::bytea[], $8::bigint[], $9::bigint[])
              AS w(org_id, asset_id, prev_us, prev_seq, month_us, n, data, last_us, last_seq)
              CROSS JOIN LATERAL (
                SELECT l.org_id, l.asset_id, l.first_at, l.first_seq, l.last_at, l.last_seq, l.reads FROM scan_read_chunks l
                 WHERE l.org_id = w.org_id AND l.asset_id = w.asset_id AND l.first_at >= ${fromMicros('w.month_us')}
                   AND (l.first_at, l.first_seq) <= (${fromMicros('w.prev_us')}, w.prev_seq)
                 ORDER BY l.first_at DESC, l.first_seq DESC LIMIT 1) l
        -- The chunk's row is found by its key alone (l's), its checks made on l: joined to w by
        -- anything else, the plan reads every chunk (a merge or hash join over the table).
        WHERE c.org_id = l.org_id AND c.asset_id = l.asset_id AND c.first_at = l.first_at AND c.first_seq = l.first_seq
          AND l.last_at = ${fromMicros('w.prev_us')} AND l.last_seq = w.prev_seq AND l.reads + w.n <= $10
       RETURNING c.org_id, c.asset_id`,
      [
        ...columnArrays(candidates, ({ orgId, assetId, current, reads }) => {
          const prev = { us: current!.lastUs, seq: current!.lastSeq, locationId: current!.locationId };
          const last = reads.at(-1)!;
          return [orgId, assetId, prev.us, prev.seq, monthStartUs(prev.us), reads.length, encodeChunk(reads, prev), last.us, last.seq];
        }),
        CHUNK_READS,
      ],
    ),
  );
  const byKey = new Map(candidates.map((a) => [`${a.orgId}/${a.assetId}`, a]));
  return new Set(result.rows.map((r) => byKey.get(`${r.org_id}/${r.asset_id}`)!));
}

/**
 * The chunks each asset's new reads go into: the last chunk that begins at or before its first
 * new read, every chunk that begins between its first and its last new read, and (read only) the
 * first chunk after them.
 */
async function loadChunks(tx: pg.PoolClient, assets: AssetBatch[]): Promise<void> {
  const chunkColumns = `c.org_id, c.asset_id, ${toMicros('c.first_at')} AS first_us, c.first_seq::text AS first_seq, ${toMicros('c.last_at')} AS last_us,
                        c.last_seq::text AS last_seq, c.data`;
  const match = 'c.org_id = t.org_id AND c.asset_id = t.asset_id';
  const from = `${fromMicros('t.min_us')}`;
  const to = `${fromMicros('t.max_us')}`;
  const result = await tx.query<{ org_id: number; asset_id: number; first_us: string; first_seq: string; last_us: string; last_seq: string; data: Buffer; after: boolean }>(
    prepared(
      `SELECT c.* FROM unnest($1::int[], $2::int[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[]) AS t(org_id, asset_id, min_us, min_seq, max_us, max_seq)
       CROSS JOIN LATERAL (
         (SELECT ${chunkColumns}, false AS after FROM scan_read_chunks c WHERE ${match} AND (c.first_at, c.first_seq) <= (${from}, t.min_seq)
           ORDER BY c.first_at DESC, c.first_seq DESC LIMIT 1)
         UNION ALL
         (SELECT ${chunkColumns}, false AS after FROM scan_read_chunks c WHERE ${match} AND (c.first_at, c.first_seq) > (${from}, t.min_seq)
             AND (c.first_at, c.first_seq) <= (${to}, t.max_seq))
         UNION ALL
         (SELECT ${chunkColumns}, true AS after FROM scan_read_chunks c WHERE ${match} AND (c.first_at, c.first_seq) > (${to}, t.max_seq)
           ORDER BY c.first_at, c.first_seq LIMIT 1)
       ) c`,
      columnArrays(assets, (a) => [a.orgId, a.assetId, a.reads[0]!.us, a.reads[0]!.seq, a.reads.at(-1)!.us, a.reads.at(-1)!.seq]),
    ),
  );
  const byKey = new Map(assets.map((a) => [`${a.orgId}/${a.assetId}`, a]));
  for (const row of result.rows) {
    const asset = byKey.get(`${row.org_id}/${row.asset_id}`)!;
    const [firstUs, firstSeq] = [Number(row.first_us), Number(row.first_seq)];
    const chunk: Chunk = { firstUs, firstSeq, lastUs: Number(row.last_us), lastSeq: Number(row.last_seq), reads: decodeChunk(firstUs, firstSeq, row.data) };
    if (row.after) asset.after = chunk;
    else asset.chunks.push(chunk);
  }
  for (const asset of assets) asset.chunks.sort((a, b) => a.firstUs - b.firstUs || a.firstSeq - b.firstSeq);
}

/** Writes the rewritten chunks of each asset and deletes those that no longer begin a chunk. */
async function writeChunks(tx: pg.PoolClient, writes: ChunkWrite[], gone: ChunkWrite[], state: BatchState): Promise<void> {
  if (gone.length > 0) {
    await tx.query(
      prepared(
        `DELETE FROM scan_read_chunks c USING unnest($1::int[], $2::int[], $3::bigint[], $4::bigint[]) AS g(org_id, asset_id, first_us, first_seq)
          WHERE c.org_id = g.org_id AND c.asset_id = g.asset_id AND c.first_at = ${fromMicros('g.first_us')} AND c.first_seq = g.first_seq`,
        columnArrays(gone, (g) => [g.orgId, g.assetId, g.chunk.firstUs, g.chunk.firstSeq]),
      ),
    );
  }
  if (writes.length === 0) return;
  await ensurePartitions(tx, 'scan_read_chunks', new Set(writes.map((w) => Math.floor(w.chunk.firstUs / 1000))), state.partitions);
  await tx.query(
    prepared(
      `INSERT INTO scan_read_chunks AS c (org_id, asset_id, first_at, first_seq, last_at, last_seq, reads, data)
       SELECT w.org_id, w.asset_id, ${fromMicros('w.first_us')}, w.first_seq, ${fromMicros('w.last_us')}, w.last_seq, w.reads, w.data
         FROM unnest($1::int[], $2::int[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::int[], $8::bytea[])
              AS w(org_id, asset_id, first_us, first_seq, last_us, last_seq, reads, data)
       ON CONFLICT (org_id, asset_id, first_at, first_seq) DO UPDATE
         SET last_at = EXCLUDED.last_at, last_seq = EXCLUDED.last_seq, reads = EXCLUDED.reads, data = EXCLUDED.data`,
      columnArrays(writes, ({ orgId, assetId, chunk: c }) => [orgId, assetId, c.firstUs, c.firstSeq, c.lastUs, c.lastSeq, c.reads.length, encodeChunk(c.reads)]),
    ),
  );
}

/** The visit holding each point (the last visit that begins at or before it), by `org/asset/us/seq`. */
async function visitsHolding(tx: pg.PoolClient, points: Array<{ orgId: number; assetId: number; read: ChunkRead }>): Promise<Map<string, Visit>> {
  if (points.length === 0) return new Map();
  const result = await tx.query<{ org_id: number; asset_id: number; us: string; seq: string; location_id: number; first_us: string; first_seq: string; last_us: string; last_seq: string }>(
    prepared(
      `SELECT t.org_id, t.asset_id, t.us::text AS us, t.seq::text AS seq, v.location_id, ${toMicros('v.first_at')} AS first_us, v.first_seq::text AS first_seq,
              ${toMicros('v.last_at')} AS last_us, v.last_seq::text AS last_seq
         FROM unnest($1::int[], $2::int[], $3::bigint[], $4::bigint[]) AS t(org_id, asset_id, us, seq)
         CROSS JOIN LATERAL (SELECT * FROM asset_visits v WHERE v.org_id = t.org_id AND v.asset_id = t.asset_id
                               AND (v.first_at, v.first_seq) <= (${fromMicros('t.us')}, t.seq) AND v.last_at >= ${fromMicros('t.us')}
                             ORDER BY v.first_at DESC, v.first_seq DESC LIMIT 1) v`,
      columnArrays(points, (p) => [p.orgId, p.assetId, p.read.us, p.read.seq]),
    ),
  );
  return new Map(
    result.rows.map((r) => [
      `${r.org_id}/${r.asset_id}/${r.us}/${r.seq}`,
      { locationId: r.location_id, firstUs: Number(r.first_us), firstSeq: Number(r.first_seq), lastUs: Number(r.last_us), lastSeq: Number(r.last_seq) },
    ]),
  );
}

interface VisitWrite {
  orgId: number;
  assetId: number;
  visit: Visit;
}

/** An asset's current visit to write, with the earliest read of the batch (asset_locations.first_seen_at keeps the least). */
interface CurrentWrite extends VisitWrite {
  firstSeenUs: number;
}

/**
 * Writes visits: the late assets' visits in a range are deleted first, then each visit is updated
 * in place (the current one extended: same first read, later last) or inserted.
 */
async function writeVisits(tx: pg.PoolClient, cleared: ClearedVisits[], writes: VisitWrite[], state: BatchState): Promise<void> {
  if (cleared.length > 0) {
    await tx.query(
      prepared(
        `DELETE FROM asset_visits v USING unnest($1::int[], $2::int[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[]) AS s(org_id, asset_id, from_us, from_seq, to_us, to_seq)
          WHERE v.org_id = s.org_id AND v.asset_id = s.asset_id AND (v.first_at, v.first_seq) >= (${fromMicros('s.from_us')}, s.from_seq)
            AND (s.to_us IS NULL OR (v.first_at, v.first_seq) <= (${fromMicros('s.to_us')}, s.to_seq))`,
        columnArrays(cleared, (c) => [c.orgId, c.assetId, c.from.us, c.from.seq, c.to?.us ?? null, c.to?.seq ?? null]),
      ),
    );
  }
  if (writes.length === 0) return;
  await ensurePartitions(tx, 'asset_visits', new Set(writes.map((w) => Math.floor(w.visit.lastUs / 1000))), state.partitions);
  // The wire times are written with the instants (migration read-model/570), the first one only by an insert.
  const values = columnArrays(writes, ({ orgId, assetId, visit: v }) => [orgId, assetId, v.locationId, v.firstUs, v.firstSeq, v.lastUs, v.lastSeq, microsToRfc3339(v.lastUs)]);
  const rows = `unnest($1::int[], $2::int[], $3::int[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::text[])
                  AS w(org_id, asset_id, location_id, first_us, first_seq, last_us, last_seq, last_text)`;
  await tx.query(
    prepared(
      `WITH updated AS (
         UPDATE asset_visits v SET last_at = ${fromMicros('w.last_us')}, last_seq = w.last_seq, last_at_rfc3339 = w.last_text
           FROM ${rows}
          WHERE v.org_id = w.org_id AND v.asset_id = w.asset_id AND v.first_at = ${fromMicros('w.first_us')} AND v.first_seq = w.first_seq
         RETURNING v.org_id, v.asset_id, v.first_seq)
       INSERT INTO asset_visits (org_id, asset_id, location_id, first_at, first_seq, last_at, last_seq, first_at_rfc3339, last_at_rfc3339)
       SELECT w.org_id, w.asset_id, w.location_id, ${fromMicros('w.first_us')}, w.first_seq, ${fromMicros('w.last_us')}, w.last_seq,
              rfc3339(${fromMicros('w.first_us')}), w.last_text
         FROM ${rows}
        WHERE NOT EXISTS (SELECT 1 FROM updated u WHERE u.org_id = w.org_id AND u.asset_id = w.asset_id AND u.first_seq = w.first_seq)`,
      values,
    ),
  );
}

/**
 * The rows of asset_locations a batch writes: every current visit it changed, and an asset whose
 * batch holds a read earlier than any it had (a late read before its first moves first_seen_at
 * back, the current visit staying), each with the batch's earliest read of it.
 */
function currentWrites(assets: AssetBatch[], currents: Map<string, VisitWrite>): CurrentWrite[] {
  const writes: CurrentWrite[] = [];
  for (const asset of assets) {
    const earliest = Math.min(asset.reads[0]?.us ?? Number.POSITIVE_INFINITY, asset.newestAged?.us ?? Number.POSITIVE_INFINITY);
    const changed = currents.get(`${asset.orgId}/${asset.assetId}`);
    if (changed) writes.push({ ...changed, firstSeenUs: earliest });
    else if (asset.firstSeenUs !== null && earliest < asset.firstSeenUs) writes.push({ orgId: asset.orgId, assetId: asset.assetId, visit: asset.current!, firstSeenUs: earliest });
  }
  return writes;
}

/**
 * Current locations of these assets, and the earliest read of each (the least of the row's and
 * the batch's); counts the assets located for the first time.
 */
async function writeCurrentLocations(tx: pg.PoolClient, currents: CurrentWrite[]): Promise<void> {
  if (currents.length === 0) return;
  await tx.query(
    prepared(
      `WITH upserted AS (
         INSERT INTO asset_locations (org_id, asset_id, location_id, last_seen, dwell_started_at, first_seq, last_seq, first_seen_at,
                                      last_seen_rfc3339, dwell_started_at_rfc3339)
         SELECT c.org_id, c.asset_id, c.location_id, ${fromMicros('c.last_us')}, ${fromMicros('c.first_us')}, c.first_seq, c.last_seq, ${fromMicros('c.first_seen_us')},
                c.last_text, c.first_text
           FROM unnest($1::int[], $2::int[], $3::int[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::text[], $10::text[])
                AS c(org_id, asset_id, location_id, first_us, first_seq, last_us, last_seq, first_seen_us, last_text, first_text)
         ON CONFLICT (org_id, asset_id) DO UPDATE
           SET location_id = EXCLUDED.location_id, last_seen = EXCLUDED.last_seen, dwell_started_at = EXCLUDED.dwell_started_at,
               first_seq = EXCLUDED.first_seq, last_seq = EXCLUDED.last_seq,
               last_seen_rfc3339 = EXCLUDED.last_seen_rfc3339, dwell_started_at_rfc3339 = EXCLUDED.dwell_started_at_rfc3339,
               first_seen_at = least(asset_locations.first_seen_at, EXCLUDED.first_seen_at)
         -- xmax is 0 on a row the statement inserted, not on one it updated.
         RETURNING org_id, xmax = 0 AS created)
       INSERT INTO asset_location_counts AS c (org_id, located)
       SELECT org_id, count(*) FROM upserted WHERE created GROUP BY org_id ORDER BY org_id
       ON CONFLICT (org_id) DO UPDATE SET located = c.located + EXCLUDED.located`,
      columnArrays(currents, ({ orgId, assetId, visit: v, firstSeenUs }) => [
        orgId,
        assetId,
        v.locationId,
        v.firstUs,
        v.firstSeq,
        v.lastUs,
        v.lastSeq,
        firstSeenUs,
        microsToRfc3339(v.lastUs),
        microsToRfc3339(v.firstUs),
      ]),
    ),
  );
}

/** A chunk of an asset, to be written or deleted. */
interface ChunkWrite {
  orgId: number;
  assetId: number;
  chunk: Chunk;
}

/** The visits of an asset that begin in a range (by first read; `to` null: no end), deleted before the writes. */
interface ClearedVisits {
  orgId: number;
  assetId: number;
  from: ReadPoint;
  to: ReadPoint | null;
}

/** What placing a batch's reads writes. */
interface Placement {
  chunkWrites: ChunkWrite[];
  chunkGone: ChunkWrite[];
  cleared: ClearedVisits[];
  visitWrites: VisitWrite[];
  /** The current visits the kept reads changed, by `org/asset`. */
  currents: Map<string, VisitWrite>;
}

/** An asset whose first new read comes before its current visit's last read. */
interface LateAsset {
  asset: AssetBatch;
  /** Its reads of the loaded chunks and the new ones, sorted (and the first read after them, when that is in the next chunk). */
  merged: ChunkRead[];
  /** The reads just before and just after the new ones, if any. */
  prev: ChunkRead | null;
  next: ChunkRead | null;
}

/** Each asset's reads of the batch, sorted; those observed before the retention cutoff only as its newest such read. */
function assetBatches(placed: Read[], state: BatchState): AssetBatch[] {
  const byAsset = new Map<string, AssetBatch>();
  for (const read of placed) {
    const key = `${read.orgId}/${read.assetId}`;
    let asset = byAsset.get(key);
    if (!asset) byAsset.set(key, (asset = { orgId: read.orgId, assetId: read.assetId!, reads: [], newestAged: null, current: null, firstSeenUs: null, chunks: [], after: null }));
    const chunkRead = { us: read.observedUs, seq: read.seq, locationId: read.locationId! };
    if (state.cutoffUs !== null && read.observedUs < state.cutoffUs) {
      if (!asset.newestAged || compareReads(chunkRead, asset.newestAged) > 0) asset.newestAged = chunkRead;
    } else {
      asset.reads.push(chunkRead);
    }
  }
  const assets = [...byAsset.values()];
  for (const asset of assets) asset.reads.sort(compareReads);
  return assets;
}

/** The visits of an asset whose new reads all follow its current visit: extended or added in memory. */
function followNewReads(asset: AssetBatch, placement: Placement): void {
  const { orgId, assetId } = asset;
  const { current, changed } = followReads(asset.current, asset.reads);
  for (const visit of changed) placement.visitWrites.push({ orgId, assetId, visit });
  placement.currents.set(`${orgId}/${assetId}`, { orgId, assetId, visit: current! });
}

/**
 * The new reads of assets with kept reads merged into their chunks; the visits of those whose new
 * reads all follow their current visit (the usual case) extended or added in memory, the others
 * returned to be placed as late reads.
 */
function mergeReads(kept: AssetBatch[], placement: Placement): LateAsset[] {
  const late: LateAsset[] = [];
  for (const asset of kept) {
    const { orgId, assetId } = asset;
    const old = asset.chunks.flatMap((c) => c.reads);
    const merged = [...old, ...asset.reads].sort(compareReads);
    const chunks = chunksOf(merged);
    const starts = new Set(chunks.map((c) => `${c.firstUs}/${c.firstSeq}`));
    for (const chunk of chunks) placement.chunkWrites.push({ orgId, assetId, chunk });
    for (const chunk of asset.chunks) if (!starts.has(`${chunk.firstUs}/${chunk.firstSeq}`)) placement.chunkGone.push({ orgId, assetId, chunk });

    const first = asset.reads[0]!;
    if (!asset.current || isAfter(first, asset.current)) {
      followNewReads(asset, placement);
      continue;
    }
    const last = asset.reads.at(-1)!;
    let prev: ChunkRead | null = null;
    for (const read of old) if (compareReads(read, first) < 0) prev = read;
    const next = old.find((read) => compareReads(read, last) > 0) ?? asset.after?.reads[0] ?? null;
    late.push({ asset, merged: asset.after && next === asset.after.reads[0] ? [...merged, next] : merged, prev, next });
  }
  return late;
}

/**
 * Late reads: the visits from the one holding the read before them to the one holding the read
 * after them are recounted from the reads in between (current-location.ts revisitLateReads).
 */
async function placeLateReads(tx: pg.PoolClient, late: LateAsset[], placement: Placement): Promise<void> {
  if (late.length === 0) return;
  const holding = await visitsHolding(
    tx,
    // With no read before them, the visit holding their first: one that began before the kept
    // detail (retention dropped its first reads), or none.
    late.flatMap(({ asset, prev, next }) =>
      [prev ?? asset.reads[0]!, next].filter((r): r is ChunkRead => r !== null).map((read) => ({ orgId: asset.orgId, assetId: asset.assetId, read })),
    ),
  );
  const holder = (asset: AssetBatch, read: ChunkRead | null) => (read ? (holding.get(`${asset.orgId}/${asset.assetId}/${read.us}/${read.seq}`) ?? null) : null);
  for (const { asset, merged, prev, next } of late) {
    const { orgId, assetId } = asset;
    const revisited = revisitLateReads({
      window: merged.filter((r) => (!prev || compareReads(r, prev) >= 0) && (!next || compareReads(r, next) <= 0)),
      before: holder(asset, prev),
      after: holder(asset, next),
      cut: prev ? null : holder(asset, asset.reads[0]!),
      current: asset.current!,
    });
    placement.cleared.push({ orgId, assetId, from: revisited.from, to: revisited.to });
    for (const visit of revisited.visits) placement.visitWrites.push({ orgId, assetId, visit });
    if (revisited.current) placement.currents.set(`${orgId}/${assetId}`, { orgId, assetId, visit: revisited.current });
  }
}

/**
 * Reads observed before the retention cutoff: only the report, when one is the asset's newest;
 * counted where `tracking retention status` shows them.
 */
async function placeAgedReads(tx: pg.PoolClient, placed: Read[], assets: AssetBatch[], state: BatchState, currents: Map<string, VisitWrite>): Promise<void> {
  const aged = placed.filter((r) => state.cutoffUs !== null && r.observedUs < state.cutoffUs).length;
  if (aged > 0) await tx.query(prepared('UPDATE tracking_retention_cutoffs SET aged_reads = aged_reads + $1 WHERE target = $2', [aged, 'scan_read_chunks']));
  for (const asset of assets) {
    if (!asset.newestAged) continue;
    const key = `${asset.orgId}/${asset.assetId}`;
    const { current, changed } = followReads(currents.get(key)?.visit ?? asset.current, [asset.newestAged]);
    if (changed.length > 0) currents.set(key, { orgId: asset.orgId, assetId: asset.assetId, visit: current! });
  }
}

/** Places each asset's new reads: its chunks, its visits, its current location. */
async function placeReads(tx: pg.PoolClient, placed: Read[], state: BatchState): Promise<void> {
  const assets = assetBatches(placed, state);
  await currentVisits(tx, assets);
  const kept = assets.filter((a) => a.reads.length > 0);
  const placement: Placement = { chunkWrites: [], chunkGone: [], cleared: [], visitWrites: [], currents: new Map() };
  const appended = kept.length > 0 ? await appendToLastChunks(tx, kept) : new Set<AssetBatch>();
  for (const asset of appended) followNewReads(asset, placement);
  const rewritten = appended.size === 0 ? kept : kept.filter((a) => !appended.has(a));
  if (rewritten.length > 0) await loadChunks(tx, rewritten);
  const late = mergeReads(rewritten, placement);
  await placeLateReads(tx, late, placement);
  await placeAgedReads(tx, placed, assets, state, placement.currents);
  await writeChunks(tx, placement.chunkWrites, placement.chunkGone, state);
  await writeVisits(tx, placement.cleared, placement.visitWrites, state);
  await writeCurrentLocations(tx, currentWrites(assets, placement.currents));
}

/**
 * The event's reads of `segment` (by asset; by its row of `unknown_reads` for a read that placed
 * nothing: `unknownSegmentKey`), decoded once in this process for every projection split by asset
 * (projections/segment-reads.ts); without a segment, all of them.
 */
function readsOfSegment(data: ScansRecordedData, readerId: string | null, segment: SegmentOf | undefined): DecodedRead[] {
  const { assigned, unassigned } = segmentReads(data, segment);
  if (unassigned.length === 0) return assigned as DecodedRead[];
  if (!segment || segment.count === 1) return [...assigned, ...unassigned];
  return [...assigned, ...unassigned.filter((read) => segmentOfKey(unknownSegmentKey(data.org_id, readerId, read), segment.count) === segment.index)];
}

/**
 * A decoded read completed with its event's fields, in an object of its own: the decoded one is
 * shared with the other projections (segment-reads.ts). Written out field by field, so every read
 * has one shape (a spread made objects V8 handles several times slower in the code after it).
 */
function completed(decoded: DecodedRead, data: ScansRecordedData, readerId: string | null, recordedMs: number): Read {
  return {
    tag_type: decoded.tag_type,
    value: decoded.value,
    observedUs: decoded.observedUs,
    rssi: decoded.rssi,
    capturePoint: decoded.capturePoint,
    assetId: decoded.assetId,
    cause: decoded.cause,
    readKey: decoded.readKey,
    orgId: data.org_id,
    locationId: data.location_id,
    readerId,
    seq: 0,
    recordedMs,
  };
}

export const trackingProjection: Projection = {
  name: 'tracking',
  tables: ['scan_read_keys', 'scan_read_chunks', 'asset_visits', 'asset_locations', 'asset_location_counts', 'unknown_reads', 'tracking_key_progress'],
  segmentStateTables: ['tracking_key_progress'],
  sequences: ['scan_read_seq'],
  eventTypes: [ScansRecorded.type],
  // By asset; a read that placed nothing by its row of unknown_reads (docs/design.md "Segmented processors").
  splittable: true,
  async apply(events: RecordedEvent[], tx: pg.PoolClient, options?: ApplyOptions): Promise<void> {
    const segment = options?.segment;
    const reads: Read[] = [];
    const recordings: Recording[] = [];
    const seen = new Set<string>();
    for (const event of events) {
      if (event.type !== ScansRecorded.type) continue;
      const data = event.data as ScansRecordedData;
      const readerId = data.source.kind === 'reader' ? data.source.reader_id : null;
      const recordedMs = event.recordedAt.getTime();
      for (const decoded of readsOfSegment(data, readerId, segment)) {
        recordings.push({ readKey: decoded.readKey, recordedMs });
        if (seen.has(decoded.readKey)) continue;
        seen.add(decoded.readKey);
        reads.push(completed(decoded, data, readerId, recordedMs));
      }
    }
    if (reads.length === 0) return;
    if (segment) {
      // Segments draw from the sequence at the same time: one value a read, each above every value drawn before (the log order within a segment).
      const seqs = await tx.query<{ seq: string }>(prepared(`SELECT nextval('scan_read_seq')::text AS seq FROM generate_series(1, $1)`, [reads.length]));
      reads.forEach((read, i) => (read.seq = Number(seqs.rows[i]!.seq)));
    } else {
      const base = await allocateSeqs(tx, reads.length);
      reads.forEach((read, i) => (read.seq = base + i));
    }
    const state = await batchState(tx, reads, recordings);
    const fresh = await newReads(tx, reads, recordings, state, segment);
    const unknown = fresh.filter((r) => r.assetId === null);
    if (unknown.length > 0) await countUnknown(tx, unknown);
    const placed = fresh.filter((r) => r.assetId !== null && r.locationId !== null);
    if (placed.length > 0) await placeReads(tx, placed, state);
  },
};
