import {
  WrongExpectedRevisionError,
  type AppendResult,
  type StreamAppend,
} from '../../../shared/event-store/port.js';
import { projectionsConsuming } from '../../../projections/index.js';
import type { ServiceContext } from '../../context.js';

/** What a decision produced: the appends to make (atomically) and a value for the caller. */
export interface Decision<T> {
  appends: StreamAppend[];
  result: T;
}

/**
 * Runs the commands queued under one key one at a time, in arrival order; other keys run
 * concurrently. One queue per event store (so per database).
 */
class OneAtATime {
  private readonly tails = new Map<string, Promise<void>>();

  run<T>(key: string, command: () => Promise<T>): Promise<T> {
    const result = (this.tails.get(key) ?? Promise.resolve()).then(command);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }
}

const queuesByStore = new WeakMap<object, OneAtATime>();

function queueOf(ctx: ServiceContext): OneAtATime {
  let queue = queuesByStore.get(ctx.store);
  if (!queue) queuesByStore.set(ctx.store, (queue = new OneAtATime()));
  return queue;
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
  options: {
    maxAttempts?: number;
    /**
     * A stream every such command appends to with its expected revision (a per-org lock stream):
     * in this process they then run one at a time, in arrival order. Of several concurrent ones
     * only one could win the revision; the others would fail their append, back off and decide
     * again, over and over under load. Queued, each decides once, after its predecessor has been
     * appended and projected; the expected revision still guards against other processes.
     */
    oneAtATimeOn?: string;
  } = {},
): Promise<{ result: T; append: AppendResult | null }> {
  const { oneAtATimeOn, ...rest } = options;
  if (oneAtATimeOn !== undefined) return queueOf(ctx).run(oneAtATimeOn, () => executeCommand(ctx, attempt, rest));
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
      await ctx.checkpoints.waitForCheckpoint(append.position, { projections: projectionsConsuming(types) });
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
 * Before deciding from the read model, make sure it reflects everything a stream has seen
 * (every projection, up to the stream's last event). Events of one append are ordered by stream
 * id, so state written in the same append as the guard stream's last event is covered when its
 * streams sort before the guard stream (`location-<org>-<id>` before `location-tree-<org>`):
 * used where a decision reads projected state guarded by that stream (e.g. the location tree),
 * so a retry after a lost race never decides from a stale read model.
 */
export async function waitForStream(ctx: ServiceContext, streamId: string): Promise<bigint | 'no_stream'> {
  const [last] = await ctx.store.readStream(streamId, { direction: 'backwards', maxCount: 1 });
  if (!last) return 'no_stream';
  await ctx.checkpoints.waitForCheckpoint(last.position);
  return last.revision;
}
