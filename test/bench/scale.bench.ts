/**
 * A year of scans on one Postgres (issue 25, "Measure"): BENCH_SCALE_READS reads (default
 * 50,000,000; `--quick`: 1,000,000) over 13 months, BENCH_SCALE_ASSETS assets (5,000) with an RFID
 * tag each, BENCH_SCALE_READERS fixed readers (200), one at a location each. Run only when named:
 * `npm run bench -- scale`.
 *
 * The workload: reader reports spread evenly over the 13 months, each a 20-second window of one
 * reader (chosen at random) as one ScansRecorded event. 85 % of the tags are parked: each is in one
 * reader's field, read 2 to 6 times a window, and moves to another reader now and then (1 in 2,000
 * of its windows). The other 15 % move: each is at one reader, read 1 to 4 times a window, and goes
 * to another reader after 3 windows in 5. Reads of one tag arrive in observed order (no late reads,
 * no redeliveries: their cost is the tracking bench's).
 *
 * Generated straight into the log and the read models, not through ingest and the projector:
 * - the log: ScansRecorded payloads from the real codec (encodeReads), inserted in bulk into
 *   `event_store.events` as append_events inserts them (plus `recorded_at`, the time of the read's
 *   window, so that the log's time runs over the 13 months as it would), and `event_streams`;
 * - the read models: each asset's reads cut into chunks (the projection's rule: 128 reads, never
 *   across a month; encodeChunk), its visits (maximal runs at one location), its current location,
 *   the keys of the reads the log recorded within the duplicate horizon, partitions made by
 *   ensurePartitions, all inserted in bulk.
 * The rebuild at the end (the real projection code, from archive and log) checks that these are
 * exactly the tables the service builds: an MD5 of every tracking table before and after.
 *
 * Measured, in one run:
 * - total bytes and bytes per read of each table, heap (with TOAST) and indexes, after VACUUM ANALYZE;
 * - GET /reports/asset-locations?limit=50 and a page of 50 visits of GET /assets/{id}/history at
 *   BENCH_SCALE_CONNECTIONS (8) over real HTTP, served by an api process of its own, each the
 *   median of BENCH_SCALE_ROUNDS (3) runs, next to the same figures on a log of
 *   BENCH_SCALE_BASELINE_READS (1,000,000; `--quick`: 200,000) generated the same way in a
 *   database of its own (target: p50 and p99 within ±20 %);
 * - an archive run of the scan events recorded before SCAN_RETENTION_DAYS (90), then `projections
 *   rebuild` of every projection from archive and log: events/s and reads/s, and equality;
 * - a retention run (SCAN_RETENTION_DAYS 90, HISTORY_RETENTION_DAYS 400, the defaults): its time and
 *   the bytes it frees.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { allProjections } from '../../projections/index.js';
import { KEY_HORIZON_DAYS, trackingProjection } from '../../projections/tracking/projection.js';
import { ensurePartitions, listPartitions, dayPartition, type Partition, type PartitionedTable } from '../../projections/tracking/partitions.js';
import { CHUNK_READS, encodeChunk, monthStartUs, type ChunkRead } from '../../projections/tracking/read-chunks.js';
import { runRetention } from '../../projections/tracking/retention.js';
import { archiveScanEvents } from '../../shared/archive/scan-archive.js';
import { loadConfig } from '../../shared/config.js';
import { applyAllMigrations } from '../../shared/db/migrate.js';
import { createPool } from '../../shared/db/pool.js';
import { columnArrays } from '../../shared/db/prepared.js';
import { ScansRecorded, locationScansStream, type ScanSource, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import { encodeReads, readKey, type RawRead } from '../../shared/domain/scans/read-codec.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import type { Position } from '../../shared/event-store/port.js';
import { createLogger } from '../../shared/logger.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import { rebuildProjections } from '../../shared/projection/rebuild.js';
import { seededRandom } from '../../shared/random.js';
import type { ServiceContext } from '../../shared/service-context.js';
import { startService } from '../../services/service.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import type { LoadResult, LoadSpec } from './load.js';
import type { BenchContext, BenchRow } from './types.js';
import { seedTaggedWorld, type TaggedWorld } from './tagged-world.js';
import { startRole } from './reader-load.js';

const READS = Number(process.env.BENCH_SCALE_READS ?? 50_000_000);
const BASELINE_READS = Number(process.env.BENCH_SCALE_BASELINE_READS ?? 1_000_000);
const ASSETS = Number(process.env.BENCH_SCALE_ASSETS ?? 5000);
const READERS = Number(process.env.BENCH_SCALE_READERS ?? 200);
const MOVING = Number(process.env.BENCH_SCALE_MOVING ?? 0.15);
const CONNECTIONS = Number(process.env.BENCH_SCALE_CONNECTIONS ?? 8);
const SECONDS = Number(process.env.BENCH_SCALE_SECONDS ?? 10);
const WARMUP_SECONDS = Number(process.env.BENCH_SCALE_WARMUP_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_SCALE_ROUNDS ?? 3);
/** `1`: stop after the views (bytes and views only: no archive, rebuild or retention run). */
const VIEWS_ONLY = process.env.BENCH_SCALE_VIEWS_ONLY === '1';
const SCAN_RETENTION_DAYS = 90;
const HISTORY_RETENTION_DAYS = 400;

