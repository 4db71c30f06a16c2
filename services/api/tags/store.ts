import type pg from 'pg';
import type { EventData, ExpectedRevision, StreamAppend } from '../../../shared/event-store/port.js';
import { ConflictError } from '../../../shared/errors.js';
import type { ServiceContext } from '../../context.js';
import { fold as foldAsset } from '../assets/decider.js';
import { assetStream } from '../assets/events.js';
import { formatTimestamp } from '../master-data/fields.js';
import { effectiveSql } from '../master-data/lists.js';
import { nextId } from '../master-data/ids.js';
import { claim, readReservation, release } from '../master-data/reservations.js';
import { decideRetireTags, evolveTags, tagAttachedEvent, tagReservationValue, type TagInput, type TagOwnerRef, type TagState } from './decider.js';
import type { OwnerType } from './events.js';
import type { TagBody, TagView } from './schema.js';

/**
 * The I/O around the tag decider, shared by the tag routes and by the asset and location create
 * and delete commands (which attach embedded tags and retire tags in the same atomic append).
 */

export function ownerStream(owner: TagOwnerRef): string {
  return owner.ownerType === 'asset' ? assetStream(owner.orgId, owner.ownerId) : `location-${owner.orgId}-${owner.ownerId}`;
}

export interface TagOwnerState {
  streamId: string;
  expectedRevision: ExpectedRevision;
  live: boolean;
  tags: TagState[];
}

// Location lifecycle events, by name: the location slice owns them.
const LOCATION_CREATED = 'LocationCreated';
const LOCATION_DELETED = 'LocationDeleted';

/** Reads the owner's stream afresh: null when it does not exist (in this org). */
export async function loadTagOwner(ctx: ServiceContext, owner: TagOwnerRef): Promise<TagOwnerState | null> {
  const streamId = ownerStream(owner);
  const events = await ctx.store.readStream(streamId);
  if (events.length === 0) return null;
  const revision = events[events.length - 1]!.revision;
  if (owner.ownerType === 'asset') {
    const state = foldAsset(events);
    if (!state) return null;
    return { streamId, expectedRevision: revision, live: state.deleted_at === null, tags: state.tags };
  }
  let live = false;
  let tags: TagState[] = [];
  for (const event of events) {
    if (event.type === LOCATION_CREATED) live = true;
    else if (event.type === LOCATION_DELETED) live = false;
    else tags = evolveTags(tags, event);
  }
  return { streamId, expectedRevision: revision, live, tags };
}

export function tagInput(body: TagBody): TagInput {
  return {
    tag_type: body.tag_type,
    value: body.value,
    is_active: body.is_active ?? true,
    valid_from: body.valid_from ?? null,
    valid_to: body.valid_to ?? null,
  };
}

/** `asset 12 (ASSET-0012)` for a 409 detail; the key from the read model when it is there. */
async function describeOwner(pool: pg.Pool, orgId: number, ownerType: string, ownerId: number): Promise<string> {
  const table = ownerType === 'location' ? 'locations' : 'assets';
  const row = await pool
    .query<{ external_key: string }>(`SELECT external_key FROM ${table} WHERE id = $1 AND org_id = $2`, [ownerId, orgId])
    .catch(() => ({ rows: [] as Array<{ external_key: string }> }));
  const key = row.rows[0]?.external_key;
  return `${ownerType} ${ownerId}${key ? ` (${key})` : ''}`;
}

export interface PreparedTags {
  /** Events for the owner's stream. */
  events: EventData[];
  /** Reservation claims to append atomically with them. */
  claims: StreamAppend[];
  tagIds: number[];
}

/**
 * Everything needed to attach `tags` to an owner: a fresh tag id each, the TagAttached events
 * and the `tag` reservation claims. A (tag_type, value) already held anywhere in the org, or
 * twice in the same request, is a 409 naming where it is attached. Call inside an
 * executeCommand attempt so a lost race re-reads the reservations.
 */
export async function prepareTagAttachments(ctx: ServiceContext, owner: TagOwnerRef, tags: readonly TagBody[], at: string): Promise<PreparedTags> {
  const inputs = tags.map(tagInput);
  const seen = new Set<string>();
  const reservations = [];
  for (const input of inputs) {
    const value = tagReservationValue(input.tag_type, input.value);
    if (seen.has(value)) {
      throw new ConflictError(`Tag (${input.tag_type}, "${input.value}") appears more than once in the request`);
    }
    seen.add(value);
    const reservation = await readReservation(ctx.store, 'tag', owner.orgId, value);
    if (reservation.holder) {
      const where = await describeOwner(ctx.pool, owner.orgId, reservation.holder.ownerType, reservation.holder.ownerId);
      throw new ConflictError(`Tag (${input.tag_type}, "${input.value}") is already attached to ${where}`);
    }
    reservations.push(reservation);
  }
  const tagIds: number[] = [];
  for (let i = 0; i < inputs.length; i++) tagIds.push(await nextId(ctx.pool, 'tag_ids'));
  const holder = { ownerType: owner.ownerType, ownerId: owner.ownerId };
  return {
    events: inputs.map((input, i) => tagAttachedEvent(owner, tagIds[i]!, input, at)),
    claims: reservations.map((r) => claim(r, holder, at)),
    tagIds,
  };
}

