-- The alerts' outbox (projection `alerts`, projections/alerts/projection.ts; docs/design.md
-- "Webhooks", "Alerts"): one row per change an endpoint may be told of (`raised`, `resolved`),
-- written in the transaction that changes the alert, keyed by the log position of the event that
-- caused it (both parts), the alert and the change. The alert's columns are as they were right
-- after the change (the view the API shows is made of them: projections/alert-rules/queries.ts).
-- Derived from the log: a rebuild, with any number of segments, writes the same rows with the same
-- keys. The webhooks role follows it with a cursor of its own (service.webhook_alert_cursor) and
-- deletes the rows behind that cursor.
CREATE TABLE alert_outbox (
  position_commit bigint NOT NULL,
  position_prepare bigint NOT NULL,
  org_id integer NOT NULL,
  alert_id text COLLATE "C" NOT NULL,
  -- 'raised' | 'resolved'; ids and changes compare byte by byte ("C"), whatever the database's collation
  change text COLLATE "C" NOT NULL,
  -- When the log recorded the event that caused it: endpoints created later are not told.
  recorded_at timestamptz NOT NULL,
  rule_id integer NOT NULL,
  kind text NOT NULL,
  asset_id integer NOT NULL,
  location_id integer NOT NULL,
  raised_at timestamptz NOT NULL,
  status text NOT NULL,
  acknowledged_at timestamptz,
  acknowledged_by jsonb,
  resolved_at timestamptz,
  raised_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(raised_at)) STORED,
  acknowledged_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(acknowledged_at)) STORED,
  resolved_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(resolved_at)) STORED,
  -- The order the webhooks role follows (log order, then org, alert, change) and its key.
  PRIMARY KEY (position_commit, position_prepare, org_id, alert_id, change)
);
