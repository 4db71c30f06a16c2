/**
 * A location moved in an organization whose assets have been seen (issue 37): the alerts
 * subscriber's batch for one `LocationMoved` of a small subtree, in an organization of
 * BENCH_ALERT_MOVE_ASSETS (20,000) assets placed at random over 2,000 locations (depth 7), each
 * with its state as the subscriber keeps it. BENCH_ALERT_MOVES (100) batches of one move each,
 * applied by the projection's own code in a transaction, one after another. Baseline, same run: the
 * states of the assets under the moved location read by one raw statement (what the batch must
 * read at least), as many times.
 */
import { alertsProjection } from '../../projections/alerts/projection.js';
import type { RecordedEvent } from '../../shared/event-store/port.js';
import { seededRandom } from '../../shared/random.js';
import type { BenchContext, BenchRow } from './types.js';

const NAME = 'alerts-moves';
const ORG = 7;
const LOCATIONS = 2000;

export async function run(bench: BenchContext): Promise<BenchRow[]> {
  const assets = Number(process.env.BENCH_ALERT_MOVE_ASSETS ?? 20_000);
  const moves = Number(process.env.BENCH_ALERT_MOVES ?? 100);
  const random = seededRandom(37);
  const parentOf = (id: number) => (id === 1 ? null : Math.floor(id / 3) + 1);
  const ancestors = (id: number) => {
    const chain: number[] = [];
    for (let at: number | null = id; at !== null; at = parentOf(at)) chain.push(at);
    return chain;
  };
  const client = await bench.pool.connect();
  try {
    await client.query('SET search_path TO read_model');
    await client.query('INSERT INTO alerts_engine_tree (segment, org_id, location_id, parent_id) SELECT 0, $1, g, CASE WHEN g = 1 THEN NULL ELSE g / 3 + 1 END FROM generate_series(1, $2) g', [ORG, LOCATIONS]);
    const placed = Array.from({ length: assets }, () => 1 + Math.floor(random() * LOCATIONS));
    const states = placed.map((locationId, i) =>
      JSON.stringify({
        orgId: ORG,
        assetId: i + 1,
        position: { locationId, lastSeenUs: 1_700_000_000_000_000, keys: [] },
        since: Object.fromEntries(ancestors(locationId).map((l) => [l, 1_700_000_000_000_000])),
        deleted: false,
        watches: {},
        unresolved: [],
      }),
    );
    bench.log(`${NAME}: ${assets} asset states over ${LOCATIONS} locations`);
    await client.query(
      `INSERT INTO alerts_engine_assets (org_id, asset_id, segment, state, location_id)
       SELECT $1, u.n, 0, u.state, u.location FROM unnest($2::int[], $3::jsonb[], $4::int[]) AS u(n, state, location)`,
      [ORG, placed.map((_, i) => i + 1), states, placed],
    );
    await client.query('ANALYZE alerts_engine_assets; ANALYZE alerts_engine_tree');
    // Locations of the level above the leaves (a subtree of 4), moved between two parents in turn.
    const movable = Array.from({ length: moves }, (_, i) => 600 + (i % 400));
    const under = movable.map((root) => placed.filter((p) => ancestors(p).includes(root)).length);
    bench.log(`${NAME}: ${moves} moves, ${(under.reduce((a, b) => a + b, 0) / moves).toFixed(1)} assets under each on average`);
    const event = (i: number, location: number): RecordedEvent => ({
      id: `move-${i}`,
      type: 'LocationMoved',
      data: { org_id: ORG, location_id: location, parent_id: i % 2 === 0 ? 2 : 3, previous_parent_id: parentOf(location), at: new Date().toISOString() },
      metadata: {},
      streamId: `location-${ORG}-${location}`,
      revision: BigInt(i),
      position: { commit: BigInt(i + 1), prepare: BigInt(i + 1) },
      recordedAt: new Date(),
    });
    const t0 = performance.now();
    for (const [i, location] of movable.entries()) {
      await client.query('BEGIN');
      await alertsProjection.apply([event(i, location)], client);
      await client.query('COMMIT');
    }
    const seconds = (performance.now() - t0) / 1000;
    const b0 = performance.now();
    for (const location of movable) {
      await client.query(
        `WITH RECURSIVE under (location_id) AS (SELECT $2::int UNION SELECT t.location_id FROM under u JOIN alerts_engine_tree t ON t.segment = 0 AND t.org_id = $1 AND t.parent_id = u.location_id)
         SELECT a.state::text FROM alerts_engine_assets a JOIN under u ON a.segment = 0 AND a.org_id = $1 AND a.location_id = u.location_id`,
        [ORG, location],
      );
    }
    const baselineSeconds = (performance.now() - b0) / 1000;
    return [
      {
        bench: NAME,
        case: `a location moved (a subtree of 4), ${assets} assets placed in its organization: the alerts subscriber's batch`,
        events: moves,
        seconds,
        baseline: { label: 'the states under it read by one statement', events: moves, seconds: baselineSeconds },
      },
    ];
  } finally {
    await client.query('RESET search_path').catch(() => undefined);
    client.release();
  }
}
