import fs from 'node:fs/promises';
import os from 'node:os';
import { Stryker } from '@stryker-mutator/core';
import { MUTATION_MODULES, type MutationModule } from './modules.js';

/**
 * npm run mutate [-- <module> ...] [--force] [--concurrency=N]
 *
 * Mutation testing (StrykerJS) of the modules in modules.ts, one Stryker run per module, each
 * against the module's own test files (vitest.mutation.config.ts); prints every module's score
 * and exits non-zero when one is under the break threshold. Incremental: a run tests only the
 * mutants whose code or covering tests changed since the module's last run (`--force` tests them
 * all; `--concurrency=N` sets the number of test runners, 2 by default). Not part of `npm test`.
 */

type StrykerOptions = NonNullable<ConstructorParameters<typeof Stryker>[0]>;
type MutantResult = Awaited<ReturnType<Stryker['runMutationTest']>>[number];

/** Set from the first full run (CONTRIBUTING.md "Mutation testing"); a module under it fails the run. */
const BREAK_THRESHOLD = 80;

/** Two cores, shared: one test runner (with its own embedded Postgres) per core at most. */
const DEFAULT_CONCURRENCY = 2;

const STRYKER_OPTIONS: StrykerOptions = {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutation.config.ts', related: false },
  // Run each mutant only against the tests that covered it in the initial run.
  coverageAnalysis: 'perTest',
  incremental: true,
  // The machine has slow moments; a mutant that really hangs still times out (and counts as detected).
  timeoutMS: 15_000,
  thresholds: { high: 90, low: BREAK_THRESHOLD, break: BREAK_THRESHOLD },
  reporters: ['clear-text', 'progress', 'html', 'json'],
  clearTextReporter: { reportScoreTable: true, reportMutants: true, logTests: false },
  // Stryker works on a copy of the project (node_modules linked), so an interrupted run never
  // leaves mutated source behind.
  inPlace: false,
  ignorePatterns: ['.data', '.cache', 'test-results', 'coverage', 'deploy', 'reports', 'test/bench', '*.md'],
  tempDirName: '.stryker-tmp',
  cleanTempDir: true,
};

interface ModuleScore {
  name: string;
  mutants: number;
  killed: number;
  timeout: number;
  survived: number;
  noCoverage: number;
  invalid: number;
  ignored: number;
  score: number;
  seconds: number;
}

/** Stryker's own definition: detected (killed, timed out) over valid mutants (detected, survived, no coverage). */
function scoreOf(name: string, results: MutantResult[], seconds: number): ModuleScore {
  const count = (...statuses: string[]) => results.filter((r) => statuses.includes(r.status)).length;
  const killed = count('Killed');
  const timeout = count('Timeout');
  const survived = count('Survived');
  const noCoverage = count('NoCoverage');
  const valid = killed + timeout + survived + noCoverage;
  return {
    name,
    mutants: results.length,
    killed,
    timeout,
    survived,
    noCoverage,
    invalid: count('CompileError', 'RuntimeError'),
    ignored: count('Ignored'),
    score: valid === 0 ? 100 : (100 * (killed + timeout)) / valid,
    seconds,
  };
}

/**
 * The incremental file is committed (CONTRIBUTING.md "Mutation testing"): it must not name the machine it
 * was made on. Stryker writes the project's absolute path into it (projectRoot, and into some
 * failure messages), and failure messages name temporary folders; nothing reads either back.
 */
async function withoutLocalPaths(file: string): Promise<void> {
  const text = await fs.readFile(file, 'utf8').catch(() => null);
  if (text === null) return;
  await fs.writeFile(file, text.split(process.cwd()).join('.').split(os.tmpdir()).join('<tmp>'));
}

async function runModule(module: MutationModule, force: boolean, concurrency: number): Promise<ModuleScore> {
  // Read by vitest.mutation.config.ts in Stryker's test-runner processes (they inherit the environment).
  process.env.MUTATION_MODULE = module.name;
  const incrementalFile = `test/mutation/incremental/${module.name}.json`;
  const started = Date.now();
  const results = await new Stryker({
    ...STRYKER_OPTIONS,
    mutate: module.mutate,
    incrementalFile,
    htmlReporter: { fileName: `reports/mutation/${module.name}.html` },
    jsonReporter: { fileName: `reports/mutation/${module.name}.json` },
    force,
    concurrency,
    ignoreStatic: module.ignoreStaticBecause !== undefined,
  }).runMutationTest();
  await withoutLocalPaths(incrementalFile);
  return scoreOf(module.name, results, Math.round((Date.now() - started) / 1000));
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const force = args.includes('--force');
  const concurrencyArg = args.find((a) => a.startsWith('--concurrency='));
  const concurrency = concurrencyArg === undefined ? DEFAULT_CONCURRENCY : Number(concurrencyArg.slice('--concurrency='.length));
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    console.error(`--concurrency must be a positive integer, got ${concurrencyArg}`);
    process.exit(2);
  }
  const names = args.filter((a) => !a.startsWith('--'));
  const unknown = names.filter((n) => !MUTATION_MODULES.some((m) => m.name === n));
  if (unknown.length > 0) {
    console.error(`unknown module(s): ${unknown.join(', ')} (known: ${MUTATION_MODULES.map((m) => m.name).join(', ')})`);
    process.exit(2);
  }
  const modules = names.length > 0 ? MUTATION_MODULES.filter((m) => names.includes(m.name)) : MUTATION_MODULES;
  const threshold = BREAK_THRESHOLD;

  const scores: ModuleScore[] = [];
  for (const module of modules) scores.push(await runModule(module, force, concurrency));

  const table = scores.map((s) => ({
    module: s.name,
    'score %': s.score.toFixed(2),
    mutants: s.mutants,
    killed: s.killed,
    timeout: s.timeout,
    survived: s.survived,
    'no coverage': s.noCoverage,
    invalid: s.invalid,
    'ignored (disabled, static)': s.ignored,
    seconds: s.seconds,
  }));
  console.log(`\nMutation scores (break threshold ${threshold}%):`);
  console.table(table);
  const failing = scores.filter((s) => s.score < threshold);
  if (failing.length > 0) {
    console.error(`under the threshold: ${failing.map((s) => `${s.name} ${s.score.toFixed(2)}%`).join(', ')}`);
    process.exitCode = 1;
  }
}

await main();
