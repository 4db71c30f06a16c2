import { CheckpointTimeoutError, type AppendedStream } from '../projection/checkpoints.js';
import { eventsOf, type EventDefinition, type EventOf } from '../event-store/catalogue.js';
import {
  WrongExpectedRevisionError,
  type AppendResult,
  type ExpectedRevision,
  type Position,
  type StreamAppend,
} from '../event-store/port.js';
import { TransientFailure } from '../errors.js';
import { fold, type Decider } from './decider.js';
import type { CommandPort } from './port.js';

/**
 * A stream read afresh: the state its decider folds from the events of `definitions` (the
 * stream's own and those other capabilities keep on it, such as tags), and the revision to append
 * with.
 */
export async function loadStream<State, D extends EventDefinition>(
  ctx: Pick<CommandPort, 'store'>,
  streamId: string,
  decider: Pick<Decider<State, never, EventOf<D>>, 'initialState' | 'evolve'>,
  definitions: readonly D[],
): Promise<{ state: State; expectedRevision: ExpectedRevision }> {
  const recorded = await ctx.store.readStream(streamId);
  const last = recorded[recorded.length - 1];
  return { state: fold(decider, eventsOf(recorded, definitions)), expectedRevision: last ? last.revision : 'no_stream' };
}

/** What a decision produced: the appends to make (atomically) and a value for the caller. */
export interface Decision<T> {
  appends: StreamAppend[];
  result: T;
}

/** Another writer won the race for the streams `maxAttempts` times in a row: transient, the same command may pass later. */
export class CommandContentionError extends TransientFailure {
  constructor(attempts: number) {
    super(`command gave up after ${attempts} concurrent-modification retries`);
    this.name = 'CommandContentionError';
  }
}

/** How a command waits (see executeCommand). */
export interface CommandOptions {
  maxAttempts?: number;
  /**
   * Commands of this process with the same key decide and append one at a time (the wait for
   * the projections is outside): writers that would only make each other retry (scans at one
   * location) queue instead. Other processes still meet as concurrent modifications.
   */
  serializeOn?: string;
  /**
   * How long to wait for the projections before answering anyway (the append is durable):
   * for writes whose answer does not show the read model (a handheld submission's counts), so
   * that a process without a projector (ROLES=ingest) still answers promptly when none runs.
   * Default: wait for them, and fail with CheckpointTimeoutError after its timeout.
   */
  visibleWithinMs?: number;
  /** Makes the append visible instead of waiting for the projectors (the CLI runs them itself when no server does). */
  project?: (position: Position, streams: readonly AppendedStream[]) => Promise<void>;
  /**
   * Answer once the append is durable, without waiting for any projection: for a writer whose
   * caller needs no read of its own write (the reader consumers commit their offsets).
   */
  noWait?: true;
}

/**
 * The write path of every command: load what the decision needs and decide (inside `attempt`),
 * append every stream with its expected revision in one atomic call, retry the whole attempt
 * when another writer got there first, then wait until the projections have applied the append
 * so the answer equals what a following GET returns.
 *
 * `attempt` must read its state afresh each time it is called. A decision with no appends (a
 * no-op) returns at once.
 */
export async function executeCommand<T>(
  ctx: Pick<CommandPort, 'store' | 'checkpoints'>,
  attempt: (attemptNumber: number) => Promise<Decision<T>>,
  options: CommandOptions = {},
): Promise<{ result: T; append: AppendResult | null }> {
  const maxAttempts = options.maxAttempts ?? 25;
  for (let n = 1; ; n++) {
    let decided: { decision: Decision<T>; append: AppendResult | null };
    try {
      decided = await inTurn(options.serializeOn, async () => {
        const decision = await attempt(n);
        if (decision.appends.length === 0 || decision.appends.every((a) => a.events.length === 0)) return { decision, append: null };
        return { decision, append: await ctx.store.appendToStreams(decision.appends) };
      });
    } catch (error) {
      if (!(error instanceof WrongExpectedRevisionError)) throw error;
      if (n >= maxAttempts) throw new CommandContentionError(n);
      // Back off a little, with jitter, so a crowd of writers does not retry in lockstep.
      await new Promise((r) => setTimeout(r, Math.random() * Math.min(2 ** n, 50)));
      continue;
    }
    const { decision, append } = decided;
    if (append && !options.noWait) {
      // The append is one transaction and `position` its last event: once every projection that
      // reads any of these event types has passed it, all of the command's changes are visible.
      const types = decision.appends.flatMap((a) => a.events.map((e) => e.type));
      const projections = ctx.checkpoints.consumersOf(types);
      // A projection that sets one of these streams aside fails the wait at once (500), instead
      // of a timeout (503): the command's events will not become visible until a retry.
      const streams: AppendedStream[] = decision.appends
        .filter((a) => a.events.length > 0)
        .map((a) => ({ streamId: a.streamId, projections: ctx.checkpoints.consumersOf(a.events.map((e) => e.type)) }));
      if (options.project) await options.project(append.position, streams);
      else await waitUntilVisible(ctx, append.position, { projections, streams }, options.visibleWithinMs);
    }
    return { result: decision.result, append };
  }
}

/**
 * Waits until `projections` have applied everything up to `position` (see
 * CheckpointTracker.waitForCheckpoint). With `withinMs`, gives up waiting after that long without
 * failing (what was appended is durable: CommandOptions.visibleWithinMs); without it, fails with
 * CheckpointTimeoutError after the tracker's timeout.
 */
export async function waitUntilVisible(
  ctx: Pick<CommandPort, 'checkpoints'>,
  position: Position,
  options: { projections: readonly string[]; streams?: readonly AppendedStream[] },
  withinMs?: number,
): Promise<void> {
  if (withinMs === undefined) return ctx.checkpoints.waitForCheckpoint(position, options);
  await ctx.checkpoints.waitForCheckpoint(position, { ...options, timeoutMs: withinMs }).catch((error: unknown) => {
    if (!(error instanceof CheckpointTimeoutError)) throw error;
  });
}

/** The tail of each key's queue (see `serializeOn`). */
const queues = new Map<string, Promise<unknown>>();

async function inTurn<R>(key: string | undefined, work: () => Promise<R>): Promise<R> {
  if (key === undefined) return work();
  const previous = queues.get(key) ?? Promise.resolve();
  const mine = previous.catch(() => undefined).then(work);
  queues.set(key, mine);
  try {
    return await mine;
  } finally {
    if (queues.get(key) === mine) queues.delete(key);
  }
}

/**
 * Before deciding from the read model, make sure it reflects everything a guard stream has seen:
 * every projection has applied the whole append that wrote the stream's last event (its
 * `endOfAppend`, so whatever the order of that append's streams in the log). Used where a
 * decision reads projected state guarded by that stream (e.g. the location tree), so a retry after
 * a lost race never decides from a stale read model. Returns the revision to append with.
 */
export async function waitForStream(ctx: Pick<CommandPort, 'store' | 'checkpoints'>, streamId: string): Promise<bigint | 'no_stream'> {
  const [last] = await ctx.store.readStream(streamId, { direction: 'backwards', maxCount: 1 });
  if (!last) return 'no_stream';
  // A stream a projection has set aside will not be reflected until a retry: the wait fails at once.
  const streams = [{ streamId, projections: ctx.checkpoints.consumersOf([last.type]) }];
  await ctx.checkpoints.waitForCheckpoint(await ctx.store.endOfAppend(last.position), { streams });
  return last.revision;
}
