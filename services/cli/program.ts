import { Command, Option } from 'commander';
import type { CommandInput, CommandModule, CommandSpec } from './registry.js';

export const PROGRAM = 'tracking';

/** Exit codes, as documented in the program's help and docs/cli.md. */
export const EXIT = { ok: 0, runtime: 1, usage: 2 } as const;

const PROGRAM_HELP = `
Every command accepts --json: then it prints exactly one JSON document on stdout and nothing
else there. Without it, a readable table. Errors print one line on stderr.

The CLI uses the same database as \`npm start\` with the same environment (DATABASE_URL, or the
embedded server of DATA_DIR: attached to when a service runs, started for the command otherwise).

Exit codes:
  0  done
  1  the command failed (refused by a rule, database unreachable, ...)
  2  usage or configuration error (unknown command or option, bad value, bad environment)
  130, 143  interrupted by Ctrl-C or SIGTERM (what the command opened is closed first)

Examples:
  $ npx ${PROGRAM} orgs create --name "Acme"
  $ ORG=$(npx ${PROGRAM} orgs create --name "Acme" --id-only)
  $ TOKEN=$(npx ${PROGRAM} keys mint --org "$ORG" --name partner --scopes assets:read,assets:write --token-only)
  $ npx ${PROGRAM} keys mint --help
  $ npx ${PROGRAM} projections status --json`;

/**
 * A command-line error as one line naming the help to read. Commander's own messages put their
 * suggestion on a second line ("(Did you mean orgs?)").
 */
function oneLine(text: string, helpOf: string): string {
  const message = text
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean)
    .join(' ')
    .replace(/\.?\s*\(Did you mean (.+?)\?\)/, '. Did you mean $1?')
    .replace(/\.$/, '');
  return `${message}${message.endsWith('?') ? '' : '.'} See '${helpOf} --help'.`;
}

function capitalized(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** Text after the options: the command's details as written, then its examples. */
function afterText(spec: CommandSpec): string {
  const parts = [];
  if (spec.details) parts.push(`\n${spec.details}`);
  if (spec.examples.length > 0) parts.push(`\nExamples:\n${spec.examples.map((e) => `  $ ${e}`).join('\n')}`);
  return parts.join('\n');
}

export interface ProgramOptions {
  version: string;
  /** Called with the command the arguments select, once they have been checked. */
  onCommand(spec: CommandSpec, input: CommandInput): void | Promise<void>;
  writeOut?: (text: string) => void;
  writeErr?: (text: string) => void;
}

/**
 * The command tree, from the command modules. Help goes to stdout; errors are one line on stderr
 * naming the help to read, and surface as a CommanderError (exitOverride) for main to map to an
 * exit code.
 */
export function buildProgram(modules: readonly CommandModule[], options: ProgramOptions): Command {
  const writeOut = options.writeOut ?? ((text: string) => process.stdout.write(text));
  const writeErr = options.writeErr ?? ((text: string) => process.stderr.write(text));
  const output = (helpOf: string) => ({
    writeOut,
    writeErr,
    outputError: (text: string, write: (text: string) => void) => write(`${oneLine(text, helpOf)}\n`),
  });

  const program = new Command(PROGRAM)
    .description('Administration of the tracking service: organizations, API keys, sessions, projections.')
    .version(options.version, '-V, --version', 'print the version')
    .helpOption('-h, --help', 'print help')
    .helpCommand('help [command...]', 'print help for a command')
    .exitOverride()
    .showSuggestionAfterError()
    .configureOutput(output(`npx ${PROGRAM}`))
    .addHelpText('after', PROGRAM_HELP);

  const groupSummaries = Object.assign({}, ...modules.map((m) => m.groups ?? {})) as Record<string, string>;
  const specs = modules.flatMap((m) => m.commands).sort((a, b) => a.path.join(' ').localeCompare(b.path.join(' ')));
  const groups = new Map<string, Command>();

  for (const spec of specs) {
    let parent = program;
    if (spec.path.length === 2) {
      const [groupName] = spec.path;
      let group = groups.get(groupName);
      if (!group) {
        group = program
          .command(groupName)
          .description(groupSummaries[groupName] ?? '')
          .helpCommand(false)
          .configureOutput(output(`npx ${PROGRAM} ${groupName}`));
        groups.set(groupName, group);
      }
      parent = group;
    }
    const name = spec.path[spec.path.length - 1]!;
    const command = parent
      .command(name)
      .summary(spec.summary)
      .description(`${capitalized(spec.summary)}.${spec.description ? ` ${spec.description}` : ''}`)
      .configureOutput(output(`npx ${PROGRAM} ${spec.path.join(' ')}`))
      .addHelpText('after', afterText(spec));
    // `name` is required; `[names...]` (written so) is optional and takes any number.
    for (const argument of spec.arguments ?? []) command.argument(argument.name.startsWith('[') ? argument.name : `<${argument.name}>`, argument.description);
    const required: Option[] = [];
    for (const option of spec.options ?? []) {
      const made = new Option(option.flags, option.required ? `${option.description} (required)` : option.description);
      if (option.conflicts) made.conflicts(option.conflicts);
      if (option.required) required.push(made);
      command.addOption(made);
    }
    command.addOption(new Option('--json', 'print exactly one JSON document on stdout'));
    command.action(async (...received: unknown[]) => {
      // Required options are checked here rather than by commander, which would report a missing
      // --name before the mistyped --nmae that caused it.
      const values = command.opts();
      const missing = required.find((option) => values[option.attributeName()] === undefined);
      if (missing) command.error(`error: required option '${missing.flags}' not specified`, { code: 'tracking.missingOption' });
      const args = received.slice(0, spec.arguments?.length ?? 0).flatMap((a) => (Array.isArray(a) ? (a as string[]) : a === undefined ? [] : [a as string]));
      await options.onCommand(spec, { args, options: values });
    });
  }
  return program;
}

/** Names of the groups of commands (`orgs`, `keys`...). */
export function groupNames(modules: readonly CommandModule[]): Set<string> {
  return new Set(modules.flatMap((m) => m.commands).flatMap((c) => (c.path.length === 2 ? [c.path[0]] : [])));
}

/**
 * Arguments as commander should see them: `help keys mint` becomes `keys mint --help`, and a bare
 * group (`orgs`) asks for its help: both print on stdout and exit 0, like `--help` itself.
 */
export function normalizeArguments(argv: readonly string[], groups: ReadonlySet<string>): string[] {
  if (argv[0] === 'help') return [...argv.slice(1), '--help'];
  if (argv.length === 0 || (argv.length === 1 && groups.has(argv[0]!))) return [...argv, '--help'];
  return [...argv];
}
