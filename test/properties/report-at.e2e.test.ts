import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ScansRecorded, locationScansStream, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import { encodeReads } from '../../shared/domain/scans/read-codec.js';
import { microsToTimestamp } from '../../shared/time.js';
import type { Position } from '../../shared/event-store/port.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import type { ListPage, ReportRow } from '../support/scans.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';

/**
 * The report at an instant is the report of the reads observed by then (docs/api.md "The report at
 * an instant"), whatever order they arrived in. Each run is an org of its own with a few assets
 * and locations; random reads (ties of observed time included) go to the log in a random order, in
 * random batches, some of them twice, and the tracking projection applies them. Then, for several
 * random instants T, `GET /reports/asset-locations?at=T` (with a random sort and page) must equal
 * a report computed here from the reads observed at or before T: per asset, its last read in
 * (observed time, log order) gives the location and `asset_last_seen`, the run of reads at that
 * location ending with it gives `dwell_started_at`; a read delivered again keeps its first place
 * in the log. An `at` in the future must equal the report of now.
 *
 * Reproduce: PROPERTY_SEED=<seed> PROPERTY_RUNS=<n> npx vitest run test/properties/report-at.e2e.test.ts
 */

const SEED = Number(process.env.PROPERTY_SEED ?? 20261126);
const RUNS = Number(process.env.PROPERTY_RUNS ?? 15);

const ASSETS = 3;
const LOCATIONS = 3;
const BASE_US = Date.UTC(2026, 4, 25, 10, 0, 0) * 1000;
const FAR_FUTURE = '9999-12-31T23:59:59.999999Z';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService('report_at_property');
});
afterAll(async () => {
  await svc?.stop();
});

interface Read {
  asset: number;
  location: number;
  us: number;
}
interface Made {
  orgId: number;
  api: ReturnType<typeof client>;
  assets: Array<{ id: number; external_key: string }>;
  locations: Array<{ id: number; external_key: string }>;
}

const SORTS = ['', 'asset_last_seen', '-asset_last_seen', 'asset_external_key', '-asset_external_key', 'location_external_key', '-location_external_key,asset_last_seen'];

/** A scenario: reads on a coarse grid of seconds (so that observed times tie), how they arrive, and the instants asked. */
const scenarioArb = fc
  .array(
    fc.record({
      asset: fc.nat({ max: ASSETS - 1 }),
      location: fc.nat({ max: LOCATIONS - 1 }),
      us: fc.tuple(fc.nat({ max: 11 }), fc.constantFrom(0, 0, 0, 1, 999)).map(([s, micro]) => BASE_US + s * 1_000_000 + micro),
    }),
    { minLength: 1, maxLength: 30 },
  )
  .chain((reads) =>
    fc.record({
      reads: fc.constant(reads),
      // Arrival: a random order of the reads, then some of them delivered again, anywhere later.
      arrival: fc.shuffledSubarray(reads, { minLength: reads.length, maxLength: reads.length }),
      again: fc.array(fc.tuple(fc.nat({ max: reads.length - 1 }), fc.nat()), { maxLength: 6 }),
      batches: fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 40, maxLength: 40 }),
      instants: fc.array(
        fc.oneof(
          fc.nat({ max: reads.length - 1 }).map((i) => reads[i]!.us),
          fc.tuple(fc.nat({ max: reads.length - 1 }), fc.constantFrom(-1, 1)).map(([i, d]) => reads[i]!.us + d),
          fc.integer({ min: -1_000_000, max: 13_000_000 }).map((d) => BASE_US + d),
          fc.constant(Number.POSITIVE_INFINITY),
        ),
        { minLength: 3, maxLength: 6 },
      ),
      pages: fc.array(fc.record({ sort: fc.constantFrom(...SORTS), limit: fc.integer({ min: 1, max: 4 }), offset: fc.nat({ max: 3 }), whole: fc.boolean() }), {
        minLength: 6,
        maxLength: 6,
      }),
    }),
  );

async function makeOrg(run: number): Promise<Made> {
  const ctx = svc.service.ctx;
  const orgId = (await createOrg(ctx, `report-at-${run}`)).id;
  const api = client(svc.apiUrl, (await mintApiKey(ctx, { orgId, scopes: ['assets:write', 'locations:write', 'tracking:read'] })).token);
  const locations = [];
  for (let i = 0; i < LOCATIONS; i++) {
    const reply = await api<{ data: { id: number; external_key: string } }>('POST', '/locations', { body: { name: 'L', external_key: `P${run}-L${i}` } });
    expect(reply.status, reply.text).toBe(201);
    locations.push(reply.body.data);
  }
  const assets = [];
  for (let i = 0; i < ASSETS; i++) {
    const reply = await api<{ data: { id: number; external_key: string } }>('POST', '/assets', { body: { name: 'A', external_key: `P${run}-A${i}` } });
    expect(reply.status, reply.text).toBe(201);
    assets.push(reply.body.data);
  }
  return { orgId, api, assets, locations };
}

/**
 * Appends the reads in this order as reader events, one location's consecutive reads per event,
 * one event per append (so the log keeps exactly this order); waits for the tracking projection.
 */