const DAY_MS = 86_400_000;
/** 13 months of reads, ending a day before now. */
const SPAN_DAYS = 395;
const WINDOW_US = 20_000_000;
const AT = '2025-01-01T00:00:00.000Z';
/** Bulk inserts: rows per statement. */
const ROWS_PER_INSERT = 5000;
/** Scan events per transaction of the log's inserts. */
const EVENTS_PER_TX = 1000;
const TRACKING_TABLES = trackingProjection.tables;

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;
const ms = (n: number) => `${n.toFixed(1)} ms`;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

// ---------------------------------------------------------------------------------------------
// Master data, appended through the store and projected.

type World = TaggedWorld;

/** One location per reader, and the tagged assets. */
function seed(ctx: ServiceContext, orgId: number): Promise<{ world: World; last: Position }> {
  return seedTaggedWorld(ctx, {
    orgId,
    locations: READERS,
    assets: ASSETS,
    at: AT,
    location: (id) => ({ externalKey: `DOCK-${String(id).padStart(5, '0')}`, name: `Dock ${id}` }),
    asset: (id) => ({ externalKey: `PALLET-${String(id).padStart(7, '0')}`, name: `Pallet ${id}` }),
  });
}

// ---------------------------------------------------------------------------------------------
// The scan log and the tracking read models, generated together.

/** `k` distinct offsets in [0, span), ascending. */
function offsets(k: number, span: number, rnd: () => number): number[] {
  const out = Array.from({ length: k }, () => Math.floor(rnd() * span)).sort((a, b) => a - b);
  for (let i = 1; i < out.length; i++) if (out[i]! <= out[i - 1]!) out[i] = out[i - 1]! + 1;
  return out;
}

interface ChunkRow {
  assetId: number;
  firstUs: number;
  firstSeq: number;
  lastUs: number;
  lastSeq: number;
  reads: number;
  data: Buffer;
}

interface VisitRow {
  assetId: number;
  locationId: number;
  firstUs: number;
  firstSeq: number;
  lastUs: number;
  lastSeq: number;
}

interface Generated {
  reads: number;
  events: number;
  seconds: number;
  /** Of the reads' observed times. */
  firstUs: number;
  lastUs: number;
  chunks: number;
  visits: number;
  keys: number;
}

/** Bulk writes of one table, ROWS_PER_INSERT rows a statement, in the read_model schema. */
class Writer<T> {
  private rows: T[] = [];
  written = 0;
  constructor(
    private readonly flushRows: (rows: T[]) => Promise<void>,
  ) {}
  async add(row: T): Promise<void> {
    this.rows.push(row);
    if (this.rows.length >= ROWS_PER_INSERT) await this.flush();
  }
  async flush(): Promise<void> {
    if (this.rows.length === 0) return;
    const rows = this.rows;
    this.rows = [];
    this.written += rows.length;
    await this.flushRows(rows);
  }
}

const fromMicros = (us: string) => `(timestamptz 'epoch' + ${us} * interval '1 microsecond')`;

