-- Assets (projection `assets`, projections/master-data/assets.ts). `location_id` is scan data:
-- only the scan projection sets it; the view joins `locations` for location_external_key on read.
CREATE TABLE assets (
  id integer PRIMARY KEY,
  org_id integer NOT NULL,
  -- "C" collation: byte order, so sorting by key is the same on every server and in a replay.
  external_key text COLLATE "C" NOT NULL,
  name text NOT NULL,
  description text,
  is_active boolean NOT NULL,
  valid_from timestamptz,
  valid_to timestamptz,
  metadata jsonb NOT NULL DEFAULT '{}',
  location_id integer,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  deleted_at timestamptz
);

-- List sort orders (each ends with id, the tiebreaker) and the external_key filter.
CREATE INDEX assets_org_key ON assets (org_id, external_key, id);
CREATE INDEX assets_org_name ON assets (org_id, name, id);
CREATE INDEX assets_org_created ON assets (org_id, created_at, id);
CREATE INDEX assets_org_updated ON assets (org_id, updated_at, id);
-- location_id filter, and the "live assets placed at a location" check of location delete.
CREATE INDEX assets_org_location ON assets (org_id, location_id, id) WHERE location_id IS NOT NULL;
