/**
 * Commands against the same durable work done directly (issue 37): POST /assets, PATCH /assets/{id},
 * POST /locations under a parent and a re-parenting PATCH /locations/{id}, each through the whole
 * service (HTTP, auth, validation, the command's reads and decision, the append, the wait for the
 * projections, the answer read from the view), at BENCH_CONNECTIONS (default 8) connections after a
 * warm-up, against its baseline in the same run: the same events appended and the same read-model
 * rows applied (by the projections' own code) in one transaction, then the view read as the
 * answer, on as many loops through pg.
 *
 * The org holds BENCH_ASSETS assets (default 20,000) and BENCH_LOCATIONS locations (default 2,000,
 * 8 levels), seeded by appending events straight to the store, and every asset is then read once
 * at a random location (BENCH_PLACED=0: not), so that the subscribers keep a position for each, as
 * in an organization whose assets are seen. The HTTP cases run first with the
 * bench's own projector; the baselines then run with nothing projecting (they apply the rows
 * themselves, and a projector would apply their events a second time), so each ratio is measured
 * within the run, a minute or two apart. CPU per command of this process (the service, or the baseline's
 * loops) and of Postgres comes from /proc, the load generator in a process of its own.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type pg from 'pg';
import { allProjections } from '../../projections/index.js';
import { assetViewQuery } from '../../projections/assets/queries.js';
import { locationViewQuery } from '../../projections/locations/queries.js';
import { startService } from '../../services/service.js';
import { loadConfig } from '../../shared/config.js';
import { assetDecider } from '../../shared/domain/assets/decider.js';
import { AssetUpdated, assetStream } from '../../shared/domain/assets/events.js';
import { mintedKey } from '../../shared/domain/external-keys.js';
import { LocationCreated, LocationMoved, LocationTreeChanged, locationStream, locationTreeStream } from '../../shared/domain/locations/events.js';
import { claim, reservationStream, type ReservationKind } from '../../shared/domain/reservations.js';
import { ScansRecorded, locationScansStream, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import { encodeReads, type RawRead } from '../../shared/domain/scans/read-codec.js';
import { seededRandom } from '../../shared/random.js';
import type { EventData, RecordedEvent, StreamAppend } from '../../shared/event-store/port.js';
import { appendQuery } from '../../shared/event-store/postgres.js';
import { createLogger } from '../../shared/logger.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import type { ServiceContext } from '../../shared/service-context.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import type { LoadSpec } from './load.js';
import { seedMasterData } from './master-data.bench.js';
import { CpuMeter, cpuPer, drive, driveSql, ms, runLoad, serverWork, startProfile, workPer, type Measured } from './measure.js';
import type { BenchContext, BenchRow } from './types.js';

const ASSETS = Number(process.env.BENCH_ASSETS ?? 20_000);
const LOCATIONS = Number(process.env.BENCH_LOCATIONS ?? 2_000);
const CONNECTION_LEVELS = (process.env.BENCH_CONNECTIONS ?? '8').split(',').map(Number).filter((n) => n > 0);
/** Locations moved back and forth by each re-parenting case (more than the connections, so that no two requests move one location at once). */
const MOVED = 64;
/** Which cases to run, by number (1 POST /assets, 2 PATCH /assets, 3 POST /locations, 4 re-parenting): all by default. */
const ONLY = process.env.BENCH_COMMANDS?.split(',').map(Number);
/** Assets patched by each PATCH case, in turn. */
const PATCHED = 1_000;
/** Every asset read once at a random location before the cases (BENCH_PLACED=0: none), as in an organization whose assets are seen. */
const PLACED = process.env.BENCH_PLACED !== '0';

const BASELINE_KEY_ID = randomUUID();

interface Reparented {
  id: number;
  parent: number;
  revision: bigint;
}

/**
 * The baseline's transaction: appends `appends` (the store's own statement, event ids given) and
 * applies them with every projection that reads one of their types, as the projector would, then
 * reads `answer` (the view the service answers with) and commits. Returns the view's JSON.
 */
