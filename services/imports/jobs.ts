import type pg from 'pg';
import type { Logger } from 'pino';
import type { CommandPort } from '../../shared/domain/port.js';
import type { CommandOptions } from '../../shared/domain/command.js';
import { runInCommandContext, type CommandActor } from '../../shared/event-store/command-context.js';
import { WrongExpectedRevisionError, comparePositions, type EventData, type EventStore, type Position, type StreamAppend } from '../../shared/event-store/port.js';
import type { AppendedStream } from '../../shared/projection/checkpoints.js';
import { ProjectionSetAsideError } from '../../shared/projection/set-aside.js';
import { FileRefused, readImportFile, type FileFormat } from './file.js';
import { dryRunPort } from './dry-run.js';
import { groupCommitStore } from '../../shared/event-store/group-commit.js';
import { stageBatch, type StagedBatch } from './batch.js';
import { UniqueValueClaimed, reservationStream } from '../../shared/domain/reservations.js';
import { tagReservationValue } from '../../shared/domain/tags/decider.js';
import { assetStream } from '../../shared/domain/assets/events.js';
import { applyAssetRow, applyLocationRow, columnsOf, locationOrder, rowErrorsOf, rowInput, type AppliedRow, type ImportResource, type RowError, type RowInput, type RowOutcome } from './rows.js';

/**
 * Import jobs (docs/api.md, "Import"; docs/design.md, "Imports"): the file is stored with its job
 * row in `service.imports`; a worker of the api role (or the CLI's `import`) claims a queued or
 * running job under a session advisory lock on a connection of its own, so two processes never
 * run one job and a process that dies (kill -9) lets go of it at once. It applies the rows in
 * order, each one command, and records how far it got with the counts in one statement.
 *
 * The events a row appends carry `metadata.import` (the job and the row). A process that dies
 * between a row's append and the progress that counts it applies the row again on resume: the
 * second apply appends nothing (`unchanged`), and the row's events found on its item's stream
 * give the outcome it had, so every count says what happened once.
 */

export const MAX_ERRORS = 1000;
/** Asset rows applied at once (rows naming the same key or tag wait for each other, so order holds). */
const ASSET_CONCURRENCY = 64;
/** Asset rows of a real run decided together and appended in one (batch.ts). */
const BATCH_ROWS = 500;
/**
 * Batches of asset rows whose appends are written at once: one append of 500 rows is a single
 * Postgres backend's work (about 200 ms), two keep both cores of a small machine busy.
 */
const APPENDS_IN_FLIGHT = 2;
/** A batch's rows are decided in memory; the event loop is let go between this many. */
const YIELD_EVERY_ROWS = 25;
/** Progress is written at least this often, and at the end. */
const PROGRESS_EVERY_ROWS = 500;
const PROGRESS_EVERY_MS = 500;
const LOCK_CLASS = 7333;
/** How long the end of a job waits for the projections to show its rows (a backlog of 100,000 rows included). */
const VISIBLE_WITHIN_MS = 10 * 60 * 1000;
const ROW_EVENT_TYPES = ['AssetCreated', 'AssetUpdated', 'LocationCreated', 'LocationUpdated', 'LocationMoved', 'TagAttached', 'UniqueValueClaimed'];

export interface ImportView {
  id: number;
  resource: ImportResource;
  status: 'queued' | 'running' | 'succeeded' | 'failed';
  dry_run: boolean;
  rows: number;
  created: number;
  updated: number;
  unchanged: number;
  rejected: number;
  errors: RowError[];
  created_at: string;
  finished_at: string | null;
}

const VIEW_COLUMNS = `id, resource, status, dry_run, rows, created, updated, unchanged, rejected, errors,
  to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created_at,
  to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS finished_at`;

export interface NewImport {
  orgId: number;
  resource: ImportResource;
  dryRun: boolean;
  format: FileFormat;
  file: Buffer;
  actor: CommandActor;
  requestId: string | null;
}

export async function insertImport(pool: pg.Pool, job: NewImport): Promise<ImportView> {
  const { rows } = await pool.query<ImportView>(
    `INSERT INTO service.imports (org_id, resource, dry_run, format, file, actor, request_id) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${VIEW_COLUMNS}`,
    [job.orgId, job.resource, job.dryRun, job.format, job.file, JSON.stringify(job.actor), job.requestId],
  );
  return rows[0]!;
}

