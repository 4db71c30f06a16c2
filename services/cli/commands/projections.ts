import { projectionStatuses } from '../../../shared/projection/status.js';
import { allProjections } from '../../../projections/index.js';
import type { CliCommand } from '../command.js';

export const projectionCommands: CliCommand[] = [
  {
    path: ['projections', 'status'],
    usage: 'projections status',
    async run(ctx) {
      const rows = await projectionStatuses(ctx.store, ctx.pool, allProjections().map((p) => p.name));
      ctx.out.print(rows, ['name', 'checkpoint', 'head', 'lag_events', 'lag_seconds']);
    },
  },
];
