import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../shared/logger.js';

/** A logger whose lines a test reads back, each as its JSON object. */
export function capturedLog(level: 'info' | 'warn' = 'info'): { log: Logger; lines: () => Array<Record<string, unknown>> } {
  const out: string[] = [];
  const log = createLogger(level, 'test', new Writable({ write: (chunk, _enc, done) => void (out.push(String(chunk)), done()) }));
  return { log, lines: () => out.join('').split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>) };
}