export async function getImport(pool: pg.Pool, orgId: number, id: number): Promise<ImportView | null> {
  const { rows } = await pool.query<ImportView>(`SELECT ${VIEW_COLUMNS} FROM service.imports WHERE org_id = $1 AND id = $2`, [orgId, id]);
  return rows[0] ?? null;
}

/** Newest first, of the resources given. */
export async function listImports(pool: pg.Pool, orgId: number, resources: readonly ImportResource[], limit: number, offset: number): Promise<{ data: ImportView[]; total: number }> {
  const [page, count] = await Promise.all([
    pool.query<ImportView>(`SELECT ${VIEW_COLUMNS} FROM service.imports WHERE org_id = $1 AND resource = ANY($2) ORDER BY id DESC LIMIT $3 OFFSET $4`, [orgId, resources, limit, offset]),
    pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM service.imports WHERE org_id = $1 AND resource = ANY($2)`, [orgId, resources]),
  ]);
  return { data: page.rows, total: count.rows[0]!.n };
}

interface ClaimedJob {
  id: number;
  org_id: number;
  resource: ImportResource;
  dry_run: boolean;
  format: FileFormat;
  file: Buffer;
  actor: CommandActor;
  request_id: string | null;
  status: string;
  done: number;
  created: number;
  updated: number;
  unchanged: number;
  rejected: number;
  errors: RowError[];
}

/** The lock of a job, held on `client` (a connection of the pool kept for the job): null when none is free. */
async function claim(client: pg.PoolClient, only?: number): Promise<ClaimedJob | null> {
  const { rows: pending } = await client.query<{ id: number }>(
    `SELECT id FROM service.imports WHERE status IN ('queued', 'running') ${only === undefined ? '' : 'AND id = $1'} ORDER BY id LIMIT 20`,
    only === undefined ? [] : [only],
  );
  for (const { id } of pending) {
    const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, $2) AS ok', [LOCK_CLASS, id]);
    if (!rows[0]!.ok) continue;
    const job = await client.query<ClaimedJob>(`SELECT * FROM service.imports WHERE id = $1 AND status IN ('queued', 'running')`, [id]);
    if (job.rows[0]) return job.rows[0];
    await client.query('SELECT pg_advisory_unlock($1, $2)', [LOCK_CLASS, id]);
  }
  return null;
}

/**
 * What a run of a job appended: the end of its last append, and every stream it wrote with the
 * types of the events it wrote there (the projections that must show the rows, and the streams a
 * projection may have set aside), by the row that wrote it.
 */
class Appended {
  last: Position | null = null;
  readonly types = new Set<string>(ROW_EVENT_TYPES);
  readonly streams = new Map<string, { row: number; types: Set<string> }>();

  record(row: number, appends: readonly StreamAppend[], position: Position): void {
    if (!this.last || comparePositions(position, this.last) > 0) this.last = position;
    for (const append of appends) {
      if (append.events.length === 0) continue;
      const entry = this.streams.get(append.streamId) ?? { row, types: new Set<string>() };
      entry.row = row;
      for (const event of append.events) {
        entry.types.add(event.type);
        this.types.add(event.type);
      }
      this.streams.set(append.streamId, entry);
    }
  }
}

/** Every event of a row's command carries which job and row it belongs to; what it appends is recorded in `appended`. */
function stampedStore(store: EventStore, importId: number, row: number, appended: Appended | null): EventStore {
  const stamp = (events: EventData[]) => events.map((e) => ({ ...e, metadata: { ...e.metadata, import: { id: importId, row } } }));
  const appendToStreams = async (appends: StreamAppend[]) => {
    const stamped = appends.map((a) => ({ ...a, events: stamp(a.events) }));
    const result = await store.appendToStreams(stamped);
    appended?.record(row, stamped, result.position);
    return result;
  };
  return Object.assign(Object.create(store) as EventStore, {
    appendToStreams,
    appendToStream: (streamId: string, events: EventData[], expected: StreamAppend['expectedRevision'] = 'any') => appendToStreams([{ streamId, events, expectedRevision: expected }]),
  });
}

/** The outcome a row had when its events are already on its item's stream (a resumed job). */
async function earlierOutcome(store: EventStore, streamId: string, importId: number, row: number, appended: Appended): Promise<RowOutcome | null> {
  const events = await store.readStream(streamId);
  const mine = events.filter((e) => {
    const stamp = e.metadata.import as { id?: number; row?: number } | undefined;
    return stamp?.id === importId && stamp.row === row;
  });
  if (mine.length === 0) return null;
  // The job's end waits for these too (an earlier run appended them).
  appended.record(row, [{ streamId, expectedRevision: 'any', events: mine }], mine[mine.length - 1]!.position);
  return mine.some((e) => e.type === 'AssetCreated' || e.type === 'LocationCreated') ? 'created' : 'updated';
}

export interface RunHooks {
  /** Rows done and the total, after each progress write. */
  progress?(done: number, total: number): void;
  signal?: AbortSignal;
  /** How a real (not dry) run makes its appends visible at the end; default: the checkpoint watcher. */
  project?(position: Position, streams: readonly AppendedStream[]): Promise<void>;
  /** Options for each asset row's command (the CLI makes appends visible itself). */
  commandOptions?: CommandOptions;
}

interface Result {
  outcome: RowOutcome | null;
  errors: RowError[];
}

interface Counts {
  created: number;
  updated: number;
  unchanged: number;
  rejected: number;
  errors: RowError[];
}

/**
 * Runs one claimed job to its end (or until `signal`): reads the file, applies the rows after
 * `done`, in order, and writes progress on `client`, the connection that holds the job's lock.
 */
async function runJob(ctx: CommandPort, client: pg.PoolClient, job: ClaimedJob, hooks: RunHooks): Promise<void> {
  let inputs: RowInput[];
  try {
    const file = await readImportFile(job.format, job.file, { signal: hooks.signal });
    const columns = columnsOf(job.resource, file.header);
    inputs = file.rows.map((cells) => rowInput(columns, cells));
  } catch (error) {
    if (hooks.signal?.aborted) return;
    const message = error instanceof FileRefused ? error.message : 'The file could not be read';
    await client.query(`UPDATE service.imports SET status = 'failed', errors = $2, finished_at = now() WHERE id = $1`, [job.id, JSON.stringify([{ row: 0, field: 'file', code: 'invalid_value', message }])]);
    return;
  }
  const total = inputs.length;
  // Locations: parents of the same file first; rows of a cycle are refused.
  const { order, cyclic } = job.resource === 'locations' ? locationOrder(inputs) : { order: inputs.map((_, i) => i), cyclic: new Set<number>() };
  const sequence = [...order, ...[...cyclic].sort((a, b) => a - b)];
  await client.query(`UPDATE service.imports SET status = 'running', rows = $2 WHERE id = $1`, [job.id, total]);

  const resumed = job.done > 0;
  const counts: Counts = { created: job.created, updated: job.updated, unchanged: job.unchanged, rejected: job.rejected, errors: job.errors };
  // A real run's rows commit together while one is being written (group-commit.ts).
  const port: CommandPort = job.dry_run ? dryRunPort(ctx) : { ...ctx, store: groupCommitStore(ctx.store) };
  const commandOptions: CommandOptions = job.dry_run ? { noWait: true } : (hooks.commandOptions ?? { noWait: true });

  const appended = new Appended();

  /**
   * Waits until every row of the job is visible (docs/api.md, "Import": a succeeded job's changes
   * are visible to every following read). The target is the end of the job's last append, not the
   * log's head: `headPosition` stops before the oldest transaction still open anywhere on the
   * server, so it can lie below appends of the job that have committed, and waiting for it
   * would say succeeded too early. The rows re-applied after a restart find their earlier events,
   * whose positions count too (progress is never recorded at the last row before the end, so a
   * resumed job always re-applies at least its last rows). The projections waited for are those
   * that read any type the job appended. A projection that set a row's stream aside will not show
   * it until `tracking projections retry`: that is the job's error (it ends `failed`), not a
   * success; a wait that times out leaves the job `running` and the worker waits again.
   */
  const visible = async (): Promise<RowError | null> => {
    const target = appended.last ? await ctx.store.endOfAppend(appended.last) : await ctx.store.headPosition();
    const byTypes = new Map<string, string[]>();
    const consumers = (types: Set<string>) => {
      const key = [...types].sort().join(' ');
      let names = byTypes.get(key);
      if (!names) byTypes.set(key, (names = ctx.checkpoints.consumersOf(types)));
      return names;
    };
    const streams: AppendedStream[] = [...appended.streams].map(([streamId, { types }]) => ({ streamId, projections: consumers(types) }));
    const projections = ctx.checkpoints.consumersOf(appended.types);
    try {
      await (hooks.project ? hooks.project(target, streams) : ctx.checkpoints.waitForCheckpoint(target, { projections, streams, timeoutMs: VISIBLE_WITHIN_MS }));
      return null;
    } catch (error) {
      if (!(error instanceof ProjectionSetAsideError)) throw error;
      return {
        row: appended.streams.get(error.streamId)?.row ?? 0,
        field: 'row',
        code: 'internal_error',
        message: `the row was applied, but the projection ${error.projection} set its events aside: they show once \`tracking projections retry\` has applied them`,
      };
    }
  };

  /** A row's command, on its own (through the group commit) or in `staged`, a batch written at once. */
  const apply = async (index: number, staged?: StagedBatch): Promise<Result> => {
    const row = index + 1;
    const input = inputs[index]!;
    // A deleted record's row (docs/api.md, "Import"): nothing to apply, whatever its other cells say.
    if (input.deleted && input.externalKey !== null) return { outcome: 'unchanged', errors: [] };
    if (cyclic.has(index)) {
      return { outcome: null, errors: [{ row, field: 'parent_external_key', code: 'conflict', message: `parent_external_key "${input.parentKey}" makes a cycle with other rows of the file` }] };
    }
    let rowPort: CommandPort = job.dry_run ? port : { ...port, store: stampedStore(port.store, job.id, row, appended) };
    if (staged) {
      staged.current = row;
      rowPort = { ...staged.port, store: stampedStore(staged.port.store, job.id, row, null) };
    }
    try {
      const applied: AppliedRow = await runInCommandContext({ actor: job.actor, requestId: job.request_id }, () =>
        job.resource === 'assets' ? applyAssetRow(rowPort, job.org_id, input, staged ? { noWait: true } : commandOptions) : applyLocationRow(rowPort, job.org_id, input),
      );
      if (applied.outcome === 'unchanged' && resumed && !job.dry_run) {
        return { outcome: (await earlierOutcome(ctx.store, applied.streamId, job.id, row, appended)) ?? 'unchanged', errors: [] };
      }
      return { outcome: applied.outcome, errors: [] };
    } catch (error) {
      const errors = rowErrorsOf(row, error, input.externalKey === null ? 'external_key' : 'row');
      if (!errors) throw error;
      return { outcome: null, errors };
    }
  };

  /**
   * Asset rows of a real run, `BATCH_ROWS` at a time (docs/design.md, "Imports"): the reservations
   * of their keys and tag values in one read, then the assets that hold those keys in another, the
   * ids of the new ones drawn at once; each row's command in file order against that (batch.ts).
   * `names`: the reservation streams the rows name (two batches that share none are independent).
   */
  const stageRows = async (positions: readonly number[]): Promise<{ positions: readonly number[]; staged: StagedBatch; results: Result[]; names: Set<string> }> => {
    const org = job.org_id;
    const keyStreams = new Map<string, number>();
    const tagStreams = new Set<string>();
    for (const position of positions) {
      const input = inputs[sequence[position]!]!;
      if (input.externalKey === null || input.errors.length > 0) continue;
      keyStreams.set(reservationStream('asset-key', org, input.externalKey), (keyStreams.get(reservationStream('asset-key', org, input.externalKey)) ?? 0) + (input.tags?.length ?? 0));
      for (const t of input.tags ?? []) tagStreams.add(reservationStream('tag', org, tagReservationValue(t.tag_type, t.value)));
    }
    const first = [...keyStreams.keys(), ...tagStreams];
    const base = await ctx.store.readStreams(first);
    const owners: string[] = [];
    let fresh = 0;
    let tags = 0;
    for (const [streamId, tagCount] of keyStreams) {
      const last = base.get(streamId)?.at(-1);
      if (last?.type === UniqueValueClaimed.type && last.data.owner_type === 'asset') owners.push(assetStream(org, Number(last.data.owner_id)));
      else {
        fresh++;
        tags += tagCount;
      }
    }
    for (const [streamId, events] of await ctx.store.readStreams(owners)) base.set(streamId, events);
    const staged = await stageBatch(ctx, base, new Set([...first, ...owners]), { asset_ids: fresh, tag_ids: tags });
    const results: Result[] = [];
    for (const [i, position] of positions.entries()) {
      // The rows' commands answer from memory (microtasks only): the HTTP listener and the
      // projector of this process get their turn every YIELD_EVERY_ROWS rows.
      if (i > 0 && i % YIELD_EVERY_ROWS === 0) await new Promise((resolve) => setImmediate(resolve));
      results.push(await apply(sequence[position]!, staged));
    }
    return { positions, staged, results, names: new Set(first) };
  };

  /** A staged batch's appends in one; false when another writer changed one of its streams meanwhile. */
  const commitStaged = async (staged: StagedBatch): Promise<boolean> => {
    try {
      const written = await runInCommandContext({ actor: job.actor, requestId: job.request_id }, () => staged.commit());
      if (written) for (const { row, appends } of staged.rows) appended.record(row, appends, written.position);
      return true;
    } catch (error) {
      if (error instanceof WrongExpectedRevisionError) return false;
      throw error;
    }
  };

  /** Rows one command at a time, `concurrency` at once: a row waits for earlier rows that name its key or one of its tag values. */
  const applyConcurrently = async (positions: readonly number[], concurrency: number): Promise<Result[]> => {
    const results = new Map<number, Result>();
    const busy = new Map<string, Promise<unknown>>();
    const inFlight = new Set<Promise<void>>();
    for (const position of positions) {
      if (hooks.signal?.aborted) break;
      const index = sequence[position]!;
      const input = inputs[index]!;
      const keys = [`key:${input.externalKey ?? ''}`, ...(input.tags ?? []).map((t) => `tag:${t.tag_type}:${t.value.toUpperCase()}`)];
      const before = keys.map((k) => busy.get(k)).filter((p): p is Promise<unknown> => p !== undefined);
      const task: Promise<void> = Promise.all(before)
        .then(() => apply(index))
        .then((result) => void results.set(position, result));
      const settled = task.catch(() => undefined);
      for (const k of keys) busy.set(k, settled);
      inFlight.add(task);
      void task.finally(() => inFlight.delete(task)).catch(() => undefined);
      if (inFlight.size >= concurrency) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
    // What is done in order: progress is a prefix of the sequence.
    const prefix: Result[] = [];
    for (const position of positions) {
      const result = results.get(position);
      if (!result) break;
      prefix.push(result);
    }
    return prefix;
  };

  const record = (result: Result) => {
    if (result.outcome) counts[result.outcome]++;
    else counts.rejected++;
    for (const e of result.errors) if (counts.errors.length < MAX_ERRORS) counts.errors.push(e);
  };

  let done = job.done;
  let lastWrite = Date.now();
  const writeProgress = async (final: boolean) => {
    counts.errors.sort((a, b) => a.row - b.row);
    // The rows' appends did not wait for the projections: the job is done once they are visible.
    const hidden = final && !job.dry_run ? await visible() : null;
    if (hidden) counts.errors = [...counts.errors.slice(0, MAX_ERRORS - 1), hidden].sort((a, b) => a.row - b.row);
    await client.query(
      `UPDATE service.imports SET done = $2, created = $3, updated = $4, unchanged = $5, rejected = $6, errors = $7
         ${final ? `, status = $8, finished_at = now()` : ''} WHERE id = $1`,
      [job.id, done, counts.created, counts.updated, counts.unchanged, counts.rejected, JSON.stringify(counts.errors), ...(final ? [hidden ? 'failed' : 'succeeded'] : [])],
    );
    lastWrite = Date.now();
    hooks.progress?.(done, total);
  };

  const batched = job.resource === 'assets' && !job.dry_run;
  const concurrency = job.resource === 'assets' ? ASSET_CONCURRENCY : 1;
  if (batched) {
    /**
     * A pipeline: the next batch is decided while the appends of the last ones (up to
     * APPENDS_IN_FLIGHT) are being written, unless it names a reservation in common with one of
     * them (then it is decided after they are written, on what they wrote). Batches in flight
     * name no stream in common, so their appends do not wait for each other. They are settled in
     * order: the rows of one whose append failed are applied again one by one before a later
     * batch's rows count, so progress stays a prefix of the file; a batch decided on streams that
     * changed meanwhile fails its append whole (it expects the revisions it read) and is applied
     * again one by one too. Once a batch comes back short (the job is being stopped), the later
     * ones are waited for but not counted: a resumed job finds their rows' events (`earlierOutcome`).
     */
    const writing: Array<{ positions: readonly number[]; results: Result[]; names: Set<string>; written: Promise<boolean> }> = [];
    let short = false;
    const settle = async (leave: number): Promise<void> => {
      while (writing.length > leave) {
        const { positions, results, written } = writing.shift()!;
        if (short) {
          await written.catch(() => undefined);
          continue;
        }
        const applied = (await written) ? results : await applyConcurrently(positions, concurrency);
        for (const result of applied) record(result);
        done += applied.length;
        short = applied.length < positions.length;
        // Never all rows before the end: a resumed job re-applies its last rows, whose events tell it where the job's appends end.
        if (done < sequence.length) await writeProgress(false);
      }
    };
    const named = (position: number, names: Set<string>): boolean => {
      const input = inputs[sequence[position]!]!;
      return (input.externalKey !== null && names.has(reservationStream('asset-key', job.org_id, input.externalKey))) || (input.tags ?? []).some((t) => names.has(reservationStream('tag', job.org_id, tagReservationValue(t.tag_type, t.value))));
    };
    let next = done;
    while (next < sequence.length && !hooks.signal?.aborted && !short) {
      const positions = Array.from({ length: Math.min(BATCH_ROWS, sequence.length - next) }, (_, i) => next + i);
      if (writing.some((w) => positions.some((p) => named(p, w.names)))) await settle(0);
      const batch = await stageRows(positions);
      await settle(APPENDS_IN_FLIGHT - 1);
      // A batch stopped short (the job is being stopped): this one is not written.
      if (short || hooks.signal?.aborted) break;
      const written = commitStaged(batch.staged);
      written.catch(() => undefined); // surfaces when settled
      writing.push({ ...batch, written });
      next += positions.length;
    }
    await settle(0);
  } else {
    while (done < sequence.length && !hooks.signal?.aborted) {
      const positions = Array.from({ length: Math.min(PROGRESS_EVERY_ROWS, sequence.length - done) }, (_, i) => done + i);
      const results = await applyConcurrently(positions, concurrency);
      for (const result of results) record(result);
      done += results.length;
      // Never all rows before the end: a resumed job re-applies its last rows, whose events tell it where the job's appends end.
      if (done < sequence.length && (done % PROGRESS_EVERY_ROWS === 0 || Date.now() - lastWrite > PROGRESS_EVERY_MS)) await writeProgress(false);
    }
  }
  const final = done === sequence.length && !hooks.signal?.aborted;
  // Stopped after the last row: the progress stays where it was, so the resumed job re-applies the last rows (see `visible`).
  if (final || done < sequence.length) await writeProgress(final);
}

