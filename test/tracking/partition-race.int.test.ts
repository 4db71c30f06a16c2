import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dayPartition, parsePartition, type Partition, type PartitionedTable } from '../../projections/tracking/partitions.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * Segments of the tracking projection (docs/design.md "Segmented processors") each create, inside
 * their own batch's transaction, the partition a read needs: two segments may create the same one
 * at once. tracking_create_partition then creates it once and lets every other caller go on
 * (docs/design.md "Tracking storage"): from many parallel connections, each in a transaction of its
 * own that commits after the call, every call succeeds and the partition exists once, takes rows
 * and is a partition of its table.
 */

const CONNECTIONS = 12;
let db: TestDatabase;
let pool: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase('partition_race');
  pool = new pg.Pool({ connectionString: db.url, max: CONNECTIONS + 2 });
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

const pad = (n: number, width: number) => String(n).padStart(width, '0');
const literal = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace('.000Z', '+00');

const partitionArb = fc
  .record({
    table: fc.constantFrom<PartitionedTable>('scan_read_chunks', 'asset_visits', 'scan_read_keys'),
    kind: fc.constantFrom('m', 'y'),
    year: fc.integer({ min: 1990, max: 2090 }),
    month: fc.integer({ min: 1, max: 12 }),
    day: fc.integer({ min: 1, max: 28 }),
  })
  .map(({ table, kind, year, month, day }): Partition => {
    if (table === 'scan_read_keys') return dayPartition(table, Date.UTC(year, month - 1, day));
    return parsePartition(kind === 'y' ? `${table}_y${pad(year, 4)}` : `${table}_m${pad(year, 4)}${pad(month, 2)}`)!;
  });

/** Calls tracking_create_partition from every connection at once, each inside its own transaction; the outcome of each. */
async function createFromMany(partition: Partition): Promise<PromiseSettledResult<void>[]> {
  const clients = await Promise.all(Array.from({ length: CONNECTIONS }, () => pool.connect()));
  try {
    // Every transaction is open (and has its snapshot) before any call: none sees another's partition committed.
    await Promise.all(clients.map((client) => client.query('BEGIN; SELECT 1 FROM read_model.projection_checkpoints LIMIT 1')));
    return await Promise.allSettled(
      clients.map(async (client) => {
        try {
          await client.query('SELECT read_model.tracking_create_partition($1, $2, $3::timestamptz, $4::timestamptz)', [
            partition.table,
            partition.name,
            literal(partition.fromMs),
            literal(partition.toMs),
          ]);
          await client.query('COMMIT');
        } catch (error) {
          await client.query('ROLLBACK');
          throw error;
        }
      }),
    );
  } finally {
    for (const client of clients) client.release();
  }
}

describe('tracking_create_partition', () => {
  it('creates a partition once when many transactions create it at the same time, and none fails', { timeout: 300_000 }, async () => {
    const seen = new Set<string>();
    await fc.assert(
      fc.asyncProperty(partitionArb, async (partition) => {
        fc.pre(!seen.has(partition.name));
        seen.add(partition.name);
        const outcomes = await createFromMany(partition);
        const failures = outcomes.flatMap((o) => (o.status === 'rejected' ? [String((o.reason as Error).message)] : []));
        expect(failures, partition.name).toEqual([]);
        const { rows } = await pool.query<{ parent: string }>(
          `SELECT p.relname AS parent FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
            WHERE c.relname = $1 AND c.relnamespace = 'read_model'::regnamespace`,
          [partition.name],
        );
        expect(rows).toEqual([{ parent: partition.table }]);
      }),
      { numRuns: 15, seed: Number(process.env.PROPERTY_SEED ?? 34) },
    );
  });

  it('still refuses a name that is not a tracking partition', async () => {
    await expect(
      pool.query("SELECT read_model.tracking_create_partition('asset_visits', 'asset_visits_x1', '2026-01-01', '2026-02-01')"),
    ).rejects.toThrow(/not a tracking partition/);
  });
});
