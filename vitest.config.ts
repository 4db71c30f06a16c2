import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'services/**/*.test.ts', 'projections/**/*.test.ts', 'shared/**/*.test.ts'],
    exclude: ['node_modules/**', 'test/bench/**'],
    globalSetup: ['test/support/global-setup.ts'],
    // Every response of a test service is checked against its published OpenAPI document.
    setupFiles: ['test/support/openapi-guard.setup.ts', 'test/support/pg-one-query.setup.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ['default', 'json'],
    // Outside .data/, the service's data folder: .ci/run reads the counts from here.
    outputFile: { json: 'test-results/vitest.json' },
  },
});