async function generate(pool: pg.Pool, world: World, reads: number, log: (message: string) => void): Promise<Generated> {
  const started = performance.now();
  const rnd = seededRandom(25);
  const { orgId, assetIds, epcs, locationIds } = world;
  const client = await pool.connect();
  try {
    await client.query('SET search_path = read_model');
    const partitions: Partition[] = await listPartitions(client, ['scan_read_chunks', 'asset_visits', 'scan_read_keys']);
    const ensure = async (table: PartitionedTable, instantsMs: Iterable<number>) => {
      await client.query('BEGIN');
      await ensurePartitions(client, table, instantsMs, partitions);
      await client.query('COMMIT');
    };

    const chunks = new Writer<ChunkRow>(async (rows) => {
      await ensure('scan_read_chunks', new Set(rows.map((r) => Math.floor(r.firstUs / 1000))));
      await client.query(
        `INSERT INTO scan_read_chunks (org_id, asset_id, first_at, first_seq, last_at, last_seq, reads, data)
         SELECT $1::int, w.asset_id, ${fromMicros('w.first_us')}, w.first_seq, ${fromMicros('w.last_us')}, w.last_seq, w.reads, w.data
           FROM unnest($2::int[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::int[], $8::bytea[]) AS w(asset_id, first_us, first_seq, last_us, last_seq, reads, data)`,
        [orgId, ...columnArrays(rows, (r) => [r.assetId, r.firstUs, r.firstSeq, r.lastUs, r.lastSeq, r.reads, r.data])],
      );
    });
    const visits = new Writer<VisitRow>(async (rows) => {
      await ensure('asset_visits', new Set(rows.map((r) => Math.floor(r.lastUs / 1000))));
      await client.query(
        `INSERT INTO asset_visits (org_id, asset_id, location_id, first_at, first_seq, last_at, last_seq, first_at_rfc3339, last_at_rfc3339)
         SELECT $1::int, w.asset_id, w.location_id, ${fromMicros('w.first_us')}, w.first_seq, ${fromMicros('w.last_us')}, w.last_seq,
                rfc3339(${fromMicros('w.first_us')}), rfc3339(${fromMicros('w.last_us')})
           FROM unnest($2::int[], $3::int[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[]) AS w(asset_id, location_id, first_us, first_seq, last_us, last_seq)`,
        [orgId, ...columnArrays(rows, (r) => [r.assetId, r.locationId, r.firstUs, r.firstSeq, r.lastUs, r.lastSeq])],
      );
    });
    interface EventRow {
      stream: string;
      revision: number;
      data: string;
      recordedMs: number;
    }
    const events = new Writer<EventRow>(async (rows) => {
      for (let i = 0; i < rows.length; i += EVENTS_PER_TX) {
        const part = rows.slice(i, i + EVENTS_PER_TX);
        await client.query(
          `INSERT INTO event_store.events (event_id, stream_id, stream_revision, type, data, metadata, recorded_at)
           SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::text[], $5::jsonb[], $6::jsonb[], $7::timestamptz[])`,
          columnArrays(part, (r) => [randomUUID(), r.stream, r.revision, ScansRecorded.type, r.data, `{"schema_version":${ScansRecorded.version}}`, new Date(r.recordedMs).toISOString()]),
        );
      }
    });

    // Each asset's open chunk and current visit (the projection's cut: read-chunks.ts chunksOf, current-location.ts visitsOf).
    const open: ChunkRead[][] = assetIds.map(() => []);
    const openMonth = new Float64Array(assetIds.length).fill(Number.NaN);
    const current: Array<VisitRow | null> = assetIds.map(() => null);
    const closeChunk = async (a: number) => {
      const list = open[a]!;
      if (list.length === 0) return;
      const first = list[0]!;
      const last = list.at(-1)!;
      await chunks.add({ assetId: assetIds[a]!, firstUs: first.us, firstSeq: first.seq, lastUs: last.us, lastSeq: last.seq, reads: list.length, data: encodeChunk(list) });
      open[a] = [];
    };
    const place = async (a: number, read: ChunkRead) => {
      const month = monthStartUs(read.us);
      if (open[a]!.length === CHUNK_READS || month !== openMonth[a]) await closeChunk(a);
      openMonth[a] = month;
      open[a]!.push(read);
      const visit = current[a];
      if (visit && visit.locationId === read.locationId) {
        visit.lastUs = read.us;
        visit.lastSeq = read.seq;
      } else {
        if (visit) await visits.add(visit);
        current[a] = { assetId: assetIds[a]!, locationId: read.locationId, firstUs: read.us, firstSeq: read.seq, lastUs: read.us, lastSeq: read.seq };
      }
    };

    // Where each tag is: parked tags first, then the moving ones.
    const moving = Math.round(ASSETS * MOVING);
    const parkedCount = ASSETS - moving;
    const at = Array.from({ length: READERS }, () => new Set<number>());
    for (let a = 0; a < ASSETS; a++) at[Math.floor(rnd() * READERS)]!.add(a);
    const isMoving = (a: number) => a >= parkedCount;
    const perReport = (parkedCount * 4 + moving * 2.5) / READERS;
    const reports = Math.ceil(reads / perReport);
    const endUs = (Date.now() - DAY_MS) * 1000;
    const startUs = endUs - SPAN_DAYS * DAY_MS * 1000;
    const spacingUs = Math.floor((endUs - startUs) / reports);
    const windowUs = Math.min(WINDOW_US, Math.floor(spacingUs / 2));
    // The keys the projection keeps: the reads the log recorded in the horizon before its newest
    // event (days whose partition ends after that), filtered at the end.
    const keyCandidates: Array<{ key: string; recordedMs: number }> = [];
    const keysFromMs = endUs / 1000 - (KEY_HORIZON_DAYS + 3) * DAY_MS;
    // The master data was entered before the first scans (the archive takes the log in order up
    // to the first event recorded after its cutoff).
    await client.query('UPDATE event_store.events SET recorded_at = $1', [new Date(startUs / 1000 - DAY_MS).toISOString()]);
    await client.query('VACUUM event_store.events');
    const revisions = new Map<string, number>();
    let seq = 0;
    let produced = 0;
    let eventCount = 0;
    let newestRecordedMs = 0;
    let lastProgress = 0;
    for (let k = 0; produced < reads; k++) {
      const windowStart = startUs + k * spacingUs + Math.floor(rnd() * (spacingUs - windowUs));
      const c = Math.floor(rnd() * READERS);
      const locationId = locationIds[c]!;
      const list: Array<RawRead & { a: number }> = [];
      for (const a of at[c]!) {
        const n = isMoving(a) ? 1 + Math.floor(rnd() * 4) : 2 + Math.floor(rnd() * 5);
        const rssi = -48 - ((a * 7) % 25);
        for (const offset of offsets(n, windowUs, rnd)) {
          list.push({ a, tag_type: 'rfid', value: epcs[a]!, observedUs: windowStart + offset, rssi: rssi + Math.floor(rnd() * 7) - 3, capturePoint: `ant-${1 + Math.floor(rnd() * 2)}` });
        }
      }
      if (list.length > 0) {
        list.sort((x, y) => x.observedUs - y.observedUs);
        const source: ScanSource = { kind: 'reader', reader_id: `reader-${locationId}`, capture_points: [] };
        const { capturePoints, ...encoded } = encodeReads(list, (read) => ({ assetId: assetIds[(read as RawRead & { a: number }).a]!, cause: null }));
        source.capture_points = capturePoints;
        const recordedMs = Math.floor(list.at(-1)!.observedUs / 1000) + 800 + Math.floor(rnd() * 400);
        newestRecordedMs = Math.max(newestRecordedMs, recordedMs);
        const data: ScansRecordedData = { org_id: orgId, location_id: locationId, source, ...encoded, at: new Date(recordedMs - 5).toISOString() };
        const stream = locationScansStream(orgId, locationId);
        const revision = (revisions.get(stream) ?? -1) + 1;
        revisions.set(stream, revision);
        await events.add({ stream, revision, data: JSON.stringify(data), recordedMs });
        eventCount++;
        // The projection's order: the event's reads in their order, a seq each.
        for (const read of list) {
          seq++;
          await place(read.a, { us: read.observedUs, seq, locationId });
          if (recordedMs >= keysFromMs) keyCandidates.push({ key: readKey(orgId, source, read), recordedMs });
        }
        produced += list.length;
      }
      // Moves, after the window.
      for (const a of [...at[c]!]) {
        if (rnd() >= (isMoving(a) ? 0.6 : 0.0005)) continue;
        let to = Math.floor(rnd() * (READERS - 1));
        if (to >= c) to++;
        at[c]!.delete(a);
        at[to]!.add(a);
      }
      if (produced - lastProgress >= 1_000_000) {
        lastProgress = produced;
        log(`  ${produced.toLocaleString('en-US')} reads generated (${((performance.now() - started) / 1000).toFixed(0)} s)`);
      }
    }
    await events.flush();
    await client.query(
      `INSERT INTO event_store.event_streams (stream_id, revision) SELECT * FROM unnest($1::text[], $2::bigint[])
       ON CONFLICT (stream_id) DO UPDATE SET revision = EXCLUDED.revision`,
      [[...revisions.keys()], [...revisions.values()]],
    );
    for (let a = 0; a < assetIds.length; a++) await closeChunk(a);
    await chunks.flush();
    const currents = current.filter((v): v is VisitRow => v !== null);
    for (const visit of currents) await visits.add(visit);
    await visits.flush();
    await client.query(
      `INSERT INTO asset_locations (org_id, asset_id, location_id, last_seen, dwell_started_at, first_seq, last_seq, first_seen_at, last_seen_rfc3339, dwell_started_at_rfc3339)
       -- first_seen_at: no later than the asset's first read; -infinity is never later.
       SELECT $1::int, c.asset_id, c.location_id, ${fromMicros('c.last_us')}, ${fromMicros('c.first_us')}, c.first_seq, c.last_seq, timestamptz '-infinity',
              rfc3339(${fromMicros('c.last_us')}), rfc3339(${fromMicros('c.first_us')})
         FROM unnest($2::int[], $3::int[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[]) AS c(asset_id, location_id, first_us, first_seq, last_us, last_seq)`,
      [orgId, ...columnArrays(currents, (v) => [v.assetId, v.locationId, v.firstUs, v.firstSeq, v.lastUs, v.lastSeq])],
    );
    await client.query('INSERT INTO asset_location_counts (org_id, located) VALUES ($1, $2)', [orgId, currents.length]);
    await client.query(`SELECT setval('scan_read_seq', $1)`, [seq]);
    // The projector drops a day of keys once it ends more than the horizon and a day before the newest event's time.
    const keys = keyCandidates.filter((k) => dayPartition('scan_read_keys', k.recordedMs).toMs > newestRecordedMs - (KEY_HORIZON_DAYS + 1) * DAY_MS);
    for (let i = 0; i < keys.length; i += ROWS_PER_INSERT) {
      const part = keys.slice(i, i + ROWS_PER_INSERT);
      await ensure('scan_read_keys', new Set(part.map((k) => k.recordedMs)));
      await client.query('INSERT INTO scan_read_keys (read_key, recorded_at) SELECT * FROM unnest($1::uuid[], $2::timestamptz[])', columnArrays(part, (k) => [k.key, new Date(k.recordedMs).toISOString()]));
    }
    return { reads: produced, events: eventCount, seconds: (performance.now() - started) / 1000, firstUs: startUs, lastUs: endUs, chunks: chunks.written, visits: visits.written, keys: keys.length };
  } finally {
    client.release();
  }
}

