import { setMaxListeners } from 'node:events';

/**
 * An abort signal for a long command: the first SIGINT or SIGTERM asks it to stop cleanly (it
 * finishes the step in flight and cleans up); a second one exits at once.
 */
export function abortOnSignals(): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  // A command passes it to every projection it runs, each waiting on it: no listener limit.
  setMaxListeners(0, controller.signal);
  const onSignal = (name: NodeJS.Signals) => {
    if (controller.signal.aborted) process.exit(130);
    controller.abort(new Error(`interrupted by ${name}`));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    signal: controller.signal,
    dispose() {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}
