import { fork, type ChildProcess } from 'node:child_process';
import { setMaxListeners } from 'node:events';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import pg from 'pg';
import { ArchivedLog } from '../archive/archived-log.js';
import { createPool } from '../db/pool.js';
import { START, comparePositions, formatPosition, parsePosition, type EventStore, type RecordedEvent } from '../event-store/port.js';
import { createLogger, type Logger } from '../logger.js';
import { catchUp, type CatchUpContext, type CatchUpOptions, type CatchUpResult } from './catch-up.js';
import type { Projection } from './projection.js';
import { parseSegmentName, segmentsOf } from './segments.js';

/**
 * A catch-up (rebuild, replay) spread over processes: the segments of the split projections dealt
 * to `count` processes by their index, each process reading the log on its own and applying its
 * segments (docs/design.md "Rebuild and replay"). One process reads and decodes the log once for
 * every segment, but does each segment's node work (its reads completed, its rows built and sent)
 * on one core; in processes of their own, that work runs on as many cores as there are processes,
 * and each one decodes only its own segments' reads (the tracking projection). This process is the
 * first of them (it applies the projections that are not split too); the others are forked from
 * the entry module the caller names, which serves them with `serveCatchUpProcess`.
 */

/** Where a catch-up process finds the log and the read models: plain values, sent to the process. */
export interface CatchUpConnection {
  /** The read models' database, as the caller's role (it owns the schema being built). */
  databaseUrl: string;
  /** The log: the Postgres store on `databaseUrl`, or KurrentDB. */
  store: { kind: 'postgres' } | { kind: 'kurrentdb'; url: string };
  /** ARCHIVE_DIR: the scan archive's segments are read with the log. */
  archiveDir?: string;
  logLevel?: string;
}

export interface CatchUpProcesses {
  /** How many processes apply the segments, this one included (`--parallel`). */
  count: number;
  connection: CatchUpConnection;
  /** The module forked for the others: it calls `serveCatchUpProcess`. */
  entry: URL;
}

/**
 * What a catch-up process applies, in values: a replay's instant instead of its functions (the
 * same window as `replayWindow`).
 */
export interface PortableCatchUp {
  /** A replay to an instant (ms since the epoch): see `replayWindow`. */
  untilMs?: number;
  deferred?: boolean;
  signal?: AbortSignal;
  /** The slowest process's progress, after each batch of any. */
  onProgress?: (progress: CatchUpResult) => void;
}

/**
 * How long after T an event recorded by T may still come in the log (replay.ts): an append is one
 * statement, which a statement timeout (60 s in this service's pools) ends long before.
 */
const APPEND_LOOKAHEAD_MS = 5 * 60_000;

/** A replay's window to `untilMs`: the events recorded by then, read until one recorded past the lookahead. */
function replayWindow(untilMs: number): Pick<CatchUpOptions, 'include' | 'stopBefore'> {
  return {
    include: (event: RecordedEvent) => event.recordedAt.getTime() <= untilMs,
    stopBefore: (event: RecordedEvent) => event.recordedAt.getTime() > untilMs + APPEND_LOOKAHEAD_MS,
  };
}

function catchUpOptions(options: PortableCatchUp, signal: AbortSignal | undefined, onProgress: ((progress: CatchUpResult) => void) | undefined): CatchUpOptions {
  return { ...(options.untilMs === undefined ? {} : replayWindow(options.untilMs)), deferred: options.deferred, signal, onProgress };
}

/**
 * The projections of each process: segment i of every split projection to process i mod count,
 * the projections that are not split to this one (the first). Processes left with nothing are not started.
 */
export function processGroups(projections: readonly Projection[], count: number): Projection[][] {
  const groups: Projection[][] = Array.from({ length: Math.max(1, count) }, () => []);
  for (const projection of projections) {
    const segment = parseSegmentName(projection.name);
    groups[segment ? segment.index % groups.length : 0]!.push(projection);
  }
  return groups.filter((group, i) => i === 0 || group.length > 0);
}

