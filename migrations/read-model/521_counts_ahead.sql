-- Reads observed ahead of their arrival, kept apart by the counts subscriber (projections/counts/;
-- docs/api.md "Counts", docs/design.md "Counts"). Working state of the segments, swapped with the
-- counts' tables by a rebuild.

-- Each asset's ahead reads not yet passed by the log's clock (a JSON array: location, observed
-- time, read key, ancestor chain at the read, place in the log), for the starts to come; a start
-- loads its segment's assets that have some.
ALTER TABLE counts_engine_assets ADD COLUMN ahead jsonb;
CREATE INDEX counts_engine_assets_ahead ON counts_engine_assets (org_id, segment) WHERE ahead IS NOT NULL;

-- The sightings of an open count's items that have an ahead one: each ahead sighting, and the latest
-- settled one of each side (ahead = false, one per side). The close keeps those observed by then
-- and deletes the count's rows; `seq` is the place in the log (the first of a tie wins).
CREATE TABLE count_ahead_sightings (
  org_id integer NOT NULL,
  count_id integer NOT NULL,
  asset_id integer NOT NULL,
  segment integer NOT NULL,
  zone boolean NOT NULL,
  ahead boolean NOT NULL,
  location_id integer NOT NULL,
  seen_at timestamptz NOT NULL,
  seq numeric NOT NULL
);
CREATE INDEX count_ahead_sightings_by_count ON count_ahead_sightings (org_id, count_id, segment, asset_id);
CREATE UNIQUE INDEX count_ahead_sightings_settled ON count_ahead_sightings (org_id, count_id, asset_id, zone) WHERE NOT ahead;
