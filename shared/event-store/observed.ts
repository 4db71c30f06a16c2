import { WrongExpectedRevisionError, type EventStore } from './port.js';

/** How an append ended: written (or found already written), refused on its expected revision, or failed. */
export type AppendOutcome = 'ok' | 'wrong_expected_revision' | 'error';

export interface AppendObserver {
  appended(seconds: number, outcome: AppendOutcome): void;
}

/**
 * The same event store, timing every append (`appendToStream`, `appendToStreams`) for `observer`.
 * A decorator, so that neither the port nor an adapter knows about metrics: the service wraps its
 * store once at start (`services/service.ts`); everything else passes through untouched.
 */
export function observeAppends(store: EventStore, observer: AppendObserver): EventStore {
  const timed = async <T>(append: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    let outcome: AppendOutcome = 'error';
    try {
      const result = await append();
      outcome = 'ok';
      return result;
    } catch (error) {
      if (error instanceof WrongExpectedRevisionError) outcome = 'wrong_expected_revision';
      throw error;
    } finally {
      observer.appended((performance.now() - started) / 1000, outcome);
    }
  };
  return {
    get name() {
      return store.name;
    },
    appendToStream: (streamId, events, expectedRevision) => timed(() => store.appendToStream(streamId, events, expectedRevision)),
    appendToStreams: (appends) => timed(() => store.appendToStreams(appends)),
    readStream: (streamId, options) => store.readStream(streamId, options),
    readStreams: (streamIds) => store.readStreams(streamIds),
    readAll: (options) => store.readAll(options),
    subscribeToAll: (options) => store.subscribeToAll(options),
    headPosition: () => store.headPosition(),
    endOfAppend: (position) => store.endOfAppend(position),
    lagAfter: (after, options) => store.lagAfter(after, options),
    close: () => store.close(),
  };
}
