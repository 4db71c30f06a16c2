-- The ids of one page of a node's descendants in the default list scope (live, effective now),
-- by external_key then id. Only this selection is planned for its values (EXECUTE plans afresh on
-- every call): a subtree may be most of an org (walk the key index until the page is full) or a
-- handful of rows (collect them through the GIN index, then sort), and a cached generic plan
-- would pick one for both. The statement around it, which builds the views, stays prepared.
-- STABLE: it reads with the snapshot of the statement that calls it.
CREATE FUNCTION location_descendant_ids(org integer, node integer, page_limit integer, page_offset integer)
RETURNS integer[] LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
DECLARE
  ids integer[];
BEGIN
  EXECUTE 'SELECT COALESCE(array_agg(s.id), ''{}'') FROM (
             SELECT l.id FROM locations l
              WHERE l.org_id = $1 AND l.ancestors @> ARRAY[$2] AND l.deleted_at IS NULL
                AND (l.valid_from IS NULL OR l.valid_from <= statement_timestamp())
                AND (l.valid_to IS NULL OR l.valid_to > statement_timestamp())
              ORDER BY l.external_key, l.id LIMIT $3 OFFSET $4) s'
    INTO ids USING org, node, page_limit, page_offset;
  RETURN ids;
END
$$;
