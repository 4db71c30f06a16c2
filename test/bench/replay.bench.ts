/**
 * `projections rebuild` at size: BENCH_REPLAY_EVENTS events (default 1,000,000), mostly scans.
 * Locations and assets (2% of the log) and then ScansRecorded events are appended straight to the
 * store, the way ingest writes them (reads encoded with `encodeReads`, BENCH_REPLAY_READS_PER_EVENT
 * reads each, default 2): an asset's tag is read again and again where it is parked, now and then
 * it moves, and 2% of the events carry late reads. The service (api and projector) projects them
 * as they come (its followers); then, in the same run:
 *
 * - `projections rebuild` of every projection, run as the CLI in its own process as an operator
 *   runs it, alone: its rate (the whole command: shadow schema, replay, logging and analyzing the
 *   tables, catch-up, swap), next to reading the whole log alone through the port (readAll in
 *   batches of the rebuild's size) in the same run: target at least 50,000 events/s and 50% of it;
 * - then a second rebuild while API reads run (an asset by id, the report at a location, an
 *   asset's history), from a worker thread at BENCH_REPLAY_CONNECTIONS connections (default 4):
 *   p99 during the rebuild against p99 of the same load just before (BENCH_SECONDS, default 10),
 *   target under 2x;
 * - then `projections rebuild --parallel 1` and `--parallel 2` with PROJECTION_SEGMENTS
 *   BENCH_REPLAY_SEGMENTS (default 2), at the same log, alone: their rates, the ratio (target at
 *   least 1.6x: docs/design.md "Rebuild and replay"), and the CPU per read of each (the CLI and the
 *   Postgres server, from /proc). BENCH_REPLAY_PARALLEL_ONLY=1 runs only these (and the first
 *   rebuild), for a quicker look.
 */
