import { pino, type Logger } from 'pino';

export type { Logger };

/** JSON lines on stdout, or on stderr (`fd: 2`) for a process whose stdout is its output (the CLI). */
export function createLogger(level: string, name = 'tracking', fd: 1 | 2 = 1): Logger {
  const options = { level, name, base: { pid: process.pid } };
  return fd === 2 ? pino(options, pino.destination(2)) : pino(options);
}
