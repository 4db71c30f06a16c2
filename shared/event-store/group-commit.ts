import { WrongExpectedRevisionError, type AppendResult, type EventData, type EventStore, type StreamAppend } from './port.js';

/**
 * Group commit: the appends of commands in flight (each its own decision and expected revisions)
 * that arrive while the previous append is being written go to the store together, in one atomic
 * append, so many concurrent writers do not pay one transaction each, and the projections that
 * follow the log take their events in one batch. When that combined append fails on an expected
 * revision, the command whose stream it names is refused (its own append would have been, and
 * its command retries it as alone), and the others go again together, not held back. Appends that
 * name the same stream never meet in one append: one that names a stream of an earlier one waits
 * for the next group. Used by an import's rows (docs/design.md "Imports") and by handheld
 * submissions (docs/design.md "Scans").
 */
export function groupCommitStore(store: EventStore, options: GroupCommitOptions = {}): GroupCommitStore {
  const maxAppends = options.maxAppends ?? 256;
  const lingerMs = options.lingerMs ?? 0;
  interface Waiting {
    appends: StreamAppend[];
    resolve(result: AppendResult): void;
    reject(error: unknown): void;
  }
  let queue: Waiting[] = [];
  let writing = false;
  /** Writers deciding (`deciding`): the next group waits for their appends, up to `lingerMs`. */
  let deciding = 0;
  let decided: (() => void) | null = null;

  /**
   * Until no writer is deciding (each has appended or given up), at most `lingerMs` in all: a
   * writer may stop deciding for a moment and start again (waiting for its turn in between).
   */
  async function awaitDeciding(): Promise<void> {
    const deadline = performance.now() + lingerMs;
    while (deciding > 0 && queue.length < maxAppends) {
      const left = deadline - performance.now();
      if (left <= 0) return;
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        decided = resolve;
        timer = setTimeout(resolve, left);
      });
      clearTimeout(timer);
      decided = null;
      // Their appends are on their way (a few promise turns after the decision): let them land.
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  function startDeciding(): () => void {
    deciding++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      deciding--;
      if ((deciding === 0 || queue.length >= maxAppends) && decided) decided();
    };
  }

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
        await awaitDeciding();
        // The next group: those waiting that name no stream of one taken before them; the others wait for the next.
        const batch: Waiting[] = [];
        const later: Waiting[] = [];
        const streams = new Set<string>();
        for (const item of queue) {
          if (batch.length < maxAppends && item.appends.every((a) => !streams.has(a.streamId))) {
            batch.push(item);
            for (const a of item.appends) streams.add(a.streamId);
          } else later.push(item);
        }
        queue = later;
        if (batch.length === 1) {
          await writeAlone(batch[0]!);
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
          // The stream named is one writer's only (a group's streams are distinct): its append alone
          // would have been refused the same; the others go again, first.
          const loser = batch.find((item) => item.appends.some((a) => a.streamId === error.streamId));
          if (!loser) {
            await Promise.all(batch.map(writeAlone));
            continue;
          }
          loser.reject(error);
          queue = [...batch.filter((item) => item !== loser), ...queue];
        }
      }
    } finally {
      writing = false;
    }
  }

  function appendToStreams(appends: StreamAppend[]): Promise<AppendResult> {
    return new Promise((resolve, reject) => {
      queue.push({ appends, resolve, reject });
      // A full group need not wait for the writers still deciding.
      if (queue.length >= maxAppends) decided?.();
      if (!writing) void drain();
    });
  }

  return Object.assign(Object.create(store) as EventStore, {
    appendToStreams,
    appendToStream: (streamId: string, events: EventData[], expectedRevision: StreamAppend['expectedRevision'] = 'any') => appendToStreams([{ streamId, events, expectedRevision }]),
    deciding: startDeciding,
  });
}

export interface GroupCommitOptions {
  /** The most appends one group takes (256). */
  maxAppends?: number;
  /** How long a group waits for the writers deciding (see `deciding`); 0, the default: it never waits. */
  lingerMs?: number;
}

/** A store whose appends are grouped (see groupCommitStore). */
export interface GroupCommitStore extends EventStore {
  /**
   * A writer starts deciding: until it appends or gives up (the function returned, called once
   * its decision is made, before its append), a group about to be written waits for it, up to
   * `lingerMs`, so that writers in flight together commit together. Only a writer whose decision
   * waits for no append of this store may say so.
   */
  deciding(): () => void;
}
