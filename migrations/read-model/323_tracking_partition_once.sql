-- Segments of the tracking projection (docs/design.md "Segmented processors") create partitions
-- inside their own batches' transactions, and two of them may need the same one at once: the
-- second CREATE TABLE waited for the first and then failed ("already exists"), and its whole batch
-- was retried. Now the creation of one partition is serialised by a transaction-level advisory
-- lock on its name (held to the creator's commit), and a partition that exists once the lock is
-- held (created by a transaction that has committed meanwhile) is left as it is. The checks and
-- the rights are those of 320.
DO $do$
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
                     CASE WHEN parent = 'scan_read_chunks' THEN ' WITH (fillfactor = 80)' ELSE '' END);
    END $body$;
  $f$, current_schema(), current_schema());
END
$do$;