// ---------------------------------------------------------------------------------------------
// Sizes.

interface TableSize {
  heap: number;
  indexes: number;
}

/** Heap (with TOAST) and index bytes of the log's tables and of each tracking table, partitions summed, after VACUUM ANALYZE. */
async function sizes(pool: pg.Pool): Promise<Map<string, TableSize>> {
  const tables = ['event_store.events', 'event_store.event_streams', ...TRACKING_TABLES.map((t) => `read_model.${t}`)];
  for (const table of tables) await pool.query(`VACUUM ANALYZE ${table}`);
  const { rows } = await pool.query<{ name: string; heap: string; indexes: string }>(
    `SELECT t.name,
            coalesce((SELECT sum(pg_table_size(p.relid)) FROM pg_partition_tree(t.name::regclass) p), pg_table_size(t.name::regclass))::text AS heap,
            coalesce((SELECT sum(pg_indexes_size(p.relid)) FROM pg_partition_tree(t.name::regclass) p), pg_indexes_size(t.name::regclass))::text AS indexes
       FROM unnest($1::text[]) AS t(name)`,
    [tables],
  );
  return new Map(rows.map((r) => [r.name.replace(/^(event_store|read_model)\./, ''), { heap: Number(r.heap), indexes: Number(r.indexes) }]));
}

