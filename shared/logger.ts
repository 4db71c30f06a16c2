import { pino, type DestinationStream, type Logger } from 'pino';
import { redactSecrets } from './redaction.js';

export type { Logger };

/** Fields that hold credentials wherever they appear in a log object (one level of nesting). */
const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'authorization',
  '*.authorization',
  'token',
  '*.token',
  'password',
  '*.password',
  '*.SIGNING_KEY_ENCRYPTION_KEY',
  '*.NEW_SIGNING_KEY_ENCRYPTION_KEY',
];

/**
 * A pino logger whose every line is passed through `redactSecrets` on its way out: structured
 * fields are censored by path, and the text filter catches secrets quoted anywhere else (an error
 * message with a connection URL, a token in a request path, a configuration dump).
 */
/**
 * `destination`: JSON lines on stdout by default, or on stderr (`2`) for a process whose stdout is
 * its output (the CLI), or any stream (tests capture logs).
 */
export function createLogger(level: string, name = 'tracking', output: 1 | 2 | DestinationStream = 1): Logger {
  const destination = typeof output === 'number' ? pino.destination({ dest: output, sync: output === 2 }) : output;
  const redacting = {
    write: (line: string) => destination.write(redactSecrets(line)),
    // pino's flush() reaches the real destination through this.
    flush(callback?: (error?: Error) => void) {
      const { flush } = destination as { flush?: (cb?: (error?: Error) => void) => void };
      if (flush) flush.call(destination, callback);
      else callback?.();
    },
  };
  return pino({ level, name, base: { pid: process.pid }, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } }, redacting);
}
