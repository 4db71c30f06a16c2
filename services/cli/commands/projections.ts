import type { ServiceContext } from '../../../shared/service-context.js';
import type { Pool } from '../../../shared/db/pool.js';
import type { ReplayProcesses } from '../../../shared/projection/rebuild.js';
import { CliUsageError, type CommandInput, type CommandModule } from '../registry.js';

const STATUS_COLUMNS = ['name', 'checkpoint', 'head', 'lag_events', 'lag_seconds', 'rebuilding', 'needs_rebuild'];

const STATUS_LEGEND = [
  'checkpoint     the last position of the event log the projection has applied',
  'head           the last position in the log (read as <transaction>/<position>)',
  'lag_events     events in the log the projection has not applied yet',
  'lag_seconds    how long the oldest of those events has waited (0: caught up)',
  'rebuilding     whether `projections rebuild` is building it now',
  'needs_rebuild  yes: its checkpoint is before the end of the scan archive, so',
  '               the projector does not run it live (it would skip the archived',
  '               scans); `projections rebuild <name>` reads the archive',
  '',
  'The last row, webhooks, is the webhooks role\'s subscriber of the log: it follows its own',
  'checkpoint like a projection, but has no read model and is never rebuilt.',
].join('\n');

const FAILURES_COLUMNS = ['projection', 'stream', 'position', 'event_type', 'error', 'set_aside_at', 'held_events'];

const FAILURES_LEGEND = [
  'position      where the event that failed is in the log; revision: in its stream',
  'error         why the projection could not apply it (sqlstate: Postgres\'s code, when it refused it)',
  'set_aside_at  when it failed (last)',
  'held_events   later events of the stream waiting behind it, applied by `projections retry`',
].join('\n');

/**
 * A rebuild or a replay creates, fills, moves and drops schemas: DDL, which is the migration
 * role's (the runtime role the service connects as has none). With one user for everything
 * (DATABASE_URL alone) that is the service's own pool.
 */
async function withMigrationPool<T>(service: ServiceContext, run: (pool: Pool) => Promise<T>): Promise<T> {
  if (service.database.migrationUrl === service.database.url) return run(service.pool);
  const { createPool } = await import('../../../shared/db/pool.js');
  const pool = createPool(service.database.migrationUrl, { max: service.config.PG_POOL_SIZE, searchPath: 'read_model', applicationName: 'tracking-projections' });
  try {
    return await run(pool);
  } finally {
    await pool.end();
  }
}

/**
 * The processes a rebuild or a replay forks for `--parallel` (shared/projection/catch-up-processes.ts):
 * on the migration role's connection, like this command's pool, and the same log.
 */
function replayProcesses(service: ServiceContext, archiveDir: string | undefined): ReplayProcesses {
  const { config } = service;
  return {
    entry: new URL('../catch-up-process.ts', import.meta.url),
    connection: {
      databaseUrl: service.database.migrationUrl,
      store: config.EVENT_STORE === 'postgres' ? { kind: 'postgres' } : { kind: 'kurrentdb', url: config.KURRENTDB_URL! },
      archiveDir,
      logLevel: config.LOG_LEVEL,
    },
  };
}

const PARALLEL_OPTION = {
  flags: '--parallel <n>',
  description: "segments of a split projection applied side by side (default: the machine's cores); PROJECTION_SEGMENTS says how many segments",
};

/** `--parallel`: at least 1; the machine's cores when absent (docs/cli.md "projections"). */
async function parallelOption(input: CommandInput): Promise<number> {
  const [{ wholeNumberOption }, os] = await Promise.all([import('../options.js'), import('node:os')]);
  const parallel = wholeNumberOption(input, 'parallel', '--parallel', 'segments') ?? os.availableParallelism();
  if (parallel < 1) throw new CliUsageError('--parallel must be at least 1');
  return parallel;
}

