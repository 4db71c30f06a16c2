import pg from 'pg';
import { vi } from 'vitest';

/** A statement a pg client of this process sent: its text, its parameters, and its result as the caller gets it. */
export interface SentStatement {
  text: string;
  values: unknown[] | undefined;
  result: Promise<pg.QueryResult>;
}

/**
 * Runs `during` with every statement that any pg client of this process sends passed to `seen`
 * (a string or a query config, the parameters either way), the statements themselves running
 * unchanged. For tests that check what a projection sends or reads, against a real database.
 */
export async function watchStatements<T>(seen: (statement: SentStatement) => void, during: () => Promise<T>): Promise<T> {
  const query = pg.Client.prototype.query;
  const spy = vi.spyOn(pg.Client.prototype, 'query').mockImplementation(function (this: pg.Client, ...args: unknown[]) {
    const result = (query as (...a: unknown[]) => unknown).apply(this, args);
    const config = args[0];
    const text = typeof config === 'string' ? config : ((config as { text?: string } | undefined)?.text ?? '');
    const values = (typeof config === 'string' ? args[1] : ((config as { values?: unknown[] } | undefined)?.values ?? args[1])) as unknown[] | undefined;
    if (result instanceof Promise) seen({ text, values, result: result as Promise<pg.QueryResult> });
    return result;
  } as typeof query);
  try {
    return await during();
  } finally {
    spy.mockRestore();
  }
}
