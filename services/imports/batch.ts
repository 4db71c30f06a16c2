import type { CommandPort, IdSequence } from '../../shared/domain/port.js';
import { recordedInMemory } from './dry-run.js';
import {
  WrongExpectedRevisionError,
  type AppendResult,
  type EventData,
  type EventStore,
  type Position,
  type ReadStreamOptions,
  type RecordedEvent,
  type StreamAppend,
} from '../../shared/event-store/port.js';

/**
 * A batch of an import's rows (docs/design.md, "Imports"): each row is still its own command
 * (the same handler, decider, events and refusals as the API's), run one after the other in the
 * file's order against a port that answers the streams the batch reads from one read of them all
 * (`EventStore.readStreams`), hands out ids drawn together, and keeps each row's append in memory
 * (checked against the streams as the rows before it left them), so a row sees the rows before
 * it. `commit` then writes every row's append in one atomic append through the real store, each
 * stream expecting the revision the batch first read: another writer in between fails it whole
 * (`WrongExpectedRevisionError`), and the caller applies those rows again one by one.
 */
export interface StagedBatch {
  /** The port each row's command runs against. */
  port: CommandPort;
  /** What each row appended, in order (its events as staged). */
  readonly rows: Array<{ row: number; appends: StreamAppend[] }>;
  /** The row whose command is running: its appends are recorded under it. */
  current: number;
  /** Writes the batch's appends in one append; null when no row appended. */
  commit(): Promise<AppendResult | null>;
}

/** `base`: the streams read for the batch (`EventStore.readStreams`) of `loaded`; `ids`: how many of each to draw at once. */
export async function stageBatch(real: CommandPort, base: Map<string, RecordedEvent[]>, loaded: Set<string>, ids: Partial<Record<IdSequence, number>>): Promise<StagedBatch> {
  /** Events staged per stream, after those read. */
  const pending = new Map<string, RecordedEvent[]>();
  /** Per stream, the revision the batch's write expects: its last as read. */
  const expected = new Map<string, StreamAppend['expectedRevision']>();
  const pool = new Map<IdSequence, number[]>();
  await Promise.all(
    (Object.entries(ids) as Array<[IdSequence, number]>).map(async ([sequence, count]) => {
      if (count > 0) pool.set(sequence, await real.ids.nextIds(sequence, count));
    }),
  );
  let commit = 1n << 62n;

  async function read(streamId: string): Promise<RecordedEvent[]> {
    if (!loaded.has(streamId)) {
      loaded.add(streamId);
      const events = await real.store.readStream(streamId);
      if (events.length > 0) base.set(streamId, events);
    }
    return [...(base.get(streamId) ?? []), ...(pending.get(streamId) ?? [])];
  }

  async function readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    const all = await read(streamId);
    const from = options.fromRevision;
    let events = from === undefined ? all : all.filter((e) => (options.direction === 'backwards' ? e.revision <= from : e.revision >= from));
    if (options.direction === 'backwards') events = [...events].reverse();
    return options.maxCount === undefined ? events : events.slice(0, options.maxCount);
  }

  const batch: StagedBatch = {
    port: real,
    rows: [],
    current: 0,
    async commit() {
      if (pending.size === 0) return null;
      const merged = new Map<string, StreamAppend>();
      for (const { appends } of batch.rows) {
        for (const append of appends) {
          const into = merged.get(append.streamId) ?? { streamId: append.streamId, expectedRevision: expected.get(append.streamId)!, events: [] };
          into.events.push(...append.events);
          merged.set(append.streamId, into);
        }
      }
      return real.store.appendToStreams([...merged.values()]);
    },
  };

  async function appendToStreams(appends: StreamAppend[]): Promise<AppendResult> {
    const position: Position = { commit: ++commit, prepare: 0n };
    const revisions = new Map<string, bigint>();
    const staged: Array<[string, RecordedEvent[], StreamAppend['expectedRevision']]> = [];
    for (const append of appends) {
      const want = append.expectedRevision;
      // A stream the batch did not read that must not exist (a new item's, whose id was just
      // drawn) is taken as empty without a read: the batch's write expects it not to exist either,
      // so if it did, the whole write fails and the rows are applied one by one.
      if (want === 'no_stream') loaded.add(append.streamId);
      const all = await read(append.streamId);
      const last = all[all.length - 1];
      const actual = last ? last.revision : 'no_stream';
      const holds = want === 'any' || (want === 'no_stream' ? actual === 'no_stream' : want === 'stream_exists' ? actual !== 'no_stream' : actual === want);
      if (!holds) throw new WrongExpectedRevisionError(append.streamId, want, actual);
      // What the real write expects: the stream as the batch read it.
      const writeExpects = base.get(append.streamId)?.at(-1)?.revision ?? ('no_stream' as const);
      const recorded = recordedInMemory(append, actual, position);
      revisions.set(append.streamId, recorded.at(-1)?.revision ?? (actual === 'no_stream' ? -1n : actual));
      staged.push([append.streamId, recorded, writeExpects]);
    }
    for (const [streamId, recorded, writeExpects] of staged) {
      if (!expected.has(streamId)) expected.set(streamId, writeExpects);
      pending.set(streamId, [...(pending.get(streamId) ?? []), ...recorded]);
    }
    // The events as given (with the ids chosen here): the real write repeats them.
    batch.rows.push({
      row: batch.current,
      appends: staged.map(([streamId, recorded]) => ({
        streamId,
        expectedRevision: 'any' as const,
        events: recorded.map((e) => ({ id: e.id, type: e.type, data: e.data, metadata: e.metadata })),
      })),
    });
    return { revisions, position };
  }

  const store: EventStore = Object.assign(Object.create(real.store) as EventStore, {
    readStream,
    appendToStreams,
    appendToStream: (streamId: string, events: EventData[], expectedRevision: StreamAppend['expectedRevision'] = 'any') => appendToStreams([{ streamId, events, expectedRevision }]),
  });
  const take = (sequence: IdSequence, count: number): number[] | null => {
    const left = pool.get(sequence);
    if (!left || left.length < count) return null;
    return left.splice(0, count);
  };
  batch.port = {
    ...real,
    store,
    ids: Object.assign(Object.create(real.ids) as CommandPort['ids'], {
      nextId: async (sequence: IdSequence) => take(sequence, 1)?.[0] ?? real.ids.nextId(sequence),
      nextIds: async (sequence: IdSequence, count: number) => take(sequence, count) ?? real.ids.nextIds(sequence, count),
    }),
  };
  return batch;
}
