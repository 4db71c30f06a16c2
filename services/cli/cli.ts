import { redactSecrets } from '../../shared/redaction.js';
import fs from 'node:fs';
import os from 'node:os';
import { CommanderError } from 'commander';
import { createOutput } from './output.js';
import { buildProgram, EXIT, groupNames, normalizeArguments } from './program.js';
import { CliUsageError, loadCommandModules, type CommandInput, type CommandSpec } from './registry.js';

// The CLI: it loads only the command modules and commander; the chosen command then loads what it
// needs (see registry.ts). main.ts runs it as a process.

function version(): string {
  const manifest = JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return manifest.version;
}

/** Runs the CLI on `argv` (the words after the program name) and answers the exit code. */
export async function runCli(argv: readonly string[]): Promise<number> {
  const modules = await loadCommandModules();
  let chosen: { spec: CommandSpec; input: CommandInput } | null = null;
  const program = buildProgram(modules, {
    version: version(),
    onCommand: (spec, input) => {
      chosen = { spec, input };
    },
  });
  try {
    await program.parseAsync(normalizeArguments(argv, groupNames(modules)), { from: 'user' });
  } catch (error) {
    // Help and version exit 0; every other commander error is a usage error, already printed.
    if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    throw error;
  }
  if (!chosen) return EXIT.ok;
  const { spec, input } = chosen as { spec: CommandSpec; input: CommandInput };

  const { openCliSession } = await import('./session.js');
  const session = openCliSession(createOutput(input.options.json === true));
  // Ctrl-C or SIGTERM mid-command: close what the command opened (a database it started stops)
  // before exiting with the shell's code for that signal.
  const interrupted = (signal: NodeJS.Signals) => {
    process.stderr.write(`error: interrupted by ${signal}\n`);
    void session.close().finally(() => process.exit(128 + os.constants.signals[signal]));
  };
  if (!spec.handlesInterrupts) {
    process.once('SIGINT', interrupted);
    process.once('SIGTERM', interrupted);
  }
  // Every event the command appends records the CLI as who asked, and one request id for the run.
  const [{ runInCommandContext, CLI_COMMAND_ACTOR }, { newRequestId }] = await Promise.all([
    import('../../shared/event-store/command-context.js'),
    import('../../shared/http/request-id.js'),
  ]);
  try {
    await runInCommandContext({ actor: CLI_COMMAND_ACTOR, requestId: newRequestId() }, () => spec.run(input, session));
  } finally {
    await session.close();
  }
  process.off('SIGINT', interrupted);
  process.off('SIGTERM', interrupted);
  return EXIT.ok;
}

/** One line on stderr for a failed command, and its exit code. */
export function reportError(error: unknown): number {
  // A bad or missing configuration value (a key-encryption key, say) is a usage error too.
  const message = error instanceof Error ? error.message : String(error);
  const configuration = message.startsWith('Invalid configuration:');
  const usage = error instanceof CliUsageError || configuration;
  process.stderr.write(`error: ${redactSecrets(message.split('\n')[0]!)}\n`);
  return usage ? EXIT.usage : EXIT.runtime;
}
