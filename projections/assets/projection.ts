import type pg from 'pg';
import type { RecordedEvent } from '../../shared/event-store/port.js';
import type { Projection } from '../../shared/projection/projection.js';
import { eventsOf } from '../../shared/event-store/catalogue.js';
import {
  assetEvents,
  type AssetCreatedData,
  type AssetDeletedData,
  type AssetRenamedData,
  type AssetRestoredData,
  type AssetUpdatedData,
} from '../../shared/domain/assets/events.js';
import { columnArrays, prepared, updateChangedColumns } from '../../shared/db/prepared.js';

/**
 * Asset rows (migrations/read-model/210_assets.sql). A pure mapping from events to SQL: every
 * value comes from the event, timestamps included, so a replay builds identical rows.
 * Consecutive creations are inserted with one multi-row statement (bulk loads, replays).
 * `asset_counts` keeps, per org, how many existing rows have no validity window (and how many of
 * those are active), so the default list's total_count does not visit every row: each change
 * takes the row's contribution out before it and puts it back after it. Each batch ends by
 * merging the trigram indexes' pending entries (`mergeSearchPending`).
 */

/** The fields of an AssetUpdated that change the row's part in asset_counts. */
const COUNTED_FIELDS = ['is_active', 'valid_from', 'valid_to'] as const;

/** The column of each field an AssetUpdated may change. */
const UPDATABLE_COLUMNS = {
  name: 'name',
  description: 'description',
  is_active: 'is_active',
  valid_from: 'valid_from',
  valid_to: 'valid_to',
  metadata: { column: 'metadata', encode: (value: Record<string, unknown> | null) => JSON.stringify(value) },
} as const;

/**
 * Inserts the created assets and adds the ones it inserted to asset_counts in the same statement,
 * from the rows the insert returns (as `countRows` counts them): reading them back from `assets`
 * by id took a plan that grew with the table (50 ms a batch of 500 at 20,000 assets).
 */
async function insertCreated(tx: pg.PoolClient, rows: AssetCreatedData[]): Promise<void> {
  if (rows.length === 0) return;
  await tx.query(
    prepared(
      `WITH inserted AS (
         INSERT INTO assets (id, org_id, external_key, name, description, is_active, valid_from, valid_to, metadata, created_at, updated_at)
         SELECT id, org_id, external_key, name, description, is_active, valid_from, valid_to, metadata, at, at
           FROM unnest($1::int[], $2::int[], $3::text[], $4::text[], $5::text[], $6::boolean[], $7::timestamptz[], $8::timestamptz[], $9::jsonb[], $10::timestamptz[])
                AS r(id, org_id, external_key, name, description, is_active, valid_from, valid_to, metadata, at)
         ON CONFLICT (id) DO NOTHING
         RETURNING org_id, is_active, deleted_at, valid_from, valid_to
       )
       INSERT INTO asset_counts AS c (org_id, live_unbounded, live_unbounded_active)
       SELECT org_id, count(*), count(*) FILTER (WHERE is_active)
         FROM inserted
        WHERE deleted_at IS NULL AND valid_from IS NULL AND valid_to IS NULL
        GROUP BY org_id
       ON CONFLICT (org_id) DO UPDATE
         SET live_unbounded = c.live_unbounded + EXCLUDED.live_unbounded,
             live_unbounded_active = c.live_unbounded_active + EXCLUDED.live_unbounded_active`,
      columnArrays(rows, (d) => [
        d.asset_id, d.org_id, d.external_key, d.name, d.description, d.is_active, d.valid_from, d.valid_to, JSON.stringify(d.metadata), d.at,
      ]),
    ),
  );
}

/** Adds (sign 1) or removes (sign -1) the contribution of these rows to asset_counts. */
async function countRows(tx: pg.PoolClient, ids: number[], sign: 1 | -1): Promise<void> {
  if (ids.length === 0) return;
  await tx.query(
    prepared(
      `INSERT INTO asset_counts AS c (org_id, live_unbounded, live_unbounded_active)
       SELECT org_id, $2 * count(*), $2 * count(*) FILTER (WHERE is_active)
         FROM assets
        WHERE id = ANY($1::int[]) AND deleted_at IS NULL AND valid_from IS NULL AND valid_to IS NULL
        GROUP BY org_id
       ON CONFLICT (org_id) DO UPDATE
         SET live_unbounded = c.live_unbounded + EXCLUDED.live_unbounded,
             live_unbounded_active = c.live_unbounded_active + EXCLUDED.live_unbounded_active`,
      [ids, sign],
    ),
  );
}

async function updated(tx: pg.PoolClient, d: AssetUpdatedData): Promise<void> {
  await tx.query(updateChangedColumns('assets', d.asset_id, d.at, d.changes, UPDATABLE_COLUMNS));
}

async function renamed(tx: pg.PoolClient, d: AssetRenamedData): Promise<void> {
  await tx.query(prepared('UPDATE assets SET external_key = $2, updated_at = $3 WHERE id = $1', [d.asset_id, d.external_key, d.at]));
}

async function deleted(tx: pg.PoolClient, d: AssetDeletedData): Promise<void> {
  await tx.query(prepared('UPDATE assets SET deleted_at = $2, updated_at = $2 WHERE id = $1 AND deleted_at IS NULL', [d.asset_id, d.at]));
}

/** docs/api.md, "Restoring": the row is existing again, its updated_at the restore's instant. */
async function restored(tx: pg.PoolClient, d: AssetRestoredData): Promise<void> {
  await tx.query(prepared('UPDATE assets SET deleted_at = NULL, updated_at = $2 WHERE id = $1 AND deleted_at IS NOT NULL', [d.asset_id, d.at]));
}

/**
 * The batch's new entries of the trigram indexes merged from GIN's pending list into the index,
 * in bulk and in the batch's transaction (migrations/read-model/227_trigram_pending_list_merged_per_batch.sql):
 * cheaper than one row at a time, and a search never scans a list left behind.
 */
export async function mergeSearchPending(tx: pg.PoolClient, table: 'assets' | 'tags'): Promise<void> {
  await tx.query(prepared('SELECT merge_search_pending($1)', [table]));
}

export const assetsProjection: Projection = {
  name: 'assets',
  tables: ['assets', 'asset_counts'],
  eventTypes: assetEvents.map((e) => e.type),
  async apply(events: RecordedEvent[], tx: pg.PoolClient): Promise<void> {
    let pending: AssetCreatedData[] = [];
    const flush = async () => {
      await insertCreated(tx, pending);
      pending = [];
    };
    for (const event of eventsOf(events, assetEvents)) {
      if (event.type === 'AssetCreated') {
        pending.push(event.data);
        if (pending.length >= 500) await flush();
        continue;
      }
      await flush();
      const id = event.data.asset_id;
      // A row's part in asset_counts depends on its deletion, validity window and is_active only:
      // an update of its name, description or metadata leaves the org's counts as they are.
      const counted =
        event.type === 'AssetDeleted' ||
        event.type === 'AssetRestored' ||
        (event.type === 'AssetUpdated' && COUNTED_FIELDS.some((field) => field in event.data.changes));
      if (counted) await countRows(tx, [id], -1);
      if (event.type === 'AssetUpdated') await updated(tx, event.data);
      else if (event.type === 'AssetRenamed') await renamed(tx, event.data);
      else if (event.type === 'AssetRestored') await restored(tx, event.data);
      else await deleted(tx, event.data);
      if (counted) await countRows(tx, [id], 1);
    }
    await flush();
    await mergeSearchPending(tx, 'assets');
  },
};
