import type { Position } from '../../shared/event-store/port.js';
import type { ServiceContext } from '../../shared/context.js';
import type { Output } from './output.js';

export class CliUsageError extends Error {}

export interface CliContext extends ServiceContext {
  out: Output;
  /**
   * Makes the read model reflect everything up to `position`: projections nobody else runs are
   * run here; those a running server holds are waited for.
   */
  project(position: Position): Promise<void>;
}

export interface CliCommand {
  /** Words that select it, e.g. ['keys', 'mint']. */
  path: string[];
  usage: string;
  /** Option names it takes (all `--name value`, except flags listed in `flags`). */
  options?: string[];
  flags?: string[];
  /** Whether it takes positional arguments (e.g. `keys revoke <key-id>`). */
  positionals?: { min: number; max: number };
  run(ctx: CliContext, options: Record<string, string | boolean | undefined>, positionals: string[]): Promise<void>;
}

export function requireOption(options: Record<string, string | boolean | undefined>, name: string): string {
  const value = options[name];
  if (typeof value !== 'string' || value === '') throw new CliUsageError(`--${name} is required`);
  return value;
}
