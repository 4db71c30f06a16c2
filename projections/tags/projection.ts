import type pg from 'pg';
import type { RecordedEvent } from '../../shared/event-store/port.js';
import type { Projection } from '../../shared/projection/projection.js';
import { eventsOf } from '../../shared/event-store/catalogue.js';
import { tagEvents, type TagAttachedData, type TagDetachedData } from '../../shared/domain/tags/events.js';
import { columnArrays, prepared } from '../../shared/db/prepared.js';
import { mergeSearchPending } from '../assets/projection.js';

/**
 * Tag rows of assets and locations (migrations/read-model/220_tags.sql), from the tag events on
 * their owners' streams. Detaching (or retiring with the owner) keeps the row with `deleted_at`.
 * Consecutive attachments are inserted with one multi-row statement; each batch ends by merging
 * the trigram index's pending entries (projections/assets/projection.ts, `mergeSearchPending`).
 */

async function insertAttached(tx: pg.PoolClient, rows: TagAttachedData[]): Promise<void> {
  if (rows.length === 0) return;
  await tx.query(
    prepared(
      `INSERT INTO tags (id, org_id, owner_type, owner_id, tag_type, value, is_active, valid_from, valid_to, created_at)
       SELECT * FROM unnest($1::int[], $2::int[], $3::text[], $4::int[], $5::text[], $6::text[], $7::boolean[], $8::timestamptz[], $9::timestamptz[], $10::timestamptz[])
       ON CONFLICT (id) DO NOTHING`,
      columnArrays(rows, (d) => [d.tag_id, d.org_id, d.owner_type, d.owner_id, d.tag_type, d.value, d.is_active, d.valid_from, d.valid_to, d.at]),
    ),
  );
}

async function detached(tx: pg.PoolClient, d: TagDetachedData): Promise<void> {
  await tx.query(prepared('UPDATE tags SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL', [d.tag_id, d.at]));
}

export const tagsProjection: Projection = {
  name: 'tags',
  tables: ['tags'],
  eventTypes: tagEvents.map((e) => e.type),
  async apply(events: RecordedEvent[], tx: pg.PoolClient): Promise<void> {
    let pending: TagAttachedData[] = [];
    for (const event of eventsOf(events, tagEvents)) {
      if (event.type === 'TagAttached') {
        pending.push(event.data);
        if (pending.length >= 500) {
          await insertAttached(tx, pending);
          pending = [];
        }
        continue;
      }
      await insertAttached(tx, pending);
      pending = [];
      await detached(tx, event.data);
    }
    await insertAttached(tx, pending);
    await mergeSearchPending(tx, 'tags');
  },
};
