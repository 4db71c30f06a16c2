import type pg from 'pg';
import { prepared } from '../db/prepared.js';

export type IdSequence = 'asset_ids' | 'location_ids' | 'tag_ids';

/** A new surrogate id: unique per entity type, 1..2147483647, never reused. */
export async function nextId(pool: pg.Pool, sequence: IdSequence): Promise<number> {
  const result = await pool.query<{ id: number }>(prepared(`SELECT nextval('service.${sequence}')::int AS id`));
  return result.rows[0]!.id;
}

/** `count` new surrogate ids in one statement, ascending. */
export async function nextIds(pool: pg.Pool, sequence: IdSequence, count: number): Promise<number[]> {
  if (count === 0) return [];
  const result = await pool.query<{ id: number }>(
    prepared(`SELECT nextval('service.${sequence}')::int AS id FROM generate_series(1, $1::int)`, [count]),
  );
  return result.rows.map((r) => r.id).sort((a, b) => a - b);
}

/**
 * The next candidate for an auto-minted external_key (`ASSET-0001`, `LOC-0001`), per org and
 * resource type. The caller claims it like any key and asks again if a caller-supplied key
 * already holds that value.
 */
export async function nextMintedKey(pool: pg.Pool, orgId: number, resource: 'asset' | 'location'): Promise<string> {
  const result = await pool.query<{ value: number }>(
    prepared(
      `INSERT INTO service.key_counters (org_id, resource, next_value) VALUES ($1, $2, 2)
       ON CONFLICT (org_id, resource) DO UPDATE SET next_value = key_counters.next_value + 1
       RETURNING next_value - 1 AS value`,
      [orgId, resource],
    ),
  );
  return mintedKey(resource, result.rows[0]!.value);
}

/**
 * For a create without an external_key: the new id and the first minted-key candidate in one
 * round trip (one statement, one commit).
 */
export async function nextIdAndMintedKey(pool: pg.Pool, sequence: IdSequence, orgId: number, resource: 'asset' | 'location'): Promise<{ id: number; mintedKey: string }> {
  const result = await pool.query<{ id: number; value: number }>(
    prepared(
      `WITH counter AS (
         INSERT INTO service.key_counters (org_id, resource, next_value) VALUES ($1, $2, 2)
         ON CONFLICT (org_id, resource) DO UPDATE SET next_value = key_counters.next_value + 1
         RETURNING next_value - 1 AS value)
       SELECT nextval('service.${sequence}')::int AS id, value FROM counter`,
      [orgId, resource],
    ),
  );
  const row = result.rows[0]!;
  return { id: row.id, mintedKey: mintedKey(resource, row.value) };
}

function mintedKey(resource: 'asset' | 'location', value: number): string {
  return `${resource === 'asset' ? 'ASSET' : 'LOC'}-${String(value).padStart(4, '0')}`;
}
