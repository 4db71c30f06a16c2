/**
 * Counts at size (docs/api.md "Counts", docs/design.md "Counts"): a zone of BENCH_COUNT_ASSETS
 * expected assets (50,000 by default). Through the whole service (an in-process api and projector
 * over real HTTP): `POST /counts` (the start, answered once the `counts` subscriber has written the
 * expected items) and `POST /counts/{id}/close` (target: under 2 s), then
 * `GET /counts/{id}/items?status=missing&limit=50`, at random offsets and then at the first page (as
 * the tracking bench measures the report), each driven by BENCH_CONNECTIONS loops for
 * BENCH_SECONDS, against the same statements (the page and its total) as raw SQL through pg in the
 * same run (target as the master-data reads: >= 60 % of raw SQL, p99 < 25 ms).
 *
 * The assets and their positions are seeded with SQL straight into the read model (assets, and the
 * subscriber's `counts_engine_assets`: each asset's current location in the zone), not through
 * reads: the bench measures the count, and 50,000 assets' events would take most of its time.
 * Half the expected items are then marked found with SQL, so the status index has two kinds.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { loadConfig } from '../../shared/config.js';
import { createLogger } from '../../shared/logger.js';
import { startService } from '../../services/service.js';
import { itemsPageQuery } from '../../projections/counts/queries.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import type { BenchContext, BenchRow } from './types.js';

const ASSETS = Number(process.env.BENCH_COUNT_ASSETS ?? 50_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
// The first level of BENCH_CONNECTIONS (the master-data module's list): 8 saturates two cores.
const CONNECTIONS = Number((process.env.BENCH_CONNECTIONS ?? '8').split(',')[0]);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
const PAGE = 50;
const FIRST_ID = 200_000_000;

interface Measured {
  requests: number;
  seconds: number;
  p50: number;
  p99: number;
}

async function loop(connections: number, seconds: number, query: () => Promise<unknown>): Promise<Measured> {
  const latencies: number[] = [];
  const end = performance.now() + seconds * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        await query();
        latencies.push(performance.now() - t0);
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))]!;
  return { requests: latencies.length, seconds: (performance.now() - started) / 1000, p50: at(0.5), p99: at(0.99) };
}

async function measure(query: () => Promise<unknown>): Promise<Measured> {
  if (WARMUP_SECONDS > 0) await loop(CONNECTIONS, WARMUP_SECONDS, query);
  return loop(CONNECTIONS, SECONDS, query);
}

const ms = (n: number) => `${n.toFixed(1)} ms`;

async function timed<T>(work: () => Promise<T>): Promise<{ value: T; seconds: number }> {
  const started = process.hrtime.bigint();
  const value = await work();
  return { value, seconds: Number(process.hrtime.bigint() - started) / 1e9 };
}

export async function run(bench: BenchContext): Promise<BenchRow[]> {
  const config = loadConfig({
    DATABASE_URL: bench.url,
    PORT: '0',
    OPS_PORT: '0',
    INGEST_PORT: '0',
    LOG_LEVEL: 'silent',
    ROLES: 'api,projector',
    PG_POOL_SIZE: '20',
    RATE_LIMIT_PER_MINUTE: '100000000',
    RATE_LIMIT_BURST: '100000000',
    SIGNING_KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
  });
  const service = await startService(config, bench.url, createLogger('silent'));
  try {
    const orgId = (await createOrg(service.ctx, 'Counts bench')).id;
    const token = (await mintApiKey(service.ctx, { orgId, scopes: ['counts:read', 'counts:write', 'locations:write'] })).token;
    const api = service.urls.api!;
    const call = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
      const response = await fetch(api + path, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
      const text = await response.text();
      if (!response.ok) throw new Error(`${method} ${path} answered ${response.status}: ${text}`);
      return JSON.parse(text) as T;
    };
    const zone = (await call<{ data: { id: number } }>('POST', '/locations', { name: 'Cage', external_key: 'BENCH-CAGE' })).data.id;

    bench.log(`seeding ${ASSETS.toLocaleString('en-US')} assets in the zone with SQL …`);
    const seeder = new pg.Client({ connectionString: bench.url });
    await seeder.connect();
    try {
      await seeder.query(
        `INSERT INTO read_model.assets (id, org_id, external_key, name, is_active, metadata, created_at, updated_at)
         SELECT $2::int + i, $1, 'SEED-' || lpad(i::text, 8, '0'), 'Seeded asset ' || i, true, '{}', now(), now() FROM generate_series(1, $3::int) i`,
        [orgId, FIRST_ID, ASSETS],
      );
      await seeder.query(
        `INSERT INTO read_model.counts_engine_assets (org_id, asset_id, segment, position, location_id)
         SELECT $1, $2::int + i, 0, jsonb_build_object('locationId', $4::int, 'lastSeenUs', 1767225600000000 + i, 'keys', jsonb_build_array('k' || i)), $4
           FROM generate_series(1, $3::int) i`,
        [orgId, FIRST_ID, ASSETS, zone],
      );
    } finally {
      await seeder.end();
    }
    await bench.pool.query('VACUUM ANALYZE read_model.assets, read_model.counts_engine_assets');

    type CountReply = { data: { id: number; expected: number; missing: number; found: number } };
    const start = await timed(() => call<CountReply>('POST', '/counts', { location_id: zone, name: 'bench' }));
    const count = start.value.data;
    if (count.expected !== ASSETS) throw new Error(`the count expects ${count.expected}, not ${ASSETS}`);
    bench.log(`start: ${start.seconds.toFixed(2)} s for ${count.expected} expected`);
    await bench.pool.query(
      `UPDATE read_model.count_items SET zone_location_id = $3, zone_seen_at = now() WHERE org_id = $1 AND count_id = $2 AND asset_id % 2 = 0`,
      [orgId, count.id, zone],
    );
    await bench.pool.query('VACUUM ANALYZE read_model.count_items');
    const close = await timed(() => call<CountReply>('POST', `/counts/${count.id}/close`));
    const missing = close.value.data.missing;
    bench.log(`close: ${close.seconds.toFixed(2)} s; found ${close.value.data.found}, missing ${missing}`);

    const randomOffset = () => Math.floor(Math.random() * Math.max(1, missing - PAGE));
    // The page through the service, and the same two statements the handler runs (the page and its
    // total) as raw SQL on the read model's schema, at offsets drawn by `offset`.
    const sqlPool = new pg.Pool({ connectionString: bench.url, max: CONNECTIONS, options: '-c search_path=read_model' });
    const pageAt = async (offset: () => number): Promise<{ http: Measured; sql: Measured }> => {
      const http = await measure(async () => {
        const response = await fetch(`${api}/counts/${count.id}/items?status=missing&limit=${PAGE}&offset=${offset()}`, { headers: { authorization: `Bearer ${token}` } });
        if (response.status !== 200) throw new Error(`items answered ${response.status}`);
        await response.arrayBuffer();
      });
      const sql = await measure(async () => {
        const page = itemsPageQuery(orgId, count.id, { status: 'missing' }, PAGE, offset());
        await Promise.all([
          sqlPool.query(page),
          sqlPool.query('SELECT count(*)::int AS n FROM count_items WHERE org_id = $1 AND count_id = $2 AND status = $3', [orgId, count.id, 'missing']),
        ]);
      });
      return { http, sql };
    };
    let deep: { http: Measured; sql: Measured };
    let first: { http: Measured; sql: Measured };
    try {
      deep = await pageAt(randomOffset);
      // The first page, as the tracking bench measures the report (`?limit=50`).
      first = await pageAt(() => 0);
    } finally {
      await sqlPool.end();
    }
    const size = `${ASSETS.toLocaleString('en-US')} expected`;
    return [
      { bench: 'counts', case: `POST /counts, a zone of ${size} (the answer waits for the expected items)`, events: ASSETS, seconds: start.seconds },
      { bench: 'counts', case: `POST /counts/{id}/close, ${size}`, events: 1, seconds: close.seconds, quantity: `${close.seconds.toFixed(2)} s`, target: { label: '< 2 s', met: close.seconds < 2 } },
      ...(
        [
          ['offset=random', deep],
          ['first page', first],
        ] as const
      ).map(([which, { http, sql }]) => ({
        bench: 'counts',
        case: `GET /counts/{id}/items?status=missing&limit=${PAGE}, ${which}, ${missing.toLocaleString('en-US')} missing, ${CONNECTIONS} loops (p50 ${ms(http.p50)}, p99 ${ms(http.p99)})`,
        events: http.requests,
        seconds: http.seconds,
        baseline: { label: `raw SQL p50 ${ms(sql.p50)} p99 ${ms(sql.p99)}`, events: sql.requests, seconds: sql.seconds },
        target: { label: '>= 60% of raw SQL, p99 < 25 ms', met: http.requests / http.seconds >= 0.6 * (sql.requests / sql.seconds) && http.p99 < 25 },
      })),
    ];
  } finally {
    await service.stop();
  }
}
