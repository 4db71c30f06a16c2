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
  /**
   * Why the module's static mutants (code run at import, outside any test) are not run, when they
   * are not: each would rerun every test file of the module. Stryker reports them as ignored, with
   * their code, so none is left out silently.
   */
  ignoreStaticBecause?: string;
}

export const MUTATION_MODULES: readonly MutationModule[] = [
  {
    name: 'auth',
    mutate: ['shared/auth/*.ts'],
    // The tests that call the module directly, inside their tests (no service started in
    // beforeAll): each mutant then runs only the few tests that cover it. The e2e tests of
    // test/auth stay in `npm test`, and so does authenticator-memory.int.test.ts: its 10,000-entry
    // cache bounds take seconds, which every mutant of the request path would pay.
    testFiles: [
      'test/auth/authenticator.int.test.ts',
      'test/auth/credentials.int.test.ts',
      'test/auth/key-encryption-source.int.test.ts',
      'test/auth/key-encryption.unit.test.ts',
      'test/auth/org.unit.test.ts',
      'test/auth/people-state.int.test.ts',
      'test/auth/rate-limiter.unit.test.ts',
      'test/auth/member-roles.unit.test.ts',
      'test/auth/session-tokens.int.test.ts',
      'test/auth/signing-key-store.int.test.ts',
      'test/auth/signing-keys.int.test.ts',
      'test/auth/tokens.unit.test.ts',
    ],
    ignoreStaticBecause:
      'its static mutants (module-level constants: the 401 details, the header and token patterns, the contract names) each rerun every auth test file, about 12 s apiece on two cores; the e2e tests of test/auth in npm test hold those constants to the contract',
  },
  {
    name: 'event-store',
    mutate: ['shared/event-store/postgres.ts'],
    // The adapter called directly: appends, reads and errors, then subscriptions and NOTIFY.
    // Left out: postgres-concurrent.int.test.ts (seconds of concurrent writers; nothing it kills
    // escapes these) and the projector runtime's tests (slow, and through the projector).
    testFiles: ['test/event-store/postgres.int.test.ts', 'test/event-store/postgres-subscriptions.int.test.ts'],
  },
  {
    name: 'checkpoints',
    mutate: ['shared/projection/checkpoints.ts'],
    // The watcher on its own, the projector runtime with it, the set-aside rule end to end, and
    // what the watcher makes of set-aside streams (notifications, table reads, reconnects).
    testFiles: [
      'test/projector/checkpoints.int.test.ts',
      'test/projector/runtime.int.test.ts',
      'test/projector/set-aside.int.test.ts',
      'test/projector/set-aside-watcher.int.test.ts',
    ],
  },
  {
    name: 'deciders',
    mutate: ['shared/domain/*/decider.ts'],
    // The deciders are pure: their own unit tests decide every rule (the e2e tests of master
    // data stay in `npm test`; here they would only start services).
    testFiles: ['shared/domain/*/decider.unit.test.ts'],
  },
];
