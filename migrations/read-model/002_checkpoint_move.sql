-- Moves a projection's checkpoint from `from` to `to` inside the batch's own transaction, and
-- raises (SQLSTATE PC001) when it is no longer at `from`: another applier got there first and the
-- batch must roll back. Raising rather than reporting lets the projector send this call and the
-- COMMIT in one round trip: an error skips the COMMIT. The NOTIFY tells every process (delivered
-- at commit). search_path is this schema's, so each read-model schema moves its own checkpoints.
CREATE FUNCTION move_projection_checkpoint(
  projection text, from_commit xid8, from_prepare bigint, to_commit xid8, to_prepare bigint, channel text, payload text
) RETURNS void LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  UPDATE projection_checkpoints
     SET commit_position = to_commit, prepare_position = to_prepare, updated_at = now()
   WHERE name = projection AND commit_position = from_commit AND prepare_position = from_prepare;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'checkpoint of % is no longer at %/%', projection, from_commit, from_prepare USING ERRCODE = 'PC001';
  END IF;
  PERFORM pg_notify(channel, payload);
END
$$;
