import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, type Pool } from '../../shared/db/pool.js';
import type { Projection } from '../../shared/projection/projection.js';
import { SegmentLeases, segmentsOf } from '../../shared/projection/segments.js';
import { seededRandom } from '../../shared/random.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * A process's fair share of segments (docs/design.md "Segmented processors"), on a real Postgres:
 * while one process gives up the segments over its share (their followers release them one by
 * one, each after its batch in flight), the renewal of every segment it keeps asks whether it is
 * over its share. No segment within the share may ever be the answer, whatever the order in which
 * the asks and the releases interleave: a process that gives one up claims it back at once under
 * a new epoch, a needless handover and a stall of that segment's reads.
 */

const SEED = Number(process.env.PROPERTY_SEED ?? Date.now() % 1_000_000);
const ROUNDS = 40;
let db: TestDatabase;
let pool: Pool;

beforeAll(async () => {
  db = await createTestDatabase('segment_shares');
  pool = createPool(db.url, { max: 12 });
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

function projection(name: string): Projection {
  return { name, eventTypes: ['Counted'], tables: [], splittable: true, apply: async () => undefined };
}

describe('a process over its fair share of segments', () => {
  it('gives up only segments above its share, however the asks and the releases interleave', { timeout: 120_000 }, async () => {
    console.info(`segment shares: PROPERTY_SEED=${SEED}`);
    const client = await pool.connect();
    try {
      for (let round = 0; round < ROUNDS; round++) {
        const random = seededRandom(SEED + round);
        const count = 4 + Math.floor(random() * 5);
        const others = 1 + Math.floor(random() * 3);
        const share = Math.ceil(count / (others + 1));
        const segments = segmentsOf(projection(`shares_${round}`), count);
        await pool.query('DELETE FROM read_model.projector_members');
        const leases = new SegmentLeases(pool, 'read_model', 60_000);
        await leases.heartbeat();
        for (let i = 0; i < others; i++) {
          await pool.query(`INSERT INTO read_model.projector_members (owner, expires_at) VALUES ($1, now() + interval '1 minute')`, [`other:${round}:${i}`]);
        }
        const epochs = new Map<number, number>();
        for (const segment of segments) epochs.set(segment.index, (await leases.claim(client, segment))!);

        // The segments over the share go from the highest down, as the followers give them up;
        // between the releases, asks about random segments still held start and are left running.
        const asks: Array<Promise<{ index: number; over: boolean }>> = [];
        const ask = (index: number) => asks.push(leases.overShare(segments[index]!).then((over) => ({ index, over })));
        for (let index = count - 1; index >= share; index--) {
          const asking = Math.floor(random() * 4);
          for (let i = 0; i < asking; i++) ask(Math.floor(random() * (index + 1)));
          const pause = random();
          if (pause < 0.3) await new Promise((resolve) => setImmediate(resolve));
          else if (pause < 0.5) await pool.query('SELECT 1');
          void leases.release(segments[index]!, epochs.get(index)!);
        }
        for (let index = 0; index < share; index++) ask(index);
        const answers = await Promise.all(asks);
        const wrong = answers.filter((answer) => answer.over && answer.index < share);
        expect(wrong, `round ${round}: ${count} segments, ${others + 1} members, share ${share}`).toEqual([]);
      }
    } finally {
      client.release();
    }
  });

  it('asks the highest held segment to go while the process is over its share, and none once it is within it', async () => {
    const client = await pool.connect();
    try {
      await pool.query('DELETE FROM read_model.projector_members');
      const segments = segmentsOf(projection('shares_plain'), 4);
      const leases = new SegmentLeases(pool, 'read_model', 60_000);
      await leases.heartbeat();
      await pool.query(`INSERT INTO read_model.projector_members (owner, expires_at) VALUES ('other:plain', now() + interval '1 minute')`);
      for (const segment of segments) await leases.claim(client, segment);
      expect(await Promise.all(segments.map((segment) => leases.overShare(segment)))).toEqual([false, false, false, true]);
      expect(await leases.mayClaim(segments[3]!)).toBe(false);
      await leases.release(segments[3]!, null);
      expect(await Promise.all(segments.map((segment) => leases.overShare(segment)))).toEqual([false, false, true, false]);
      await leases.release(segments[2]!, null);
      expect(await Promise.all(segments.map((segment) => leases.overShare(segment)))).toEqual([false, false, false, false]);
      expect(await leases.mayClaim(segments[2]!)).toBe(false);
      await pool.query('DELETE FROM read_model.projector_members WHERE owner = $1', ['other:plain']);
      expect(await leases.mayClaim(segments[2]!)).toBe(true);
    } finally {
      client.release();
    }
  });
});
