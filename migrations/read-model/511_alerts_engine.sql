-- The alerts subscriber's own state (projection `alerts`, projections/alerts/; docs/design.md
-- "Alerts"), swapped with `alerts` by a rebuild. Split into segments, each segment keeps its copy of
-- what every segment follows (rules, tree, clock: one row by segment index) and the state of its
-- own assets (position, zone entries, what each rule raised).
CREATE TABLE alerts_engine_segments (
  segment integer PRIMARY KEY,
  state jsonb NOT NULL
);
CREATE TABLE alerts_engine_assets (
  org_id integer NOT NULL,
  asset_id integer NOT NULL,
  segment integer NOT NULL,
  state jsonb NOT NULL,
  -- The earliest deadline of a time-based rule for this asset (µs, observed time), or null: the
  -- ticker's question "is anything due?" is a min over this index (docs/design.md "Alerts: time as an event").
  next_deadline_us bigint,
  PRIMARY KEY (org_id, asset_id)
);
CREATE INDEX alerts_engine_assets_due ON alerts_engine_assets (next_deadline_us) WHERE next_deadline_us IS NOT NULL;
CREATE INDEX alerts_engine_assets_by_segment ON alerts_engine_assets (segment, org_id);