/** Messages to a catch-up process, and from it. */
type ToProcess = { type: 'start'; plan: ProcessPlan } | { type: 'stop' };
type FromProcess =
  | { type: 'progress'; events: number; applied: number; position: string }
  | { type: 'done'; events: number; applied: number; position: string }
  | { type: 'failed'; message: string; code?: string };

interface ProcessPlan {
  connection: CatchUpConnection;
  schema: string;
  /** The applied projections' names (a segment's `tracking#1/2`). */
  projections: string[];
  batchSize?: number;
  catchUp: Omit<PortableCatchUp, 'signal' | 'onProgress'>;
}

/** A catch-up process failed; its error as it reported it. */
export class CatchUpProcessError extends Error {
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message);
    this.name = 'CatchUpProcessError';
  }
}

/**
 * `catchUp` over `processes.count` processes (see the module comment): resolves when every one has
 * reached the head (or the replay's end), with the furthest position; the first failure stops the
 * others after their batch in flight and rejects with it. `options.signal` stops them all the same way.
 * Without `processes`, or with one, it is `catchUp` in this process.
 */
export async function catchUpInProcesses(ctx: CatchUpContext, options: PortableCatchUp, processes: CatchUpProcesses | undefined): Promise<CatchUpResult> {
  if (!processes) return catchUp(ctx, catchUpOptions(options, options.signal, options.onProgress));
  const groups = processGroups(ctx.projections, processes.count);
  if (groups.length === 1) return catchUp(ctx, catchUpOptions(options, options.signal, options.onProgress));
  const stop = new AbortController();
  setMaxListeners(0, stop.signal);
  const stopAll = () => stop.abort(options.signal?.reason ?? new Error('a catch-up process failed'));
  options.signal?.addEventListener('abort', stopAll, { once: true });
  const latest: CatchUpResult[] = groups.map(() => ({ events: 0, applied: 0, position: START }));
  const report = (i: number, progress: CatchUpResult) => {
    latest[i] = { ...progress };
    const slowest = latest.reduce((a, b) => (b.events < a.events ? b : a));
    options.onProgress?.({ ...slowest });
  };
  try {
    const runs = [
      catchUp({ ...ctx, projections: groups[0]! }, catchUpOptions(options, stop.signal, (progress) => report(0, progress))),
      ...groups.slice(1).map((group, i) =>
        runProcess(processes, { connection: processes.connection, schema: ctx.schema, projections: group.map((p) => p.name), batchSize: ctx.batchSize, catchUp: { untilMs: options.untilMs, deferred: options.deferred } }, stop.signal, (progress) => report(i + 1, progress)),
      ),
    ].map((run) => run.catch((error: unknown) => {
      stopAll();
      throw error;
    }));
    const outcomes = await Promise.allSettled(runs);
    // The first failure is the cause; the others stopped because of it (or of the signal).
    const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected' && !(stop.signal.aborted && o.reason === stop.signal.reason));
    const rejected = failed ?? outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
    if (rejected) throw rejected.reason;
    const results = outcomes.map((o) => (o as PromiseFulfilledResult<CatchUpResult>).value);
    return results.reduce((a, b) => (comparePositions(b.position, a.position) > 0 ? b : a));
  } finally {
    options.signal?.removeEventListener('abort', stopAll);
  }
}

/** Forks one catch-up process, hands it its plan and follows it to its end. */
function runProcess(processes: CatchUpProcesses, plan: ProcessPlan, signal: AbortSignal, onProgress: (progress: CatchUpResult) => void): Promise<CatchUpResult> {
  return new Promise((resolve, reject) => {
    // Its stdout goes to our stderr: a command's stdout holds its output alone.
    const child: ChildProcess = fork(fileURLToPath(processes.entry), [], { execArgv: tsxLoader(), stdio: ['ignore', 2, 2, 'ipc'], serialization: 'advanced' });
    let outcome: { ok: CatchUpResult } | { error: Error } | null = null;
    const send = (message: ToProcess) => {
      if (child.connected) child.send(message);
    };
    const onAbort = () => send({ type: 'stop' });
    signal.addEventListener('abort', onAbort, { once: true });
    child.on('message', (message: FromProcess) => {
      if (message.type === 'failed') outcome = { error: new CatchUpProcessError(message.message, message.code) };
      else {
        const result = { events: message.events, applied: message.applied, position: parsePosition(message.position) };
        if (message.type === 'done') outcome = { ok: result };
        else onProgress(result);
      }
    });
    child.on('error', (error) => {
      outcome ??= { error };
    });
    child.on('exit', (code, exitSignal) => {
      signal.removeEventListener('abort', onAbort);
      if (outcome && 'ok' in outcome) resolve(outcome.ok);
      // Stopped, it fails with the reason it was stopped for.
      else if (outcome) reject(signal.aborted ? signal.reason : outcome.error);
      else reject(new CatchUpProcessError(`a catch-up process ended without finishing (${exitSignal ? `signal ${exitSignal}` : `exit code ${code}`})`));
    });
    send({ type: 'start', plan });
    if (signal.aborted) onAbort();
  });
}

