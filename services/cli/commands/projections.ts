import type { CommandModule } from '../registry.js';

const STATUS_COLUMNS = ['name', 'checkpoint', 'head', 'lag_events', 'lag_seconds'];

const STATUS_LEGEND = [
  'checkpoint   the last position of the event log the projection has applied',
  'head         the last position in the log (read as <transaction>/<position>)',
  'lag_events   events in the log the projection has not applied yet',
  'lag_seconds  how long the oldest of those events has waited (0: caught up)',
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
        const [{ projectionStatuses }, { allProjections }] = await Promise.all([import('../../../shared/projection/status.js'), import('../../../projections/index.js')]);
        const { store, pool } = await ctx.service();
        const rows = await projectionStatuses(store, pool, allProjections().map((p) => p.name));
        ctx.out.print(rows, STATUS_COLUMNS);
        ctx.out.note(`\n${STATUS_LEGEND}`);
      },
    },
  ],
} satisfies CommandModule;