/**
 * An MD5 of each tracking table's rows. Of the keys, those the log recorded in the last
 * KEY_HORIZON_DAYS only: the projector drops a day of keys at the first batch after it expires, so
 * a batch that spans more than the horizon (a rebuild's, of 5,000 events) leaves the older days
 * of its own span until the next batch or retention run.
 */
async function digest(pool: pg.Pool, keysFrom: Date): Promise<Record<string, string>> {
  const sums: Record<string, string> = {};
  for (const table of TRACKING_TABLES) {
    const where = table === 'scan_read_keys' ? 'WHERE t.recorded_at >= $1' : '';
    const { rows } = await pool.query<{ md5: string }>(
      `SELECT md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), '')) AS md5 FROM read_model."${table}" t ${where}`,
      table === 'scan_read_keys' ? [keysFrom.toISOString()] : [],
    );
    sums[table] = rows[0]!.md5;
  }
  return sums;
}

// ---------------------------------------------------------------------------------------------
// HTTP, with autocannon in a process of its own (load.ts).

const LOAD_SCRIPT = fileURLToPath(new URL('./load.ts', import.meta.url));

function runLoad(spec: LoadSpec): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', LOAD_SCRIPT, JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let result: LoadResult | null = null;
    readline.createInterface({ input: child.stdout }).on('line', (line) => {
      if (line !== 'started') result = JSON.parse(line) as LoadResult;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0 || !result) return reject(new Error(`load generator exited with ${code}`));
      const r: LoadResult = result;
      if (r.non2xx > 0 || r.errors > 0) return reject(new Error(`GET ${spec.url}: ${r.non2xx} non-2xx, ${r.errors} errors`));
      resolve(r);
    });
  });
}

interface Latency {
  p50: number;
  p99: number;
  rps: number;
}

