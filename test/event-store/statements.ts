import type pg from 'pg';

/** A store's statements, counted by kind as they are sent (the pool and the database are real). */
export interface Statements {
  reads: number;
  /** When each read was sent (ms since the epoch). */
  readTimes: number[];
  appends: number;
  notifies: number;
}

export function countStatements(pool: pg.Pool): Statements {
  const counts: Statements = { reads: 0, readTimes: [], appends: 0, notifies: 0 };
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  pool.query = ((...args: unknown[]) => {
    const config = args[0] as { text?: string; rowMode?: string } | string;
    if (typeof config === 'object') {
      if (config.rowMode === 'array') {
        counts.reads++;
        counts.readTimes.push(Date.now());
      } else if (config.text?.includes('append_events(')) counts.appends++;
      else if (config.text?.includes('pg_notify(')) counts.notifies++;
    }
    return query(...args);
  }) as typeof pool.query;
  return counts;
}
