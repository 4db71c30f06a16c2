import { randomBytes, randomUUID } from 'node:crypto';
/**
 * Tracking at size (issue 10, "Measure"): ASSETS assets, each with an RFID tag, and LOCATIONS
 * locations in one org, seeded by appending events straight to the store; then READS reads as
 * ScansRecorded events appended with no projector running:
 *
 * - a handheld sweep that reads every asset once at its home location (one event per location);
 * - fixed readers at a tenth of the locations (READER_LOCATIONS), each reporting what it read in a
 *   20-second window as one event (one per reader and window, grouped per location as ingest
 *   does): every tag parked in its field is read 5 to 15 times a window (dozens of times a
 *   minute), a few tags move to another reader now and then (MOVE per window), and SHUTTLES assets
 *   go from reader to reader three times a window (they build long histories);
 * - LATE of the reader batches arrive late: held back and appended after the same reader's next
 *   batch (a reader that lost its connection sends its backlog after the live batch), so that
 *   most of their reads are older than reads of the same tags already in the log.
 *
 * Measured, with the CPU of this process (the service) and of the Postgres processes read from
 * /proc around each run:
 * - bytes of the event store (events with TOAST and indexes, and event_streams) per read, for
 *   this mix and for a workload of parked tags alone (read every 2 to 4 seconds);
 * - the tracking projection catching up on the pre-filled log (a ProjectorRuntime with only the
 *   tracking projection), in reads/s, next to reading the same log through the port and decoding
 *   its reads (the floor of any projection of it);
 * - GET /reports/asset-locations?limit=50 and a page of 50 visits of GET /assets/{id}/history
 *   through the whole service, next to the very same statements as raw SQL through pg, and
 *   POST /ingest/v1/scans of 100 reads (a fresh submission_id each), at each level of
 *   BENCH_CONNECTIONS. autocannon runs in a process of its own (load.ts), so that the service's
 *   CPU per request is its own;
 * - the report at an instant halfway through the workload (`?at=`), through the service next to
 *   the same statement as raw SQL; and, as raw SQL, amid the parked reads, where every parked
 *   asset's last read by then is found in its chunk (the dearest case).
 */
