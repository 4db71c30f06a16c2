import type pg from 'pg';
import { ArchivedLog } from '../../shared/archive/archived-log.js';
import { START, formatPosition, type EventStore, type Position } from '../../shared/event-store/port.js';

/**
 * The whole log as a reader sees it (archive merged with the store's events), one line per event:
 * position, id, stream, revision, type, data, metadata, recorded time. Equal lists mean every event
 * exactly once, in the same place, with the same content.
 */
export async function wholeLog(store: EventStore, pool: pg.Pool, dir: string | undefined, batch = 1000): Promise<string[]> {
  const log = await ArchivedLog.open({ store, pool, dir });
  try {
    const lines: string[] = [];
    for (let after: Position = START; ; ) {
      const events = await log.readAll({ after, maxCount: batch });
      if (events.length === 0) return lines;
      for (const e of events) {
        lines.push(JSON.stringify([formatPosition(e.position), e.id, e.streamId, String(e.revision), e.type, e.data, e.metadata, e.recordedAt.toISOString()]));
      }
      after = events.at(-1)!.position;
    }
  } finally {
    await log.close();
  }
}

/** Every row of every table given, in a stable order, as text: what "the same read models" compares. */
export async function readModelRows(pool: pg.Pool, schema: string, tables: readonly string[]): Promise<Record<string, string[]>> {
  const rows: Record<string, string[]> = {};
  for (const table of tables) {
    // The engines' segment rows without the token of the batch that wrote them last (random: projections/engine-states.ts).
    const row = table === 'alerts_engine_segments' || table === 'counts_engine_segments' ? 'row(t.segment, t.state)' : 't';
    const { rows: found } = await pool.query<{ row: string }>(`SELECT ${row}::text AS row FROM "${schema}"."${table}" t ORDER BY 1`);
    rows[table] = found.map((r) => r.row);
  }
  return rows;
}
