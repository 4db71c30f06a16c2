-- The tracking projection split into segments (docs/design.md "Segmented processors"): how far
-- each segment has recorded read keys (the log's time of its newest batch). A segment drops a day of
-- `scan_read_keys` only once every segment is past it, so none loses a key it would look at. Empty
-- while the projection runs as one segment.
CREATE TABLE tracking_key_progress (
  segment integer PRIMARY KEY,
  segments integer NOT NULL,
  recorded_at timestamptz NOT NULL
);
