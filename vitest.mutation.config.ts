import { defineConfig } from 'vitest/config';
import { MUTATION_MODULES } from './test/mutation/modules.js';

/**
 * The tests StrykerJS runs (`npm run mutate`): those of the module being mutated (MUTATION_MODULE,
 * set by test/mutation/run.ts), or of every module when it is unset, with the usual global setup
 * (one embedded Postgres per test-runner process) and timeouts. Stryker sets the pool, workers
 * and bail itself. Narrowing here, not only with Stryker's `testFiles`, also keeps the runs of
 * mutants without per-test coverage (which run every test) inside the module's files.
 */
const selected = MUTATION_MODULES.filter((m) => process.env.MUTATION_MODULE === undefined || m.name === process.env.MUTATION_MODULE);
if (selected.length === 0) throw new Error(`unknown MUTATION_MODULE: ${process.env.MUTATION_MODULE}`);

export default defineConfig({
  test: {
    include: [...new Set(selected.flatMap((m) => m.testFiles))],
    exclude: ['node_modules/**'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
