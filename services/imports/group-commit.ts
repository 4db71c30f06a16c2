import { WrongExpectedRevisionError, type AppendResult, type EventData, type EventStore, type StreamAppend } from '../../shared/event-store/port.js';

/**
 * Group commit for an import's rows (docs/design.md, "Imports"): the appends of the rows in flight
 * (each row's own command, its own decision and expected revisions) that arrive while the previous
 * append is being written go to the store together, in one atomic append, so a file of many rows
 * does not pay one transaction each. When that combined append fails on an expected revision,
 * each row's append is tried on its own, so a row that lost a race is retried by its command, as
 * alone, and the others are not held back. Rows that name the same stream never meet in one
 * append (the import runs them one after the other).
 */
export function groupCommitStore(store: EventStore, maxRows = 256): EventStore {
  interface Waiting {
    appends: StreamAppend[];
    resolve(result: AppendResult): void;
    reject(error: unknown): void;
  }
  let queue: Waiting[] = [];
  let writing = false;

  async function writeAlone(item: Waiting): Promise<void> {
    try {
      item.resolve(await store.appendToStreams(item.appends));
    } catch (error) {
      item.reject(error);
    }
  }

  async function drain(): Promise<void> {
    writing = true;
    try {
      while (queue.length > 0) {
        const batch = queue.slice(0, maxRows);
        queue = queue.slice(batch.length);
        const streams = new Set<string>();
        const distinct = batch.every((item) => item.appends.every((a) => !streams.has(a.streamId) && streams.add(a.streamId)));
        if (batch.length === 1 || !distinct) {
          await Promise.all(batch.map(writeAlone));
          continue;
        }
        try {
          const result = await store.appendToStreams(batch.flatMap((item) => item.appends));
          for (const item of batch) {
            const revisions = new Map([...result.revisions].filter(([streamId]) => item.appends.some((a) => a.streamId === streamId)));
            item.resolve({ revisions, position: result.position });
          }
        } catch (error) {
          if (!(error instanceof WrongExpectedRevisionError)) {
            for (const item of batch) item.reject(error);
            continue;
          }
          await Promise.all(batch.map(writeAlone));
        }
      }
    } finally {
      writing = false;
    }
  }

  function appendToStreams(appends: StreamAppend[]): Promise<AppendResult> {
    return new Promise((resolve, reject) => {
      queue.push({ appends, resolve, reject });
      if (!writing) void drain();
    });
  }

  return Object.assign(Object.create(store) as EventStore, {
    appendToStreams,
    appendToStream: (streamId: string, events: EventData[], expectedRevision: StreamAppend['expectedRevision'] = 'any') => appendToStreams([{ streamId, events, expectedRevision }]),
  });
}
