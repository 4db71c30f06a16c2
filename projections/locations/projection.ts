import type pg from 'pg';
import type { RecordedEvent } from '../../shared/event-store/port.js';
import type { Projection } from '../../shared/projection/projection.js';
import { eventsOf } from '../../shared/event-store/catalogue.js';
import {
  locationEvents,
  type LocationCreatedData,
  type LocationDeletedData,
  type LocationMovedData,
  type LocationRenamedData,
  type LocationRestoredData,
  type LocationUpdatedData,
} from '../../shared/domain/locations/events.js';
import { prepared, updateChangedColumns } from '../../shared/db/prepared.js';

/**
 * Location rows and the tree (materialized ancestor paths, see migrations/read-model/200_locations.sql).
 * A pure mapping from events to SQL: every value comes from the event (timestamps included), and
 * the only rows read are the read model's own, in log order, so a replay builds identical rows.
 */

/** The column of each field a LocationUpdated may change. */
const UPDATABLE_COLUMNS = {
  name: 'name',
  description: 'description',
  is_active: 'is_active',
  valid_from: 'valid_from',
  valid_to: 'valid_to',
} as const;

async function created(tx: pg.PoolClient, d: LocationCreatedData): Promise<void> {
  await tx.query(
    prepared(
      `INSERT INTO locations (id, org_id, external_key, name, description, parent_id, ancestors, is_active,
                              valid_from, valid_to, created_at, updated_at, deleted_at)
       VALUES ($1, $2, $3, $4, $5, $6,
               COALESCE((SELECT p.ancestors || p.id FROM locations p WHERE p.id = $6), '{}'::integer[]),
               $7, $8, $9, $10, $10, NULL)
       ON CONFLICT (id) DO NOTHING`,
      [d.location_id, d.org_id, d.external_key, d.name, d.description, d.parent_id, d.is_active, d.valid_from, d.valid_to, d.at],
    ),
  );
}

async function updated(tx: pg.PoolClient, d: LocationUpdatedData): Promise<void> {
  await tx.query(updateChangedColumns('locations', d.location_id, d.at, d.changes, UPDATABLE_COLUMNS));
}

async function moved(tx: pg.PoolClient, d: LocationMovedData): Promise<void> {
  // The subtree first (it needs the node's old path), then the node. The new parent is never in
  // the subtree: the decider refuses cycles.
  await tx.query(
    prepared(
      `WITH node AS (SELECT ancestors FROM locations WHERE id = $1),
            new_path AS (SELECT COALESCE((SELECT p.ancestors || p.id FROM locations p WHERE p.id = $2), '{}'::integer[]) AS path)
       UPDATE locations l
          SET ancestors = new_path.path || l.ancestors[cardinality(node.ancestors) + 1:]
         FROM node, new_path
        WHERE l.ancestors @> ARRAY[$1]::integer[]`,
      [d.location_id, d.parent_id],
    ),
  );
  await tx.query(
    prepared(
      `UPDATE locations
          SET parent_id = $2, updated_at = $3,
              ancestors = COALESCE((SELECT p.ancestors || p.id FROM locations p WHERE p.id = $2), '{}'::integer[])
        WHERE id = $1`,
      [d.location_id, d.parent_id, d.at],
    ),
  );
}

async function renamed(tx: pg.PoolClient, d: LocationRenamedData): Promise<void> {
  await tx.query(prepared('UPDATE locations SET external_key = $2, updated_at = $3 WHERE id = $1', [d.location_id, d.external_key, d.at]));
}

async function deleted(tx: pg.PoolClient, d: LocationDeletedData): Promise<void> {
  await tx.query(prepared('UPDATE locations SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL', [d.location_id, d.at]));
}

/** docs/api.md, "Restoring": the row is existing again (its path was kept up to date while deleted). */
async function restored(tx: pg.PoolClient, d: LocationRestoredData): Promise<void> {
  await tx.query(prepared('UPDATE locations SET deleted_at = NULL, updated_at = $2 WHERE id = $1 AND deleted_at IS NOT NULL', [d.location_id, d.at]));
}

export const locationsProjection: Projection = {
  name: 'locations',
  tables: ['locations'],
  eventTypes: locationEvents.map((e) => e.type),
  async apply(events: RecordedEvent[], tx: pg.PoolClient): Promise<void> {
    for (const event of eventsOf(events, locationEvents)) {
      switch (event.type) {
        case 'LocationCreated':
          await created(tx, event.data);
          break;
        case 'LocationUpdated':
          await updated(tx, event.data);
          break;
        case 'LocationMoved':
          await moved(tx, event.data);
          break;
        case 'LocationRenamed':
          await renamed(tx, event.data);
          break;
        case 'LocationDeleted':
          await deleted(tx, event.data);
          break;
        case 'LocationRestored':
          await restored(tx, event.data);
          break;
      }
    }
  },
};