/** Releases of the `tag` reservations of detached or retired tags. */
export function tagReleases(owner: TagOwnerRef, tags: readonly TagState[], at: string): StreamAppend[] {
  const holder = { ownerType: owner.ownerType, ownerId: owner.ownerId };
  return tags.map((t) => release('tag', owner.orgId, tagReservationValue(t.tag_type, t.value), holder, at));
}

/**
 * For an owner's soft delete: TagDetached events (reason `owner_deleted`) for its stream and
 * the reservation releases, so the values can be attached elsewhere afterwards.
 */
export function retireTags(owner: TagOwnerRef, tags: readonly TagState[], at: string): { events: EventData[]; releases: StreamAppend[] } {
  return { events: decideRetireTags(owner, tags, at), releases: tagReleases(owner, tags, at) };
}

interface TagRow {
  id: number;
  owner_id: number;
  tag_type: string;
  value: string;
  is_active: boolean;
  valid_from: Date | null;
  valid_to: Date | null;
  created_at: Date;
}

const TAG_COLUMNS = 'id, owner_id, tag_type, value, is_active, valid_from, valid_to, created_at';

export function tagView(row: TagRow): TagView {
  return {
    id: row.id,
    tag_type: row.tag_type,
    value: row.value,
    is_active: row.is_active,
    valid_from: formatTimestamp(row.valid_from),
    valid_to: formatTimestamp(row.valid_to),
    created_at: formatTimestamp(row.created_at)!,
  };
}

/**
 * Embedded `tags` of many owners in one indexed query: live, active, currently effective tags,
 * in creation order. Owners without tags map to an empty array.
 */
export async function loadEmbeddedTags(
  pool: pg.Pool | pg.PoolClient,
  orgId: number,
  ownerType: OwnerType,
  ownerIds: readonly number[],
): Promise<Map<number, TagView[]>> {
  const result = new Map<number, TagView[]>(ownerIds.map((id) => [id, []]));
  if (ownerIds.length === 0) return result;
  const rows = await pool.query<TagRow>(
    `SELECT ${TAG_COLUMNS} FROM tags t
      WHERE t.org_id = $1 AND t.owner_type = $2 AND t.owner_id = ANY($3::int[]) AND t.deleted_at IS NULL
        AND t.is_active AND ${effectiveSql('t')}
      ORDER BY t.owner_id, t.created_at, t.id`,
    [orgId, ownerType, ownerIds],
  );
  for (const row of rows.rows) result.get(row.owner_id)?.push(tagView(row));
  return result;
}

/** The tag sub-resource list: every live tag of the owner (active or not), newest last. */
export async function listOwnerTags(
  pool: pg.Pool,
  owner: TagOwnerRef,
  limit: number,
  offset: number,
): Promise<{ data: TagView[]; total: number }> {
  const rows = await pool.query<TagRow & { total: number }>(
    `SELECT ${TAG_COLUMNS}, count(*) OVER () AS total FROM tags t
      WHERE t.org_id = $1 AND t.owner_type = $2 AND t.owner_id = $3 AND t.deleted_at IS NULL
      ORDER BY t.created_at, t.id
      LIMIT $4 OFFSET $5`,
    [owner.orgId, owner.ownerType, owner.ownerId, limit, offset],
  );
  let total = rows.rows[0]?.total ?? 0;
  if (rows.rows.length === 0 && offset > 0) {
    const count = await pool.query<{ total: number }>(
      'SELECT count(*)::int AS total FROM tags WHERE org_id = $1 AND owner_type = $2 AND owner_id = $3 AND deleted_at IS NULL',
      [owner.orgId, owner.ownerType, owner.ownerId],
    );
    total = count.rows[0]!.total;
  }
  return { data: rows.rows.map(tagView), total: Number(total) };
}

/** One live tag of the owner, or null. */
export async function findOwnerTag(pool: pg.Pool, owner: TagOwnerRef, tagId: number): Promise<TagView | null> {
  const rows = await pool.query<TagRow>(
    `SELECT ${TAG_COLUMNS} FROM tags t
      WHERE t.id = $1 AND t.org_id = $2 AND t.owner_type = $3 AND t.owner_id = $4 AND t.deleted_at IS NULL`,
    [tagId, owner.orgId, owner.ownerType, owner.ownerId],
  );
  return rows.rows[0] ? tagView(rows.rows[0]) : null;
}
