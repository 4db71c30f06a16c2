-- total_count of the default asset list without a filter is the most common count and would
-- otherwise visit every asset of the org. Rows that are live and have no validity window are
-- counted by the projection per org (they are effective at any time); the few live rows with a
-- window are counted at read time through the partial index below, against the current time.
CREATE TABLE asset_counts (
  org_id integer PRIMARY KEY,
  live_unbounded integer NOT NULL DEFAULT 0,
  live_unbounded_active integer NOT NULL DEFAULT 0
);

CREATE INDEX assets_org_windowed ON assets (org_id) INCLUDE (is_active, valid_from, valid_to)
  WHERE deleted_at IS NULL AND (valid_from IS NOT NULL OR valid_to IS NOT NULL);
