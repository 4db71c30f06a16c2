import { describe, expect, it } from 'vitest';
import { timestampOption } from '../../services/cli/options.js';
import { CliUsageError } from '../../services/cli/registry.js';

/** CLI timestamp options follow the time range of every other input path (docs/api.md, "Time range"). */
describe('timestampOption', () => {
  const option = (value: string | undefined) => timestampOption({ args: [], options: value === undefined ? {} : { expiresAt: value } }, 'expiresAt', '--expires-at');
  const usage = (value: string) => {
    try {
      option(value);
    } catch (error) {
      expect(error).toBeInstanceOf(CliUsageError);
      return (error as Error).message;
    }
    throw new Error(`${value} was accepted`);
  };

  it('takes an instant of the range, with its offset, to the millisecond', () => {
    expect(option(undefined)).toBeNull();
    expect(option('2027-01-31T01:00:00.1239+01:00')?.toISOString()).toBe('2027-01-31T00:00:00.123Z');
    expect(option('9999-12-31T23:59:59.999999Z')?.toISOString()).toBe('9999-12-31T23:59:59.999Z');
  });

  it('refuses an instant out of the range with the range message, and an impossible date as a usage error', () => {
    for (const value of ['0000-01-01T00:00:00Z', '9999-12-31T23:59:59-01:00']) {
      expect(usage(value)).toBe('--expires-at must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z');
    }
    for (const value of ['2027-02-29T00:00:00Z', '2027-01-01T24:00:00Z', 'tomorrow', '']) {
      expect(usage(value)).toBe('--expires-at must be an RFC 3339 timestamp, e.g. 2027-01-31T00:00:00Z');
    }
  });
});
