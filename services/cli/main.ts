import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../../shared/config.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../shared/db/embedded.js';
import { createLogger } from '../../shared/logger.js';
import { allProjections } from '../../projections/index.js';
import { ProjectorRuntime } from '../projector/runtime.js';
import { closeContext, openContext } from '../service.js';
import { CliUsageError, type CliCommand, type CliContext } from './command.js';
import { commands } from './commands/index.js';
import { createOutput } from './output.js';

function findCommand(args: string[]): { command: CliCommand; rest: string[] } | null {
  let best: CliCommand | null = null;
  for (const command of commands) {
    if (command.path.every((word, i) => args[i] === word) && (!best || command.path.length > best.path.length)) best = command;
  }
  return best ? { command: best, rest: args.slice(best.path.length) } : null;
}

function usage(): string {
  return ['usage: npm run cli -- <command> [--json]', '', ...commands.map((c) => `  ${c.usage}`)].join('\n');
}

async function main(argv: string[]): Promise<number> {
  const found = findCommand(argv);
  if (!found) {
    process.stderr.write(argv.length === 0 || argv[0] === '--help' ? `${usage()}\n` : `unknown command: ${argv.join(' ')}\n${usage()}\n`);
    return argv.length === 0 || argv[0] === '--help' ? 0 : 2;
  }
  const { command, rest } = found;
  const optionSpec: Record<string, { type: 'string' | 'boolean' }> = { json: { type: 'boolean' } };
  for (const name of command.options ?? []) optionSpec[name] = { type: 'string' };
  for (const name of command.flags ?? []) optionSpec[name] = { type: 'boolean' };
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options: optionSpec, allowPositionals: true, strict: true });
  } catch (error) {
    throw new CliUsageError(`${(error as Error).message.split('\n')[0]}; usage: ${command.usage}`);
  }
  const positionals = parsed.positionals;
  const range = command.positionals ?? { min: 0, max: 0 };
  if (positionals.length < range.min || positionals.length > range.max) {
    throw new CliUsageError(`usage: ${command.usage}`);
  }

  const config = loadConfig();
  // The CLI logs only problems, and to stderr: stdout is for the command's output.
  const log = createLogger(config.LOG_LEVEL === 'info' ? 'warn' : config.LOG_LEVEL);
  let embedded: EmbeddedPostgres | null = null;
  let databaseUrl = config.DATABASE_URL;
  if (!databaseUrl) {
    embedded = await startEmbeddedPostgres({ dataDir: config.DATA_DIR, role: 'cli' });
    databaseUrl = embedded.url;
  }
  let runtime: ProjectorRuntime | null = null;
  try {
    const base = await openContext(config, databaseUrl, log);
    const ctx: CliContext = {
      ...base,
      out: createOutput(Boolean(parsed.values.json)),
      async project(position) {
        if (!runtime) {
          runtime = new ProjectorRuntime({
            store: base.store,
            pool: base.pool,
            projections: allProjections(),
            log,
            takeoverIntervalMs: 200,
            onCheckpoint: (name, at) => base.checkpoints.advance(name, at),
          });
          runtime.start();
        }
        await base.checkpoints.waitForCheckpoint(position, { timeoutMs: 30_000 });
      },
    };
    try {
      await command.run(ctx, parsed.values as Record<string, string | boolean | undefined>, positionals);
    } finally {
      await (runtime as ProjectorRuntime | null)?.stop();
      await closeContext(base);
    }
  } finally {
    await embedded?.stop();
  }
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    const message = error instanceof CliUsageError || error instanceof ConfigError ? error.message : `error: ${(error as Error).message ?? String(error)}`;
    process.stderr.write(`${message.split('\n')[0]}\n`);
    process.exit(error instanceof CliUsageError || error instanceof ConfigError ? 2 : 1);
  },
);
