import { CliUsageError, type CommandModule } from '../registry.js';
import { orgIdOption, stringOption } from '../options.js';

/**
 * `import` (docs/cli.md, "import"): an import job as `POST /api/v1/imports` makes one (docs/api.md,
 * "Import"), posted by the CLI, run here with a progress bar on stderr (or, when a running
 * service's worker took it first, waited for), and its finished `Import` printed as JSON.
 */
export default {
  commands: [
    {
      path: ['import'],
      summary: 'import assets or locations from a CSV or XLSX file (progress on stderr, the finished Import on stdout)',
      description:
        'The rules of POST /api/v1/imports: rows matched by external_key, each one command recorded with actor cli; --dry-run applies nothing. A file the API would refuse at once (an unknown column, no external_key column, neither CSV nor XLSX) exits with 2 and imports nothing.',
      options: [
        { flags: '--org <org-id>', description: 'the organization to import into', required: true },
        { flags: '--resource <assets|locations>', description: 'what the rows are', required: true },
        { flags: '--file <path>', description: 'a CSV (UTF-8) or XLSX file (.xlsx, or any file that is a zip), at most 50 MiB', required: true },
        { flags: '--dry-run', description: 'validate every row against the current state and apply nothing' },
      ],
      examples: ['npx tracking import --org 1 --resource assets --file assets.csv', 'npx tracking import --org 1 --resource locations --file sites.xlsx --dry-run'],
      handlesInterrupts: true,
      async run(input, ctx) {
        const orgId = orgIdOption(input);
        const resource = stringOption(input, 'resource');
        if (resource !== 'assets' && resource !== 'locations') throw new CliUsageError('--resource must be assets or locations');
        const path = stringOption(input, 'file');
        const [fs, { readImportFile, FileRefused }, { columnsOf }, jobs, { MAX_IMPORT_BYTES }, { currentCommandContext, CLI_COMMAND_ACTOR }, { ValidationFailed }, { progressOnStderr }, { abortOnSignals }] =
          await Promise.all([
            import('node:fs/promises'),
            import('../../imports/file.js'),
            import('../../imports/rows.js'),
            import('../../imports/jobs.js'),
            import('../../api/imports/routes.js'),
            import('../../../shared/event-store/command-context.js'),
            import('../../../shared/errors.js'),
            import('../progress.js'),
            import('../interrupt.js'),
          ]);
        const size = await fs.stat(path).then((s) => s.size, () => null);
        if (size === null) throw new CliUsageError(`--file: no such file: ${path}`);
        if (size > MAX_IMPORT_BYTES) throw new CliUsageError(`--file: ${path} is larger than 50 MiB`);
        const file = await fs.readFile(path);
        const format = file.length >= 4 && file.readUInt32LE(0) === 0x04034b50 ? 'xlsx' : 'csv';
        try {
          columnsOf(resource, (await readImportFile(format, file, { headerOnly: true })).header);
        } catch (error) {
          if (error instanceof FileRefused) throw new CliUsageError(`--file: ${error.message}`);
          if (error instanceof ValidationFailed) throw new CliUsageError(`--file: ${error.fields.map((f) => f.message).join('; ')}`);
          throw error;
        }
        const service = await ctx.service();
        const context = currentCommandContext();
        const job = await jobs.insertImport(service.pool, { orgId, resource, dryRun: input.options.dryRun === true, format, file, actor: CLI_COMMAND_ACTOR, requestId: context?.requestId ?? null });
        // The projections nobody else runs are run here (a location's parent is looked up in them).
        await ctx.project(await service.store.headPosition());
        const progress = progressOnStderr('import', 'rows');
        const interrupt = abortOnSignals();
        try {
          const ranHere = await jobs.runImportHere({ ...service, pool: service.pool }, job.id, {
            signal: interrupt.signal,
            progress: (done, total) => progress.update(input.options.dryRun === true ? 'checking' : 'importing', done, total),
            project: (position, streams) => ctx.project(position, streams),
          });
          // A running service's worker took it first: follow it there.
          let finished = await jobs.getImport(service.pool, orgId, job.id);
          while (!ranHere && finished && (finished.status === 'queued' || finished.status === 'running') && !interrupt.signal.aborted) {
            progress.update('importing (by the service)', finished.created + finished.updated + finished.unchanged + finished.rejected, finished.rows);
            await new Promise((r) => setTimeout(r, 200));
            finished = await jobs.getImport(service.pool, orgId, job.id);
          }
          progress.stop();
          if (interrupt.signal.aborted) process.stderr.write(`import ${job.id} stopped where it was; the service resumes it when it runs\n`);
          ctx.out.line(JSON.stringify(finished, null, 2));
        } finally {
          progress.stop();
          interrupt.dispose();
        }
      },
    },
  ],
} satisfies CommandModule;
