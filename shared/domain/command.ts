import { eventsOf, type EventDefinition, type EventOf } from '../event-store/catalogue.js';
import {
  WrongExpectedRevisionError,
  type AppendResult,
  type ExpectedRevision,
  type StreamAppend,
} from '../event-store/port.js';
import type { ServiceContext } from '../context.js';
import { fold, type Decider } from './decider.js';

/**
 * A stream read afresh: the state its decider folds from the events of `definitions` (the
 * stream's own and those other capabilities keep on it, such as tags), and the revision to append
 * with.
 */
export async function loadStream<State, D extends EventDefinition>(
  ctx: ServiceContext,
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

export class CommandContentionError extends Error {
  constructor(attempts: number) {
    super(`command gave up after ${attempts} concurrent-modification retries`);
    this.name = 'CommandContentionError';
  }
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
  ctx: ServiceContext,
  attempt: (attemptNumber: number) => Promise<Decision<T>>,
  options: { maxAttempts?: number } = {},
): Promise<{ result: T; append: AppendResult | null }> {
  const maxAttempts = options.maxAttempts ?? 25;
  for (let n = 1; ; n++) {
    const decision = await attempt(n);
    if (decision.appends.length === 0 || decision.appends.every((a) => a.events.length === 0)) {
      return { result: decision.result, append: null };
    }
    try {
      const append = await ctx.store.appendToStreams(decision.appends);
      // The append is one transaction and `position` its last event: once every projection that
      // reads any of these event types has passed it, all of the command's changes are visible.
      const types = decision.appends.flatMap((a) => a.events.map((e) => e.type));
      await ctx.checkpoints.waitForCheckpoint(append.position, { projections: ctx.checkpoints.consumersOf(types) });
      return { result: decision.result, append };
    } catch (error) {
      if (!(error instanceof WrongExpectedRevisionError)) throw error;
      if (n >= maxAttempts) throw new CommandContentionError(n);
      // Back off a little, with jitter, so a crowd of writers does not retry in lockstep.
      await new Promise((r) => setTimeout(r, Math.random() * Math.min(2 ** n, 50)));
    }
  }
}

/**
 * Before deciding from the read model, make sure it reflects everything a guard stream has seen:
 * every projection has applied the whole append that wrote the stream's last event (its
 * `endOfAppend`, so whatever the order of that append's streams in the log). Used where a
 * decision reads projected state guarded by that stream (e.g. the location tree), so a retry after
 * a lost race never decides from a stale read model. Returns the revision to append with.
 */
export async function waitForStream(ctx: ServiceContext, streamId: string): Promise<bigint | 'no_stream'> {
  const [last] = await ctx.store.readStream(streamId, { direction: 'backwards', maxCount: 1 });
  if (!last) return 'no_stream';
  await ctx.checkpoints.waitForCheckpoint(await ctx.store.endOfAppend(last.position));
  return last.revision;
}
