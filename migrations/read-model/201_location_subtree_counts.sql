-- Subtree counts (total_count of GET /locations/{id}/descendants) without visiting the rows.
-- Paths compare element by element, so the descendants of node N (paths starting with
-- N.ancestors || N.id) are the contiguous btree range [N.ancestors || N.id, N.ancestors || (N.id + 1)):
-- an index-only range count over the live rows without a validity window. The few live windowed
-- rows, whose effectiveness depends on the clock, are counted apart through their own small index.
CREATE INDEX locations_org_path ON locations (org_id, ancestors)
  WHERE deleted_at IS NULL AND valid_from IS NULL AND valid_to IS NULL;
CREATE INDEX locations_windowed_ancestors ON locations USING gin (ancestors)
  WHERE deleted_at IS NULL AND (valid_from IS NOT NULL OR valid_to IS NOT NULL);
