-- Alert rules (projection `alert-rules`, projections/alert-rules/projection.ts; docs/api.md
-- "Alerts"). A deleted rule keeps its row with deleted_at set: it no longer counts toward the
-- limit of 100 and no list shows it, but its alerts still name it.
CREATE TABLE alert_rules (
  org_id integer NOT NULL,
  rule_id integer NOT NULL,
  name text NOT NULL,
  kind text NOT NULL,
  location_id integer NOT NULL,
  threshold_seconds integer,
  asset_ids integer[],
  is_active boolean NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  deleted_at timestamptz,
  created_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(created_at)) STORED,
  updated_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(updated_at)) STORED,
  PRIMARY KEY (org_id, rule_id)
);
CREATE INDEX alert_rules_live ON alert_rules (org_id, rule_id) WHERE deleted_at IS NULL;
