import pg from 'pg';
import { formatPosition, parsePosition, type Position, type RecordedEvent } from '../event-store/port.js';
import { sqlstateOf } from '../db/pool.js';
import type { FailureTraits } from '../errors.js';

/**
 * Streams set aside by a projection (migrations/read-model/005_projection_set_aside.sql, and
 * docs/design.md "A projection that cannot apply an event"): an event it cannot apply sets its
 * stream aside for that projection, the stream's later events wait behind it (held), and every
 * other stream flows on. `projections retry` applies them again after a fix.
 */

/** NOTIFY channel: watchers learn, in every process, which streams are set aside. */
export const SET_ASIDE_CHANNEL = 'projection_set_aside';

/** A change of one set-aside stream, as the watchers learn it. `position` null: recovered. */
export interface SetAsideChange {
  schema: string;
  projection: string;
  streamId: string;
  position: Position | null;
}

/**
 * What NOTIFY on SET_ASIDE_CHANNEL carries: `<schema> <projection> <position or -> <stream id>`;
 * the stream id last, since only it could hold a space.
 */
export function setAsidePayload(schema: string, projection: string, streamId: string, position: Position | null): string {
  return `${schema} ${projection} ${position ? formatPosition(position) : '-'} ${streamId}`;
}

export function parseSetAsidePayload(payload: string): SetAsideChange | null {
  const [schema, projection, position, ...stream] = payload.split(' ');
  const streamId = stream.join(' ');
  if (!schema || !projection || !position || !streamId) return null;
  return { schema, projection, streamId, position: position === '-' ? null : parsePosition(position) };
}

/**
 * A command's own event was set aside by a projection (or held behind an earlier one of its
 * stream): the command will not become visible, so it fails at once instead of waiting. The
 * error plugin answers `500 internal_error`: the append is durable, the read model is not.
 */
export class ProjectionSetAsideError extends Error implements FailureTraits {
  constructor(
    readonly projection: string,
    readonly streamId: string,
    readonly position: Position,
  ) {
    super(`projection ${projection} set aside stream ${streamId} at ${formatPosition(position)}; see \`npx tracking projections failures\``);
    this.name = 'ProjectionSetAsideError';
  }

  get logMessage(): string {
    return "the command's event was set aside by a projection";
  }
}

/** An event a projection could not apply, and why. */
export interface ApplyFailure {
  event: RecordedEvent;
  error: unknown;
}

function errorText(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.length > 2000 ? `${text.slice(0, 2000)}…` : text;
}

/**
 * Records failed events as set aside and announces them, inside the caller's transaction (NOTIFY
 * is delivered at commit, before the checkpoint's NOTIFY the caller sends after this).
 */
export async function recordSetAside(client: pg.ClientBase, schema: string, projection: string, failures: readonly ApplyFailure[]): Promise<void> {
  const s = pg.escapeIdentifier(schema);
  for (const { event, error } of failures) {
    await client.query(
      `INSERT INTO ${s}.projection_set_aside (projection, stream_id, position, revision, event_id, event_type, error, sqlstate)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [projection, event.streamId, formatPosition(event.position), event.revision.toString(), event.id, event.type, errorText(error), sqlstateOf(error)],
    );
    await client.query('SELECT pg_notify($1, $2)', [SET_ASIDE_CHANNEL, setAsidePayload(schema, projection, event.streamId, event.position)]);
  }
}

/** Records events of set-aside streams as held, in the caller's transaction: one statement. */
export async function recordHeld(client: pg.ClientBase, schema: string, projection: string, events: readonly RecordedEvent[]): Promise<void> {
  if (events.length === 0) return;
  await client.query(
    `INSERT INTO ${pg.escapeIdentifier(schema)}.projection_held_events (projection, stream_id, revision, position, event_id, event_type)
     SELECT $1, stream_id, revision, position, event_id, event_type
       FROM unnest($2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[]) AS e(stream_id, revision, position, event_id, event_type)
     ON CONFLICT DO NOTHING`,
    [
      projection,
      events.map((e) => e.streamId),
      events.map((e) => e.revision.toString()),
      events.map((e) => formatPosition(e.position)),
      events.map((e) => e.id),
      events.map((e) => e.type),
    ],
  );
}

/** One set-aside stream as `projections failures` lists it. */
export interface SetAsideStream {
  projection: string;
  stream: string;
  position: string;
  revision: string;
  event_type: string;
  error: string;
  sqlstate: string | null;
  set_aside_at: string;
  held_events: number;
}

/** Every set-aside stream of a read-model schema, oldest first. */
export async function listSetAside(db: pg.Pool | pg.ClientBase, schema: string, filter: { projection?: string; stream?: string } = {}): Promise<SetAsideStream[]> {
  const s = pg.escapeIdentifier(schema);
  const { rows } = await db.query<Omit<SetAsideStream, 'set_aside_at'> & { set_aside_at: Date }>(
    `SELECT a.projection, a.stream_id AS stream, a.position, a.revision::text AS revision, a.event_type, a.error, a.sqlstate, a.set_aside_at,
            (SELECT count(*) FROM ${s}.projection_held_events h WHERE h.projection = a.projection AND h.stream_id = a.stream_id)::int AS held_events
       FROM ${s}.projection_set_aside a
      WHERE ($1::text IS NULL OR a.projection = $1) AND ($2::text IS NULL OR a.stream_id = $2)
      ORDER BY a.set_aside_at, a.projection, a.stream_id`,
    [filter.projection ?? null, filter.stream ?? null],
  );
  return rows.map((row) => ({ ...row, set_aside_at: row.set_aside_at.toISOString() }));
}

/** How many streams each projection has set aside (projections with none are absent). */
export async function setAsideCounts(db: pg.Pool | pg.ClientBase, schema: string): Promise<Map<string, number>> {
  const { rows } = await db.query<{ projection: string; streams: number }>(
    `SELECT projection, count(*)::int AS streams FROM ${pg.escapeIdentifier(schema)}.projection_set_aside GROUP BY projection`,
  );
  return new Map(rows.map((row) => [row.projection, row.streams]));
}
