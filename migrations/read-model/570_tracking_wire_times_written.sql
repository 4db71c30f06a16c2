-- Every batch of reads rewrites the current visit and the current location of each asset it reads
-- (their last read moves on). Their wire timestamps were generated columns (rfc3339(), 230): each
-- such write formatted them again with to_char, twice per row and per column in an upsert (the
-- proposed row and the updated one), whether the instant changed or not: about a third of the
-- upsert of asset_locations. The projector now writes them, formatted in the process as the
-- contract prints them (shared/time.ts microsToRfc3339, the same text as rfc3339()); the columns
-- keep their values and become plain ones, which every write must fill.
ALTER TABLE asset_locations
  ALTER COLUMN last_seen_rfc3339 DROP EXPRESSION,
  ALTER COLUMN dwell_started_at_rfc3339 DROP EXPRESSION;
ALTER TABLE asset_locations
  ALTER COLUMN last_seen_rfc3339 SET NOT NULL,
  ALTER COLUMN dwell_started_at_rfc3339 SET NOT NULL;
ALTER TABLE asset_visits
  ALTER COLUMN first_at_rfc3339 DROP EXPRESSION,
  ALTER COLUMN last_at_rfc3339 DROP EXPRESSION;
ALTER TABLE asset_visits
  ALTER COLUMN first_at_rfc3339 SET NOT NULL,
  ALTER COLUMN last_at_rfc3339 SET NOT NULL;
