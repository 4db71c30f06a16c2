/**
 * A small projection for the runtime tests: per stream, the number of `Counted` events, the sum
 * of their `n`, the last revision, and a hash chain over the event ids in the order applied, so
 * that an event applied twice, skipped or out of order shows in the row.
 */
import { createHash } from 'node:crypto';
import pg from 'pg';
import type { RecordedEvent } from '../../shared/event-store/port.js';
import type { Projection } from '../../shared/projection/projection.js';

export const COUNTED = 'Counted';

export function counterTableSql(schema: string, table: string): string {
  return `CREATE TABLE IF NOT EXISTS ${pg.escapeIdentifier(schema)}.${pg.escapeIdentifier(table)} (
    stream_id text PRIMARY KEY,
    events integer NOT NULL,
    total bigint NOT NULL,
    last_revision bigint NOT NULL,
    chain text NOT NULL
  )`;
}

export interface CounterOptions {
  name: string;
  table: string;
  /** Called inside the transaction after the batch's writes, before the checkpoint. */
  afterWrites?: (events: RecordedEvent[], tx: pg.PoolClient) => Promise<void>;
}

export function counterProjection(options: CounterOptions): Projection {
  const table = pg.escapeIdentifier(options.table);
  return {
    name: options.name,
    tables: [options.table],
    eventTypes: [COUNTED],
    async apply(events, tx) {
      const streams = [...new Set(events.map((e) => e.streamId))];
      const current = await tx.query<{ stream_id: string; events: number; total: string; last_revision: string; chain: string }>(
        `SELECT stream_id, events, total::text AS total, last_revision::text AS last_revision, chain FROM ${table} WHERE stream_id = ANY($1)`,
        [streams],
      );
      const rows = new Map(
        current.rows.map((r) => [r.stream_id, { events: r.events, total: BigInt(r.total), lastRevision: BigInt(r.last_revision), chain: r.chain }]),
      );
      for (const event of events) {
        const row = rows.get(event.streamId) ?? { events: 0, total: 0n, lastRevision: -1n, chain: '' };
        row.events += 1;
        row.total += BigInt(Number(event.data.n));
        row.lastRevision = event.revision;
        row.chain = createHash('sha256').update(`${row.chain}/${event.id}`).digest('hex');
        rows.set(event.streamId, row);
      }
      const entries = [...rows.entries()];
      await tx.query(
        `INSERT INTO ${table} (stream_id, events, total, last_revision, chain)
         SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[], $4::bigint[], $5::text[])
         ON CONFLICT (stream_id) DO UPDATE SET events = EXCLUDED.events, total = EXCLUDED.total,
           last_revision = EXCLUDED.last_revision, chain = EXCLUDED.chain`,
        [
          entries.map(([id]) => id),
          entries.map(([, r]) => r.events),
          entries.map(([, r]) => String(r.total)),
          entries.map(([, r]) => String(r.lastRevision)),
          entries.map(([, r]) => r.chain),
        ],
      );
      await options.afterWrites?.(events, tx);
    },
  };
}
