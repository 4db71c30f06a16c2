import { afterAll, afterEach } from 'vitest';

// vitest `setupFiles`: a second query sent on a pg client before its first has answered. pg queues
// it and warns (it will refuse it from pg 9); it never saves a round trip, and in a transaction
// the order of the two is the queue's, not the code's. Noticed in any test file, it fails the test
// that was running (or the file), with where it was sent. The warning comes once a process.
let sent: string | null = null;
process.on('warning', (warning) => {
  if (warning.name === 'DeprecationWarning' && warning.message.includes('already executing a query')) sent ??= warning.stack ?? warning.message;
});

function assertNone(): void {
  if (sent === null) return;
  const stack = sent;
  sent = null;
  throw new Error(`a pg client was sent a query while it was executing another:\n${stack}`);
}

afterEach(() => assertNone());
afterAll(() => assertNone());