async function appendAndApply(ctx: ServiceContext, appends: StreamAppend[], answer: pg.QueryConfig): Promise<string> {
  // As the service records them: an id each, and who asked in which request (the audit log's actor).
  const metadata = { actor: { type: 'api_key', id: BASELINE_KEY_ID, name: 'bench' }, request_id: randomUUID() };
  for (const append of appends) {
    for (const event of append.events) {
      event.id = randomUUID();
      event.metadata = metadata;
    }
  }
  const client = await ctx.pool.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<{ revisions: string[]; commit: string; prepare: string }>(appendQuery(appends));
    const recorded = recordedOf(appends, rows[0]!);
    for (const projection of allProjections()) {
      const events = recorded.filter((e) => projection.eventTypes.includes(e.type));
      if (events.length > 0) await projection.apply(events, client);
    }
    const view = await client.query<{ json: string }>(answer);
    await client.query('COMMIT');
    return view.rows[0]!.json;
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  } finally {
    client.release();
  }
}

/** The appended events as the log records them, in the caller's order: revisions from the append's answer (its streams in sorted order). */
function recordedOf(appends: StreamAppend[], row: { revisions: string[]; commit: string; prepare: string }): RecordedEvent[] {
  const sorted = appends.map((a) => a.streamId).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const last = new Map(sorted.map((streamId, i) => [streamId, BigInt(row.revisions[i]!)]));
  const position = { commit: BigInt(row.commit), prepare: BigInt(row.prepare) };
  const recordedAt = new Date();
  return appends.flatMap((append) =>
    append.events.map((event: EventData, i) => ({
      id: event.id!,
      type: event.type,
      data: event.data,
      metadata: event.metadata ?? {},
      streamId: append.streamId,
      revision: last.get(append.streamId)! - BigInt(append.events.length - 1 - i),
      position,
      recordedAt,
    })),
  );
}

function claimOf(kind: ReservationKind, orgId: number, value: string, ownerType: string, ownerId: number, at: string): StreamAppend {
  return claim({ streamId: reservationStream(kind, orgId, value), kind, orgId, value, expectedRevision: 'no_stream', holder: null }, { ownerType, ownerId }, at);
}

function treeChange(orgId: number, locationId: number, change: 'created' | 'moved', parentId: number, at: string): StreamAppend {
  return { streamId: locationTreeStream(orgId), expectedRevision: 'any', events: [{ type: LocationTreeChanged.type, data: { org_id: orgId, location_id: locationId, change, parent_id: parentId, at } }] };
}

/**
 * Ids drawn from the service's sequence ahead, a block at a time (the service draws one per
 * create, in one statement with its key number): the baseline's id costs no statement of its own.
 */
function idSource(pool: pg.Pool, sequence: 'asset_ids' | 'location_ids'): () => Promise<number> {
  let block: number[] = [];
  let refill: Promise<void> | null = null;
  return async () => {
    while (block.length === 0) {
      refill ??= pool
        .query<{ id: number }>(`SELECT nextval('service.${sequence}')::int AS id FROM generate_series(1, 20000)`)
        .then((result) => {
          block = result.rows.map((r) => r.id);
        })
        .finally(() => {
          refill = null;
        });
      await refill;
    }
    return block.pop()!;
  };
}

function row(name: string, http: Measured, work: string, baseline: Measured, baselineLabel: string): BenchRow {
  const rate = http.requests / http.seconds;
  const baseRate = baseline.requests / baseline.seconds;
  return {
    bench: 'commands',
    case: `${name} (p50 ${ms(http.p50)}, p99 ${ms(http.p99)}${cpuPer(http.cpu, http.requests, 'command')}${work})`,
    events: http.requests,
    seconds: http.seconds,
    baseline: { label: `${baselineLabel}, p50 ${ms(baseline.p50)} p99 ${ms(baseline.p99)}${cpuPer(baseline.cpu, baseline.requests, 'command')}`, events: baseline.requests, seconds: baseline.seconds },
    target: { label: '>= 50% of the baseline, p99 < 25 ms', met: rate >= 0.5 * baseRate && http.p99 < 25 },
  };
}

