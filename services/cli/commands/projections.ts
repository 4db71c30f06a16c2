import type { CommandModule } from '../registry.js';

const STATUS_COLUMNS = ['name', 'checkpoint', 'head', 'lag_events', 'lag_seconds'];

const STATUS_LEGEND = [
  'checkpoint   the last position of the event log the projection has applied',
  'head         the last position in the log (read as <transaction>/<position>)',
  'lag_events   events in the log the projection has not applied yet',
  'lag_seconds  time between the first and the last of those events (0: caught up)',
].join('\n');

/** Read models built from the event log (INTERFACES.md). */
export default {
  groups: { projections: 'the read models built from the event log' },
  commands: [
    {
      path: ['projections', 'status'],
      summary: 'how far each projection has applied the event log',
      description: 'Commands answer once the projections have applied their events, so a projection that keeps lagging holds up writes.',
      details: `Columns:\n${STATUS_LEGEND.replace(/^/gm, '  ')}`,
      examples: ['npx tracking projections status', 'npx tracking projections status --json'],
      async run(_input, ctx) {
        const [{ comparePositions, formatPosition }, { readCheckpoint }, { allProjections }] = await Promise.all([
          import('../../../shared/event-store/port.js'),
          import('../../../shared/projection/checkpoints.js'),
          import('../../../projections/index.js'),
        ]);
        const { store, pool } = await ctx.service();
        const head = await store.headPosition();
        const rows = [];
        for (const projection of allProjections()) {
          const checkpoint = await readCheckpoint(pool, 'read_model', projection.name);
          const behind = comparePositions(checkpoint, head) < 0;
          const lag = behind
            ? await pool.query<{ events: number; seconds: number | null }>(
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
        ctx.out.print(rows, STATUS_COLUMNS);
        ctx.out.note(`\n${STATUS_LEGEND}`);
      },
    },
  ],
} satisfies CommandModule;
