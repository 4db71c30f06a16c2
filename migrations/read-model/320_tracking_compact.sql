-- Tracking storage that stays small under parked tags (docs/design.md "Tracking storage"): a row
-- per read (scan_reads, about 180 bytes a read with its two indexes, kept forever) gives way to
--   * scan_read_chunks: an asset's reads, in (observed time, log order), up to 128 to a row,
--     each a few bytes (projections/tracking/read-chunks.ts);
--   * scan_read_keys: the keys of the reads delivered in the last 7 days of the log, for
--     duplicate detection only;
-- and the per-read and per-visit tables are partitioned by observed time, so that retention
-- drops whole partitions. The projector creates partitions (ahead, and for a read that needs
-- one); `tracking retention run` drops them.
--
-- The tracking tables are emptied and the projection's checkpoint removed: the projector
-- builds them again from the log at its next start (docs/operations.md "Upgrading").

DROP TABLE scan_reads;
DELETE FROM projection_held_events WHERE projection = 'tracking';
DELETE FROM projection_set_aside WHERE projection = 'tracking';
DELETE FROM projection_checkpoints WHERE name = 'tracking';
TRUNCATE asset_visits, asset_locations, asset_location_counts, unknown_reads;
SELECT setval('scan_read_seq', 1, false);

CREATE TABLE scan_read_chunks (
  org_id integer NOT NULL,
  asset_id integer NOT NULL,
  first_at timestamptz NOT NULL,
  first_seq bigint NOT NULL,
  last_at timestamptz NOT NULL,
  last_seq bigint NOT NULL,
  reads integer NOT NULL,
  data bytea NOT NULL,
  PRIMARY KEY (org_id, asset_id, first_at, first_seq)
) PARTITION BY RANGE (first_at);

-- Partitioned by the log's time of the event that carried the read (not observed time): the
-- projector drops a day once it is older than the duplicate-detection horizon.
CREATE TABLE scan_read_keys (
  read_key uuid NOT NULL,
  recorded_at timestamptz NOT NULL
) PARTITION BY RANGE (recorded_at);
CREATE INDEX scan_read_keys_key ON scan_read_keys (read_key);

-- Visits, partitioned by their last read: a visit that goes on is never in a dropped partition.
DROP TABLE asset_visits;
CREATE TABLE asset_visits (
  org_id integer NOT NULL,
  asset_id integer NOT NULL,
  location_id integer NOT NULL,
  first_at timestamptz NOT NULL,
  first_seq bigint NOT NULL,
  last_at timestamptz NOT NULL,
  last_seq bigint NOT NULL,
  first_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(first_at)) STORED,
  last_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(last_at)) STORED
) PARTITION BY RANGE (last_at);
CREATE INDEX asset_visits_asset ON asset_visits (org_id, asset_id, first_at, first_seq);

-- The current visit's log order too: the projector tells a new read from a late one without
-- reading the visits.
ALTER TABLE asset_locations ADD COLUMN first_seq bigint NOT NULL, ADD COLUMN last_seq bigint NOT NULL;

-- Where retention has cut (written by `tracking retention run`): a read observed before
-- `scan_cutoff` changes no visit and no per-read detail, only the report when it is the newest.
-- Not a projection table: a rebuild builds everything, and the next retention run cuts again.
CREATE TABLE tracking_retention_cutoffs (
  target text PRIMARY KEY,
  cutoff timestamptz NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
