import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { createPool } from '../../shared/db/pool.js';
import { loadTrees, type Tree } from '../../projections/engine-tree.js';
import { seededRandom } from '../../shared/random.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { watchStatements } from '../support/statements.js';

/**
 * projections/engine-tree.ts `loadTrees`: a batch names a location for every read and every
 * loaded asset's position, thousands of names for a few dozen locations. The statement walks up
 * from each location once, and what it loads is every named location with all its ancestors,
 * whatever the order and repetition of the names.
 */

let db: TestDatabase;
let pool: pg.Pool;
beforeAll(async () => {
  db = await createTestDatabase('engine_tree_load');
  pool = createPool(db.url, { max: 1, searchPath: 'read_model' });
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

/** A random forest per org: location i's parent is a location before it, or none. */
function randomForest(orgs: number[], size: number, random: () => number): Tree {
  const tree: Tree = {};
  for (const org of orgs) {
    const locations: Record<string, number | null> = {};
    for (let i = 0; i < size; i += 1) {
      const id = org * 1000 + i;
      locations[id] = i === 0 || random() < 0.15 ? null : org * 1000 + Math.floor(random() * i);
    }
    tree[org] = locations;
  }
  return tree;
}

function withAncestors(tree: Tree, named: Array<[number, number]>): Tree {
  const out: Tree = {};
  for (const [org, location] of named) {
    let at: number | null = location;
    while (at !== null && tree[org]?.[at] !== undefined) {
      (out[org] ??= {})[at] = tree[org]![at]!;
      at = tree[org]![at]!;
    }
  }
  return out;
}

describe('loadTrees', () => {
  it('loads each named location with its ancestors, walking up from each location once, over random forests and repeated names', async () => {
    for (let seed = 1; seed <= 20; seed += 1) {
      const random = seededRandom(seed);
      const orgs = [7, 8, 9];
      const tree = randomForest(orgs, 40, random);
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await client.query('DELETE FROM read_model.alerts_engine_tree');
        const rows = Object.entries(tree).flatMap(([org, locations]) => Object.entries(locations).map(([location, parent]) => [Number(org), Number(location), parent] as const));
        await client.query(
          `INSERT INTO read_model.alerts_engine_tree (segment, org_id, location_id, parent_id) SELECT 0, * FROM unnest($1::int[], $2::int[], $3::int[])`,
          [rows.map((r) => r[0]), rows.map((r) => r[1]), rows.map((r) => r[2])],
        );
        // A batch's names: 2,000 of them over a handful of locations (a few unknown to the tree).
        const locations = Array.from({ length: 1 + Math.floor(random() * 12) }, () => {
          const org = orgs[Math.floor(random() * orgs.length)]!;
          return [org, org * 1000 + Math.floor(random() * 45)] as [number, number];
        });
        const named = Array.from({ length: 2000 }, () => locations[Math.floor(random() * locations.length)]!);
        const sent: unknown[][] = [];
        const loaded = await watchStatements(
          ({ values }) => sent.push(values ?? []),
          () => loadTrees(client, 'alerts_engine_tree', 0, named),
        );
        expect(loaded, `seed ${seed}`).toEqual(withAncestors(tree, named));
        const distinct = new Set(named.map(([org, location]) => `${org}/${location}`)).size;
        expect(sent).toHaveLength(1);
        expect((sent[0]![1] as number[]).length, `seed ${seed}: one walk per location`).toBe(distinct);
        await client.query('ROLLBACK');
      } finally {
        client.release();
      }
    }
  });

  it('walks up by the primary key, on a tree without statistics, beside the index of parents the alerts walk down by', async () => {
    const client = await pool.connect();
    const plans: string[] = [];
    try {
      await client.query('BEGIN');
      await client.query('DELETE FROM read_model.alerts_engine_tree');
      for (let segment = 0; segment < 4; segment += 1) {
        await client.query(`INSERT INTO read_model.alerts_engine_tree (segment, org_id, location_id, parent_id) SELECT $1, 7, g, CASE WHEN g = 1 THEN NULL ELSE g / 3 + 1 END FROM generate_series(1, 2000) g`, [segment]);
      }
      await watchStatements(
        ({ text, values }) => {
          if (text.includes('WITH RECURSIVE up')) plans.push(JSON.stringify([text, values]));
        },
        () => loadTrees(client, 'alerts_engine_tree', 1, [[7, 1500], [7, 600]]),
      );
      const [text, values] = JSON.parse(plans[0]!) as [string, unknown[]];
      const { rows } = await client.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${text}`, values);
      const plan = JSON.stringify(rows[0]!['QUERY PLAN']);
      expect(plan).toContain('alerts_engine_tree_pkey');
      expect(plan).not.toContain('alerts_engine_tree_children');
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  });
});
