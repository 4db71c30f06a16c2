-- The report at an instant (projections/tracking/queries.ts reportAtQuery) without a probe of
-- asset_visits for every located asset:
--   * an asset whose current visit (asset_locations) began by the instant was in that visit then:
--     it is the newest of its visits, so no other began between it and the instant;
--   * an asset first read after the instant was nowhere then: `first_seen_at` says so. It is the
--     observed time of the asset's earliest read the projection placed, or earlier: never later
--     than its first visit's first read, so an asset it leaves out had no visit by then.
-- Only the assets that have moved since the instant are looked up in their visits.
ALTER TABLE asset_locations ADD COLUMN first_seen_at timestamptz;
UPDATE asset_locations al
   SET first_seen_at = least(al.dwell_started_at,
                             (SELECT min(v.first_at) FROM asset_visits v WHERE v.org_id = al.org_id AND v.asset_id = al.asset_id));
ALTER TABLE asset_locations ALTER COLUMN first_seen_at SET NOT NULL;
