import { useRef, useState } from 'preact/hooks';

/**
 * Opening again a live stream the server refused (docs/console.md "Live view", "Alerts"). The
 * browser reconnects an EventSource that broke by itself, but not one the server refused when it
 * opened (`429` too many streams, `503` busy, `403`): it is closed for good. A page then opens a
 * new one after 2 s, doubling up to 30 s, until one opens; a person may ask at once.
 */

/** The first wait before opening again a stream the server refused; it doubles up to the last. */
export const RETRY_FIRST_MS = 2_000;
export const RETRY_LAST_MS = 30_000;

export interface StreamAttempts {
  /** Changes each time a new stream should be opened: a dependency of the effect that opens it. */
  attempt: number;
  /** The stream opened: the next refusal waits the first wait again. */
  opened(): void;
  /** The server refused the stream: the next attempt after the wait. Gives back what cancels it. */
  refused(): () => void;
  /** A new attempt now (a person asked). */
  now(): void;
}

export function useStreamAttempts(): StreamAttempts {
  const [attempt, setAttempt] = useState(0);
  const nextWait = useRef(RETRY_FIRST_MS);
  return {
    attempt,
    opened: () => {
      nextWait.current = RETRY_FIRST_MS;
    },
    refused: () => {
      const wait = nextWait.current;
      nextWait.current = Math.min(wait * 2, RETRY_LAST_MS);
      const timer = setTimeout(() => setAttempt((n) => n + 1), wait);
      return () => clearTimeout(timer);
    },
    now: () => {
      nextWait.current = RETRY_FIRST_MS;
      setAttempt((n) => n + 1);
    },
  };
}