import type pg from 'pg';
import { allProjections } from '../../projections/index.js';
import { seedTaggedWorld, type TaggedWorld } from './tagged-world.js';
import { KEY_HORIZON_DAYS, trackingProjection } from '../../projections/tracking/projection.js';
import { historyQuery, reportQuery } from '../../projections/tracking/queries.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import { startService } from '../../services/service.js';
import { loadConfig } from '../../shared/config.js';
import type { ServiceContext } from '../../shared/service-context.js';
import { ScansRecorded, locationScansStream, type ScanSource, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import { decodeReads, encodeReads, tagKey, type RawRead } from '../../shared/domain/scans/read-codec.js';
import { handheldDecider } from '../../shared/domain/scans/decider.js';
import { handheldAppends, submissionStream } from '../../shared/domain/scans/commands.js';
import { resolveTag } from '../../shared/domain/scans/resolve.js';
import { comparePositions, type Position, type StreamAppend } from '../../shared/event-store/port.js';
import { createLogger } from '../../shared/logger.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { CpuMeter, cpuPer, drive, driveHttpFloor, driveSql, floorLabel, ms, runLoad, serverWork, startProfile, workPer, type Measured } from './measure.js';
import type { BenchContext, BenchRow } from './types.js';
import { seededRandom as random } from '../../shared/random.js';

const ASSETS = Number(process.env.BENCH_ASSETS ?? 100_000);
const LOCATIONS = Number(process.env.BENCH_LOCATIONS ?? Math.max(10, Math.round(ASSETS / 100)));
const READS = Number(process.env.BENCH_READS ?? 1_000_000);
const READER_LOCATIONS = Number(process.env.BENCH_READER_LOCATIONS ?? Math.max(2, Math.round(LOCATIONS / 10)));
/** Readers that report in one window: the others' tags are not read then. */
const REPORTERS = Math.min(READER_LOCATIONS, Number(process.env.BENCH_REPORTERS ?? Math.max(2, Math.round(READER_LOCATIONS / 10))));
const SHUTTLES = Number(process.env.BENCH_SHUTTLES ?? 16);
const LATE = Number(process.env.BENCH_LATE ?? 0.03);
const MOVE = Number(process.env.BENCH_MOVE ?? 0.01);
const PARKED_READS = Number(process.env.BENCH_PARKED_READS ?? Math.min(100_000, Math.round(READS / 10)));
/** Reads per handheld submission (issue 37's case: 5; the tables before 2026-11-30 used 100). */
const HANDHELD_READS = Number(process.env.BENCH_HANDHELD_READS ?? 5);
const HANDHELD_LOCATIONS = 8;

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
// Empty: no HTTP cases.
const CONNECTION_LEVELS = (process.env.BENCH_CONNECTIONS ?? '8,16').split(',').map(Number).filter((n) => n > 0);
/** When set, CPU profiles of this process during the projection run and the handheld case are written here (.cpuprofile). */

/** What a fixed reader reports as one batch. */
const WINDOW_US = 20_000_000;
/** The projector's subscription batch (ProjectorRuntime's default): the baseline reads the log in batches of this many events. */
const LOG_BATCH = 500;
const PROJECTION_TARGET = 20_000;
const BYTES_TARGET = 40;
const AT = '2026-01-01T00:00:00.000Z';



// ---------------------------------------------------------------------------------------------
// Seeding: assets with an RFID tag each, locations.

interface World extends TaggedWorld {
  assetOfEpc: Map<string, number>;
  indexOfEpc: Map<string, number>;
}

/** Appends the org's locations and assets with an RFID tag each; returns the last position. */
async function seed(ctx: ServiceContext, orgId: number, log: (message: string) => void): Promise<{ world: World; last: Position }> {
  log(`seeding ${LOCATIONS} locations and ${ASSETS} assets with an RFID tag each …`);
  const { world, last } = await seedTaggedWorld(ctx, {
    orgId,
    locations: LOCATIONS,
    assets: ASSETS,
    at: AT,
    location: (id) => ({ externalKey: `LOC-T${String(id).padStart(6, '0')}`, name: `Location ${id}` }),
    asset: (id) => ({ externalKey: `TRACK-${String(id).padStart(7, '0')}`, name: `Asset ${id}` }),
  });
  const { assetIds, epcs } = world;
  return {
    world: { ...world, assetOfEpc: new Map(epcs.map((value, i) => [value, assetIds[i]!])), indexOfEpc: new Map(epcs.map((value, i) => [value, i])) },
    last,
  };
}

// ---------------------------------------------------------------------------------------------
// Workloads: batches of reads at one location, as ingest records them.

interface ScanBatch {
  locationId: number;
  source: ScanSource;
  reads: RawRead[];
}

/** `k` distinct offsets in [0, span), ascending. */
function offsets(k: number, span: number, rnd: () => number): number[] {
  const out = Array.from({ length: k }, () => Math.floor(rnd() * span)).sort((a, b) => a - b);
  for (let i = 1; i < out.length; i++) if (out[i]! <= out[i - 1]!) out[i] = out[i - 1]! + 1;
  return out;
}

const rfid = (value: string, observedUs: number, rssi: number | null, capturePoint?: string): RawRead => ({
  tag_type: 'rfid',
  value,
  observedUs,
  rssi,
  ...(capturePoint !== undefined ? { capturePoint } : {}),
});

function readerSource(locationId: number): ScanSource {
  return { kind: 'reader', reader_id: `reader-${locationId}`, capture_points: [] };
}

/** Each yield is one append (one event per location). See the module comment. */
function* mixedWorkload(world: World, rnd: () => number, startUs: number, reads: number): Generator<ScanBatch[]> {
  const { epcs, locationIds } = world;
  const L = locationIds.length;
  // The handheld sweep: a location a minute, every asset read once at its home (index mod L).
  let group: ScanBatch[] = [];
  for (let l = 0; l < L; l++) {
    const batch: RawRead[] = [];
    let us = startUs + l * 60_000_000;
    for (let i = l; i < epcs.length; i += L) {
      us += 1 + Math.floor(rnd() * 500_000);
      batch.push(rfid(epcs[i]!, us, null));
    }
    if (batch.length > 0) group.push({ locationId: locationIds[l]!, source: { kind: 'handheld', device_id: 'bench-sweep', submission_id: `sweep-${l}` }, reads: batch });
    if (group.length === 50) {
      yield group;
      group = [];
    }
  }
  if (group.length > 0) yield group;
  let budget = reads - epcs.length;

  // Fixed readers at the first READER_LOCATIONS locations; the tags homed there are in their fields.
  const readers = Math.min(READER_LOCATIONS, L);
  const present = Array.from({ length: readers }, () => new Set<number>());
  const shuttles: number[] = [];
  for (let i = 0; i < epcs.length; i++) {
    if (i % L >= readers) continue;
    if (shuttles.length < SHUTTLES) shuttles.push(i);
    else present[i % L]!.add(i);
  }
  const rssiOf = (i: number) => -48 - ((i * 7) % 25) + Math.floor(rnd() * 7) - 3;
  const windowsStart = startUs + L * 60_000_000;
  let forced: number[] = [];
  let held: ScanBatch[] = [];
  for (let window = 0; budget > 0; window++) {
    const start = windowsStart + window * WINDOW_US;
    const chosen = [...forced];
    while (chosen.length < Math.min(REPORTERS, readers)) {
      const c = Math.floor(rnd() * readers);
      if (!chosen.includes(c)) chosen.push(c);
    }
    const readsAt = new Map<number, RawRead[]>(chosen.map((c) => [c, []]));
    for (const c of chosen) {
      const list = readsAt.get(c)!;
      for (const i of present[c]!) {
        for (const offset of offsets(5 + Math.floor(rnd() * 11), WINDOW_US, rnd)) {
          list.push(rfid(epcs[i]!, start + offset, rssiOf(i), `ant-${1 + Math.floor(rnd() * 2)}`));
        }
      }
    }
    const third = Math.floor(WINDOW_US / 3);
    for (const s of shuttles) {
      for (let t = 0; t < 3; t++) {
        const c = chosen[Math.floor(rnd() * chosen.length)]!;
        for (const offset of offsets(2 + Math.floor(rnd() * 4), third, rnd)) {
          readsAt.get(c)!.push(rfid(epcs[s]!, start + t * third + offset, rssiOf(s), `ant-${1 + Math.floor(rnd() * 2)}`));
        }
      }
    }
    const now: ScanBatch[] = [];
    const hold: ScanBatch[] = [];
    forced = [];
    for (const c of chosen) {
      const list = readsAt.get(c)!.sort((a, b) => a.observedUs - b.observedUs);
      if (list.length === 0) continue;
      budget -= list.length;
      const batch = { locationId: locationIds[c]!, source: readerSource(locationIds[c]!), reads: list };
      if (rnd() < LATE) {
        hold.push(batch);
        forced.push(c); // its next batch comes first
      } else {
        now.push(batch);
      }
    }
    if (now.length > 0) yield now;
    if (held.length > 0) yield held;
    held = hold;
    for (const c of chosen) {
      for (const i of [...present[c]!]) {
        if (rnd() >= MOVE) continue;
        let to = Math.floor(rnd() * (readers - 1));
        if (to >= c) to++;
        present[c]!.delete(i);
        present[to]!.add(i);
      }
    }
  }
  if (held.length > 0) yield held;
}

/** Tags parked in readers' fields, read every 2 to 4 seconds; one batch per reader a minute. */
function* parkedWorkload(world: World, rnd: () => number, startUs: number, reads: number): Generator<ScanBatch[]> {
  const { epcs, locationIds } = world;
  const L = locationIds.length;
  const readers = Math.min(4, L);
  const fields = Array.from({ length: readers }, (_, c) => {
    const tags: number[] = [];
    for (let i = c; i < epcs.length && tags.length < 20; i += L) tags.push(i);
    return tags;
  });
  const next = fields.map((tags) => tags.map(() => startUs + Math.floor(rnd() * 3_000_000)));
  let budget = reads;
  for (let minute = 0; budget > 0; minute++) {
    const end = startUs + (minute + 1) * 60_000_000;
    const group: ScanBatch[] = [];
    for (let c = 0; c < readers; c++) {
      const list: RawRead[] = [];
      fields[c]!.forEach((i, k) => {
        let us = next[c]![k]!;
        for (; us < end; us += 2_000_000 + Math.floor(rnd() * 2_000_000)) list.push(rfid(epcs[i]!, us, -50 - (i % 20), `ant-${1 + (k % 2)}`));
        next[c]![k] = us;
      });
      list.sort((a, b) => a.observedUs - b.observedUs);
      budget -= list.length;
      group.push({ locationId: locationIds[c]!, source: readerSource(locationIds[c]!), reads: list });
    }
    yield group;
  }
}

/** One ScansRecorded event per batch, on its location's scans stream. */
function scanAppends(world: World, batches: ScanBatch[], at: string): StreamAppend[] {
  const resolve = (read: RawRead) => ({ assetId: world.assetOfEpc.get(read.value)!, cause: null });
  return batches.map((batch) => {
    const { capturePoints, ...encoded } = encodeReads(batch.reads, resolve);
    const source: ScanSource = batch.source.kind === 'reader' ? { ...batch.source, capture_points: capturePoints } : batch.source;
    const data: ScansRecordedData = { org_id: world.orgId, location_id: batch.locationId, source, ...encoded, at };
    return { streamId: locationScansStream(world.orgId, batch.locationId), expectedRevision: 'any', events: [{ type: ScansRecorded.type, data }] };
  });
}

interface Appended {
  reads: number;
  events: number;
  /** Reads older than a read of the same tag earlier in the log. */
  late: number;
  seconds: number;
  last: Position;
}

async function appendWorkload(ctx: ServiceContext, world: World, workload: Generator<ScanBatch[]>): Promise<Appended> {
  const newest = new Float64Array(world.epcs.length).fill(Number.NEGATIVE_INFINITY);
  let reads = 0;
  let events = 0;
  let late = 0;
  let seconds = 0;
  let last: Position | null = null;
  for (const group of workload) {
    for (const batch of group) {
      for (const read of batch.reads) if (read.observedUs < newest[world.indexOfEpc.get(read.value)!]!) late++;
      for (const read of batch.reads) {
        const i = world.indexOfEpc.get(read.value)!;
        newest[i] = Math.max(newest[i]!, read.observedUs);
      }
      reads += batch.reads.length;
    }
    const at = new Date(Math.floor(Math.max(...group.map((b) => b.reads.at(-1)!.observedUs)) / 1000) + 1000).toISOString();
    const appends = scanAppends(world, group, at);
    events += appends.length;
    const t0 = performance.now();
    last = (await ctx.store.appendToStreams(appends)).position;
    seconds += (performance.now() - t0) / 1000;
  }
  return { reads, events, late, seconds, last: last! };
}

interface StoreSize {
  events: number;
  streams: number;
}

async function storeSize(pool: pg.Pool): Promise<StoreSize> {
  const { rows } = await pool.query<{ events: string; streams: string }>(
    `SELECT pg_total_relation_size('event_store.events') AS events, pg_total_relation_size('event_store.event_streams') AS streams`,
  );
  return { events: Number(rows[0]!.events), streams: Number(rows[0]!.streams) };
}

function bytesRow(name: string, before: StoreSize, after: StoreSize, appended: Appended): BenchRow {
  const events = after.events - before.events;
  const streams = after.streams - before.streams;
  const perRead = (events + streams) / appended.reads;
  return {
    bench: 'tracking',
    case: `event-store bytes per read, ${name} (${appended.events} events, ${(appended.reads / appended.events).toFixed(0)} reads each; events ${(events / 1e6).toFixed(1)} MB, event_streams ${(streams / 1e3).toFixed(0)} kB)`,
    events: appended.reads,
    seconds: 0,
    quantity: `${perRead.toFixed(1)} B/read`,
    target: { label: `<= ${BYTES_TARGET} B/read`, met: perRead <= BYTES_TARGET },
  };
}

/** Bytes of each table of the tracking projection (heap, indexes and TOAST; a partitioned table's partitions summed), after VACUUM ANALYZE. */
type ModelSize = Map<string, number>;

async function readModelSize(pool: pg.Pool): Promise<ModelSize> {
  for (const table of trackingProjection.tables) await pool.query(`VACUUM ANALYZE read_model.${table}`);
  const { rows } = await pool.query<{ name: string; bytes: string }>(
    `SELECT t.name, coalesce((SELECT sum(pg_total_relation_size(p.relid)) FROM pg_partition_tree(t.rel) p), pg_total_relation_size(t.rel)) AS bytes
       FROM (SELECT name, ('read_model.' || name)::regclass AS rel FROM unnest($1::text[]) AS name) t`,
    [trackingProjection.tables],
  );
  return new Map(rows.map((r) => [r.name, Number(r.bytes)]));
}

const totalOf = (size: ModelSize, except: readonly string[] = []) => [...size].filter(([name]) => !except.includes(name)).reduce((sum, [, bytes]) => sum + bytes, 0);

function describeSize(after: ModelSize, reads: number, before: ModelSize = new Map()): string {
  const parts = [...after].map(([name, bytes]) => `${name} ${((bytes - (before.get(name) ?? 0)) / reads).toFixed(1)}`);
  return `read-model B/read by table: ${parts.join(', ')}`;
}

async function modelCounts(pool: pg.Pool): Promise<{ visits: number; located: number }> {
  const { rows } = await pool.query<{ visits: number; located: number }>(
    'SELECT (SELECT count(*) FROM read_model.asset_visits)::int AS visits, (SELECT count(*) FROM read_model.asset_locations)::int AS located',
  );
  return rows[0]!;
}

/** The duplicate-detection keys: kept KEY_HORIZON_DAYS of the log, then dropped by the projector. */
const KEYS_TABLE = 'scan_read_keys';
/** The retention the amortized figure spreads the keys over (SCAN_RETENTION_DAYS' default). */
const AMORTIZED_OVER_DAYS = 90;

/**
 * Read-model bytes per read of the tracking projection, next to the log's bytes per read of the
 * same reads as the baseline column: amortized (every table but the keys, plus the keys' bytes
 * times KEY_HORIZON_DAYS / AMORTIZED_OVER_DAYS: the keys are kept 7 days, the rest 90), and all
 * tables as they stand within the horizon. The issue's target (40 B) is for parked reads: a moving
 * tag's visits and current location are per asset, not per read.
 */
function readModelBytesRows(name: string, before: ModelSize, after: ModelSize, storeBefore: StoreSize, storeAfter: StoreSize, appended: Appended, target: boolean): BenchRow[] {
  const delta = (except: string[]) => (totalOf(after, except) - totalOf(before, except)) / appended.reads;
  const kept = delta([KEYS_TABLE]);
  const keys = ((after.get(KEYS_TABLE) ?? 0) - (before.get(KEYS_TABLE) ?? 0)) / appended.reads;
  const amortized = kept + (keys * KEY_HORIZON_DAYS) / AMORTIZED_OVER_DAYS;
  const all = delta([]);
  const logBytes = storeAfter.events - storeBefore.events + (storeAfter.streams - storeBefore.streams);
  const row = (text: string, perRead: number, target: boolean): BenchRow => ({
    bench: 'tracking',
    case: `read-model bytes per read, ${name}${text} (${appended.reads} reads)`,
    events: appended.reads,
    seconds: 0,
    quantity: `${perRead.toFixed(1)} B/read`,
    baseline: { label: 'event log B/read', events: logBytes, seconds: appended.reads },
    ...(target ? { target: { label: `<= ${BYTES_TARGET} B/read`, met: perRead <= BYTES_TARGET } } : {}),
  });
  return [
    row(`, amortized (${kept.toFixed(1)} B kept + ${keys.toFixed(1)} B of keys x ${KEY_HORIZON_DAYS}/${AMORTIZED_OVER_DAYS} days)`, amortized, target),
    row(`, every table within the ${KEY_HORIZON_DAYS}-day duplicate horizon`, all, false),
  ];
}

/** Reads the log after `after` up to `head` through the port and decodes every read: the floor of a projection. */
async function readLog(ctx: ServiceContext, after: Position, head: Position): Promise<{ reads: number; seconds: number }> {
  const t0 = performance.now();
  let reads = 0;
  let position = after;
  while (comparePositions(position, head) < 0) {
    const batch = await ctx.store.readAll({ after: position, maxCount: LOG_BATCH });
    if (batch.length === 0) break;
    for (const event of batch) if (event.type === ScansRecorded.type) reads += decodeReads(event.data as ScansRecordedData).length;
    position = batch.at(-1)!.position;
  }
  return { reads, seconds: (performance.now() - t0) / 1000 };
}

// ---------------------------------------------------------------------------------------------
// HTTP cases.

/** Issue 37's target for the report at an instant (5,000 assets, 8 connections). */
const REPORT_AT_P99_MS = 50;

/**
 * What the report at an instant has to do at `atMs` (reportAtQuery): its rows, of which those whose
 * visit then is an earlier one than their current (looked up in asset_visits), and those whose
 * visit then ran on past it (the last read by then found in a chunk).
 */
async function reportAtShapeOf(pool: pg.Pool, orgId: number, atMs: number): Promise<string> {
  const { rows } = await pool.query<{ rows: number; moved: number; straddling: number }>(
    `WITH t AS (SELECT to_timestamp($2::double precision / 1000) AS at)
     SELECT (SELECT count(*)::int FROM read_model.asset_locations al, t WHERE al.org_id = $1 AND al.first_seen_at <= t.at) AS rows,
            (SELECT count(*)::int FROM read_model.asset_locations al, t WHERE al.org_id = $1 AND al.first_seen_at <= t.at AND al.dwell_started_at > t.at) AS moved,
            (SELECT count(*)::int FROM read_model.asset_visits v, t WHERE v.org_id = $1 AND v.first_at <= t.at AND v.last_at > t.at) AS straddling`,
    [orgId, atMs],
  );
  const shape = rows[0]!;
  return `${shape.rows} assets seen by then, ${shape.moved} moved since, ${shape.straddling} in a visit running past it`;
}

function httpRow(name: string, http: Measured, sql?: Measured, extra = '', p99Ms = 25): BenchRow {
  const target = sql
    ? { label: `>= 80% of raw SQL, p99 < ${p99Ms} ms`, met: http.requests / http.seconds >= 0.8 * (sql.requests / sql.seconds) && http.p99 < p99Ms }
    : { label: `p99 < ${p99Ms} ms`, met: http.p99 < p99Ms };
  return {
    bench: 'tracking',
    case: `${name} (p50 ${ms(http.p50)}, p99 ${ms(http.p99)}${extra}${cpuPer(http.cpu, http.requests, 'req')})`,
    events: http.requests,
    seconds: http.seconds,
    ...(sql ? { baseline: { label: `raw SQL p50 ${ms(sql.p50)} p99 ${ms(sql.p99)}${cpuPer(sql.cpu, sql.requests, 'query')}`, events: sql.requests, seconds: sql.seconds } } : {}),
    target,
  };
}

/**
 * The handheld baseline (issue 37): the durable work of a submission done directly, without HTTP,
 * authentication, validation, the submission's and the location's look-ups or the wait for the
 * views: its tags resolved in one statement, its events decided as the service decides them, and
 * appended through the event-store port in one atomic append (the reads on the location's scans
 * stream, the record on the submission's own stream, which must not exist yet).
 */
async function baselineSubmission(ctx: ServiceContext, orgId: number, location: { id: number; tags: string[] }): Promise<void> {
  const nowUs = Date.now() * 1000;
  const reads: RawRead[] = location.tags.map((value, i) => ({ tag_type: 'rfid', value, observedUs: nowUs + i, rssi: -55 }));
  const found = await ctx.readModels.lookupTags(orgId, reads);
  const resolutions = new Map([[orgId, new Map(reads.map((read, i) => [tagKey(read.tag_type, read.value), resolveTag(found[i]!)]))]]);
  const submissionId = randomUUID();
  const events = handheldDecider.decide(
    {
      orgId,
      submissionId,
      deviceId: 'bench-baseline',
      location: { ref: { by: 'id', id: location.id }, locationId: location.id },
      reads,
      bodySha256: '0'.repeat(64),
      resolutions,
      scans: { closed: false },
      at: new Date().toISOString(),
    },
    handheldDecider.initialState,
  );
  await ctx.store.appendToStreams(handheldAppends(events, { streamId: locationScansStream(orgId, location.id), expectedRevision: 'any' }, submissionStream(orgId, submissionId)));
}


// ---------------------------------------------------------------------------------------------

export async function run(bench: BenchContext): Promise<BenchRow[]> {
  if (READS < 2 * ASSETS) throw new Error(`BENCH_READS (${READS}) must be at least twice BENCH_ASSETS (${ASSETS}): the sweep alone reads every asset once`);
  const config = loadConfig({
    PORT: '0',
    OPS_PORT: '0',
    INGEST_PORT: '0',
    // No projector role: the bench runs its own ProjectorRuntime, so that the log can be filled
    // with nothing projecting it.
    ROLES: 'api,ingest',
    LOG_LEVEL: 'silent',
    PG_POOL_SIZE: '40',
    RATE_LIMIT_PER_MINUTE: '100000000',
    RATE_LIMIT_BURST: '100000000',
    SIGNING_KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
  });
  const service = await startService(config, bench.url, createLogger('silent'));
  const { ctx } = service;
  const projectorLog = createLogger('error');
  const projector = (projections = allProjections()) => {
    const runtime = new ProjectorRuntime({ store: ctx.store, pool: ctx.pool, projections, log: projectorLog, onCheckpoint: (name, position) => ctx.checkpoints.advance(name, position) });
    runtime.start();
    return runtime;
  };
  let runtime: ProjectorRuntime | null = projector();
  const rows: BenchRow[] = [];
  const meter = await CpuMeter.open(ctx.pool);
  if (!meter) bench.log('no /proc (or a remote Postgres): CPU is not accounted');
  try {
    const org = await createOrg(ctx, 'Tracking bench');
    const key = await mintApiKey(ctx, { orgId: org.id, scopes: ['tracking:read', 'scans:write', 'assets:read'] });
    const headers = { authorization: `Bearer ${key.token}` };

    const seedStart = performance.now();
    const seeded = await seed(ctx, org.id, bench.log);
    await ctx.checkpoints.waitForCheckpoint(seeded.last, { timeoutMs: 30 * 60_000 });
    const seedSeconds = (performance.now() - seedStart) / 1000;
    bench.log(`seeded and projected in ${seedSeconds.toFixed(1)} s`);
    for (const table of ['assets', 'tags', 'locations']) await ctx.pool.query(`VACUUM ANALYZE read_model.${table}`);
    await runtime.stop();
    runtime = null;
    const { world } = seeded;
    rows.push({ bench: 'tracking', case: `seed ${ASSETS} assets (RFID tag each) + ${LOCATIONS} locations (events appended, then projected)`, events: ASSETS * 4 + LOCATIONS * 2, seconds: seedSeconds });

    // 1. The log, filled with nothing projecting it.
    const startUs = (Date.now() - 30 * 86_400_000) * 1000;
    bench.log(`appending ${READS} reads (sweep, ${READER_LOCATIONS} reader locations, ${REPORTERS} reporting a window, ${SHUTTLES} shuttles, ${LATE * 100}% of batches late) …`);
    const before = await storeSize(ctx.pool);
    const after0 = await ctx.store.headPosition();
    const mixed = await appendWorkload(ctx, world, mixedWorkload(world, random(42), startUs, READS));
    await ctx.pool.query('CHECKPOINT');
    const afterMixed = await storeSize(ctx.pool);
    bench.log(`appended ${mixed.reads} reads in ${mixed.events} events (${((mixed.late / mixed.reads) * 100).toFixed(1)}% of reads late) in ${mixed.seconds.toFixed(1)} s`);
    rows.push({
      bench: 'tracking',
      case: `append ${mixed.events} ScansRecorded events (${(mixed.reads / mixed.events).toFixed(0)} reads each, ${((mixed.late / mixed.reads) * 100).toFixed(1)}% of reads late), reads/s`,
      events: mixed.reads,
      seconds: mixed.seconds,
    });
    rows.push(bytesRow('sweep + readers + moves', before, afterMixed, mixed));

    // 2. Reading the log alone, then the tracking projection catching up on it.
    const head = await ctx.store.headPosition();
    bench.log('reading the log through the port …');
    const baseline = await readLog(ctx, after0, head);
    bench.log(`read and decoded ${baseline.reads} reads in ${baseline.seconds.toFixed(1)} s`);
    const emptyModel = await readModelSize(ctx.pool);
    bench.log('projecting (tracking only) …');
    const cpu0 = meter?.snapshot();
    const projectionStart = performance.now();
    const projectionProfile = await startProfile('tracking-projection');
    runtime = projector([trackingProjection]);
    await ctx.checkpoints.waitForCheckpoint(head, { projections: ['tracking'], timeoutMs: 3 * 3600_000 });
    await projectionProfile.stop();
    const projectionSeconds = (performance.now() - projectionStart) / 1000;
    const projectionCpu = meter && cpu0 ? CpuMeter.since(cpu0, meter.snapshot()) : null;
    await runtime.stop();
    runtime = null;
    const rate = mixed.reads / projectionSeconds;
    bench.log(`projected in ${projectionSeconds.toFixed(1)} s${cpuPer(projectionCpu, mixed.reads, 'read')}`);
    rows.push({
      bench: 'tracking',
      case: `tracking projection of ${mixed.reads} reads, log pre-filled, reads/s${projectionCpu ? ` (${cpuPer(projectionCpu, mixed.reads, 'read').slice(2)})` : ''}`,
      events: mixed.reads,
      seconds: projectionSeconds,
      baseline: { label: 'readAll + decodeReads', events: baseline.reads, seconds: baseline.seconds },
      target: { label: `>= ${PROJECTION_TARGET.toLocaleString('en-US')} reads/s`, met: rate >= PROJECTION_TARGET },
    });
    const mixedModel = await readModelSize(ctx.pool);
    const m = await modelCounts(ctx.pool);
    bench.log(`read model: ${m.visits} visits, ${m.located} located assets; ${describeSize(mixedModel, mixed.reads)}`);
    rows.push(...readModelBytesRows('moving tags (sweep + readers + moves)', emptyModel, mixedModel, before, afterMixed, mixed, false));

    // 3. The views and handheld submissions, the whole service running.
    runtime = projector();
    await ctx.checkpoints.waitForCheckpoint(await ctx.store.headPosition(), { timeoutMs: 30 * 60_000 });
    const busiest = await ctx.pool.query<{ asset_id: number; visits: number }>(
      'SELECT asset_id, count(*)::int AS visits FROM read_model.asset_visits WHERE org_id = $1 GROUP BY asset_id ORDER BY count(*) DESC, asset_id LIMIT 1',
      [org.id],
    );
    const { asset_id: historyAsset, visits: historyVisits } = busiest.rows[0]!;
    const L = world.locationIds.length;
    const handheldLocations = Array.from({ length: Math.min(HANDHELD_LOCATIONS, L) }, (_, k) => {
      const l = (Math.min(READER_LOCATIONS, L) + k) % L;
      const tags: string[] = [];
      for (let i = l; i < world.epcs.length && tags.length < HANDHELD_READS; i += L) tags.push(world.epcs[i]!);
      return { id: world.locationIds[l]!, tags };
    });
    const handheldReads = Math.min(...handheldLocations.map((l) => l.tags.length));
    // The report at an instant halfway through the workload's observed times: most assets' visits
    // then run on past it (each costs a scan_reads probe), the case it is dearest in.
    const middle = await ctx.pool.query<{ ms: string }>(
      `SELECT (extract(epoch FROM min(first_at) + (max(last_at) - min(first_at)) / 2) * 1000)::bigint::text AS ms FROM read_model.asset_visits WHERE org_id = $1`,
      [org.id],
    );
    const reportAt = { limit: 50, offset: 0, at: { ms: Number(middle.rows[0]!.ms), microsOfMs: 0 } };
    const reportAtShape = await reportAtShapeOf(ctx.pool, org.id, reportAt.at.ms);
    const api = service.urls.api!;
    const ingest = service.urls.ingest!;
    const orgId = org.id;
    for (const connections of CONNECTION_LEVELS) {
      const at = `${connections} conn`;
      bench.log(`${at}: GET /reports/asset-locations?limit=50 …`);
      // Each read beside its raw statement and its HTTP floor (measure.ts onHttpFloor): the
      // same response from a bare server, what HTTP and the load generator cost here alone.
      const reportSpec = { url: `${api}/reports/asset-locations?limit=50`, headers, connections };
      const report = await drive(reportSpec, meter);
      const reportSql = await driveSql(connections, () => ctx.pool.query(reportQuery(orgId, { limit: 50, offset: 0 })), meter);
      const reportFloor = await driveHttpFloor(reportSpec, null);
      rows.push(httpRow(`${at}, GET /reports/asset-locations?limit=50 (${m.located} rows)`, report, reportSql, floorLabel(report, reportSql, reportFloor)));
      bench.log(`${at}: GET /reports/asset-locations?at=<halfway>&limit=50 …`);
      const reportAtHttp = await drive({ url: `${api}/reports/asset-locations?limit=50&at=${encodeURIComponent(new Date(reportAt.at.ms).toISOString())}`, headers, connections }, meter);
      const reportAtSql = await driveSql(connections, () => ctx.pool.query(reportQuery(orgId, reportAt)), meter);
      rows.push(httpRow(`${at}, GET /reports/asset-locations?at=<halfway>&limit=50 (${reportAtShape})`, reportAtHttp, reportAtSql, '', REPORT_AT_P99_MS));

      bench.log(`${at}: GET /assets/{id}/history?limit=50 …`);
      const historySpec = { url: `${api}/assets/${historyAsset}/history?limit=50`, headers, connections };
      const history = await drive(historySpec, meter);
      const historySql = await driveSql(connections, () => ctx.pool.query(historyQuery(orgId, historyAsset, { limit: 50, offset: 0 })), meter);
      const historyFloor = await driveHttpFloor(historySpec, null);
      rows.push(httpRow(`${at}, GET /assets/{id}/history?limit=50 (${historyVisits} visits)`, history, historySql, floorLabel(history, historySql, historyFloor)));

      bench.log(`${at}: POST /ingest/v1/scans …`);
      const handheldProfile = await startProfile(`tracking-handheld-${connections}`);
      const handheld = await drive(
        {
          url: `${ingest}/scans`,
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json' },
          connections,
          handheld: { locations: handheldLocations },
        },
        meter,
      );
      await handheldProfile.stop();
      // The server's work per submission (the warm-up's included in neither reading: counted from here).
      await new Promise((r) => setTimeout(r, 1000));
      const workBefore = await serverWork(ctx.pool);
      const counted = await runLoad(
        { url: `${ingest}/scans`, method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, connections, seconds: Math.min(SECONDS, 3), handheld: { locations: handheldLocations } },
        null,
      );
      await new Promise((r) => setTimeout(r, 1000));
      const work = workPer(workBefore, await serverWork(ctx.pool), counted.requests);
      // The baseline with nothing projecting (the projections are the design's part), then the
      // projector again, caught up before the next case.
      bench.log(`${at}: the handheld baseline (lookup + decide + one append through the port) …`);
      await runtime.stop();
      let turn = 0;
      const baseline = await driveSql(connections, () => baselineSubmission(ctx, orgId, handheldLocations[turn++ % handheldLocations.length]!), meter);
      runtime = projector();
      await ctx.checkpoints.waitForCheckpoint(await ctx.store.headPosition(), { timeoutMs: 30 * 60_000 });
      const readsPerSecond = Math.round((handheld.requests * handheldReads) / handheld.seconds).toLocaleString('en-US');
      const rate = handheld.requests / handheld.seconds;
      const baseRate = baseline.requests / baseline.seconds;
      rows.push({
        bench: 'tracking',
        case: `${at}, POST /ingest/v1/scans, ${handheldReads} reads (fresh submission_id) (p50 ${ms(handheld.p50)}, p99 ${ms(handheld.p99)}, ${readsPerSecond} reads/s${cpuPer(handheld.cpu, handheld.requests * handheldReads, 'read')}${work})`,
        events: handheld.requests,
        seconds: handheld.seconds,
        baseline: { label: `lookup + one append through the port, p50 ${ms(baseline.p50)} p99 ${ms(baseline.p99)}${cpuPer(baseline.cpu, baseline.requests * handheldReads, 'read')}`, events: baseline.requests, seconds: baseline.seconds },
        target: { label: '>= 50% of the baseline, p99 < 25 ms', met: rate >= 0.5 * baseRate && handheld.p99 < 25 },
      });
    }
    await runtime.stop();
    runtime = null;

    // 4. Parked tags alone (appended last, then projected).
    if (PARKED_READS <= 0) return rows;
    const parkedBefore = await storeSize(ctx.pool);
    const parkedStartUs = Math.ceil((Date.now() - 7 * 86_400_000) * 1000);
    const parked = await appendWorkload(ctx, world, parkedWorkload(world, random(7), parkedStartUs, PARKED_READS));
    await ctx.pool.query('CHECKPOINT');
    const parkedAfter = await storeSize(ctx.pool);
    rows.push(bytesRow('parked tags only (read every 2-4 s, a batch per reader a minute)', parkedBefore, parkedAfter, parked));
    const modelBefore = await readModelSize(ctx.pool);
    runtime = projector([trackingProjection]);
    await ctx.checkpoints.waitForCheckpoint(parked.last, { projections: ['tracking'], timeoutMs: 3 * 3600_000 });
    await runtime.stop();
    runtime = null;
    const modelAfter = await readModelSize(ctx.pool);
    bench.log(`parked tags: ${describeSize(modelAfter, parked.reads, modelBefore)}`);
    rows.push(...readModelBytesRows('parked tags (read every 2-4 s)', modelBefore, modelAfter, parkedBefore, parkedAfter, parked, true));

    // The report at an instant where it costs most: amid the parked reads, the visit of every
    // parked asset runs on past the instant, and its last read by then is found in its chunk.
    if (CONNECTION_LEVELS.length > 0) {
      const connections = CONNECTION_LEVELS[0]!;
      const end = await ctx.pool.query<{ ms: string }>(
        `SELECT (extract(epoch FROM max(last_seen)) * 1000)::bigint::text AS ms FROM read_model.asset_locations WHERE org_id = $1`,
        [org.id],
      );
      const atMs = Math.round((parkedStartUs / 1000 + Number(end.rows[0]!.ms)) / 2);
      const shape = await reportAtShapeOf(ctx.pool, org.id, atMs);
      bench.log(`${connections} conn: the report at an instant amid the parked reads (${shape}), raw SQL …`);
      const parkedAt = { limit: 50, offset: 0, at: { ms: atMs, microsOfMs: 0 } };
      const measured = await driveSql(connections, () => ctx.pool.query(reportQuery(org.id, parkedAt)), meter);
      rows.push({
        bench: 'tracking',
        case: `${connections} conn, report ?at=<amid the parked reads>&limit=50, raw SQL (${shape}; p50 ${ms(measured.p50)}, p99 ${ms(measured.p99)}${cpuPer(measured.cpu, measured.requests, 'query')})`,
        events: measured.requests,
        seconds: measured.seconds,
        target: { label: `p99 < ${REPORT_AT_P99_MS} ms`, met: measured.p99 < REPORT_AT_P99_MS },
      });
    }
    return rows;
  } finally {
    await runtime?.stop();
    await service.stop();
  }
}
