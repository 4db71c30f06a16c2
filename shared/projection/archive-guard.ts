import type pg from 'pg';
import { ARCHIVE_LOCK, ARCHIVED_TYPE, archivedThrough } from '../archive/scan-archive.js';
import { comparePositions, formatPosition, type EventStore, type Position } from '../event-store/port.js';
import type { Projection } from './projection.js';

/**
 * The projector's followers read the store's log only, never the scan archive (docs/design.md
 * "The scan archive"). An archive run never passes a follower's checkpoint, but a projection that
 * starts behind the archive's end (one added after archiving, or one whose checkpoint was reset)
 * would, followed, go past the archived scans without seeing them and build a read model that
 * silently lacks them. No follower runs such a projection: it needs `projections rebuild`, which
 * reads the archive. The projector logs it at error, /readyz and `projections status` name it.
 */

/** Whether the projection reads the events the archive moves out of the log. */
export function readsArchivedEvents(projection: Pick<Projection, 'eventTypes' | 'skipsArchivedEvents'>): boolean {
  return !projection.skipsArchivedEvents && projection.eventTypes.includes(ARCHIVED_TYPE);
}

/**
 * The archive's end when `checkpoint` lies before it and the projection reads archived events
 * (with the Postgres event store: no other store has an archive); null when a follower may run it.
 */
export async function behindArchive(store: Pick<EventStore, 'name'>, db: pg.Pool | pg.ClientBase, projection: Pick<Projection, 'eventTypes' | 'skipsArchivedEvents'>, checkpoint: Position): Promise<Position | null> {
  if (store.name !== 'postgres' || !readsArchivedEvents(projection)) return null;
  const through = await archivedThrough(db);
  return through && comparePositions(checkpoint, through) < 0 ? through : null;
}

/** What the projector, /readyz and `projections status` say of a projection behind the archive. */
export function behindArchiveReason(name: string, checkpoint: Position, through: Position): string {
  return `projection ${name} is at ${formatPosition(checkpoint)}, before the end of the scan archive (${formatPosition(through)}): live it would skip the archived scan events; run \`npx tracking projections rebuild ${name}\` (it reads the archive)`;
}

/**
 * `behindArchive`, taken under the archive's lock held shared when it is free, so a run that has
 * not seen this projection's checkpoint cannot be moving events past it meanwhile (a run holds the
 * lock exclusively from reading the checkpoints to its end). While a run holds it (a first run
 * over years of log takes a while), the followers are not held up: the check is made without
 * it. That is exact for a checkpoint that only moved forward since the run began (the run stops
 * at or before it); a checkpoint created or set back during a run, while the archive was still
 * empty, is the one case it can miss (docs/design.md "The scan archive", Guards).
 */
export async function behindArchiveSettled(
  store: Pick<EventStore, 'name'>,
  client: pg.ClientBase,
  projection: Pick<Projection, 'eventTypes' | 'skipsArchivedEvents'>,
  checkpoint: Position,
): Promise<Position | null> {
  if (store.name !== 'postgres' || !readsArchivedEvents(projection)) return null;
  const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock_shared(hashtext($1)) AS ok', [ARCHIVE_LOCK]);
  if (!rows[0]!.ok) return behindArchive(store, client, projection, checkpoint);
  try {
    return await behindArchive(store, client, projection, checkpoint);
  } finally {
    await client.query('SELECT pg_advisory_unlock_shared(hashtext($1))', [ARCHIVE_LOCK]);
  }
}
