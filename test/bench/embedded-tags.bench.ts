import { randomBytes } from 'node:crypto';
/**
 * POST /assets with 100 embedded tags (the most a create body may carry), one request at a time,
 * through the whole service (auth, validation, the command, read-your-writes, the view). Each
 * request is timed, and the statements the command sends through the pool are counted by kind:
 * stream reads (the tag reservations among them) and id allocations (`nextval`). No baseline: the
 * row is the latency of the create and how many round trips its tags cost.
 */
import type pg from 'pg';
import { startService } from '../../services/service.js';
import { loadConfig } from '../../shared/config.js';
import { createLogger } from '../../shared/logger.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import type { BenchContext, BenchRow } from './types.js';

const REQUESTS = Number(process.env.BENCH_TAG_REQUESTS ?? 200);
const WARMUP = 20;
const TAGS = 100;

/** Counts the pool's statements by kind while `body` runs. */
async function counted<T>(pool: pg.Pool, body: () => Promise<T>): Promise<{ result: T; streamReads: number; nextvals: number; total: number }> {
  const original = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
  const counts = { streamReads: 0, nextvals: 0, total: 0 };
  (pool as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = (...args: unknown[]) => {
    const config = args[0] as string | { name?: string; text?: string };
    const text = typeof config === 'string' ? config : `${config.name ?? ''} ${config.text ?? ''}`;
    counts.total++;
    if (text.includes('event_store_read_stream')) counts.streamReads++;
    if (text.includes('nextval(')) counts.nextvals++;
    return original(...args);
  };
  try {
    return { result: await body(), ...counts };
  } finally {
    delete (pool as unknown as { query?: unknown }).query;
  }
}

export async function run(bench: BenchContext): Promise<BenchRow[]> {
  const config = loadConfig({
    PORT: '0',
    OPS_PORT: '0',
    INGEST_PORT: '0',
    ROLES: 'api,projector',
    LOG_LEVEL: 'silent',
    RATE_LIMIT_PER_MINUTE: '100000000',
    RATE_LIMIT_BURST: '100000000',
    SIGNING_KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
  });
  const service = await startService(config, bench.url, createLogger('silent'));
  try {
    const { ctx } = service;
    const org = await createOrg(ctx, 'Bench');
    const key = await mintApiKey(ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write'] });
    const post = async (n: number) => {
      const tags = Array.from({ length: TAGS }, (_, i) => ({ tag_type: 'rfid', value: `E280${String(n).padStart(6, '0')}${String(i).padStart(4, '0')}` }));
      const response = await fetch(`${service.urls.api}/assets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `tagged ${n}`, tags }),
      });
      if (response.status !== 201) throw new Error(`POST /assets answered ${response.status}: ${await response.text()}`);
      await response.arrayBuffer();
    };

    bench.log(`embedded-tags: ${WARMUP} warm-up creates …`);
    for (let n = 0; n < WARMUP; n++) await post(n);
    const { streamReads, nextvals, total } = await counted(ctx.pool, () => post(WARMUP));

    bench.log(`embedded-tags: ${REQUESTS} creates with ${TAGS} tags each …`);
    const latencies: number[] = [];
    const started = performance.now();
    for (let n = 0; n < REQUESTS; n++) {
      const t0 = performance.now();
      await post(WARMUP + 1 + n);
      latencies.push(performance.now() - t0);
    }
    const seconds = (performance.now() - started) / 1000;
    latencies.sort((a, b) => a - b);
    const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!.toFixed(1);
    return [
      {
        bench: 'embedded-tags',
        case: `POST /assets with ${TAGS} tags, sequential: p50 ${at(0.5)} ms, p99 ${at(0.99)} ms; one create sent ${total} statements (${streamReads} stream reads, ${nextvals} nextval)`,
        events: REQUESTS,
        seconds,
      },
    ];
  } finally {
    await service.stop();
  }
}