/** tsx's loader for the forked process (this code is TypeScript, run through tsx), found from here, not from the working folder. */
function tsxLoader(): string[] {
  return ['--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href];
}

/** How a catch-up process opens what the plan names (the entry module knows the projections and the stores). */
export interface CatchUpProcessHost {
  /** The applied projections of these names (segments included). */
  projections(names: readonly string[]): Projection[];
  /** The log of `connection.store`, over `pool` for the Postgres store. */
  openStore(connection: CatchUpConnection, pool: pg.Pool): Promise<EventStore>;
}

/** The applied projections of `names` among `all`: a projection's own name, or a segment's (`tracking#1/2`). */
export function appliedNamed(all: readonly Projection[], names: readonly string[]): Projection[] {
  return names.map((name) => {
    const segment = parseSegmentName(name);
    const base = all.find((p) => p.name === (segment?.base ?? name));
    if (!base) throw new Error(`unknown projection ${name}`);
    return segment ? segmentsOf(base, segment.count)[segment.index]!.projection : base;
  });
}

/**
 * The forked process's side: waits for its plan, applies it as `catchUp` does, reports each
 * batch and its end, and exits. A `stop` ends it after the batch in flight; so does its parent's
 * end (the channel closing).
 */
export function serveCatchUpProcess(host: CatchUpProcessHost): void {
  const stop = new AbortController();
  setMaxListeners(0, stop.signal);
  const report = (message: FromProcess) => new Promise<void>((resolve) => (process.connected ? process.send!(message, undefined, undefined, () => resolve()) : resolve()));
  process.on('message', (message: ToProcess) => {
    if (message.type === 'stop') stop.abort(new Error('stopped'));
    else void run(message.plan);
  });
  process.on('disconnect', () => stop.abort(new Error('the parent process went away')));
  // The parent's signals (Ctrl-C reaches the whole group) stop it through the parent, after its batch.
  process.on('SIGINT', () => undefined);

  async function run(plan: ProcessPlan): Promise<void> {
    const log: Logger = createLogger(plan.connection.logLevel ?? 'info', 'tracking-catch-up', 2);
    const pool = createPool(plan.connection.databaseUrl, { max: plan.projections.length + 2, applicationName: 'tracking-catch-up' });
    let code = 0;
    try {
      const store = await host.openStore(plan.connection, pool);
      try {
        const archived = await ArchivedLog.open({ store, pool, dir: plan.connection.archiveDir });
        try {
          const projections = host.projections(plan.projections);
          const result = await catchUp(
            { store: archived, pool, projections, log, schema: plan.schema, batchSize: plan.batchSize, stopping: stop.signal },
            catchUpOptions(plan.catchUp, stop.signal, (progress) => void report({ type: 'progress', ...portable(progress) })),
          );
          await report({ type: 'done', ...portable(result) });
        } finally {
          await archived.close();
        }
      } finally {
        await store.close();
      }
    } catch (error) {
      code = 1;
      const err = error as { message?: string; code?: unknown };
      await report({ type: 'failed', message: String(err.message ?? error), code: typeof err.code === 'string' ? err.code : undefined });
    } finally {
      await pool.end().catch(() => undefined);
      process.exit(code);
    }
  }
}

function portable(result: CatchUpResult): { events: number; applied: number; position: string } {
  return { events: result.events, applied: result.applied, position: formatPosition(result.position) };
}
