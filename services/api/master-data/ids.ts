import type pg from 'pg';

export type IdSequence = 'asset_ids' | 'location_ids' | 'tag_ids';

/** A new surrogate id: unique per entity type, 1..2147483647, never reused. */
export async function nextId(pool: pg.Pool, sequence: IdSequence): Promise<number> {
  const result = await pool.query<{ id: number }>(`SELECT nextval('service.${sequence}')::int AS id`);
  return result.rows[0]!.id;
}

/**
 * The next candidate for an auto-minted external_key (`ASSET-0001`, `LOC-0001`), per org and
 * resource type. The caller claims it like any key and asks again if a caller-supplied key
 * already holds that value.
 */
export async function nextMintedKey(pool: pg.Pool, orgId: number, resource: 'asset' | 'location'): Promise<string> {
  const result = await pool.query<{ value: number }>(
    `INSERT INTO service.key_counters (org_id, resource, next_value) VALUES ($1, $2, 2)
     ON CONFLICT (org_id, resource) DO UPDATE SET next_value = key_counters.next_value + 1
     RETURNING next_value - 1 AS value`,
    [orgId, resource],
  );
  const prefix = resource === 'asset' ? 'ASSET' : 'LOC';
  return `${prefix}-${String(result.rows[0]!.value).padStart(4, '0')}`;
}