/** A baseline must have done the command's work: its answer shows it. */
function expectInView(view: string, expected: Record<string, unknown>): void {
  const parsed = JSON.parse(view) as Record<string, unknown>;
  for (const [field, value] of Object.entries(expected)) {
    if (parsed[field] !== value) throw new Error(`baseline answered ${field} ${JSON.stringify(parsed[field])}, expected ${JSON.stringify(value)}`);
  }
}

/**
 * Reads every asset once, at a random location of the org, as a fixed reader's scan events (500
 * reads each), and waits until every projection shows them: the tracking, alerts and counts
 * subscribers then keep a position for each asset, which a re-parent's batch of the alerts
 * subscriber may have to load (docs/design.md "Alerts").
 */
async function placeAssets(ctx: ServiceContext, orgId: number, assetIds: number[], log: (message: string) => void): Promise<void> {
  const { rows } = await ctx.pool.query<{ id: number }>('SELECT id FROM read_model.locations WHERE org_id = $1 ORDER BY id', [orgId]);
  const random = seededRandom(37);
  const at = new Map<number, number[]>();
  for (const assetId of assetIds) {
    const location = rows[Math.floor(random() * rows.length)]!.id;
    const here = at.get(location);
    if (here) here.push(assetId);
    else at.set(location, [assetId]);
  }
  log(`placing ${assetIds.length} assets at ${at.size} locations …`);
  const tagOf = (assetId: number) => `E28011606000${assetId.toString(16).padStart(12, '0')}`.toUpperCase();
  let observedUs = (Date.now() - 3_600_000) * 1000;
  let last: RecordedEvent['position'] | null = null;
  for (const [location, here] of at) {
    for (let i = 0; i < here.length; i += 500) {
      const reads: RawRead[] = here.slice(i, i + 500).map((assetId) => ({ tag_type: 'rfid', value: tagOf(assetId), observedUs: (observedUs += 1000), rssi: -60, capturePoint: 'door' }));
      const { capturePoints, ...encoded } = encodeReads(reads, (read) => ({ assetId: Number.parseInt(read.value.slice(12), 16), cause: null }));
      const data: ScansRecordedData = { org_id: orgId, location_id: location, source: { kind: 'reader', reader_id: 'bench-reader', capture_points: capturePoints }, ...encoded, at: new Date().toISOString() };
      last = (await ctx.store.appendToStream(locationScansStream(orgId, location), [{ type: ScansRecorded.type, data: data as never }])).position;
    }
  }
  if (last) await ctx.checkpoints.waitForCheckpoint(last, { timeoutMs: 10 * 60_000 });
}

