import { projectionStatuses } from '../../../shared/projection/status.js';
import { parseTimestamp } from '../../../shared/http/validation.js';
import { allProjections } from '../../../projections/index.js';
import { rebuildProjections, RebuildRefusedError, selectProjections } from '../../projector/rebuild.js';
import { replayDatabaseUrl, replayProjections, replaySchemaProblem } from '../../projector/replay.js';
import { CliUsageError, requireOption, type CliCommand } from '../command.js';
import { abortOnSignals } from '../interrupt.js';
import { progressOnStderr } from '../progress.js';

export const projectionCommands: CliCommand[] = [
  {
    path: ['projections', 'status'],
    usage: 'projections status',
    async run(ctx) {
      const rows = await projectionStatuses(ctx.store, ctx.pool, allProjections().map((p) => p.name), { rebuilds: true });
      ctx.out.print(rows, ['name', 'checkpoint', 'head', 'lag_events', 'lag_seconds', 'rebuilding']);
    },
  },
  {
    path: ['projections', 'rebuild'],
    usage: 'projections rebuild [<name>...]',
    positionals: { min: 0, max: 64 },
    async run(ctx, _options, names) {
      let projections;
      try {
        projections = selectProjections(allProjections(), names);
      } catch (error) {
        if (error instanceof RebuildRefusedError) throw new CliUsageError(error.message);
        throw error;
      }
      const progress = progressOnStderr('rebuild');
      const interrupt = abortOnSignals();
      try {
        const result = await rebuildProjections({
          store: ctx.store,
          pool: ctx.pool,
          log: ctx.log,
          projections,
          signal: interrupt.signal,
          onProgress: (p) => progress.update(p.phase, p.events, p.total),
        });
        progress.stop();
        ctx.out.print(result, ['rebuilt', 'events', 'seconds']);
      } finally {
        progress.stop();
        interrupt.dispose();
      }
    },
  },
  {
    path: ['projections', 'replay'],
    usage: 'projections replay --until <RFC 3339> --into <schema> [--replace]',
    options: ['until', 'into'],
    flags: ['replace'],
    async run(ctx, options) {
      const until = parseTimestamp(requireOption(options, 'until'));
      if (!until) throw new CliUsageError('--until must be an RFC 3339 timestamp, e.g. 2026-05-25T09:00:00Z');
      const into = requireOption(options, 'into');
      const problem = replaySchemaProblem(into);
      if (problem) throw new CliUsageError(problem);
      const progress = progressOnStderr('replay');
      const interrupt = abortOnSignals();
      try {
        const result = await replayProjections({
          store: ctx.store,
          pool: ctx.pool,
          log: ctx.log,
          projections: allProjections(),
          until,
          into,
          replace: options.replace === true,
          signal: interrupt.signal,
          onProgress: (p) => progress.update('replaying', p.events, p.total),
        });
        progress.stop();
        ctx.out.print({ ...result, database_url: replayDatabaseUrl(ctx.databaseUrl, result.schema) }, ['schema', 'until', 'events', 'seconds', 'database_url']);
      } finally {
        progress.stop();
        interrupt.dispose();
      }
    },
  },
];
