-- The trigram indexes take new entries through GIN's pending list again, and the projections that
-- insert rows into their tables merge that list into the index at the end of each batch, in the
-- batch's transaction (`merge_search_pending`). With `fastupdate = off` (226) every inserted row
-- paid for each of its trigrams on its own, which made the assets and tags projections insert two
-- to three times slower than a bulk merge (measured: 650 against 1,400-1,800 rows a second, batches
-- of 500 assets with a tag each, on the shared 2-core machine; docs/benchmarks.md, "Import of
-- assets (issue 33)"), and an import of many assets waits for those projections. A search still
-- finds the list empty once a batch has committed (226's reason: a search after a burst of creates
-- scanned the whole list; with 256 kB left in it, a search measured 36 ms against 6 ms merged).
ALTER INDEX assets_name_trgm SET (fastupdate = on);
ALTER INDEX assets_key_trgm SET (fastupdate = on);
ALTER INDEX assets_description_trgm SET (fastupdate = on);
ALTER INDEX tags_value_trgm SET (fastupdate = on);

-- Merges the pending lists of the GIN indexes of `tbl`, a table of this schema. Owner's rights:
-- gin_clean_pending_list asks for the index's owner (as VACUUM does), and the projections run as
-- the runtime role.
CREATE FUNCTION merge_search_pending(tbl text)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
  IF tbl NOT IN ('assets', 'tags') THEN
    RAISE EXCEPTION 'merge_search_pending: no trigram indexes on %', tbl;
  END IF;
  PERFORM pg_catalog.gin_clean_pending_list(i.indexrelid)
     FROM pg_catalog.pg_index i
     JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
     JOIN pg_catalog.pg_am a ON a.oid = c.relam
    WHERE i.indrelid = tbl::regclass AND a.amname = 'gin';
END
$$;
