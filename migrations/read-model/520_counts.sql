-- Counts of a zone (projection `counts`, projections/counts/; docs/api.md "Counts", docs/design.md
-- "Counts"). Derived from the log: a rebuild gives every row again.
CREATE TABLE counts (
  org_id integer NOT NULL,
  count_id integer NOT NULL,
  name text,
  -- The zone: this location and its descendants.
  location_id integer NOT NULL,
  started_at timestamptz NOT NULL,
  closed_at timestamptz,
  started_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(started_at)) STORED,
  closed_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(closed_at)) STORED,
  PRIMARY KEY (org_id, count_id)
);
-- The list's filters: open counts of a zone (the console's Scan page), newest first.
CREATE INDEX counts_by_location ON counts (org_id, location_id, count_id DESC);

-- One row per asset a count is about: every expected asset (written when the count starts), and
-- every other asset once it is seen in the zone. Its status follows from what was seen: the latest
-- read in the zone (zone_*) and the latest read outside it (out_*), both within the window.
CREATE TABLE count_items (
  org_id integer NOT NULL,
  count_id integer NOT NULL,
  asset_id integer NOT NULL,
  expected boolean NOT NULL,
  zone_location_id integer,
  zone_seen_at timestamptz,
  out_location_id integer,
  out_seen_at timestamptz,
  status text GENERATED ALWAYS AS (
    CASE WHEN NOT expected THEN 'unexpected'
         WHEN zone_seen_at IS NOT NULL THEN 'found'
         WHEN out_seen_at IS NOT NULL THEN 'misplaced'
         ELSE 'missing' END) STORED,
  seen_location_id integer GENERATED ALWAYS AS (CASE WHEN zone_seen_at IS NOT NULL THEN zone_location_id ELSE out_location_id END) STORED,
  last_seen_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(CASE WHEN zone_seen_at IS NOT NULL THEN zone_seen_at ELSE out_seen_at END)) STORED,
  PRIMARY KEY (org_id, count_id, asset_id)
);
-- The five numbers (a count by status) and the items list by status, paged in asset order.
CREATE INDEX count_items_by_status ON count_items (org_id, count_id, status, asset_id);

-- The counts subscriber's own state, swapped with the tables above by a rebuild. Each segment
-- keeps its copy of what every segment follows (the tree, the counts: one row by segment index)
-- and the position of its own assets (the report's current location), by location for a start.
CREATE TABLE counts_engine_segments (
  segment integer PRIMARY KEY,
  state jsonb NOT NULL
);
CREATE TABLE counts_engine_assets (
  org_id integer NOT NULL,
  asset_id integer NOT NULL,
  segment integer NOT NULL,
  position jsonb,
  location_id integer,
  deleted boolean NOT NULL DEFAULT false,
  PRIMARY KEY (org_id, asset_id)
);
CREATE INDEX counts_engine_assets_by_location ON counts_engine_assets (org_id, segment, location_id) WHERE NOT deleted;