import { Worker } from 'node:worker_threads';
import { allProjections } from '../../projections/index.js';
import { startService } from '../../services/service.js';
import { loadConfig } from '../../shared/config.js';
import { AssetCreated, assetStream } from '../../shared/domain/assets/events.js';
import { LocationCreated } from '../../shared/domain/locations/events.js';
import { ScansRecorded, locationScansStream, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import { encodeReads, type RawRead } from '../../shared/domain/scans/read-codec.js';
import { START, type EventData, type Position, type StreamAppend } from '../../shared/event-store/port.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { createLogger } from '../../shared/logger.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { cliRebuild, KEY_ENCRYPTION_KEY, type CliRebuild } from './cli-rebuild.js';
import { postmasterOf } from './proc.js';
import { printStatements, resetStatements } from './statements.js';
import type { BenchContext, BenchRow } from './types.js';
import { seededRandom as random } from '../../shared/random.js';

const EVENTS = Number(process.env.BENCH_REPLAY_EVENTS ?? 1_000_000);
const READS_PER_EVENT = Number(process.env.BENCH_REPLAY_READS_PER_EVENT ?? 2);
const CONNECTIONS = Number(process.env.BENCH_REPLAY_CONNECTIONS ?? 4);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
const SEGMENTS = Number(process.env.BENCH_REPLAY_SEGMENTS ?? 2);
const PARALLEL_ONLY = process.env.BENCH_REPLAY_PARALLEL_ONLY === '1';
const BATCH = 5000;
const AT = '2026-01-01T00:00:00.000Z';

interface Latencies {
  requests: number;
  seconds: number;
  failures: number;
  p50: number;
  p99: number;
}

/** Starts the read load in a worker; `stop()` ends it and reports. */
function startLoad(urls: string[], token: string): { stop(): Promise<Latencies> } {
  const worker = new Worker(new URL('./http-load.mjs', import.meta.url), { workerData: { urls, token, connections: CONNECTIONS } });
  const done = new Promise<Latencies>((resolve, reject) => {
    worker.once('error', reject);
    worker.once('message', (message: { latencies: number[]; failures: number; seconds: number }) => {
      const sorted = message.latencies.sort((a, b) => a - b);
      const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0;
      resolve({ requests: sorted.length, seconds: message.seconds, failures: message.failures, p50: at(0.5), p99: at(0.99) });
      void worker.terminate();
    });
  });
  return {
    stop() {
      worker.postMessage('stop');
      return done;
    },
  };
}

async function loadFor(seconds: number, urls: string[], token: string): Promise<Latencies> {
  const load = startLoad(urls, token);
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  return load.stop();
}

const ms = (n: number) => `${n.toFixed(1)} ms`;
const rate = (n: number) => Math.round(n).toLocaleString('en-US');

export async function run(bench: BenchContext): Promise<BenchRow[]> {
  const config = loadConfig({
    PORT: '0',
    OPS_PORT: '0',
    INGEST_PORT: '0',
    ROLES: 'api,projector',
    LOG_LEVEL: 'warn',
    PG_POOL_SIZE: '30',
    RATE_LIMIT_PER_MINUTE: '100000000',
    RATE_LIMIT_BURST: '100000000',
    SIGNING_KEY_ENCRYPTION_KEY: KEY_ENCRYPTION_KEY,
  });
  const service = await startService(config, bench.url, createLogger('warn'));
  const { ctx } = service;
  // Seeding skips the catalogue's validation (the events are built by the same code ingest uses)
  // and records the schema version as it would.
  const seedStore = new PostgresEventStore(bench.pool, bench.url);
  try {
    const org = await createOrg(ctx, 'Replay bench');
    const orgId = org.id;
    const key = await mintApiKey(ctx, { orgId, scopes: ['assets:read', 'tracking:read'] });
    const rnd = random(42);
    const master = Math.max(20, Math.round(EVENTS * 0.02));
    const locations = Math.max(10, Math.round(master / 10));
    const assets = master - locations;
    const scans = EVENTS - master;
    const locationIds = (await ctx.pool.query<{ id: number }>(`SELECT nextval('service.location_ids')::int AS id FROM generate_series(1, $1)`, [locations])).rows.map((r) => r.id);
    const assetIds = (await ctx.pool.query<{ id: number }>(`SELECT nextval('service.asset_ids')::int AS id FROM generate_series(1, $1)`, [assets])).rows.map((r) => r.id);
    const meta = { schema_version: 1 };
    bench.log(`appending ${locations} locations, ${assets} assets and ${scans} scan events (${READS_PER_EVENT} reads each) …`);
    const appendStarted = performance.now();
    let last: Position = START;
    const append = async (appends: StreamAppend[]) => {
      last = (await seedStore.appendToStreams(appends)).position;
    };
    for (let start = 0; start < locations; start += 1000) {
      await append(
        locationIds.slice(start, start + 1000).map((id, j) => ({
          streamId: `location-${orgId}-${id}`,
          expectedRevision: 'no_stream',
          events: [
            {
              type: LocationCreated.type,
              metadata: meta,
              data: { org_id: orgId, location_id: id, external_key: `LOC-${id}`, name: `Location ${id}`, description: null, parent_id: start + j === 0 ? null : locationIds[0]!, is_active: true, valid_from: null, valid_to: null, at: AT },
            },
          ],
        })),
      );
    }
    for (let start = 0; start < assets; start += 1000) {
      await append(
        assetIds.slice(start, start + 1000).map((id) => ({
          streamId: assetStream(orgId, id),
          expectedRevision: 'no_stream',
          events: [
            {
              type: AssetCreated.type,
              metadata: meta,
              data: { org_id: orgId, asset_id: id, external_key: `BENCH-${id}`, minted: false, name: `Asset ${id}`, description: null, is_active: true, valid_from: null, valid_to: null, metadata: {}, at: AT },
            },
          ],
        })),
      );
    }
    // Each asset is parked at a location; a scan event reads some of the assets parked where it is
    // taken, and now and then one of them has moved there.
    const home = assetIds.map((_, i) => i % locations);
    const parked: number[][] = Array.from({ length: locations }, () => []);
    home.forEach((l, i) => parked[l]!.push(i));
    let us = Date.UTC(2026, 0, 1) * 1000;
    for (let start = 0; start < scans; start += 1000) {
      const byStream = new Map<string, EventData[]>();
      for (let n = start; n < Math.min(scans, start + 1000); n++) {
        const l = Math.floor(rnd() * locations);
        const here = parked[l]!;
        if (rnd() < 0.01 || here.length === 0) {
          const moved = Math.floor(rnd() * assets);
          const from = parked[home[moved]!]!;
          from.splice(from.indexOf(moved), 1);
          home[moved] = l;
          here.push(moved);
        }
        const late = rnd() < 0.02;
        const reads: RawRead[] = [];
        for (let r = 0; r < READS_PER_EVENT; r++) {
          us += 1 + Math.floor(rnd() * 2_000_000);
          const asset = here[Math.floor(rnd() * here.length)]!;
          reads.push({ tag_type: 'rfid', value: `E280${String(assetIds[asset]).padStart(8, '0')}`, observedUs: late ? us - 3_600_000_000 : us, rssi: -50 - Math.floor(rnd() * 30), capturePoint: `door-${l}` });
        }
        const { capturePoints, ...encoded } = encodeReads(reads, (read) => ({ assetId: Number(read.value.slice(4)), cause: null }));
        // Received half a second after its last read, as a gateway sends them: no read is ahead of the clock.
        const at = new Date(Math.floor(us / 1000) + 500).toISOString();
        const data: ScansRecordedData = { org_id: orgId, location_id: locationIds[l]!, source: { kind: 'reader', reader_id: `reader-${l}`, capture_points: capturePoints }, ...encoded, at };
        const stream = locationScansStream(orgId, locationIds[l]!);
        byStream.set(stream, [...(byStream.get(stream) ?? []), { type: ScansRecorded.type, metadata: meta, data }]);
      }
      await append([...byStream].map(([streamId, events]) => ({ streamId, expectedRevision: 'any', events })));
      if ((start / 1000) % 100 === 99) bench.log(`  ${start + 1000} scan events appended`);
    }
    const appended = (performance.now() - appendStarted) / 1000;
    bench.log(`appended in ${appended.toFixed(0)} s; waiting for the follower …`);
    const projectStarted = performance.now();
    await ctx.checkpoints.waitForCheckpoint(last, { timeoutMs: 3 * 3600_000 });
    const projected = (performance.now() - projectStarted) / 1000;
    bench.log(`the follower caught up ${projected.toFixed(0)} s after the last append`);
    // What autovacuum would have done by now on a long-running installation.
    for (const table of allProjections().flatMap((p) => p.tables)) await ctx.pool.query(`VACUUM ANALYZE read_model.${table}`);
    const total = (await ctx.store.lagAfter(START)).events;

    bench.log('reading the whole log through the port …');
    const readStarted = performance.now();
    let read = 0;
    for (let after: Position = START; !PARALLEL_ONLY; ) {
      const batch = await ctx.store.readAll({ after, maxCount: BATCH });
      if (batch.length === 0) break;
      read += batch.length;
      after = batch[batch.length - 1]!.position;
    }
    const readSeconds = (performance.now() - readStarted) / 1000;

    const api = service.urls.api!;
    const urls: string[] = [];
    for (let i = 0; i < 300; i++) {
      const asset = assetIds[Math.floor(rnd() * assets)]!;
      urls.push(`${api}/assets/${asset}`, `${api}/reports/asset-locations?location_id=${locationIds[Math.floor(rnd() * locations)]!}&limit=50`, `${api}/assets/${asset}/history?limit=20`);
    }
    const idle: Latencies = { requests: 0, seconds: 1, failures: 0, p50: 0, p99: 0 };
    bench.log(`API reads before the rebuild (${CONNECTIONS} connections, ${SECONDS} s after ${WARMUP_SECONDS} s of warm-up) …`);
    if (!PARALLEL_ONLY) await loadFor(WARMUP_SECONDS, urls, key.token);
    const before = PARALLEL_ONLY ? idle : await loadFor(SECONDS, urls, key.token);

    bench.log('rebuilding every projection (the CLI, in its own process) …');
    const postmaster = postmasterOf((await bench.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
    await resetStatements(bench.pool);
    const alone = await cliRebuild(bench.url, postmaster);
    await printStatements(bench.pool, 'rebuild alone');
    const perEvent = (us: number) => (us / alone.result.events).toFixed(1);
    const cpuNote = `CPU/event: CLI ${perEvent(alone.cpu.cli)} µs, postgres ${perEvent(alone.cpu.postgres)} µs`;
    const replaying = alone.phases['analyzing']!;
    bench.log(
      `rebuilt ${alone.result.events} events in ${alone.result.seconds} s: replaying ${replaying.toFixed(1)} s, logging and analyzing ` +
        `${(alone.phases['catching up']! - replaying).toFixed(1)} s, catch-up and swap ${(alone.result.seconds - alone.phases['catching up']!).toFixed(1)} s`,
    );
    let loaded = alone;
    let during = idle;
    if (!PARALLEL_ONLY) {
      bench.log('rebuilding again while the same API load runs …');
      const load = startLoad(urls, key.token);
      loaded = await cliRebuild(bench.url, postmaster);
      during = await load.stop();
      if (before.failures + during.failures > 0) throw new Error(`API reads failed: ${before.failures} before, ${during.failures} during the rebuild`);
    }

    // Side by side: the same log rebuilt as SEGMENTS segments, one at a time, then two at a time.
    const reads = scans * READS_PER_EVENT;
    const side: Record<number, CliRebuild> = {};
    for (const parallel of [1, 2]) {
      bench.log(`rebuilding with PROJECTION_SEGMENTS=${SEGMENTS}, --parallel ${parallel} …`);
      side[parallel] = await cliRebuild(bench.url, postmaster, { split: { segments: SEGMENTS, parallel } });
      const r = side[parallel];
      bench.log(`  ${r.result.events} events in ${r.result.seconds} s; CPU/read: CLI ${(r.cpu.cli / reads).toFixed(2)} µs, postgres ${(r.cpu.postgres / reads).toFixed(2)} µs`);
    }
    const cpuPerRead = (r: CliRebuild) => `CPU/read: CLI ${(r.cpu.cli / reads).toFixed(2)} µs, postgres ${(r.cpu.postgres / reads).toFixed(2)} µs`;
    const [one, two] = [side[1]!, side[2]!];
    const sideRows: BenchRow[] = [
      { bench: 'replay', case: `rebuild --parallel 1 (PROJECTION_SEGMENTS ${SEGMENTS}; ${reads} reads; ${cpuPerRead(one)})`, events: one.result.events, seconds: one.result.seconds },
      { bench: 'replay', case: `rebuild --parallel 2 (PROJECTION_SEGMENTS ${SEGMENTS}; ${reads} reads; ${cpuPerRead(two)})`, events: two.result.events, seconds: two.result.seconds },
      {
        bench: 'replay',
        case: 'rebuild --parallel 2 against --parallel 1, same log',
        events: two.result.events,
        seconds: two.result.seconds,
        baseline: { label: 'rebuild --parallel 1', events: one.result.events, seconds: one.result.seconds },
        target: { label: '>= 1.6x --parallel 1', met: two.result.events / two.result.seconds >= 1.6 * (one.result.events / one.result.seconds) },
      },
    ];
    if (PARALLEL_ONLY) return [{ bench: 'replay', case: `projections rebuild, one segment (${cpuNote})`, events: alone.result.events, seconds: alone.result.seconds }, ...sideRows];

    const baseline = { label: 'read the log alone through the port', events: read, seconds: readSeconds };
    const perSecond = alone.result.events / alone.result.seconds;
    return [
      { bench: 'replay', case: `append ${total} events (then projected by the follower in another ${projected.toFixed(0)} s)`, events: total, seconds: appended },
      {
        bench: 'replay',
        case: `projections rebuild, all projections (${READS_PER_EVENT} reads per scan event; ${cpuNote})`,
        events: alone.result.events,
        seconds: alone.result.seconds,
        baseline,
        target: { label: '>= 50,000 events/s and >= 50% of reading alone', met: perSecond >= 50_000 && perSecond >= 0.5 * (read / readSeconds) },
      },
      { bench: 'replay', case: 'rebuild: its replaying phase alone', events: alone.result.events, seconds: replaying, baseline },
      { bench: 'replay', case: 'rebuild under the API load below', events: loaded.result.events, seconds: loaded.result.seconds, baseline },
      {
        bench: 'replay',
        case: `API reads during that rebuild (p50 ${ms(during.p50)}, p99 ${ms(during.p99)}; ${CONNECTIONS} conn)`,
        events: during.requests,
        seconds: during.seconds,
        baseline: { label: `before it: p50 ${ms(before.p50)} p99 ${ms(before.p99)}, ${rate(before.requests / before.seconds)}/s`, events: before.requests, seconds: before.seconds },
        target: { label: `p99 < 2x before (${ms(2 * before.p99)})`, met: during.p99 < 2 * before.p99 },
      },
      ...sideRows,
    ];
  } finally {
    await seedStore.close();
    await service.stop();
  }
}
