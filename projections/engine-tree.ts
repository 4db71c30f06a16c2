import type pg from 'pg';

/**
 * The location tree the alerts and counts engines follow (each segment its own copy, from the
 * log's location events): org → location → parent (null: a root). Kept a row per location
 * (`alerts_engine_tree`, `counts_engine_tree`, migration read-model/530): a batch loads the
 * ancestors of the locations it walks up from (the whole tree of an organization only where a zone's
 * descendants are needed) and writes back the locations it changed, so a location created or moved
 * costs a row, and a batch of reads its locations' paths, not every organization's tree.
 */
export type Tree = Record<string, Record<string, number | null>>;

/** The locations an engine's steps changed, by `org/location`: [org, location, parent]. */
export type TreeChanges = Map<string, [orgId: number, locationId: number, parentId: number | null]>;

type TreeTable = 'alerts_engine_tree' | 'counts_engine_tree';

/**
 * What a batch needs of segment `segment`'s trees: the locations `from` names (org, location) with
 * every ancestor of each (what `ancestorsOf` walks), and the whole tree of each org of `whole`
 * (what a zone's descendants need), in one statement. The caller names every location a step may
 * walk up from: a read's location, an asset's position, and a tree step's location and new parent
 * (so that a walk through a location moved in the batch finds its new ancestors loaded too).
 */
export async function loadTrees(tx: pg.PoolClient, table: TreeTable, segment: number, from: Iterable<[orgId: number, locationId: number]>, whole: Iterable<number> = []): Promise<Tree> {
  // Each location once: a batch names one for every read and every loaded asset's position (a
  // few thousand naming a few dozen locations), and every duplicate would be a probe of its own.
  const pairs = [...new Map([...from].map((pair) => [`${pair[0]}/${pair[1]}`, pair] as const)).values()];
  const orgs = [...new Set(whole)];
  const tree: Tree = {};
  if (pairs.length === 0 && orgs.length === 0) return tree;
  const { rows } = await tx.query<{ org_id: number; location_id: number; parent_id: number | null }>(
    // Each step one primary-key probe (LATERAL … LIMIT 1 is not flattened into a join): as a
    // join, the planner may hash the segment's whole tree at every level of the walk.
    `WITH RECURSIVE up (org_id, location_id, parent_id) AS (
       SELECT t.org_id, t.location_id, t.parent_id
         FROM unnest($2::int[], $3::int[]) AS w (org_id, location_id)
         CROSS JOIN LATERAL (SELECT * FROM ${table} t WHERE t.segment = $1 AND t.org_id = w.org_id AND t.location_id = w.location_id LIMIT 1) t
       UNION
       SELECT t.org_id, t.location_id, t.parent_id
         FROM up CROSS JOIN LATERAL (SELECT * FROM ${table} t WHERE t.segment = $1 AND t.org_id = up.org_id AND t.location_id = up.parent_id LIMIT 1) t
     )
     SELECT org_id, location_id, parent_id FROM up
     UNION
     SELECT org_id, location_id, parent_id FROM ${table} WHERE segment = $1 AND org_id = ANY ($4::int[])`,
    [segment, pairs.map((p) => p[0]), pairs.map((p) => p[1]), orgs],
  );
  for (const r of rows) (tree[r.org_id] ??= {})[r.location_id] = r.parent_id;
  return tree;
}

/** Writes the changed locations of segment `segment`. */
export async function saveTreeChanges(tx: pg.PoolClient, table: TreeTable, segment: number, changes: TreeChanges): Promise<void> {
  if (changes.size === 0) return;
  const rows = [...changes.values()];
  await tx.query(
    `INSERT INTO ${table} (segment, org_id, location_id, parent_id)
     SELECT $1, * FROM unnest($2::int[], $3::int[], $4::int[])
     ON CONFLICT (segment, org_id, location_id) DO UPDATE SET parent_id = EXCLUDED.parent_id`,
    [segment, rows.map((r) => r[0]), rows.map((r) => r[1]), rows.map((r) => r[2])],
  );
}

/**
 * Where a step walks up from, for `loadTrees`: a read's location; a tree step's location and its
 * new parent (a walk through a location moved in the batch then finds its new ancestors loaded).
 */
export function walkStartsOf(input: { type: string; orgId: number; locationId?: number; parentId?: number | null }): Array<[orgId: number, locationId: number]> {
  if (input.locationId === undefined || (input.type !== 'read' && input.type !== 'tree')) return [];
  const starts: Array<[number, number]> = [[input.orgId, input.locationId]];
  if (input.type === 'tree' && input.parentId != null) starts.push([input.orgId, input.parentId]);
  return starts;
}

/** Records a tree step in `tree` and in `changes`. */
export function setParent(tree: Tree, changes: TreeChanges, orgId: number, locationId: number, parentId: number | null): void {
  (tree[orgId] ??= {})[locationId] = parentId;
  changes.set(`${orgId}/${locationId}`, [orgId, locationId, parentId]);
}