/** ROUNDS runs after a warm-up; the median of each figure. */
async function latency(url: string, headers: Record<string, string>): Promise<Latency> {
  if (WARMUP_SECONDS > 0) await runLoad({ url, headers, connections: CONNECTIONS, seconds: WARMUP_SECONDS });
  const runs: LoadResult[] = [];
  for (let i = 0; i < ROUNDS; i++) runs.push(await runLoad({ url, headers, connections: CONNECTIONS, seconds: SECONDS }));
  return { p50: median(runs.map((r) => r.p50)), p99: median(runs.map((r) => r.p99)), rps: median(runs.map((r) => r.requests / r.seconds)) };
}

// ---------------------------------------------------------------------------------------------
// One installation: a database, the service on it, the log and read models generated.

interface Installation {
  url: string;
  /** The key that encrypts the installation's signing keys: an api process of its own verifies the bench's API key with it. */
  keyEncryptionKey: string;
  pool: pg.Pool;
  service: Awaited<ReturnType<typeof startService>>;
  world: World;
  generated: Generated;
  /** The tables before the scans (master data in the log; empty tracking tables). */
  seededSizes: Map<string, TableSize>;
  headers: Record<string, string>;
}

async function install(url: string, pool: pg.Pool, reads: number, log: (message: string) => void): Promise<Installation> {
  const keyEncryptionKey = randomBytes(32).toString('base64');
  const config = loadConfig({
    PORT: '0',
    OPS_PORT: '0',
    INGEST_PORT: '0',
    ROLES: 'api',
    LOG_LEVEL: 'silent',
    PG_POOL_SIZE: '20',
    RATE_LIMIT_PER_MINUTE: '100000000',
    RATE_LIMIT_BURST: '100000000',
    SIGNING_KEY_ENCRYPTION_KEY: keyEncryptionKey,
  });
  const service = await startService(config, url, createLogger('silent'));
  try {
    const { ctx } = service;
    // The master data is projected by a projector of its own (the service runs the api role alone); stopped before the scans.
    const runtime = new ProjectorRuntime({
      store: ctx.store,
      pool: ctx.pool,
      projections: allProjections(),
      log: createLogger('error'),
      onCheckpoint: (name, position) => ctx.checkpoints.advance(name, position),
    });
    runtime.start();
    const org = await createOrg(ctx, 'Scale bench');
    const key = await mintApiKey(ctx, { orgId: org.id, scopes: ['tracking:read', 'assets:read'] });
    log(`seeding ${READERS} reader locations and ${ASSETS} assets …`);
    const seeded = await seed(ctx, org.id);
    await ctx.checkpoints.waitForCheckpoint(seeded.last, { timeoutMs: 10 * 60_000 });
    await runtime.stop();
    // Statistics, as an installation that has run a while has them (autovacuum would, minutes later).
    for (const table of ['assets', 'tags', 'locations', 'asset_location_counts']) await ctx.pool.query(`VACUUM ANALYZE read_model.${table}`);
    const seededSizes = await sizes(pool);
    log(`generating ${reads.toLocaleString('en-US')} reads over ${SPAN_DAYS} days into the log and the read models …`);
    const generated = await generate(pool, seeded.world, reads, log);
    log(
      `generated ${generated.reads.toLocaleString('en-US')} reads in ${generated.events} events, ${generated.chunks} chunks, ${generated.visits} visits, ${generated.keys} keys in ${generated.seconds.toFixed(1)} s`,
    );
    return { url, keyEncryptionKey, pool, service, world: seeded.world, generated, seededSizes, headers: { authorization: `Bearer ${key.token}` } };
  } catch (error) {
    await service.stop();
    throw error;
  }
}

interface Views {
  report: Latency;
  history: Latency;
  historyVisits: number;
}

/**
 * The views, served by the api role as a process of its own (`services/main.ts`), as deployed:
 * not by the bench's process, whose heap has just generated the reads (at 50 million, a
 * gigabyte and more, which its garbage collector then works through while the service in it
 * answers).
 */
async function views(inst: Installation): Promise<Views> {
  const busiest = await inst.pool.query<{ asset_id: number; visits: number }>(
    'SELECT asset_id, count(*)::int AS visits FROM read_model.asset_visits WHERE org_id = $1 GROUP BY asset_id ORDER BY count(*) DESC, asset_id LIMIT 1',
    [inst.world.orgId],
  );
  const { asset_id: asset, visits } = busiest.rows[0]!;
  const service = await startRole('api', {
    DATABASE_URL: inst.url,
    SIGNING_KEY_ENCRYPTION_KEY: inst.keyEncryptionKey,
    PG_POOL_SIZE: '20',
    RATE_LIMIT_PER_MINUTE: '100000000',
    RATE_LIMIT_BURST: '100000000',
  });
  try {
    const api = service.api;
    const report = await latency(`${api}/reports/asset-locations?limit=50`, inst.headers);
    const history = await latency(`${api}/assets/${asset}/history?limit=50`, inst.headers);
    return { report, history, historyVisits: visits };
  } finally {
    await service.stop();
  }
}

