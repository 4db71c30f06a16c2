import type pg from 'pg';
import { inTransaction } from '../../shared/db/pool.js';
import type { Attempt } from './send.js';
import type { StoredSecrets } from './secrets.js';

/**
 * The delivery queue (docs/design.md "Webhooks", migrations/service/402_webhook_queue.sql): one
 * row per (endpoint, asset) with pending deliveries, naming its head, the earliest, which is the
 * only one the ordering rule lets go. The history (`webhook_deliveries`) keeps every delivery and
 * its outcome; the queue only what is due when. So a claim reads a few index entries whatever the
 * backlog, and what was sent is gone from the queue, not left for a vacuum to clear.
 *
 * The head of a pair changes under the lock of its queue row: a writer that queues deliveries
 * locks the pairs' rows (insert, or lock the existing one), an outcome that finishes a head locks
 * them before it looks for the pair's next pending delivery, so that one of the two always sees
 * the other's work. Both lock in (endpoint, asset) order.
 */

/**
 * A CTE to follow one named `inserted` (new pending deliveries: id, endpoint_id, asset_id,
 * next_attempt_at): each pair without a head gets its earliest; a pair with one is locked.
 */
export const QUEUE_INSERTED = `queued AS (
       INSERT INTO service.webhook_queue (endpoint_id, asset_id, delivery_id, due_at, paused)
       SELECT DISTINCT ON (i.endpoint_id, i.asset_id) i.endpoint_id, i.asset_id, i.id, i.next_attempt_at, NOT e.is_active
         FROM inserted i JOIN service.webhook_endpoints e ON e.id = i.endpoint_id
        ORDER BY i.endpoint_id, i.asset_id, i.id
       ON CONFLICT (endpoint_id, asset_id) DO UPDATE SET delivery_id = EXCLUDED.delivery_id WHERE false)`;

export interface Claimed extends Omit<StoredSecrets, 'id'> {
  id: number;
  endpoint_id: number;
  asset_id: number;
  webhook_id: string;
  body: string;
  attempt: number;
  created_at: Date;
  url: string;
}

/** Claims up to `limit` due heads of active endpoints for `leaseMs` (their due time moves to the lease's end). */
export async function claimDeliveries(pool: pg.Pool, limit: number, leaseMs: number): Promise<Claimed[]> {
  const { rows } = await pool.query<Claimed>(
    `WITH next AS (
       SELECT q.endpoint_id, q.asset_id FROM service.webhook_queue q
        WHERE q.due_at <= now() AND NOT q.paused
        ORDER BY q.due_at
        LIMIT $1
          FOR UPDATE SKIP LOCKED),
     leased AS (
       UPDATE service.webhook_queue q SET due_at = now() + $2 * interval '1 millisecond'
         FROM next WHERE q.endpoint_id = next.endpoint_id AND q.asset_id = next.asset_id
       RETURNING q.delivery_id)
     SELECT d.id, d.endpoint_id, d.asset_id, d.webhook_id, d.body, d.attempt, d.created_at, e.url,
            e.secret, e.secret_encrypted, e.encryption_key_id,
            CASE WHEN e.previous_until > now() THEN e.previous_secret END AS previous_secret,
            CASE WHEN e.previous_until > now() THEN e.previous_secret_encrypted END AS previous_secret_encrypted
       FROM leased JOIN service.webhook_deliveries d ON d.id = leased.delivery_id
       JOIN service.webhook_endpoints e ON e.id = d.endpoint_id
      WHERE e.is_active`,
    [limit, leaseMs],
  );
  return rows;
}

export interface Outcome {
  id: number;
  endpointId: number;
  assetId: number;
  made: number;
  attempt: Attempt;
  /** Null: finished (delivered, or given up when `disable` says why). */
  delayMs: number | null;
  /** The last attempt failed: the delivery is `failed` and its endpoint disabled for this reason. */
  disable?: string;
}

/**
 * Writes outcomes in one transaction: the history's rows; a retry's head moves its due time; a
 * finished head gives way to its pair's next pending delivery, or leaves the queue. A delivery
 * given up also disables its endpoint and pauses the endpoint's queue. An outcome for a delivery
 * no longer pending (another sender's, after a lease ran out) changes nothing.
 */
