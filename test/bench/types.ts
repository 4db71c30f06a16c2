import type pg from 'pg';

export interface BenchContext {
  /** Connection string of this module's own database (fresh, migrated). */
  url: string;
  pool: pg.Pool;
  /** Progress messages (stderr). */
  log(message: string): void;
}

/** One line of the table: `events` things (events, requests…) done in `seconds`. */
export interface BenchRow {
  bench: string;
  case: string;
  events: number;
  seconds: number;
  /** The same work done the plain way (raw SQL through `pg`), measured in the same run. */
  baseline?: { label: string; events: number; seconds: number };
  target?: { label: string; met: boolean };
  /**
   * A measured quantity that is not a rate (bytes per read, say), shown instead of the rate:
   * `events` is then what it was measured over, and `seconds` is not shown.
   */
  quantity?: string;
}

export interface BenchModule {
  run(ctx: BenchContext): Promise<BenchRow[]>;
}
