import { afterEach, beforeEach, vi } from 'vitest';
import { buildCatalogue } from '../../../shared/domain/catalogue.js';
import type { CommandPort } from '../../../shared/domain/port.js';
import { InMemoryEventStore } from '../../../shared/event-store/in-memory.js';
import { START, comparePositions, type EventData, type ExpectedRevision, type Position } from '../../../shared/event-store/port.js';
import type { AppendedStream } from '../../../shared/projection/checkpoints.js';
import { InMemoryCredentials } from './credentials.js';
import { InMemoryIds } from './ids.js';
import { InMemoryReads } from './read-model-queries.js';
import { inMemoryTokens, type InMemoryTokens } from './tokens.js';

/**
 * The command port in memory, for a command handler's unit test (`commands.unit.test.ts` beside
 * the handlers): no database, no projector. A test file takes a fresh one per test with
 * `useInMemoryPort` (below):
 *
 *   const port = useInMemoryPort(T0);                  // the clock at T0, a new port per test
 *   await port().given('asset-1-7', [created]);        // the events before the command
 *   await renameAsset(port(), 1, 7, 'NEW');            // the command, as a route runs it
 *   expect(await port().appended()).toEqual([...]);    // what it appended, stream by stream
 *
 * The store is the in-memory adapter (it passes the event-store conformance suite) with the
 * service's catalogue, so every event a handler appends is validated as in production. The
 * projections are taken to be caught up: the checkpoint waits resolve at once (and are
 * recorded), and the reads are folded from the log (`read-model-queries.ts`).
 */
export interface InMemoryPort extends CommandPort {
  store: InMemoryEventStore;
  ids: InMemoryIds;
  tokens: InMemoryTokens;
  readModels: InMemoryReads;
  checkpoints: InMemoryCheckpoints;
  credentials: InMemoryCredentials;
  /** Appends `events` to `streamId` (the "given" of a test); what the handler appends is what follows. */
  given(streamId: string, events: ReadonlyArray<{ type: string; data: object }>, expectedRevision?: ExpectedRevision): Promise<void>;
  /** The events appended since the last `given` (or since the start), as `{ streamId, type, data }` in log order. */
  appended(): Promise<Array<{ streamId: string; type: string; data: Record<string, unknown> }>>;
}

/** Read-your-writes with projections that have always caught up: every wait resolves at once. */
export class InMemoryCheckpoints {
  /** The waits asked for, in order: the position and the streams each command appended. */
  readonly waits: Array<{ position: Position; streams: readonly AppendedStream[] }> = [];

  consumersOf(eventTypes: Iterable<string>): string[] {
    return [...eventTypes].length > 0 ? ['in-memory'] : [];
  }

  async waitForCheckpoint(position: Position, options: { streams?: readonly AppendedStream[] } = {}): Promise<void> {
    this.waits.push({ position, streams: options.streams ?? [] });
  }
}

export async function inMemoryPort(options: { environment?: string } = {}): Promise<InMemoryPort> {
  const store = new InMemoryEventStore({ catalogue: buildCatalogue() });
  let mark = START;
  let sessionsOpened = 0;
  return {
    store,
    ids: new InMemoryIds(),
    tokens: await inMemoryTokens(options.environment),
    readModels: new InMemoryReads(store),
    checkpoints: new InMemoryCheckpoints(),
    credentials: new InMemoryCredentials(),
    sessions: {
      // The in-memory port keeps no sessions: an id per session opened.
      openCliSession: async () => `ses_mem_${++sessionsOpened}`,
    },
    async given(streamId, events, expectedRevision = 'any') {
      const result = await store.appendToStream(streamId, events.map((e): EventData => ({ type: e.type, data: { ...e.data } })), expectedRevision);
      if (comparePositions(result.position, mark) > 0) mark = result.position;
    },
    async appended() {
      const events = await store.readAll({ after: mark, maxCount: Number.MAX_SAFE_INTEGER });
      return events.map((e) => ({ streamId: e.streamId, type: e.type, data: e.data }));
    },
  };
}

/**
 * The set-up of every handler test file: before each test, the clock stopped at `at` (only `Date`
 * is faked, so the timers of a retry's back-off still run) and a fresh in-memory port; after it,
 * the real clock back and the spies on the port's members restored. Call it at the top of the
 * file, before the file's own `beforeEach` (which then sees the new port): the answer is a getter
 * for the current test's port.
 */
export function useInMemoryPort(at: string, options: { environment?: string } = {}): () => InMemoryPort {
  let port: InMemoryPort | undefined;
  beforeEach(async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(new Date(at));
    port = await inMemoryPort(options);
  });
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
    port = undefined;
  });
  return () => {
    if (!port) throw new Error('useInMemoryPort: the port exists only while a test runs (inside it, beforeEach or afterEach)');
    return port;
  };
}
