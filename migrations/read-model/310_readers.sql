-- Fixed readers and their scan points (projection `readers`, projections/readers/projection.ts).
CREATE TABLE readers (
  reader_id text PRIMARY KEY,
  org_id integer NOT NULL,
  registered_at timestamptz NOT NULL,
  registered_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(registered_at)) STORED
);
CREATE INDEX readers_org ON readers (org_id, reader_id);

-- A (reader, capture point) assigned to a location. A location's soft delete removes its rows:
-- the points are unassigned.
CREATE TABLE scan_points (
  reader_id text NOT NULL,
  capture_point text NOT NULL,
  org_id integer NOT NULL,
  location_id integer NOT NULL,
  PRIMARY KEY (reader_id, capture_point)
);
CREATE INDEX scan_points_org ON scan_points (org_id, reader_id, capture_point);
CREATE INDEX scan_points_location ON scan_points (org_id, location_id);