/** Read models built from the event log (docs/cli.md "projections"). */
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
        const [{ projectionStatuses }, { allProjections }, { movementSubscriber }] = await Promise.all([
          import('../../../shared/projection/status.js'),
          import('../../../projections/index.js'),
          import('../../webhooks/movements.js'),
        ]);
        const { store, pool } = await ctx.service();
        const rows = await projectionStatuses(store, pool, [...allProjections(), movementSubscriber()], { rebuilds: true, archive: true });
        if (ctx.out.json) return ctx.out.print(rows);
        ctx.out.print(
          rows.map((r) => ({ ...r, needs_rebuild: r.needs_rebuild ? 'yes' : '-' })),
          STATUS_COLUMNS,
        );
        for (const r of rows) if (r.needs_rebuild) ctx.out.note(r.needs_rebuild);
        ctx.out.note(`\n${STATUS_LEGEND}`);
      },
    },
    {
      path: ['projections', 'rebuild'],
      summary: 'replay the log into fresh tables beside the live ones, then swap them in',
      description:
        'The API keeps answering from the live tables meanwhile; the swap is one short transaction. Ctrl-C or SIGTERM leaves the live tables untouched and drops the new ones. Progress on stderr.',
      arguments: [{ name: '[names...]', description: 'projections to rebuild (default: all)' }],
      options: [PARALLEL_OPTION],
      handlesInterrupts: true,
      examples: ['npx tracking projections rebuild', 'npx tracking projections rebuild tracking --parallel 2 --json'],
      async run(input, ctx) {
        const [{ allProjections }, { rebuildProjections, RebuildRefusedError, selectProjections }, { abortOnSignals }, { progressOnStderr }] = await Promise.all([
          import('../../../projections/index.js'),
          import('../../../shared/projection/rebuild.js'),
          import('../interrupt.js'),
          import('../progress.js'),
        ]);
        let projections;
        try {
          projections = selectProjections(allProjections(), input.args);
        } catch (error) {
          if (error instanceof RebuildRefusedError) throw new CliUsageError(error.message);
          throw error;
        }
        const parallel = await parallelOption(input);
        const service = await ctx.service();
        const { archiveDir } = await import('../../../shared/config.js');
        const progress = progressOnStderr('rebuild');
        const interrupt = abortOnSignals();
        try {
          const result = await withMigrationPool(service, (pool) =>
            rebuildProjections({
              store: service.store,
              pool,
              archiveDir: archiveDir(service.config),
              log: service.log,
              projections,
              segments: service.config.PROJECTION_SEGMENTS,
              parallel,
              processes: replayProcesses(service, archiveDir(service.config)),
              signal: interrupt.signal,
              onProgress: (p) => progress.update(p.phase, p.events, p.total),
            }),
          );
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
      summary: 'the read models as they stood at an instant, in a schema of their own',
      description: 'Events recorded up to --until are applied into --into; query it with plain SQL through the printed database_url (read-only).',
      options: [
        { flags: '--until <RFC 3339>', description: 'the instant (events recorded up to it)', required: true },
        { flags: '--into <schema>', description: 'the schema to build (refused when it exists, unless --replace)', required: true },
        { flags: '--replace', description: 'replace an earlier replay schema of that name' },
        PARALLEL_OPTION,
      ],
      handlesInterrupts: true,
      examples: ['npx tracking projections replay --until 2026-05-25T09:00:00Z --into as_of_0900 --json'],
      async run(input, ctx) {
        const [{ timestampOption }, { allProjections }, { replayDatabaseUrl, replayProjections, replaySchemaProblem }, { abortOnSignals }, { progressOnStderr }] = await Promise.all([
          import('../options.js'),
          import('../../../projections/index.js'),
          import('../../../shared/projection/replay.js'),
          import('../interrupt.js'),
          import('../progress.js'),
        ]);
        const until = timestampOption(input, 'until', '--until', '2026-05-25T09:00:00Z');
        if (!until) throw new CliUsageError('--until must be an RFC 3339 timestamp, e.g. 2026-05-25T09:00:00Z');
        const into = String(input.options.into ?? '');
        const problem = replaySchemaProblem(into);
        if (problem) throw new CliUsageError(problem);
        const parallel = await parallelOption(input);
        const service = await ctx.service();
        const { archiveDir } = await import('../../../shared/config.js');
        const progress = progressOnStderr('replay');
        const interrupt = abortOnSignals();
        try {
          const result = await withMigrationPool(service, (pool) =>
            replayProjections({
              store: service.store,
              pool,
              archiveDir: archiveDir(service.config),
              log: service.log,
              projections: allProjections(),
              until,
              into,
              replace: input.options.replace === true,
              segments: service.config.PROJECTION_SEGMENTS,
              parallel,
              processes: replayProcesses(service, archiveDir(service.config)),
              signal: interrupt.signal,
              onProgress: (p) => progress.update('replaying', p.events, p.total),
            }),
          );
          progress.stop();
          const { analystDatabaseUrl } = await import('../../../shared/db/connections.js');
          const base = analystDatabaseUrl(service) ?? service.databaseUrl;
          ctx.out.print({ ...result, database_url: replayDatabaseUrl(base, result.schema) }, ['schema', 'until', 'events', 'seconds', 'database_url']);
        } finally {
          progress.stop();
          interrupt.dispose();
        }
      },
    },
    {
      path: ['projections', 'failures'],
      summary: 'the streams projections set aside: events they could not apply',
      description:
        'An event a projection cannot apply sets its stream aside for that projection; the later events of the stream wait behind it (held), and every other stream goes on. Fix the cause, then `projections retry`.',
      details: `Columns:\n${FAILURES_LEGEND.replace(/^/gm, '  ')}`,
      examples: ['npx tracking projections failures', 'npx tracking projections failures --json'],
      async run(_input, ctx) {
        const [{ listSetAside }, { READ_MODEL_SCHEMA }] = await Promise.all([import('../../../shared/projection/set-aside.js'), import('../../../shared/db/migrate.js')]);
        const rows = await listSetAside(await ctx.pool(), READ_MODEL_SCHEMA);
        ctx.out.print(rows, FAILURES_COLUMNS);
        if (rows.length > 0) ctx.out.note(`\n${FAILURES_LEGEND}`);
      },
    },
    {
      path: ['projections', 'retry'],
      summary: 'apply set-aside streams again, after a fix',
      description:
        'Applies the failed event of each set-aside stream (all, or the one named), then the events held behind it, in order, while the projector runs. Exit code 1 when one fails again (it stays set aside at the event that failed).',
      arguments: [{ name: '[stream]', description: 'the stream to retry (default: every set-aside stream)' }],
      options: [{ flags: '--projection <name>', description: 'only the streams this projection set aside' }],
      examples: ['npx tracking projections retry', 'npx tracking projections retry asset-7-42 --projection assets --json'],
      async run(input, ctx) {
        const [{ allProjections }, { ProjectorRuntime }, { listSetAside }, { READ_MODEL_SCHEMA }] = await Promise.all([
          import('../../../projections/index.js'),
          import('../../../shared/projection/runtime.js'),
          import('../../../shared/projection/set-aside.js'),
          import('../../../shared/db/migrate.js'),
        ]);
        const projections = allProjections();
        const projection = input.options.projection === undefined ? undefined : String(input.options.projection);
        if (projection !== undefined && !projections.some((p) => p.name === projection)) {
          throw new CliUsageError(`unknown projection ${projection} (projections: ${projections.map((p) => p.name).join(', ')})`);
        }
        const stream = input.args[0];
        const service = await ctx.service();
        const filter = { projection, stream };
        if (stream !== undefined && (await listSetAside(service.pool, READ_MODEL_SCHEMA, filter)).length === 0) {
          throw new CliUsageError(`stream ${stream} is not set aside${projection ? ` by ${projection}` : ''} (see \`npx tracking projections failures\`)`);
        }
        const runtime = new ProjectorRuntime({ store: service.store, pool: service.pool, projections, log: service.log });
        const outcomes = await runtime.retrySetAside(filter);
        ctx.out.print(outcomes, ['projection', 'stream', 'outcome', 'applied', 'held_events', 'error']);
        const again = outcomes.filter((o) => o.outcome !== 'recovered');
        if (again.length > 0) throw new Error(`${again.length} of ${outcomes.length} set-aside stream${outcomes.length === 1 ? '' : 's'} failed again: ${again[0]!.error}`);
      },
    },
  ],
} satisfies CommandModule;
