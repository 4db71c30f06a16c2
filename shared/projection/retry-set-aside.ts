import pg from 'pg';
import type { EventStore } from '../event-store/port.js';
import { applyIsolating } from './apply-batch.js';
import type { Projection } from './projection.js';
import { SET_ASIDE_CHANNEL, listSetAside, recordHeld, recordSetAside, setAsidePayload } from './set-aside.js';

/** The projections whose set-aside streams are retried, the log they are read from, and where. */
export interface RetryContext {
  store: EventStore;
  pool: pg.Pool;
  projections: readonly Projection[];
  /** Schema the projections build: `read_model` for the current one. */
  schema: string;
}

/** What `projections retry` did with one set-aside stream. */
export interface RetryOutcome {
  projection: string;
  stream: string;
  outcome: 'recovered' | 'failed again';
  /** Events of the stream applied now (the failed one and those held behind it, or a part). */
  applied: number;
  /** Events still held behind the failed one. */
  held_events: number;
  /** Why it failed again; null when it recovered. */
  error: string | null;
}

/**
 * `projections retry`: applies each set-aside stream again (those of `filter`), the failed event
 * then the held ones, in stream order, read afresh from the log. Each stream in a transaction
 * that first locks its projection's checkpoint row, as a batch does: the followers'
 * batches wait meanwhile, and the next one sees the stream recovered. What fails again is set
 * aside again at that event; what came before it stays applied.
 */
export async function retrySetAside(ctx: RetryContext, filter: { projection?: string; stream?: string } = {}): Promise<RetryOutcome[]> {
  const outcomes: RetryOutcome[] = [];
  for (const row of await listSetAside(ctx.pool, ctx.schema, filter)) {
    const projection = ctx.projections.find((p) => p.name === row.projection);
    if (projection) outcomes.push(await retryStream(ctx, projection, row.stream));
  }
  return outcomes;
}

async function retryStream(ctx: RetryContext, projection: Projection, streamId: string): Promise<RetryOutcome> {
  const client = await ctx.pool.connect();
  const onError = () => undefined; // surfaces as the failure of the query in flight
  client.on('error', onError);
  let broken = false;
  const schema = pg.escapeIdentifier(ctx.schema);
  const key = [projection.name, streamId];
  try {
    await client.query(`BEGIN; SET LOCAL search_path TO ${schema}`);
    await client.query(`SELECT 1 FROM ${schema}.projection_checkpoints WHERE name = $1 FOR UPDATE`, [projection.name]);
    const failedRow = await client.query<{ revision: string }>(
      `SELECT revision::text AS revision FROM ${schema}.projection_set_aside WHERE projection = $1 AND stream_id = $2 FOR UPDATE`,
      key,
    );
    const from = failedRow.rows[0]?.revision;
    if (from === undefined) {
      // Retried meanwhile by someone else.
      await client.query('ROLLBACK');
      return { projection: projection.name, stream: streamId, outcome: 'recovered', applied: 0, held_events: 0, error: null };
    }
    const heldRows = await client.query<{ revision: string }>(
      `SELECT revision::text AS revision FROM ${schema}.projection_held_events WHERE projection = $1 AND stream_id = $2`,
      key,
    );
    const wanted = new Set([from, ...heldRows.rows.map((row) => row.revision)]);
    const events = (await ctx.store.readStream(streamId, { fromRevision: BigInt(from) })).filter((e) => wanted.has(e.revision.toString()));
    const { failed, held } = await applyIsolating(client, projection, events, new Set(), undefined);
    await client.query(`DELETE FROM ${schema}.projection_set_aside WHERE projection = $1 AND stream_id = $2`, key);
    await recordSetAside(client, ctx.schema, projection.name, failed);
    await recordHeld(client, ctx.schema, projection.name, held);
    if (failed.length === 0) await client.query('SELECT pg_notify($1, $2)', [SET_ASIDE_CHANNEL, setAsidePayload(ctx.schema, projection.name, streamId, null)]);
    await client.query('COMMIT');
    const error = failed[0]?.error;
    return {
      projection: projection.name,
      stream: streamId,
      outcome: failed.length === 0 ? 'recovered' : 'failed again',
      applied: events.length - failed.length - held.length,
      held_events: held.length,
      error: error === undefined ? null : error instanceof Error ? error.message : String(error),
    };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {
      broken = true;
    });
    throw error;
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}
