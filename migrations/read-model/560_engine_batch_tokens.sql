-- Each batch of the alerts and counts engines writes a new random token into its segment's row;
-- the next batch in the same process reads it and, when it is the one that process wrote, takes
-- the asset states it kept instead of loading them (projections/engine-states.ts, docs/design.md
-- "Engine batches"). Null: nothing kept anywhere matches. A migration that changes the states
-- must set it to null.
ALTER TABLE alerts_engine_segments ADD COLUMN batch_token text;
ALTER TABLE counts_engine_segments ADD COLUMN batch_token text;
