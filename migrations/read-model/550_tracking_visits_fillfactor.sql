-- The current visit of every asset read in a batch has its row updated (its last read moves on):
-- with room left on each page, that update stays on the page and writes no index entry (a HOT
-- update), as the chunks' already do (320: fillfactor 80). Full pages left about one update in five
-- writing every index of the partition. New partitions are created with that room; the existing
-- ones keep it on the pages they fill from now on. The checks and the rights are those of 323.
DO $do$
DECLARE
  partition regclass;
BEGIN
  EXECUTE format($f$
    CREATE OR REPLACE FUNCTION %1$I.tracking_create_partition(parent text, name text, from_at timestamptz, to_at timestamptz) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = %1$I, pg_catalog AS $body$
    BEGIN
      IF parent NOT IN ('scan_read_chunks', 'asset_visits', 'scan_read_keys')
         OR name !~ ('^' || parent || '_(m[0-9]{6}|y[0-9]{4}|d[0-9]{8})$') THEN
        RAISE EXCEPTION 'not a tracking partition: %% of %%', name, parent;
      END IF;
      PERFORM pg_advisory_xact_lock(hashtext('tracking partition ' || %2$L || '.' || name));
      IF EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                  WHERE c.relname = name AND c.relnamespace = %2$L::regnamespace
                    AND i.inhparent = format('%%I.%%I', %2$L, parent)::regclass) THEN
        RETURN;
      END IF;
      EXECUTE format('CREATE TABLE %%I PARTITION OF %%I FOR VALUES FROM (%%L) TO (%%L)%%s', name, parent, from_at, to_at,
                     CASE WHEN parent IN ('scan_read_chunks', 'asset_visits') THEN ' WITH (fillfactor = 80)' ELSE '' END);
    END $body$;
  $f$, current_schema(), current_schema());
  FOR partition IN SELECT i.inhrelid::regclass FROM pg_inherits i WHERE i.inhparent = 'asset_visits'::regclass LOOP
    EXECUTE format('ALTER TABLE %s SET (fillfactor = 80)', partition);
  END LOOP;
END
$do$;
