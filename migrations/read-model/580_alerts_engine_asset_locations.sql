-- Where each asset of the alerts subscriber stands (its state's position), as a column: a location
-- moved or restored changes the zones of the assets under it only, and a batch now loads those
-- (projections/alerts/projection.ts `load`, docs/design.md "Alerts") instead of every asset of
-- the organization: a re-parent in an organization of 20,000 assets read all 20,000 states.
ALTER TABLE alerts_engine_assets ADD COLUMN location_id integer;
UPDATE alerts_engine_assets SET location_id = (state -> 'position' ->> 'locationId')::integer
 WHERE jsonb_typeof(state -> 'position') = 'object';
CREATE INDEX alerts_engine_assets_by_location ON alerts_engine_assets (segment, org_id, location_id) WHERE location_id IS NOT NULL;
-- The walk down from a moved location to its subtree. The parent leads: an index that began with
-- (segment, org_id), as the primary key does, was taken on a table without statistics for the walk
-- up (projections/engine-tree.ts loadTrees), which then read the organization's whole tree at each
-- step (4.3 ms against 0.26 for a walk of 14 steps at 2,000 locations).
CREATE INDEX alerts_engine_tree_children ON alerts_engine_tree (parent_id, org_id, segment);
