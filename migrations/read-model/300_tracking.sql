-- Tracking (projection `tracking`, projections/tracking/projection.ts): every read once, visits,
-- the current location of each scanned asset, and the reads that placed nothing.

-- Every read once, by its key (the identity of the read itself, so a read delivered twice
-- counts once), placed or not. `seq` is the order of the log: it breaks ties of observed time.
CREATE TABLE scan_reads (
  org_id integer NOT NULL,
  read_key uuid NOT NULL,
  asset_id integer,
  location_id integer,
  observed_at timestamptz NOT NULL,
  seq bigint NOT NULL,
  PRIMARY KEY (org_id, read_key)
);
-- An asset's reads in time order: recomputing its visits after a late read.
CREATE INDEX scan_reads_asset ON scan_reads (org_id, asset_id, observed_at, seq) WHERE asset_id IS NOT NULL;
CREATE SEQUENCE scan_read_seq;

-- Visits: each maximal run of an asset's reads (in observed-time order) at one location.
CREATE TABLE asset_visits (
  org_id integer NOT NULL,
  asset_id integer NOT NULL,
  location_id integer NOT NULL,
  first_at timestamptz NOT NULL,
  first_seq bigint NOT NULL,
  last_at timestamptz NOT NULL,
  last_seq bigint NOT NULL,
  first_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(first_at)) STORED,
  last_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(last_at)) STORED,
  PRIMARY KEY (org_id, asset_id, first_at, first_seq)
);

-- The current location of each scanned asset: its last visit.
CREATE TABLE asset_locations (
  org_id integer NOT NULL,
  asset_id integer NOT NULL,
  location_id integer NOT NULL,
  last_seen timestamptz NOT NULL,
  dwell_started_at timestamptz NOT NULL,
  last_seen_rfc3339 text GENERATED ALWAYS AS (rfc3339(last_seen)) STORED,
  dwell_started_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(dwell_started_at)) STORED,
  PRIMARY KEY (org_id, asset_id)
);
-- The assets placed at a location (asset list filter, location delete, report filter).
CREATE INDEX asset_locations_location ON asset_locations (org_id, location_id, asset_id);
-- The report's default order.
CREATE INDEX asset_locations_last_seen ON asset_locations (org_id, last_seen DESC, asset_id);

-- Reads that placed nothing, counted per org and cause (docs/scan-ingestion.md, "Reads that placed nothing").
CREATE TABLE unknown_reads (
  org_id integer NOT NULL,
  cause text NOT NULL,
  reader_id text,
  capture_point text,
  tag_type text,
  value text,
  count bigint NOT NULL,
  first_seen timestamptz NOT NULL,
  last_seen timestamptz NOT NULL,
  UNIQUE NULLS NOT DISTINCT (org_id, cause, reader_id, capture_point, tag_type, value)
);
CREATE INDEX unknown_reads_by_count ON unknown_reads (org_id, count DESC);

-- The current location is the tracking projection's own table now: the assets projection never
-- wrote this column.
ALTER TABLE assets DROP COLUMN location_id;

-- Resolving a scanned value that no live tag holds: was it ever attached (a retired tag)?
CREATE INDEX tags_lookup ON tags (org_id, tag_type, upper(value));
