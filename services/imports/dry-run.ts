import type { CommandPort } from '../../shared/domain/port.js';
import type { TreeNode } from '../../shared/domain/locations/parent.js';
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
import { LocationCreated } from '../../shared/domain/locations/events.js';

/**
 * An append's events as the store would record them after revision `actual`, kept in memory (a
 * dry run's and a batch's own appends, which later rows of the file read).
 */
export function recordedInMemory(append: StreamAppend, actual: bigint | 'no_stream', position: Position): RecordedEvent[] {
  let revision = actual === 'no_stream' ? -1n : actual;
  return append.events.map((event: EventData) => ({
    id: event.id ?? crypto.randomUUID(),
    type: event.type,
    data: event.data,
    metadata: event.metadata ?? {},
    streamId: append.streamId,
    revision: ++revision,
    position,
    recordedAt: new Date(),
  }));
}

/**
 * A dry run (docs/api.md, "Import"): every row runs the same command as a real import, against a
 * port whose event store reads the real log and keeps its own appends in memory, so each row sees
 * the rows before it and nothing is written. Nothing waits for a projection (nothing is
 * projected); a parent created earlier in the same file is found by its key here.
 */
export function dryRunPort(real: CommandPort): CommandPort {
  const pending = new Map<string, RecordedEvent[]>();
  const created = new Map<string, TreeNode>();
  let commit = 1n << 62n;

  async function readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    const all = [...(await real.store.readStream(streamId)), ...(pending.get(streamId) ?? [])];
    const from = options.fromRevision;
    let events = from === undefined ? all : all.filter((e) => (options.direction === 'backwards' ? e.revision <= from : e.revision >= from));
    if (options.direction === 'backwards') events = [...events].reverse();
    return options.maxCount === undefined ? events : events.slice(0, options.maxCount);
  }

  async function appendToStreams(appends: StreamAppend[]): Promise<AppendResult> {
    const position: Position = { commit: ++commit, prepare: 0n };
    const revisions = new Map<string, bigint>();
    const staged: Array<[string, RecordedEvent[]]> = [];
    for (const append of appends) {
      const [last] = await readStream(append.streamId, { direction: 'backwards', maxCount: 1 });
      const actual = last ? last.revision : 'no_stream';
      const expected = append.expectedRevision;
      const holds = expected === 'any' || (expected === 'no_stream' ? actual === 'no_stream' : expected === 'stream_exists' ? actual !== 'no_stream' : actual === expected);
      if (!holds) throw new WrongExpectedRevisionError(append.streamId, expected, actual);
      const recorded = recordedInMemory(append, actual, position);
      revisions.set(append.streamId, recorded.at(-1)?.revision ?? (actual === 'no_stream' ? -1n : actual));
      staged.push([append.streamId, recorded]);
    }
    for (const [streamId, recorded] of staged) {
      pending.set(streamId, [...(pending.get(streamId) ?? []), ...recorded]);
      for (const event of recorded) {
        if (event.type !== LocationCreated.type) continue;
        const data = event.data as { location_id: number; external_key: string; parent_id: number | null };
        const parent = [...created.values()].find((n) => n.id === data.parent_id);
        created.set(data.external_key, { id: data.location_id, ancestors: parent ? [...parent.ancestors, parent.id] : [] });
      }
    }
    return { revisions, position };
  }

  const store: EventStore = Object.assign(Object.create(real.store) as EventStore, {
    readStream,
    appendToStreams,
    appendToStream: (streamId: string, events: EventData[], expectedRevision: StreamAppend['expectedRevision'] = 'any') => appendToStreams([{ streamId, events, expectedRevision }]),
    // The dry run's own positions are past every real one; nothing waits on them.
    endOfAppend: async (position: Position) => position,
  });
  return {
    ...real,
    store,
    checkpoints: { waitForCheckpoint: async () => undefined, consumersOf: (types) => real.checkpoints.consumersOf(types) },
    readModels: Object.assign(Object.create(real.readModels) as CommandPort['readModels'], {
      findExistingLocation: async (orgId: number, by: { id: number } | { externalKey: string }) => {
        if ('externalKey' in by && created.has(by.externalKey)) return created.get(by.externalKey)!;
        if ('id' in by) {
          const node = [...created.values()].find((n) => n.id === by.id);
          if (node) return node;
        }
        return real.readModels.findExistingLocation(orgId, by);
      },
    }),
  };
}