/** Claims and runs the job `id` in this process, if no other process holds it; false when one does. */
export async function runImportHere(ctx: CommandPort & { pool: pg.Pool }, id: number, hooks: RunHooks = {}): Promise<boolean> {
  const client = await ctx.pool.connect();
  try {
    const job = await claim(client, id);
    if (!job) return false;
    try {
      await runJob(ctx, client, job, hooks);
    } finally {
      await client.query('SELECT pg_advisory_unlock($1, $2)', [LOCK_CLASS, job.id]);
    }
    return true;
  } finally {
    client.release();
  }
}

/**
 * The api role's import worker: claims queued and interrupted jobs one at a time (every
 * `pollMs`, and at once when this process posted one) and runs them until stopped.
 */
export function startImportWorker(ctx: CommandPort & { pool: pg.Pool }, log: Logger, pollMs = 1000): { wake(): void; stop(): Promise<void> } {
  const abort = new AbortController();
  let wakeUp: (() => void) | null = null;
  const sleep = () =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, pollMs);
      wakeUp = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  const loop = (async () => {
    while (!abort.signal.aborted) {
      let ran = false;
      try {
        const client = await ctx.pool.connect();
        try {
          const job = await claim(client);
          if (job) {
            ran = true;
            try {
              await runJob(ctx, client, job, { signal: abort.signal });
            } finally {
              await client.query('SELECT pg_advisory_unlock($1, $2)', [LOCK_CLASS, job.id]);
            }
          }
        } finally {
          client.release();
        }
      } catch (error) {
        if (!abort.signal.aborted) log.warn({ err: error }, 'an import failed to run; it is tried again');
        // Not at once: what failed (the database, a projection's wait) needs a moment.
        ran = false;
      }
      if (!ran && !abort.signal.aborted) await sleep();
    }
  })();
  return {
    wake: () => wakeUp?.(),
    async stop() {
      abort.abort();
      wakeUp?.();
      await loop;
    },
  };
}