export async function recordOutcomes(pool: pg.Pool, outcomes: readonly Outcome[]): Promise<void> {
  await inTransaction(pool, async (client) => {
    await client.query(
      `SELECT 1 FROM service.webhook_queue q JOIN unnest($1::int[], $2::int[]) AS o(endpoint_id, asset_id) USING (endpoint_id, asset_id)
        ORDER BY q.endpoint_id, q.asset_id FOR UPDATE OF q`,
      [outcomes.map((o) => o.endpointId), outcomes.map((o) => o.assetId)],
    );
    // A new statement: it sees every delivery queued before the locks above were granted.
    await client.query(
      `WITH o AS (
         SELECT * FROM unnest($1::int[], $2::int[], $3::int[], $4::int[], $5::text[], $6::bigint[], $7::text[])
                    AS o(id, made, status, duration_ms, error, delay_ms, disable)),
       done AS (
         UPDATE service.webhook_deliveries d
            SET status = CASE WHEN o.delay_ms IS NOT NULL THEN 'pending' WHEN o.disable IS NOT NULL THEN 'failed' ELSE 'succeeded' END,
                attempt = o.made, response_status = o.status, duration_ms = o.duration_ms, error = o.error,
                next_attempt_at = CASE WHEN o.delay_ms IS NULL THEN d.next_attempt_at ELSE now() + o.delay_ms * interval '1 millisecond' END
           FROM o WHERE d.id = o.id AND d.status = 'pending'
         RETURNING d.id, d.endpoint_id, d.asset_id, d.status, d.next_attempt_at),
       heads AS (
         SELECT done.id, done.endpoint_id, done.asset_id, done.next_attempt_at,
                (SELECT n.id FROM service.webhook_deliveries n
                  WHERE n.endpoint_id = done.endpoint_id AND n.asset_id = done.asset_id AND n.status = 'pending' AND n.id > done.id
                  ORDER BY n.id LIMIT 1) AS next_id,
                done.status = 'pending' AS retried
           FROM done),
       moved AS (
         UPDATE service.webhook_queue q
            SET delivery_id = CASE WHEN h.retried THEN h.id ELSE h.next_id END,
                due_at = CASE WHEN h.retried THEN h.next_attempt_at ELSE n.next_attempt_at END
           FROM heads h LEFT JOIN service.webhook_deliveries n ON n.id = h.next_id
          WHERE q.endpoint_id = h.endpoint_id AND q.asset_id = h.asset_id AND q.delivery_id = h.id
            AND (h.retried OR h.next_id IS NOT NULL))
       DELETE FROM service.webhook_queue q USING heads h
        WHERE q.endpoint_id = h.endpoint_id AND q.asset_id = h.asset_id AND q.delivery_id = h.id
          AND NOT h.retried AND h.next_id IS NULL`,
      [
        outcomes.map((o) => o.id),
        outcomes.map((o) => o.made),
        outcomes.map((o) => o.attempt.status),
        outcomes.map((o) => o.attempt.durationMs),
        outcomes.map((o) => o.attempt.error),
        outcomes.map((o) => o.delayMs),
        outcomes.map((o) => o.disable ?? null),
      ],
    );
    const disabled = outcomes.filter((o) => o.disable !== undefined);
    if (disabled.length > 0) {
      await client.query(
        `WITH e AS (
           UPDATE service.webhook_endpoints e SET is_active = false, disabled_reason = o.reason, updated_at = now()
             FROM unnest($1::int[], $2::text[]) AS o(endpoint_id, reason) WHERE e.id = o.endpoint_id AND e.is_active
           RETURNING e.id)
         UPDATE service.webhook_queue q SET paused = true
          WHERE (q.endpoint_id, q.asset_id) IN (SELECT p.endpoint_id, p.asset_id FROM service.webhook_queue p JOIN e ON e.id = p.endpoint_id
                                                 ORDER BY p.endpoint_id, p.asset_id FOR UPDATE OF p)`,
        [disabled.map((o) => o.endpointId), disabled.map((o) => o.disable!)],
      );
    }
  });
}

/** Age in seconds of the oldest pending delivery of an active endpoint (a head: the oldest of its pair); 0 when none. */
export async function oldestPendingSeconds(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ age: number | null }>(
    `SELECT extract(epoch FROM now() - min(d.created_at))::float8 AS age
       FROM service.webhook_queue q JOIN service.webhook_deliveries d ON d.id = q.delivery_id
      WHERE NOT q.paused`,
  );
  return rows[0]?.age ?? 0;
}

/**
 * Deletes finished deliveries (succeeded or failed) queued more than `days` days ago, `batch` at a
 * time, each batch its own short transaction; pending ones are never touched. One process prunes
 * at a time (the others find the lock taken and skip the round). The number deleted.
 */
export async function pruneDeliveries(pool: pg.Pool, days: number, batch = 5000): Promise<number> {
  let deleted = 0;
  for (;;) {
    const { rows } = await pool.query<{ n: number | null }>(
      `WITH turn AS (SELECT pg_try_advisory_xact_lock(hashtext('webhooks:prune')) AS held),
            gone AS (
              DELETE FROM service.webhook_deliveries WHERE id IN (
                SELECT d.id FROM service.webhook_deliveries d, turn
                 WHERE turn.held AND d.status <> 'pending' AND d.created_at < now() - make_interval(days => $1)
                 ORDER BY d.id LIMIT $2)
              RETURNING 1)
       SELECT CASE WHEN (SELECT held FROM turn) THEN (SELECT count(*)::int FROM gone) END AS n`,
      [days, batch],
    );
    const n = rows[0]?.n;
    if (n === null || n === undefined) return deleted;
    deleted += n;
    if (n < batch) return deleted;
  }
}
