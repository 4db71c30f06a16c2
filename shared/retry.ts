/**
 * Waiting and trying again: the one abortable sleep, and the one loop that runs a piece of work
 * until it succeeds while it is still wanted (the Kafka consumer and the MQTT subscriber record a
 * batch with it, docs/scan-ingestion.md).
 */

/** Waits `ms`, or until `signal` (if any) aborts; never rejects. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** The pause after the n-th failed attempt: 200 ms, doubling, at most 2 s. */
export const retryPauseMs = (attempt: number): number => Math.min(100 * 2 ** attempt, 2_000);

export interface UntilDoneOptions {
  /** Whether a failure passes when tried again; any other is thrown at once. */
  retryable: (error: unknown) => boolean;
  /** Told of each failure that will be tried again (to log it), with its attempt, from 1. */
  onRetry: (error: unknown, attempt: number) => void;
  /** Whether the work is still wanted: asked after a failure, before and after the pause. */
  wanted: () => boolean;
  /** Runs before each pause (a Kafka consumer's heartbeat); its failure is ignored. */
  beforePause?: () => Promise<void>;
}

/** Runs `work` until it succeeds (true), or until it is no longer wanted after a failure (false). */
export async function untilDone(work: () => Promise<void>, options: UntilDoneOptions): Promise<boolean> {
  for (let attempt = 1; ; attempt++) {
    try {
      await work();
      return true;
    } catch (error) {
      if (!options.retryable(error)) throw error;
      options.onRetry(error, attempt);
    }
    if (!options.wanted()) return false;
    await options.beforePause?.().catch(() => undefined);
    await sleep(retryPauseMs(attempt));
    if (!options.wanted()) return false;
  }
}
