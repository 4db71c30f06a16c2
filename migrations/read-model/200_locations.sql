-- Locations and the location tree (projection `locations`, projections/master-data/locations.ts).
--
-- The tree is a materialized ancestor path: `ancestors` holds the ids from the root down to the
-- parent (the row itself excluded). Chosen over a closure table because every read the contract
-- needs is then one indexed query (ancestors: unnest the row's own array and join on the primary
-- key; descendants: `ancestors @> ARRAY[id]` on the GIN index) and a re-parent rewrites only the
-- moved subtree's rows, with no O(depth × subtree) closure rows to maintain.
CREATE TABLE locations (
  id integer PRIMARY KEY,
  org_id integer NOT NULL,
  -- "C" collation: byte order, so sorting by key is the same on every server and in a replay.
  external_key text COLLATE "C" NOT NULL,
  name text NOT NULL,
  description text,
  parent_id integer,
  ancestors integer[] NOT NULL DEFAULT '{}',
  is_active boolean NOT NULL,
  valid_from timestamptz,
  valid_to timestamptz,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  deleted_at timestamptz
);

-- List sort orders (each ends with id, the tiebreaker) and the external_key filter.
CREATE INDEX locations_org_key ON locations (org_id, external_key, id);
CREATE INDEX locations_org_name ON locations (org_id, name, id);
CREATE INDEX locations_org_created ON locations (org_id, created_at, id);
CREATE INDEX locations_org_updated ON locations (org_id, updated_at, id);
-- Children (and the parent_id filter), in their order.
CREATE INDEX locations_org_parent_key ON locations (org_id, parent_id, external_key, id);
-- Descendants: every row whose path contains the node.
CREATE INDEX locations_ancestors ON locations USING gin (ancestors);
