import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProgram, groupNames, normalizeArguments } from '../../services/cli/program.js';
import { loadCommandModules, type CommandInput, type CommandModule, type CommandSpec } from '../../services/cli/registry.js';
import { MINTABLE_SCOPES } from '../../shared/auth/scopes.js';

// The command tree as a user meets it: help on stdout, errors as one line on stderr, exit codes
// (docs/cli.md). In process, on the real command modules; nothing runs.

interface Run {
  code: number;
  stdout: string;
  stderr: string;
  chosen: { path: string; input: CommandInput } | null;
}

let modules: CommandModule[];

beforeAll(async () => {
  modules = await loadCommandModules();
});

async function parse(argv: string[], from: CommandModule[] = modules): Promise<Run> {
  let stdout = '';
  let stderr = '';
  let chosen: Run['chosen'] = null;
  const program = buildProgram(from, {
    version: '9.9.9',
    onCommand: (spec: CommandSpec, input: CommandInput) => {
      chosen = { path: spec.path.join(' '), input };
    },
    writeOut: (text) => (stdout += text),
    writeErr: (text) => (stderr += text),
  });
  let code = 0;
  try {
    await program.parseAsync(normalizeArguments(argv, groupNames(from)), { from: 'user' });
  } catch (error) {
    code = (error as { exitCode: number }).exitCode === 0 ? 0 : 2;
  }
  return { code, stdout, stderr, chosen };
}

describe('help', () => {
  it('the program, `help` and `--help` print the commands, exit codes and examples on stdout', async () => {
    for (const argv of [[], ['--help'], ['help']]) {
      const run = await parse(argv);
      expect(run.code, argv.join(' ')).toBe(0);
      expect(run.stderr).toBe('');
      expect(run.stdout).toContain('Usage: tracking');
      for (const group of ['orgs', 'keys', 'sessions', 'projections']) expect(run.stdout).toMatch(new RegExp(`^  ${group} `, 'm'));
      expect(run.stdout).toContain('Exit codes:');
      expect(run.stdout).toMatch(/^  2 {2}usage or configuration error/m);
      expect(run.stdout).toContain('$ npx tracking');
    }
  });

  it('every command has its own help with a description and examples, by `<cmd> --help` and `help <cmd>`', async () => {
    for (const spec of modules.flatMap((m) => m.commands)) {
      for (const argv of [[...spec.path, '--help'], ['help', ...spec.path]]) {
        const run = await parse(argv);
        expect(run.code, argv.join(' ')).toBe(0);
        expect(run.stdout).toContain(`Usage: tracking ${spec.path.join(' ')}`);
        expect(run.stdout).toContain('--json');
        expect(run.stdout).toMatch(/Examples:\n {2}\$ npx tracking /);
        expect(run.chosen).toBeNull();
      }
    }
  });

  it('a group alone prints its commands on stdout', async () => {
    const run = await parse(['keys']);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('Usage: tracking keys');
    for (const name of ['mint', 'list', 'revoke', 'rotate-signing-key']) expect(run.stdout).toMatch(new RegExp(`^  ${name} `, 'm'));
  });

  it('keys mint --help lists every mintable scope', async () => {
    const run = await parse(['keys', 'mint', '--help']);
    for (const scope of MINTABLE_SCOPES) expect(run.stdout).toMatch(new RegExp(`^  ${scope} +\\S`, 'm'));
    expect(run.stdout).toContain('keys:admin is refused');
  });

  it('projections status --help explains its columns', async () => {
    const run = await parse(['projections', 'status', '--help']);
    for (const column of ['checkpoint', 'head', 'lag_events', 'lag_seconds']) expect(run.stdout).toMatch(new RegExp(`^  ${column} +\\S`, 'm'));
  });

  it('--version prints the version', async () => {
    const run = await parse(['--version']);
    expect(run).toMatchObject({ code: 0, stdout: '9.9.9\n', stderr: '' });
  });
});

describe('usage errors: exit code 2 and one line on stderr', () => {
  it.each([
    [['orgz', 'list'], "error: unknown command 'orgz'. Did you mean orgs? See 'npx tracking --help'."],
    [['orgs', 'lst'], "error: unknown command 'lst'. Did you mean list? See 'npx tracking orgs --help'."],
    [['keys', 'mint', '--org', '1', '--nmae', 'x'], "error: unknown option '--nmae'. Did you mean --name? See 'npx tracking keys mint --help'."],
    [['keys', 'mint', '--org', '1', '--scopes', 'assets:read'], "error: required option '--name <name>' not specified. See 'npx tracking keys mint --help'."],
    [['keys', 'mint', '--org'], "error: option '--org <org-id>' argument missing. See 'npx tracking keys mint --help'."],
    [['keys', 'revoke'], "error: missing required argument 'key-id'. See 'npx tracking keys revoke --help'."],
    [['orgs', 'list', 'extra'], "error: too many arguments for 'list'. Expected 0 arguments but got 1. See 'npx tracking orgs list --help'."],
    [['keys', 'mint', '--org', '1', '--name', 'x', '--scopes', 'a', '--json', '--token-only'], "error: option '--token-only' cannot be used with option '--json'. See 'npx tracking keys mint --help'."],
  ])('%j', async (argv, line) => {
    const run = await parse(argv);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(`${line}\n`);
    expect(run.chosen).toBeNull();
  });
});

describe('what a command receives', () => {
  it('options by camel-cased name, positionals in order, --json everywhere', async () => {
    const mint = await parse(['keys', 'mint', '--org', '7', '--name', 'partner', '--scopes', 'assets:read', '--expires-at', '2099-01-01T00:00:00Z', '--json']);
    expect(mint.chosen).toEqual({
      path: 'keys mint',
      input: { args: [], options: { org: '7', name: 'partner', scopes: 'assets:read', expiresAt: '2099-01-01T00:00:00Z', json: true } },
    });
    const revoke = await parse(['keys', 'revoke', 'ak_1']);
    expect(revoke.chosen).toEqual({ path: 'keys revoke', input: { args: ['ak_1'], options: {} } });
  });
});

describe('the registry', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tracking-cli-modules-'));
    await fs.writeFile(
      path.join(dir, 'gates.mjs'),
      `export default {
        groups: { gates: 'yard gates' },
        commands: [{ path: ['gates', 'list'], summary: 'list gates', options: [{ flags: '--org <org-id>', description: 'the organization', required: true }], examples: ['npx tracking gates list --org 1'], run: async () => {} }],
      };\n`,
    );
    await fs.writeFile(path.join(dir, 'gates.test.mjs'), 'throw new Error("not a command module");\n');
  });

  afterAll(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('a new command is one module in the commands folder', async () => {
    const found = await loadCommandModules(dir);
    const run = await parse(['--help'], [...modules, ...found]);
    expect(run.stdout).toMatch(/^ {2}gates +yard gates$/m);
    const chosen = await parse(['gates', 'list', '--org', '3'], [...modules, ...found]);
    expect(chosen.chosen).toEqual({ path: 'gates list', input: { args: [], options: { org: '3' } } });
  });
});
