import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../support/service.js';
import { deliverPlacedReads } from '../support/scans.js';
import { seededRandom as random, shuffled as shuffle } from '../../shared/random.js';
import { TIME_RANGE_MIN, microsToRfc3339 } from '../../shared/time.js';

/**
 * The tracking projection as a function of the set of reads (docs/design.md "Scans"): whatever
 * order reads arrive in, however they are batched, and however often one is delivered again,
 * visits and current locations come out the same. Each trial runs in its own org.
 */

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService('tracking_projection', { ROLES: 'projector' });
});
afterAll(async () => {
  await svc?.stop();
});

interface Read {
  assetId: number;
  locationId: number;
  us: number;
  tag: string;
}

const BASE_US = Date.UTC(2026, 4, 25, 14, 0, 0) * 1000;

/** Moves and parked tags: each asset walks among 4 locations, often read several times in a row. */
function scenario(rnd: () => number): Read[] {
  const reads: Read[] = [];
  const used = new Set<number>();
  for (let asset = 1; asset <= 3; asset++) {
    let location = 1 + Math.floor(rnd() * 4);
    let us = BASE_US + asset * 7;
    for (let i = 0; i < 30; i++) {
      if (rnd() < 0.3) location = 1 + Math.floor(rnd() * 4);
      us += 1 + Math.floor(rnd() * 5_000_000);
      while (used.has(us)) us++;
      used.add(us);
      reads.push({ assetId: asset, locationId: location, us, tag: `E2801160600002084D9F34A${asset}` });
    }
  }
  return reads;
}

/** Visits as docs/api.md "Tracking: where assets are and have been" defines them, straight from the set of reads. */
function expectedVisits(reads: Read[]): Map<number, Array<[number, number, number]>> {
  const byAsset = new Map<number, Array<[number, number, number]>>();
  for (const read of [...reads].sort((a, b) => a.us - b.us)) {
    const visits = byAsset.get(read.assetId) ?? [];
    const last = visits.at(-1);
    if (last && last[0] === read.locationId) last[2] = read.us;
    else visits.push([read.locationId, read.us, read.us]);
    byAsset.set(read.assetId, visits);
  }
  return byAsset;
}

/** Delivers reads in the given order, in batches of 1 to 8, each batch split by location. */
const deliver = (orgId: number, reads: Read[], rnd: () => number) => deliverPlacedReads(svc, orgId, reads, rnd, 8);

async function visitsOf(orgId: number): Promise<Map<number, Array<[number, number, number]>>> {
  const result = await svc.service.ctx.pool.query<{ asset_id: number; location_id: number; first_us: string; last_us: string }>(
    `SELECT asset_id, location_id, (extract(epoch FROM first_at) * 1000000)::bigint::text AS first_us, (extract(epoch FROM last_at) * 1000000)::bigint::text AS last_us
       FROM asset_visits WHERE org_id = $1 ORDER BY asset_id, first_at, first_seq`,
    [orgId],
  );
  const byAsset = new Map<number, Array<[number, number, number]>>();
  for (const row of result.rows) byAsset.set(row.asset_id, [...(byAsset.get(row.asset_id) ?? []), [row.location_id, Number(row.first_us), Number(row.last_us)]]);
  return byAsset;
}

async function currentOf(orgId: number): Promise<Array<{ asset_id: number; location_id: number; last_us: number; dwell_us: number }>> {
  const result = await svc.service.ctx.pool.query<{ asset_id: number; location_id: number; last_us: string; dwell_us: string }>(
    `SELECT asset_id, location_id, (extract(epoch FROM last_seen) * 1000000)::bigint::text AS last_us,
            (extract(epoch FROM dwell_started_at) * 1000000)::bigint::text AS dwell_us
       FROM asset_locations WHERE org_id = $1 ORDER BY asset_id`,
    [orgId],
  );
  return result.rows.map((r) => ({ asset_id: r.asset_id, location_id: r.location_id, last_us: Number(r.last_us), dwell_us: Number(r.dwell_us) }));
}

/** The rows of the org whose wire times (written by the projector, migration read-model/570) differ from rfc3339() of their instants. */
async function wireTimesOtherThanRfc3339(orgId: number): Promise<unknown[]> {
  const { rows } = await svc.service.ctx.pool.query(
    `SELECT 'current' AS row, asset_id FROM asset_locations
      WHERE org_id = $1 AND (last_seen_rfc3339 IS DISTINCT FROM rfc3339(last_seen) OR dwell_started_at_rfc3339 IS DISTINCT FROM rfc3339(dwell_started_at))
     UNION ALL
     SELECT 'visit', asset_id FROM asset_visits
      WHERE org_id = $1 AND (first_at_rfc3339 IS DISTINCT FROM rfc3339(first_at) OR last_at_rfc3339 IS DISTINCT FROM rfc3339(last_at))`,
    [orgId],
  );
  return rows;
}

function expectedCurrent(visits: Map<number, Array<[number, number, number]>>) {
  return [...visits]
    .sort(([a], [b]) => a - b)
    .map(([assetId, list]) => ({ asset_id: assetId, location_id: list.at(-1)![0], last_us: list.at(-1)![2], dwell_us: list.at(-1)![1] }));
}

