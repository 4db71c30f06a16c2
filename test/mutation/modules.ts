/**
 * The modules under mutation testing (`npm run mutate`, see test/mutation/run.ts) and, for each,
 * the test files that exercise it. Stryker runs a mutant only against the tests that covered it
 * in the initial run, and against every test of its module when the mutant also ran outside a
 * test (a service started in beforeAll, a projector loop between tests): narrowing each module to
 * its own files keeps those runs small.
 *
 * Left out on purpose: test/auth/cli.e2e.test.ts and the projector child of
 * test/projector/runtime.int.test.ts run the code in child processes, where Stryker can neither
 * switch a mutant on nor see coverage, so they could only slow the run down.
 */
export interface MutationModule {
  name: string;
  /** Files to mutate (globs, from the project root). */
  mutate: string[];
  /** Test files that exercise them (globs; Stryker's `testFiles` has no negation). */
  testFiles: string[];
}

export const MUTATION_MODULES: readonly MutationModule[] = [
  {
    name: 'auth',
    mutate: ['shared/auth/*.ts'],
    testFiles: [
      'test/auth/encryption-key-rotation.e2e.test.ts',
      'test/auth/hostile-tokens.e2e.test.ts',
      'test/auth/key-encryption.unit.test.ts',
      'test/auth/lifecycle.e2e.test.ts',
      'test/auth/orgs-me.e2e.test.ts',
      'test/auth/projection.int.test.ts',
      'test/auth/rate-limit.e2e.test.ts',
      'test/auth/rate-limiter.unit.test.ts',
      'test/auth/scopes-sessions.e2e.test.ts',
      'test/auth/signing-keys-at-rest.int.test.ts',
      'test/auth/signing-keys.int.test.ts',
      'test/auth/tenancy.e2e.test.ts',
    ],
  },
  {
    name: 'event-store',
    mutate: ['shared/event-store/postgres.ts'],
    // The adapter called directly: appends, reads and errors, then live subscriptions and NOTIFY.
    // Left out: postgres-concurrent.int.test.ts (seconds of concurrent writers; nothing it kills
    // escapes these) and the projector runtime's tests (slow, and through the projector).
    testFiles: ['test/event-store/postgres.int.test.ts', 'test/event-store/postgres-live.int.test.ts'],
  },
  {
    name: 'checkpoints',
    mutate: ['shared/projection/checkpoints.ts'],
    testFiles: ['test/projector/checkpoints.int.test.ts', 'test/projector/runtime.int.test.ts'],
  },
  {
    name: 'deciders',
    mutate: ['shared/domain/*/decider.ts'],
    testFiles: [
      'shared/domain/*/decider.unit.test.ts',
      'test/master-data/assets.e2e.test.ts',
      'test/master-data/locations-crud.e2e.test.ts',
      'test/master-data/locations-tree.e2e.test.ts',
      'test/master-data/tags.e2e.test.ts',
    ],
  },
];
