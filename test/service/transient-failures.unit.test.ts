import { describe, expect, it } from 'vitest';
import { isConnectionError } from '../../shared/db/pool.js';
import { CommandContentionError } from '../../shared/domain/command.js';
import { ApiError, isTransient, type FailureTraits } from '../../shared/errors.js';
import { EventStoreUnavailableError } from '../../shared/event-store/port.js';
import { CheckpointTimeoutError } from '../../shared/projection/checkpoints.js';
import { ProjectionSetAsideError } from '../../shared/projection/set-aside.js';

const raw = (code: string) => Object.assign(new Error(code), { code });

/**
 * What the edge asks a failure (errors.ts): the error plugin answers a transient one with 503 and
 * Retry-After, the Kafka consumer tries its batch again; everything else is a 500 and fails.
 */
describe('transient failures', () => {
  it('a dependency unreachable or late, or a command that lost its race too often, is transient', () => {
    expect(isTransient(new EventStoreUnavailableError('event store unreachable', { cause: raw('ECONNREFUSED') }))).toBe(true);
    expect(isTransient(new CheckpointTimeoutError({ commit: 1n, prepare: 1n }, ['assets']))).toBe(true);
    expect(isTransient(new CommandContentionError(25))).toBe(true);
  });

  it('a lost or refused database connection is transient (recognized by db/pool.ts)', () => {
    for (const error of [raw('ECONNREFUSED'), raw('ECONNRESET'), raw('08006'), raw('57P01'), raw('53300'), new Error('Connection terminated unexpectedly')]) {
      expect(isConnectionError(error), error.message).toBe(true);
      expect(isTransient(error), error.message).toBe(true);
    }
  });

  it('whatever else a statement or the code meets is not: a serialization failure or a refused statement answers 500 as before', () => {
    for (const error of [raw('40001'), raw('40P01'), raw('23505'), new TypeError('x is undefined'), new ApiError('service_unavailable', 'shutting down')]) {
      expect(isTransient(error), error.message).toBe(false);
    }
    expect(isTransient(undefined)).toBe(false);
    expect(isTransient('text')).toBe(false);
  });

  it("a command's event set aside by a projection is not transient, and names its own log line", () => {
    const error = new ProjectionSetAsideError('assets', 'asset-1-1', { commit: 1n, prepare: 1n });
    expect(isTransient(error)).toBe(false);
    expect((error as FailureTraits).logMessage).toBe("the command's event was set aside by a projection");
  });

  it('the traits live on the prototype, so a logged or serialized error shows the fields it always had', () => {
    expect(Object.keys(new CommandContentionError(25))).not.toContain('transient');
    expect(Object.keys(new ProjectionSetAsideError('assets', 'asset-1-1', { commit: 1n, prepare: 1n }))).not.toContain('logMessage');
  });
});
