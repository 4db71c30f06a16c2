import type pg from 'pg';

/** A store's statements, counted by kind as they are sent (the pool and the database are real). */
export interface Statements {
  reads: number;
  /** Reads answered (or failed): a read sent and not yet answered may be shared by another subscription. */
  readsDone: number;
  /** When each read was sent (ms since the epoch). */
  readTimes: number[];
  appends: number;
  notifies: number;
}

export function countStatements(pool: pg.Pool): Statements {
  const counts: Statements = { reads: 0, readsDone: 0, readTimes: [], appends: 0, notifies: 0 };
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  pool.query = ((...args: unknown[]) => {
    const config = args[0] as { text?: string; rowMode?: string } | string;
    const read = typeof config === 'object' && config.rowMode === 'array';
    if (read) {
      counts.reads++;
      counts.readTimes.push(Date.now());
    } else if (typeof config === 'object') {
      if (config.text?.includes('append_events(')) counts.appends++;
      else if (config.text?.includes('pg_notify(')) counts.notifies++;
    }
    const result = query(...args);
    if (read) {
      const done = () => {
        counts.readsDone++;
      };
      void (result as Promise<unknown>).then(done, done);
    }
    return result;
  }) as typeof pool.query;
  return counts;
}
