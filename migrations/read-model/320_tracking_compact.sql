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
-- builds them again from the log at its next start (docs/operations.md "Upgrading to the partitioned
-- storage").

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
-- `aged_reads`: the reads observed before the cutoff that arrived since (counted by the projector,
-- shown by `tracking retention status`).
CREATE TABLE tracking_retention_cutoffs (
  target text PRIMARY KEY,
  cutoff timestamptz NOT NULL,
  aged_reads bigint NOT NULL DEFAULT 0,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Partitions are made and dropped by the projector and `tracking retention run`, which may
-- connect as the runtime role: that role owns no table, so it goes through these two functions,
-- which run as their owner, touch only partitions of the three tables above, in this schema,
-- named as projections/tracking/partitions.ts names them.
DO $do$
BEGIN
  EXECUTE format($f$
    CREATE FUNCTION %1$I.tracking_create_partition(parent text, name text, from_at timestamptz, to_at timestamptz) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = %1$I, pg_catalog AS $body$
    BEGIN
      IF parent NOT IN ('scan_read_chunks', 'asset_visits', 'scan_read_keys')
         OR name !~ ('^' || parent || '_(m[0-9]{6}|y[0-9]{4}|d[0-9]{8})$') THEN
        RAISE EXCEPTION 'not a tracking partition: %% of %%', name, parent;
      END IF;
      EXECUTE format('CREATE TABLE %%I PARTITION OF %%I FOR VALUES FROM (%%L) TO (%%L)%%s', name, parent, from_at, to_at,
                     CASE WHEN parent = 'scan_read_chunks' THEN ' WITH (fillfactor = 80)' ELSE '' END);
    END $body$;
    CREATE FUNCTION %1$I.tracking_drop_partition(name text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = %1$I, pg_catalog AS $body$
    BEGIN
      IF name !~ '^(scan_read_chunks|asset_visits|scan_read_keys)_(m[0-9]{6}|y[0-9]{4}|d[0-9]{8})$'
         OR NOT EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                         WHERE c.relname = name AND c.relnamespace = %2$L::regnamespace) THEN
        RAISE EXCEPTION 'not a tracking partition: %%', name;
      END IF;
      EXECUTE format('DROP TABLE %%I', name);
    END $body$;
  $f$, current_schema(), current_schema());
END
$do$;

-- The reads of a chunk as rows (the decoding of projections/tracking/read-chunks.ts, in SQL):
-- for an operator's query, and for a view that needs an asset's exact read times in SQL.
CREATE FUNCTION tracking_chunk_reads(first_at timestamptz, first_seq bigint, data bytea)
RETURNS TABLE (observed_at timestamptz, seq bigint, location_id integer)
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
  i integer := 0;
  n integer := length(data);
  us bigint := 0;
  s bigint := first_seq;
  loc integer := 0;
  v bigint;
  scale bigint;
  b integer;
  field integer;
BEGIN
  WHILE i < n LOOP
    FOR field IN 1..3 LOOP
      v := 0;
      scale := 1;
      LOOP
        b := get_byte(data, i);
        i := i + 1;
        v := v + (b & 127) * scale;
        EXIT WHEN b < 128;
        scale := scale * 128;
      END LOOP;
      IF field = 1 THEN
        us := us + v;
      ELSIF field = 2 THEN
        s := s + CASE WHEN v % 2 = 0 THEN v / 2 ELSE -(v + 1) / 2 END;
      ELSIF v <> 0 THEN
        loc := v;
      END IF;
    END LOOP;
    observed_at := first_at + make_interval(secs => us / 1000000) + make_interval(secs => (us % 1000000) / 1000000.0);
    seq := s;
    location_id := loc;
    RETURN NEXT;
  END LOOP;
END $$;