describe('tracking projection: history is a function of the set of reads', () => {
  it('random permutations, batchings and re-deliveries of one set of reads give the same visits and current locations', async () => {
    const reads = scenario(random(7));
    const expected = expectedVisits(reads);
    // The scenario has moves and parked runs, or the test would prove little.
    for (const visits of expected.values()) {
      expect(visits.length).toBeGreaterThan(3);
      expect(visits.some(([, first, last]) => last > first)).toBe(true);
    }
    for (let trial = 0; trial < 24; trial++) {
      const rnd = random(1000 + trial);
      const orgId = 5000 + trial;
      // In time order (the usual case), fully shuffled, or in time order with some reads late.
      const order = trial === 0 ? reads : trial % 3 === 1 ? shuffle(reads, rnd) : reads.map((r) => r).sort((a, b) => a.us - b.us + (rnd() < 0.2 ? 1e9 : 0));
      // Some reads are delivered again (a Kafka redelivery, a gateway republishing), later on.
      const again = order.filter(() => rnd() < 0.15);
      await deliver(orgId, [...order, ...shuffle(again, rnd)], rnd);
      const visits = await visitsOf(orgId);
      expect(Object.fromEntries(visits), `trial ${trial}`).toEqual(Object.fromEntries(expected));
      expect(await currentOf(orgId), `trial ${trial}`).toEqual(expectedCurrent(expected));
      const counted = await svc.service.ctx.pool.query<{ n: number }>('SELECT coalesce(sum(reads), 0)::int AS n FROM scan_read_chunks WHERE org_id = $1', [orgId]);
      expect(counted.rows[0]!.n).toBe(reads.length);
      expect(await wireTimesOtherThanRfc3339(orgId), `trial ${trial}`).toEqual([]);
    }
  });

  it('the wire times the projector writes are what rfc3339() prints, for instants across the whole range', async () => {
    const rnd = random(11);
    const minUs = Date.parse(TIME_RANGE_MIN) * 1000;
    const maxUs = Date.parse('9999-12-31T23:59:59.999Z') * 1000 + 968; // the last double of the range (shared/time.ts)
    const samples = [minUs, maxUs, -1, 0, 1, 999, 1000, -999, -1000, -1001, 2 ** 53, 2 ** 53 + 2, -(2 ** 53), BASE_US + 999_999];
    for (let i = 0; i < 2000; i++) {
      const us = Math.round(minUs + rnd() * (maxUs - minUs));
      samples.push(us, Math.min(maxUs, us - (us % 1000) + 999), us - (us % 1000));
    }
    const { rows } = await svc.service.ctx.pool.query<{ i: number; text: string }>(
      `SELECT i::int, rfc3339(timestamptz 'epoch' + us * interval '1 microsecond') AS text FROM unnest($1::bigint[]) WITH ORDINALITY AS t(us, i) ORDER BY i`,
      [samples],
    );
    expect(rows.map((r) => [samples[r.i - 1], r.text])).toEqual(samples.map((us) => [us, microsToRfc3339(us)]));
  });

  it('a late, older read enters history but never moves an asset back; it can split a visit or join two', async () => {
    const orgId = 6001;
    const at = (s: number) => BASE_US + s * 1_000_000;
    const tag = 'E2801160600002084D9F0001';
    const read = (locationId: number, s: number): Read => ({ assetId: 1, locationId, us: at(s), tag });
    await deliver(orgId, [read(1, 0), read(1, 10), read(1, 20), read(2, 30)], () => 0.99);
    expect((await currentOf(orgId))[0]).toMatchObject({ location_id: 2, last_us: at(30), dwell_us: at(30) });
    // Late read at location 3 in the middle of the first visit: splits it; current location stays.
    await deliver(orgId, [read(3, 15)], () => 0.99);
    expect((await visitsOf(orgId)).get(1)).toEqual([
      [1, at(0), at(10)],
      [3, at(15), at(15)],
      [1, at(20), at(20)],
      [2, at(30), at(30)],
    ]);
    expect((await currentOf(orgId))[0]).toMatchObject({ location_id: 2, last_us: at(30) });
    // A late read at location 1 between the two visits there... is at 3's place: joins nothing.
    // Removing the split needs a read of location 1 later than 15 and earlier than 20: it merges
    // with the visit at 20 only (15 stays between them).
    await deliver(orgId, [read(1, 17)], () => 0.99);
    expect((await visitsOf(orgId)).get(1)).toEqual([
      [1, at(0), at(10)],
      [3, at(15), at(15)],
      [1, at(17), at(20)],
      [2, at(30), at(30)],
    ]);
    // Two late reads at 2 right before 30 join the last visit: dwell starts earlier.
    await deliver(orgId, [read(2, 25)], () => 0.99);
    expect((await currentOf(orgId))[0]).toMatchObject({ location_id: 2, last_us: at(30), dwell_us: at(25) });
  });

  it('reads at the same observed time: the later in the log is the current location', async () => {
    const orgId = 6002;
    const tag = 'E2801160600002084D9F0002';
    const us = BASE_US + 5_000_000;
    await deliver(orgId, [{ assetId: 1, locationId: 1, us, tag }], () => 0.99);
    await deliver(orgId, [{ assetId: 1, locationId: 2, us, tag }], () => 0.99);
    expect((await currentOf(orgId))[0]).toMatchObject({ location_id: 2, last_us: us });
    expect((await visitsOf(orgId)).get(1)).toEqual([
      [1, us, us],
      [2, us, us],
    ]);
  });

  it('keeps microseconds of observed times', async () => {
    const orgId = 6003;
    const us = BASE_US + 123_456;
    await deliver(orgId, [{ assetId: 1, locationId: 1, us, tag: 'E2801160600002084D9F0003' }], () => 0.99);
    expect((await currentOf(orgId))[0]).toMatchObject({ last_us: us, dwell_us: us });
  });
});
