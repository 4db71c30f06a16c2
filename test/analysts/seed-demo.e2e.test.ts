import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedDemo } from '../../services/cli/demo/seed.js';
import { kafkaEnv } from '../support/kafka.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * `seed demo` with KAFKA_BROKERS set while no ingest process consumes the topic (here: a service
 * without Kafka): it consumes its own reader reports, through the same consumer, until they are in.
 * (With a consumer running, the determinism test's demo goes through the service's.)
 */

let svc: TestService;

beforeAll(async () => {
  svc = await startTestService('seed_demo', { ROLES: 'api,projector' });
});
afterAll(async () => {
  await svc?.stop();
});

describe('seed demo', () => {
  it('ingests its fixed-reader reports itself when no ingest process consumes them', async () => {
    const { ctx } = svc.service;
    const kafka = await kafkaEnv('seed-demo');
    const seed = await seedDemo({ ...ctx, config: { ...ctx.config, ...kafka } }, { project: (position) => ctx.checkpoints.waitForCheckpoint(position) });
    expect(seed.scans.kafka).toBeGreaterThan(100);
    const { rows } = await ctx.pool.query<{ placed: number; unknown: number; readers: number }>(
      `SELECT ((SELECT coalesce(sum(reads), 0) FROM scan_read_chunks WHERE org_id = $1) + (SELECT coalesce(sum(count), 0) FROM unknown_reads WHERE org_id = $1))::int AS placed,
              (SELECT coalesce(sum(count), 0) FROM unknown_reads WHERE org_id = $1 AND cause = 'unknown_tag')::int AS unknown,
              (SELECT count(*) FROM readers WHERE org_id = $1)::int AS readers`,
      [seed.org_id],
    );
    expect(rows[0]!.placed).toBe(seed.scans.handheld + seed.scans.kafka);
    expect(rows[0]!.unknown).toBeGreaterThanOrEqual(3); // a stray tag at the dock door each day
    expect(rows[0]!.readers).toBe(2);
  }, 300_000);
});