async function otherDatabase(url: string, name: string): Promise<{ url: string; pool: pg.Pool }> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)}`);
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  } finally {
    await admin.end();
  }
  const other = new URL(url);
  other.pathname = `/${name}`;
  const pool = createPool(other.toString(), { max: 10, applicationName: 'bench' });
  await applyAllMigrations(pool);
  return { url: other.toString(), pool };
}

function viewRows(size: string, measured: Views, baseline: Views | null, baselineReads: number): BenchRow[] {
  const row = (name: string, m: Latency, b: Latency | undefined): BenchRow => {
    const within = (x: number, y: number) => Math.abs(x - y) <= 0.2 * y;
    return {
      bench: 'scale',
      case: `${size}: ${CONNECTIONS} conn, ${name}, p50 ${ms(m.p50)}, p99 ${ms(m.p99)} (median of ${ROUNDS})${b ? `; at ${baselineReads.toLocaleString('en-US')} reads: p50 ${ms(b.p50)}, p99 ${ms(b.p99)}` : ''}`,
      events: Math.round(m.rps * SECONDS),
      seconds: SECONDS,
      ...(b ? { baseline: { label: `${baselineReads.toLocaleString('en-US')} reads`, events: Math.round(b.rps * SECONDS), seconds: SECONDS } } : {}),
      ...(b ? { target: { label: 'p50 and p99 within ±20 % of the smaller log', met: within(m.p50, b.p50) && within(m.p99, b.p99) } } : {}),
    };
  };
  return [
    row('GET /reports/asset-locations?limit=50', measured.report, baseline?.report),
    row(`GET /assets/{id}/history?limit=50 (${measured.historyVisits} visits)`, measured.history, baseline?.history),
  ];
}

export async function run(bench: BenchContext): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const load = (await fs.readFile('/proc/loadavg', 'utf8').catch(() => '')).split(' ').slice(0, 3).join(' ');
  const size = `${(READS / 1e6).toFixed(READS < 1e6 ? 1 : 0)}M reads`;

  // The smaller log first, in a database of its own: its view latencies are the baseline.
  let baseline: Views | null = null;
  if (BASELINE_READS > 0 && BASELINE_READS < READS) {
    const db = await otherDatabase(bench.url, 'bench_scale_baseline');
    try {
      const inst = await install(db.url, db.pool, BASELINE_READS, bench.log);
      try {
        await sizes(db.pool);
        bench.log(`views at ${BASELINE_READS.toLocaleString('en-US')} reads …`);
        baseline = await views(inst);
      } finally {
        await inst.service.stop();
      }
    } finally {
      await db.pool.end();
    }
  }

  const inst = await install(bench.url, bench.pool, READS, bench.log);
  const { pool } = bench;
  const { generated } = inst;
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'bench-scale-archive-'));
  const store = new PostgresEventStore(pool, bench.url);
  try {
    const n = generated.reads;
    rows.push({
      bench: 'scale',
      case: `generate ${n.toLocaleString('en-US')} reads over ${SPAN_DAYS} days (${ASSETS} assets, ${Math.round(MOVING * 100)} % moving, ${READERS} readers) into log and read models: ${generated.events} events, ${generated.chunks} chunks, ${generated.visits} visits, ${generated.keys} keys; load ${load}; reads/s`,
      events: n,
      seconds: generated.seconds,
    });

    // 1. Bytes.
    bench.log('sizes …');
    const before = await sizes(pool);
    let total = 0;
    // Of the scans alone: what the tables held before them (master data, empty partitions) taken off.
    const grown = new Map([...before].map(([table, s]) => {
      const seeded = inst.seededSizes.get(table) ?? { heap: 0, indexes: 0 };
      return [table, { heap: s.heap - seeded.heap, indexes: s.indexes - seeded.indexes }] as const;
    }));
    for (const [table, s] of grown) {
      total += s.heap + s.indexes;
      rows.push({
        bench: 'scale',
        case: `${size}: ${table}, ${mb(s.heap + s.indexes)} (heap ${mb(s.heap)}, indexes ${mb(s.indexes)}; ${(s.indexes / n).toFixed(2)} B/read of indexes)`,
        events: n,
        seconds: 0,
        quantity: `${((s.heap + s.indexes) / n).toFixed(2)} B/read`,
      });
    }
    const model = [...grown].filter(([t]) => TRACKING_TABLES.includes(t)).reduce((sum, [, s]) => sum + s.heap + s.indexes, 0);
    rows.push({ bench: 'scale', case: `${size}: all tables (what the scans added), ${mb(total)} (read models ${mb(model)}, ${(model / n).toFixed(2)} B/read)`, events: n, seconds: 0, quantity: `${(total / n).toFixed(2)} B/read` });

    // 2. Views.
    bench.log('views …');
    try {
      rows.push(...viewRows(size, await views(inst), baseline, BASELINE_READS));
    } finally {
      await inst.service.stop();
    }
    if (VIEWS_ONLY) return rows;

    // 3. Archive, then rebuild from archive and log.
    // One instant for both digests (the keys' window must not move between them).
    const keysFrom = new Date(Date.now() - KEY_HORIZON_DAYS * DAY_MS);
    const tablesBefore = await digest(pool, keysFrom);
    const cutoff = new Date(Date.now() - SCAN_RETENTION_DAYS * DAY_MS);
    bench.log(`archiving scan events recorded before ${cutoff.toISOString()} …`);
    const logBefore = before.get('events')!;
    const archived = await archiveScanEvents({ pool, dir, olderThan: cutoff, projections: [] });
    await pool.query('VACUUM FULL event_store.events');
    const logAfter = (await sizes(pool)).get('events')!;
    const freed = logBefore.heap + logBefore.indexes - logAfter.heap - logAfter.indexes;
    const archivedReads = Math.round(n * (archived.events / generated.events));
    rows.push({
      bench: 'scale',
      case: `${size}: archive ${archived.events} scan events (about ${archivedReads.toLocaleString('en-US')} reads, recorded more than ${SCAN_RETENTION_DAYS} days ago): ${archived.segments} segments, ${mb(archived.bytes)}; the log gives back ${mb(freed)} (VACUUM FULL); events/s`,
      events: archived.events,
      seconds: archived.seconds,
    });
    rows.push({ bench: 'scale', case: `${size}: segment bytes per archived read`, events: archivedReads, seconds: 0, quantity: `${(archived.bytes / archivedReads).toFixed(2)} B/read` });

    bench.log('rebuilding every projection from archive and log …');
    const rebuilt = await rebuildProjections({ store, pool, log: createLogger('warn'), projections: allProjections(), archiveDir: dir });
    const tablesAfter = await digest(pool, keysFrom);
    const different = TRACKING_TABLES.filter((t) => tablesBefore[t] !== tablesAfter[t]);
    rows.push({
      bench: 'scale',
      case: `${size}: projections rebuild from archive and log, ${rebuilt.events} events (${Math.round(n / rebuilt.seconds).toLocaleString('en-US')} reads/s); tracking tables equal to the generated ones: ${different.length === 0 ? 'yes' : `NO (${different.join(', ')})`}; events/s`,
      events: rebuilt.events,
      seconds: rebuilt.seconds,
      target: { label: 'equal tables', met: different.length === 0 },
    });
    // What the projection itself built (its chunks are rewritten in place as reads come: fillfactor 80).
    const after = await sizes(pool);
    for (const table of TRACKING_TABLES) {
      const s = after.get(table)!;
      rows.push({ bench: 'scale', case: `${size}: ${table} as the rebuild built it, ${mb(s.heap + s.indexes)} (heap ${mb(s.heap)}, indexes ${mb(s.indexes)})`, events: n, seconds: 0, quantity: `${((s.heap + s.indexes) / n).toFixed(2)} B/read` });
    }

    // 4. Retention at the defaults.
    bench.log('retention run …');
    // As `tracking retention run` connects: the read-model schema on the search path.
    const retentionPool = createPool(bench.url, { max: 2, applicationName: 'bench', searchPath: 'read_model' });
    const t0 = performance.now();
    const retention = await runRetention(retentionPool, { SCAN_RETENTION_DAYS, HISTORY_RETENTION_DAYS });
    const retentionSeconds = (performance.now() - t0) / 1000;
    await retentionPool.end();
    const freedBytes = retention.reduce((sum, r) => sum + r.drop_bytes, 0);
    rows.push({
      bench: 'scale',
      case: `${size}: retention run (scan ${SCAN_RETENTION_DAYS} d, history ${HISTORY_RETENTION_DAYS} d): drops ${retention.map((r) => `${r.target} ${r.drops.length}`).join(', ')} partitions, frees ${mb(freedBytes)}; seconds`,
      events: retention.reduce((sum, r) => sum + r.drops.length, 0),
      seconds: 0,
      quantity: `${retentionSeconds.toFixed(3)} s`,
    });
    return rows;
  } finally {
    await store.close();
    await fs.rm(dir, { recursive: true, force: true });
  }
}