async function deliver(made: Made, order: Read[], batches: number[]): Promise<void> {
  const { store, checkpoints } = svc.service.ctx;
  let last: Position | null = null;
  for (let i = 0, b = 0; i < order.length; b++) {
    const location = order[i]!.location;
    const batch: Read[] = [];
    while (i < order.length && order[i]!.location === location && batch.length < batches[b % batches.length]!) batch.push(order[i++]!);
    const { capturePoints, ...encoded } = encodeReads(
      batch.map((r) => ({ tag_type: 'rfid', value: `E28011606000020${made.orgId}A${r.asset}`, observedUs: r.us, rssi: -60, capturePoint: `door-${location}` })),
      (raw) => ({ assetId: made.assets[Number(raw.value.slice(raw.value.lastIndexOf('A') + 1))]!.id, cause: null }),
    );
    const locationId = made.locations[location]!.id;
    const data: ScansRecordedData = {
      org_id: made.orgId,
      location_id: locationId,
      source: { kind: 'reader', reader_id: 'reader-1', capture_points: capturePoints },
      ...encoded,
      at: new Date().toISOString(),
    };
    last = (await store.appendToStream(locationScansStream(made.orgId, locationId), [{ type: ScansRecorded.type, data }], 'any')).position;
  }
  if (last) await checkpoints.waitForCheckpoint(last, { projections: ['tracking'] });
}

const wire = (us: number) => new Date(Math.floor(us / 1000)).toISOString();

/** The report at T computed from the reads: each read once, at its first arrival; the newest by (observed time, arrival) per asset. */
function expectedReport(made: Made, order: Read[], t: number, sort: string): ReportRow[] {
  const seen = new Set<string>();
  const byAsset = new Map<number, Array<Read & { seq: number }>>();
  order.forEach((read, seq) => {
    const key = `${read.asset}/${read.location}/${read.us}`;
    if (seen.has(key)) return;
    seen.add(key);
    if (read.us > t) return;
    byAsset.set(read.asset, [...(byAsset.get(read.asset) ?? []), { ...read, seq }]);
  });
  const rows = [...byAsset.values()].map((reads) => {
    reads.sort((a, b) => a.us - b.us || a.seq - b.seq);
    const last = reads.at(-1)!;
    let first = reads.length - 1;
    while (first > 0 && reads[first - 1]!.location === last.location) first--;
    const row: ReportRow = {
      asset_id: made.assets[last.asset]!.id,
      asset_external_key: made.assets[last.asset]!.external_key,
      location_id: made.locations[last.location]!.id,
      location_external_key: made.locations[last.location]!.external_key,
      asset_deleted_at: null,
      asset_last_seen: wire(last.us),
      dwell_started_at: wire(reads[first]!.us),
    };
    return { lastUs: last.us, row };
  });
  const keys = (sort || '-asset_last_seen').split(',').map((s) => ({ field: s.replace(/^-/, ''), sign: s.startsWith('-') ? -1 : 1 }));
  const compare = (x: (typeof rows)[number], y: (typeof rows)[number]): number => {
    for (const { field, sign } of keys) {
      const a = field === 'asset_last_seen' ? x.lastUs : (x.row[field as 'asset_external_key' | 'location_external_key'] ?? '');
      const b = field === 'asset_last_seen' ? y.lastUs : (y.row[field as 'asset_external_key' | 'location_external_key'] ?? '');
      if (a !== b) return (a < b ? -1 : 1) * sign;
    }
    return x.row.asset_id - y.row.asset_id;
  };
  return rows.sort(compare).map((r) => r.row);
}

describe('the report at an instant (property)', () => {
  it('equals the report of the reads observed by then, whatever their arrival order, batching and redeliveries', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(scenarioArb, async (scenario) => {
        const made = await makeOrg(++run);
        const order = [...scenario.arrival];
        for (const [index, position] of scenario.again) order.splice(position % (order.length + 1), 0, scenario.reads[index]!);
        await deliver(made, order, scenario.batches);
        const get = async (query: string) => {
          const reply = await made.api<ListPage<ReportRow>>('GET', `/reports/asset-locations${query}`);
          expect(reply.status, reply.text).toBe(200);
          return reply.body;
        };
        for (const [i, t] of scenario.instants.entries()) {
          const page = scenario.pages[i]!;
          const at = Number.isFinite(t) ? microsToTimestamp(t) : FAR_FUTURE;
          const paging = page.whole ? '&limit=200' : `&limit=${page.limit}&offset=${page.offset}`;
          const query = `${page.sort ? `&sort=${page.sort}` : ''}${paging}`;
          const all = expectedReport(made, order, t, page.sort);
          const expected = page.whole ? all : all.slice(page.offset, page.offset + page.limit);
          const actual = await get(`?at=${encodeURIComponent(at)}${query}`);
          expect(actual.data, `at=${at}${query}`).toEqual(expected);
          expect(actual.total_count, `at=${at}${query}`).toBe(all.length);
          if (!Number.isFinite(t)) expect(actual, 'a future at is the report of now').toEqual(await get(`?${query.slice(1)}`));
        }
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true },
    );
  });
});