export async function run(bench: BenchContext): Promise<BenchRow[]> {
  const config = loadConfig({
    PORT: '0',
    OPS_PORT: '0',
    INGEST_PORT: '0',
    // No projector role: the bench runs its own ProjectorRuntime, stopped for the baselines.
    ROLES: 'api',
    LOG_LEVEL: 'silent',
    PG_POOL_SIZE: '40',
    RATE_LIMIT_PER_MINUTE: '100000000',
    RATE_LIMIT_BURST: '100000000',
    SIGNING_KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
  });
  const service = await startService(config, bench.url, createLogger('silent'));
  const { ctx } = service;
  const projector = () => {
    const runtime = new ProjectorRuntime({ store: ctx.store, pool: ctx.pool, projections: allProjections(), log: createLogger('error'), onCheckpoint: (name, position) => ctx.checkpoints.advance(name, position) });
    runtime.start();
    return runtime;
  };
  let runtime: ProjectorRuntime | null = projector();
  const meter = await CpuMeter.open(ctx.pool);
  if (!meter) bench.log('no /proc (or a remote Postgres): CPU is not accounted');
  try {
    const org = await createOrg(ctx, 'Commands bench');
    const orgId = org.id;
    const key = await mintApiKey(ctx, { orgId, scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write'] });
    const headers = { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' };
    const patchHeaders = { ...headers, 'content-type': 'application/merge-patch+json' };
    const seeded = await seedMasterData(ctx, orgId, bench.log, { assets: ASSETS, locations: LOCATIONS });
    if (PLACED) await placeAssets(ctx, orgId, seeded.assetIds, bench.log);
    const api = service.urls.api!;
    const prefix = new URL(api).pathname;

    // Two parents at the third level from the bottom, and locations of the level below the
    // others' (each with a few children) moved between them: half for the service, half for the baseline.
    const byLevel = async (level: number, limit: number) =>
      (await ctx.pool.query<{ id: number; parent_id: number }>('SELECT id, parent_id FROM read_model.locations WHERE org_id = $1 AND cardinality(ancestors) = $2 ORDER BY id LIMIT $3', [orgId, level, limit])).rows;
    const [parentA, parentB] = (await byLevel(5, 2)).map((r) => r.id) as [number, number];
    const movable = await byLevel(6, 2 * MOVED);
    if (movable.length < 2 * MOVED) throw new Error(`only ${movable.length} locations at level 6: raise BENCH_LOCATIONS`);
    // The patched assets, taken in turn from the whole org (a list the load generator gets on its command line).
    const patched = seeded.assetIds.filter((_, i) => i % Math.max(1, Math.floor(seeded.assetIds.length / (2 * PATCHED))) === 0).slice(0, 2 * PATCHED);
    const httpAssets = patched.filter((_, i) => i % 2 === 0);
    const baselineAssets = patched.filter((_, i) => i % 2 === 1).map((id) => ({ id, revision: 0n }));
    const httpMoved = movable.slice(0, MOVED).map((r) => r.id);
    const baselineMoved: Reparented[] = movable.slice(MOVED).map((r) => ({ id: r.id, parent: r.parent_id, revision: 0n }));
    const reparent = (ids: number[]): NonNullable<LoadSpec['rotate']> =>
      [parentA, parentB].flatMap((parent) => ids.map((id) => ({ path: `${prefix}/locations/${id}`, body: JSON.stringify({ parent_id: parent }) })));

    const cases: Array<{ name: string; spec: Omit<LoadSpec, 'seconds' | 'connections'> }> = [
      { name: 'POST /assets (minted key)', spec: { url: `${api}/assets`, method: 'POST', headers, body: JSON.stringify({ name: 'bench create', metadata: { source: 'bench' } }) } },
      {
        name: 'PATCH /assets/{id} (a new name)',
        spec: { url: api, method: 'PATCH', headers: patchHeaders, rotate: httpAssets.map((id) => ({ path: `${prefix}/assets/${id}`, body: '{"name":"bench patch {{n}}"}' })) },
      },
      { name: 'POST /locations under a parent (minted key)', spec: { url: `${api}/locations`, method: 'POST', headers, body: JSON.stringify({ name: 'bench location', parent_id: parentA }) } },
      { name: 'PATCH /locations/{id} re-parenting (a subtree of 4)', spec: { url: api, method: 'PATCH', headers: patchHeaders, rotate: reparent(httpMoved) } },
    ];

    const nextAssetId = idSource(ctx.pool, 'asset_ids');
    const nextLocationId = idSource(ctx.pool, 'location_ids');
    let nextAsset = 0;
    let nextMove = 0;
    const baselines: Array<{ label: string; command: () => Promise<void> }> = [
      {
        label: 'AssetCreated + key claim appended and applied in one transaction',
        command: async () => {
          const id = await nextAssetId();
          const at = new Date().toISOString();
          const externalKey = mintedKey('asset', 1_000_000 + id);
          const events = assetDecider.decide(
            { type: 'CreateAsset', orgId, assetId: id, externalKey, minted: true, keyTaken: false, name: 'bench create', description: null, isActive: true, validFrom: null, validTo: null, metadata: { source: 'bench' }, tags: [], at },
            assetDecider.initialState,
          );
          const view = await appendAndApply(ctx, [{ streamId: assetStream(orgId, id), expectedRevision: 'no_stream', events }, claimOf('asset-key', orgId, externalKey, 'asset', id, at)], assetViewQuery(orgId, id));
          expectInView(view, { id, external_key: externalKey });
        },
      },
      {
        label: 'AssetUpdated appended and applied in one transaction',
        command: async () => {
          const asset = baselineAssets[nextAsset++ % baselineAssets.length]!;
          const name = `bench patch ${nextAsset}`;
          const event = { type: AssetUpdated.type, data: { org_id: orgId, asset_id: asset.id, changes: { name }, at: new Date().toISOString() } };
          const revision = asset.revision;
          asset.revision++;
          const view = await appendAndApply(ctx, [{ streamId: assetStream(orgId, asset.id), expectedRevision: revision, events: [event] }], assetViewQuery(orgId, asset.id));
          expectInView(view, { name });
        },
      },
      {
        label: 'LocationCreated + key claim + tree change appended and applied in one transaction',
        command: async () => {
          const id = await nextLocationId();
          const at = new Date().toISOString();
          const externalKey = mintedKey('location', 1_000_000 + id);
          const created = {
            type: LocationCreated.type,
            data: { org_id: orgId, location_id: id, external_key: externalKey, name: 'bench location', description: null, parent_id: parentA, is_active: true, valid_from: null, valid_to: null, at },
          };
          const view = await appendAndApply(
            ctx,
            [{ streamId: locationStream(orgId, id), expectedRevision: 'no_stream', events: [created] }, claimOf('location-key', orgId, externalKey, 'location', id, at), treeChange(orgId, id, 'created', parentA, at)],
            locationViewQuery(orgId, id),
          );
          expectInView(view, { id, parent_id: parentA });
        },
      },
      {
        label: 'LocationMoved + tree change appended and applied in one transaction',
        command: async () => {
          const moved = baselineMoved[nextMove++ % baselineMoved.length]!;
          const parent = moved.parent === parentA ? parentB : parentA;
          const at = new Date().toISOString();
          const event = { type: LocationMoved.type, data: { org_id: orgId, location_id: moved.id, parent_id: parent, previous_parent_id: moved.parent, at } };
          const revision = moved.revision;
          moved.revision++;
          moved.parent = parent;
          const view = await appendAndApply(
            ctx,
            [{ streamId: locationStream(orgId, moved.id), expectedRevision: revision, events: [event] }, treeChange(orgId, moved.id, 'moved', parent, at)],
            locationViewQuery(orgId, moved.id),
          );
          expectInView(view, { parent_id: parent });
        },
      },
    ];

    // Every level's HTTP cases first, then (the projector stopped for good) every baseline: a
    // projector started again would apply the baselines' events a second time.
    const measured = new Map<string, { http: Measured; work: string }>();
    for (const connections of CONNECTION_LEVELS) {
      for (const [i, { name, spec }] of cases.entries()) {
        if (ONLY && !ONLY.includes(i + 1)) continue;
        bench.log(`${connections} conn: ${name} …`);
        const profile = await startProfile(`commands-${i + 1}-${connections}`);
        const http = await drive({ ...spec, connections }, meter);
        await profile.stop();
        // The server's transactions and statements per command, over 3 s more of the same load
        // (pg_stat_database lags by up to its stats interval: read after a pause).
        await new Promise((r) => setTimeout(r, 1000));
        const before = await serverWork(ctx.pool);
        const counted = await runLoad({ ...spec, connections, seconds: 3 }, null);
        await new Promise((r) => setTimeout(r, 1000));
        measured.set(`${connections} ${name}`, { http, work: workPer(before, await serverWork(ctx.pool), counted.requests, 'command') });
      }
    }
    await runtime.stop();
    runtime = null;
    const rows: BenchRow[] = [];
    for (const connections of CONNECTION_LEVELS) {
      for (const [i, { label, command }] of baselines.entries()) {
        if (ONLY && !ONLY.includes(i + 1)) continue;
        const { name } = cases[i]!;
        bench.log(`${connections} conn: the baseline of ${name} …`);
        const { http, work } = measured.get(`${connections} ${name}`)!;
        rows.push(row(`${connections} conn, ${name}`, http, work, await driveSql(connections, command, meter), label));
      }
    }
    return rows;
  } finally {
    await runtime?.stop();
    await service.stop();
  }
}
