-- The delivery queue apart from the delivery history (docs/design.md "Webhooks"). The senders'
-- claim read the history's partial indexes of pending deliveries, which keep the entries of
-- finished deliveries until a vacuum, and sorted every due delivery to take the first few: its
-- cost grew with the backlog and with what had just been sent. `webhook_queue` holds one row per
-- (endpoint, asset) that has pending deliveries: its head, the earliest one, the only one the
-- ordering rule lets go. A claim is an ordered scan of `due_at` that stops after the batch; a
-- claimed head's `due_at` is the end of its lease; a finished head is replaced by the pair's next
-- pending delivery or deleted. The later pending deliveries of a pair wait in the history.
-- The table stays small, so it is vacuumed eagerly.
CREATE TABLE webhook_queue (
  endpoint_id integer NOT NULL REFERENCES webhook_endpoints ON DELETE CASCADE,
  asset_id integer NOT NULL,
  delivery_id integer NOT NULL,
  -- The next attempt, or while a sender holds it, the end of its lease.
  due_at timestamptz NOT NULL,
  -- The endpoint is not active: nothing of it is sent until it is again.
  paused boolean NOT NULL DEFAULT false,
  PRIMARY KEY (endpoint_id, asset_id)
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
        autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 1000,
        autovacuum_vacuum_cost_delay = 0, autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 1000);
CREATE INDEX webhook_queue_due ON webhook_queue (due_at) WHERE NOT paused;

-- The deliveries pending now: each pair's earliest (a lease still held counts until it runs out).
INSERT INTO webhook_queue (endpoint_id, asset_id, delivery_id, due_at, paused)
SELECT DISTINCT ON (d.endpoint_id, d.asset_id) d.endpoint_id, d.asset_id, d.id,
       greatest(d.next_attempt_at, coalesce(d.leased_until, '-infinity')), NOT e.is_active
  FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
 WHERE d.status = 'pending'
 ORDER BY d.endpoint_id, d.asset_id, d.id;

-- The claim no longer reads the history by due time; leases live in the queue.
DROP INDEX webhook_deliveries_due;
ALTER TABLE webhook_deliveries DROP COLUMN leased_until;
