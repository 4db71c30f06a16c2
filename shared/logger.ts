import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string, name = 'tracking'): Logger {
  return pino({ level, name, base: { pid: process.pid } });
}
