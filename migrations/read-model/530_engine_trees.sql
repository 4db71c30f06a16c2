-- The location tree each segment of the alerts and counts subscribers follows, a row per location
-- (projections/engine-tree.ts; docs/design.md "Alerts" and "Counts"). It was a part of the
-- segment's one JSON state (`state.tree`: every organization's tree), which every batch read whole
-- and every location created or moved wrote whole, in every segment: a location command cost
-- 17 ms of Postgres time at 2,000 locations, growing with every location of every organization.
-- Now a batch reads the trees of its organizations only and writes the locations it changed.
CREATE TABLE alerts_engine_tree (
  segment integer NOT NULL,
  org_id integer NOT NULL,
  location_id integer NOT NULL,
  parent_id integer,
  PRIMARY KEY (segment, org_id, location_id)
);
CREATE TABLE counts_engine_tree (
  segment integer NOT NULL,
  org_id integer NOT NULL,
  location_id integer NOT NULL,
  parent_id integer,
  PRIMARY KEY (segment, org_id, location_id)
);

-- The trees kept so far move to the rows, and out of the states.
INSERT INTO alerts_engine_tree (segment, org_id, location_id, parent_id)
SELECT s.segment, o.key::integer, l.key::integer, CASE WHEN jsonb_typeof(l.value) = 'number' THEN l.value::text::integer END
  FROM alerts_engine_segments s, jsonb_each(coalesce(s.state -> 'tree', '{}')) o, jsonb_each(o.value) l;
UPDATE alerts_engine_segments SET state = state - 'tree';
INSERT INTO counts_engine_tree (segment, org_id, location_id, parent_id)
SELECT s.segment, o.key::integer, l.key::integer, CASE WHEN jsonb_typeof(l.value) = 'number' THEN l.value::text::integer END
  FROM counts_engine_segments s, jsonb_each(coalesce(s.state -> 'tree', '{}')) o, jsonb_each(o.value) l;
UPDATE counts_engine_segments SET state = state - 'tree';
