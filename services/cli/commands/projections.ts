import { comparePositions, formatPosition } from '../../../shared/event-store/port.js';
import { readCheckpoint } from '../../../shared/projection/checkpoints.js';
import { allProjections } from '../../../projections/index.js';
import type { CliCommand } from '../command.js';

export const projectionCommands: CliCommand[] = [
  {
    path: ['projections', 'status'],
    usage: 'projections status',
    async run(ctx) {
      const head = await ctx.store.headPosition();
      const rows = [];
      for (const projection of allProjections()) {
        const checkpoint = await readCheckpoint(ctx.pool, 'read_model', projection.name);
        const behind = comparePositions(checkpoint, head) < 0;
        const lag = behind
          ? await ctx.pool.query<{ events: number; seconds: number | null }>(
              `SELECT count(*)::int AS events,
                      EXTRACT(EPOCH FROM (max(recorded_at) - min(recorded_at)))::float8 AS seconds
               FROM event_store.events WHERE (tx_id, global_position) > ($1::text::xid8, $2::bigint)
                 AND tx_id < pg_snapshot_xmin(pg_current_snapshot())`,
              [String(checkpoint.commit), String(checkpoint.prepare)],
            )
          : null;
        rows.push({
          name: projection.name,
          checkpoint: formatPosition(checkpoint),
          head: formatPosition(head),
          lag_events: lag?.rows[0]?.events ?? 0,
          lag_seconds: lag?.rows[0]?.seconds ?? 0,
        });
      }
      ctx.out.print(rows, ['name', 'checkpoint', 'head', 'lag_events', 'lag_seconds']);
    },
  },
];
