import { isFieldError, parseId } from '../../shared/http/validation.js';
import { instantDate, parseInstant, timeRangeMessage } from '../../shared/time.js';
import { CliUsageError, type CommandInput } from './registry.js';

// Option values checked before the command opens the database: a mistyped value is a usage error
// (exit code 2) that needs no database to report.

/** The value of a required option (commander has checked it is present). */
export function stringOption(input: CommandInput, key: string, flag = `--${key}`): string {
  const value = input.options[key];
  if (typeof value !== 'string' || value === '') throw new CliUsageError(`${flag} is required`);
  return value;
}

/** An organization id (`--org`), 1..2147483647. */
export function orgIdOption(input: CommandInput, key = 'org'): number {
  const parsed = parseId(`--${key}`, stringOption(input, key));
  if (isFieldError(parsed)) throw new CliUsageError(parsed.message);
  return parsed;
}

/** An RFC 3339 timestamp option of the time range (docs/api.md, "Time range"), or null when absent. */
export function timestampOption(input: CommandInput, key: string, flag: string, example = '2027-01-31T00:00:00Z'): Date | null {
  const raw = input.options[key];
  if (raw === undefined) return null;
  const instant = parseInstant(typeof raw === 'string' ? raw : '');
  if (instant.ok) return instantDate(instant);
  if (instant.problem === 'range') throw new CliUsageError(timeRangeMessage(flag));
  throw new CliUsageError(`${flag} must be an RFC 3339 timestamp, e.g. ${example}`);
}

/** A whole number option, or undefined when absent. */
export function wholeNumberOption(input: CommandInput, key: string, flag: string, unit: string): number | undefined {
  const raw = input.options[key];
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || !/^\d+$/.test(raw)) throw new CliUsageError(`${flag} must be a whole number of ${unit}`);
  return Number(raw);
}
