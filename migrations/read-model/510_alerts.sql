-- Alerts (projection `alerts`, the alerts subscriber, projections/alerts/; docs/api.md "Alerts",
-- docs/design.md "Alerts"). Derived from the log: a rebuild gives every row again, with the same
-- ids. Times are observed times (microseconds kept), except acknowledged_at (when the command was
-- made) and a resolved_at caused by a rule's change or a tree edit (when that was recorded).
CREATE TABLE alerts (
  org_id integer NOT NULL,
  -- Deterministic: '<rule id>-<asset id>-<n>', the n-th alert of that rule for that asset.
  alert_id text NOT NULL,
  rule_id integer NOT NULL,
  kind text NOT NULL,
  asset_id integer NOT NULL,
  -- The asset's own location at raised_at (for `left`, where it went), not the zone.
  location_id integer NOT NULL,
  raised_at timestamptz NOT NULL,
  -- 'open' | 'acknowledged' | 'resolved'
  status text NOT NULL,
  acknowledged_at timestamptz,
  -- The acknowledging actor as the audit log names it: {type, id, name}.
  acknowledged_by jsonb,
  resolved_at timestamptz,
  -- Log order of the event that raised it: alerts of the same instant in the order they were raised.
  raised_position bigint NOT NULL,
  raised_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(raised_at)) STORED,
  acknowledged_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(acknowledged_at)) STORED,
  resolved_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(resolved_at)) STORED,
  PRIMARY KEY (org_id, alert_id)
);
-- The list, newest first, and its filters (status, rule, asset).
CREATE INDEX alerts_recent ON alerts (org_id, raised_at DESC, raised_position DESC);
CREATE INDEX alerts_by_status ON alerts (org_id, status, raised_at DESC, raised_position DESC);
CREATE INDEX alerts_by_rule ON alerts (org_id, rule_id, raised_at DESC);
CREATE INDEX alerts_by_asset ON alerts (org_id, asset_id, raised_at DESC);
