import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type pg from 'pg';
import type { Config } from '../../shared/config.js';
import type { ServiceContext } from '../../shared/service-context.js';
import type { Position } from '../../shared/event-store/port.js';
import type { AppendedStream } from '../../shared/projection/checkpoints.js';
import type { Output } from './output.js';

/**
 * The CLI's commands. Each module in `commands/` exports a `CommandModule` as its default export;
 * the program finds them by listing that folder, so a new command (or a new group) is one new
 * module there. A command module is loaded on every run, also for `--help`: at its top it imports
 * only types and the CLI's own light modules (`test/cli/lazy-loading.unit.test.ts` checks), and
 * its `run` imports what the command needs with `await import(...)`.
 */

/** A usage or configuration error: exit code 2. Every other error exits with 1. */
export class CliUsageError extends Error {}

/** A positional argument, e.g. `keys revoke <key-id>`. */
export interface ArgumentSpec {
  name: string;
  description: string;
}

export interface OptionSpec {
  /** As on the command line: `--org <org-id>` takes a value, `--replace` is a flag. */
  flags: string;
  description: string;
  required?: boolean;
  /** Options (by their long name without dashes) this one cannot be combined with. */
  conflicts?: string[];
}

/** What a command receives from the command line; option keys are camel-cased (`expiresAt`). */
export interface CommandInput {
  args: string[];
  options: Record<string, string | boolean | undefined>;
}

export interface CliContext {
  /** Prints the command's result: one JSON document under `--json`, a table otherwise. */
  out: Output;
  /** The environment's configuration (the same variables as `npm start`). */
  config(): Config;
  /**
   * The database pool (unqualified names are the current read model), on a migrated schema. The
   * database is opened on first use: the embedded server of DATA_DIR (attached to when running,
   * started for this command otherwise) or DATABASE_URL.
   */
  pool(): Promise<pg.Pool>;
  /** Everything a command handler needs (event store, checkpoint watcher...), opened on first use. */
  service(): Promise<ServiceContext>;
  /**
   * Makes the read model reflect everything up to `position`: projections nobody else runs are
   * run here; those a running server holds are waited for.
   */
  project(position: Position, streams?: readonly AppendedStream[]): Promise<void>;
}

export interface CommandSpec {
  /** The words that select it, e.g. `['keys', 'mint']`. */
  path: [group: string, name: string] | [name: string];
  /** One line, shown in the list of commands. */
  summary: string;
  /** Prose shown in the command's own help after the summary (commander wraps it). */
  description?: string;
  /** Preformatted text shown after the options (a table of values, say), at most 80 columns. */
  details?: string;
  arguments?: ArgumentSpec[];
  options?: OptionSpec[];
  /** Shown at the end of the command's help. Written as a user types them (`npx tracking ...`). */
  examples: string[];
  /** The command stops cleanly on SIGINT/SIGTERM itself (and reports it): the CLI leaves the signals to it. */
  handlesInterrupts?: boolean;
  run(input: CommandInput, ctx: CliContext): Promise<void>;
}

export interface CommandModule {
  /** One-line summaries of the groups this module introduces, e.g. `{ keys: 'API keys ...' }`. */
  groups?: Record<string, string>;
  commands: CommandSpec[];
}

const COMMANDS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'commands');

function isCommandModule(value: unknown): value is CommandModule {
  return typeof value === 'object' && value !== null && Array.isArray((value as CommandModule).commands);
}

/** Every command module of `commands/`, in file-name order. */
export async function loadCommandModules(dir = COMMANDS_DIR): Promise<CommandModule[]> {
  const files = (await fs.readdir(dir)).filter((f) => /\.[cm]?[jt]s$/.test(f) && !/\.(test|d)\.[cm]?[jt]s$/.test(f)).sort();
  return Promise.all(
    files.map(async (file) => {
      const loaded = (await import(pathToFileURL(path.join(dir, file)).href)) as { default?: unknown };
      if (!isCommandModule(loaded.default)) throw new Error(`CLI command module ${file} has no default export of commands`);
      return loaded.default;
    }),
  );
}
