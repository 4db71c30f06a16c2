import type pg from 'pg';
import { ALERT_COLUMNS, alertFrom } from '../../projections/alert-rules/queries.js';
import { alertsProjection } from '../../projections/alerts/projection.js';
import { inTransaction } from '../../shared/db/pool.js';
import type { AlertView } from '../../shared/domain/alerts/schema.js';
import { segmentCount, segmentsOf, type ProjectionSegments } from '../../shared/projection/segments.js';
import { enqueue, type DerivedEvent } from './movements.js';

/**
 * `alert.raised` and `alert.resolved` (docs/design.md "Webhooks", "Alerts and webhooks"): the
 * webhooks role follows the `alerts` projection's outbox (`alert_outbox`, one row per change, keyed
 * by the causing event's log position, the alert and the change) with a cursor of its own
 * (`service.webhook_alert_cursor`), and queues one delivery per (endpoint subscribed, change) in
 * the transaction that moves the cursor. It reads only rows at or before the smallest checkpoint
 * of the `alerts` segments: a segment behind the others has not written its rows of later
 * positions yet, so no change overtakes an earlier one. A rebuild of `alerts` empties the outbox
 * and writes the same rows again; the cursor stays where it was, so nothing is sent twice and
 * nothing is skipped.
 */

/** The checkpoint names of the `alerts` segments as PROJECTION_SEGMENTS says (`alerts`, or `alerts#i/n`). */
export function alertSegmentNames(segments: ProjectionSegments | undefined): string[] {
  return segmentsOf(alertsProjection, segmentCount(alertsProjection, segments)).map((segment) => segment.projection.name);
}

/**
 * The smallest checkpoint of the segments named by `$1`, as `{commit, prepare}`; null while one of
 * them has none. One subquery, so that it and the outbox rows it bounds are read in one statement
 * (one snapshot: a rebuild's swap moves the outbox and the checkpoints together).
 */
const HORIZON = `(SELECT CASE WHEN count(*) = cardinality($1::text[])
                          THEN min(ARRAY[split_part(position, '/', 1)::bigint, split_part(position, '/', 2)::bigint]) END
                    FROM projection_checkpoints WHERE name = ANY ($1::text[]))`;

const KEY = 'a.position_commit, a.position_prepare, a.org_id, a.alert_id, a.change';

interface OutboxRow extends AlertView {
  o_commit: string;
  o_prepare: string;
  o_org: number;
  o_alert: string;
  o_change: 'raised' | 'resolved';
  o_recorded_at: Date;
}

export interface FollowResult {
  /** Outbox rows passed. */
  followed: number;
  /** Deliveries queued. */
  queued: number;
}

/**
 * One step: up to `limit` changes after the cursor and at or before the horizon, queued for the
 * org's active endpoints subscribed to their type and created before the change was recorded, and
 * the cursor moved past them, in one transaction. Processes of the role take turns on the cursor's
 * row lock. Made at the first step, the cursor starts at the horizon then.
 */
export async function followAlertOutbox(pool: pg.Pool, segments: readonly string[], limit = 500): Promise<FollowResult> {
  return inTransaction(pool, async (tx) => {
    await tx.query(
      `INSERT INTO service.webhook_alert_cursor (position_commit, position_prepare, org_id, alert_id, change)
       SELECT coalesce(h[1], 0), coalesce(h[2], 0), 2147483647, '', '' FROM (SELECT ${HORIZON} AS h) x
       ON CONFLICT (singleton) DO NOTHING`,
      [segments],
    );
    const { rows: cursors } = await tx.query<{ c: string; p: string; org_id: number; alert_id: string; change: string }>(
      `SELECT position_commit::text AS c, position_prepare::text AS p, org_id, alert_id, change FROM service.webhook_alert_cursor FOR UPDATE`,
    );
    const cursor = cursors[0]!;
    const { rows } = await tx.query<OutboxRow>(
      `SELECT a.position_commit::text AS o_commit, a.position_prepare::text AS o_prepare, a.org_id AS o_org, a.alert_id AS o_alert, a.change AS o_change,
              a.recorded_at AS o_recorded_at, ${ALERT_COLUMNS}
         FROM ${alertFrom('alert_outbox')}
        WHERE (${KEY}) > ($2::bigint, $3::bigint, $4::int, $5::text, $6::text)
          AND ARRAY[a.position_commit, a.position_prepare] <= ${HORIZON}
        ORDER BY ${KEY}
        LIMIT $7`,
      [segments, cursor.c, cursor.p, cursor.org_id, cursor.alert_id, cursor.change, limit],
    );
    if (rows.length === 0) return { followed: 0, queued: 0 };
    const events: DerivedEvent[] = rows.map(({ o_commit: _c, o_prepare: _p, o_org, o_alert: _a, o_change, o_recorded_at, ...view }) => ({
      orgId: o_org,
      assetId: view.asset_id,
      type: o_change === 'raised' ? 'alert.raised' : 'alert.resolved',
      data: view,
      recordedAt: o_recorded_at,
    }));
    const queued = await enqueue(tx, events);
    const last = rows[rows.length - 1]!;
    await tx.query(
      `UPDATE service.webhook_alert_cursor SET position_commit = $1, position_prepare = $2, org_id = $3, alert_id = $4, change = $5, updated_at = now()`,
      [last.o_commit, last.o_prepare, last.o_org, last.o_alert, last.o_change],
    );
    return { followed: rows.length, queued };
  });
}

/** Deletes the outbox rows at or behind the cursor, `batch` at a time (each its own statement); the number deleted. */
export async function pruneAlertOutbox(pool: pg.Pool, batch = 5000): Promise<number> {
  let deleted = 0;
  for (;;) {
    const result = await pool.query(
      `DELETE FROM alert_outbox WHERE (position_commit, position_prepare, org_id, alert_id, change) IN (
         SELECT ${KEY} FROM alert_outbox a, service.webhook_alert_cursor c
          WHERE (${KEY}) <= (c.position_commit, c.position_prepare, c.org_id, c.alert_id, c.change)
          ORDER BY ${KEY} LIMIT $1)`,
      [batch],
    );
    deleted += result.rowCount ?? 0;
    if ((result.rowCount ?? 0) < batch) return deleted;
  }
}

/**
 * Follows the outbox in a process of the webhooks role: a pass when an `alerts` segment's checkpoint
 * moves (`wake`) and every `pollMs` in any case; each pass steps until nothing is left, and calls
 * `onQueued` when it queued deliveries. Passes do not overlap; a wake during one runs another after.
 */
export class AlertOutboxFollower {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;

  constructor(
    private readonly options: {
      pool: pg.Pool;
      segments: readonly string[];
      onQueued: () => void;
      onError: (error: unknown) => void;
      pollMs?: number;
      limit?: number;
    },
  ) {}

  start(): void {
    this.timer = setInterval(() => this.wake(), this.options.pollMs ?? 1000);
    this.timer.unref();
    this.wake();
  }

  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.pass().finally(() => {
      this.running = null;
      if (this.again) {
        this.again = false;
        this.wake();
      }
    });
  }

  private async pass(): Promise<void> {
    try {
      const limit = this.options.limit ?? 500;
      while (!this.stopped) {
        const { followed, queued } = await followAlertOutbox(this.options.pool, this.options.segments, limit);
        if (queued > 0) this.options.onQueued();
        if (followed < limit) return;
      }
    } catch (error) {
      this.options.onError(error);
    }
  }

  /** Stops, after the step in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }
}
