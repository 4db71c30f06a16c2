-- Checkpoints are opaque to the read model: the text form of a log position as the event-store
-- adapter writes it (`formatPosition`), never a type of one adapter (they were xid8, which only
-- the Postgres adapter's positions fit). The guard of a batch compares them for equality only.
ALTER TABLE projection_checkpoints ADD COLUMN position text;
UPDATE projection_checkpoints SET position = commit_position::text || '/' || prepare_position::text;
ALTER TABLE projection_checkpoints ALTER COLUMN position SET NOT NULL;
ALTER TABLE projection_checkpoints DROP COLUMN commit_position, DROP COLUMN prepare_position;

DROP FUNCTION move_projection_checkpoint(text, xid8, bigint, xid8, bigint, text, text);

-- Moves a projection's checkpoint from `from_position` to `to_position` inside the batch's own
-- transaction, and raises (SQLSTATE PC001) when it is no longer at `from_position`: another
-- applier got there first and the batch must roll back. Raising rather than reporting lets the
-- projector send this call and the COMMIT in one round trip: an error skips the COMMIT. The
-- NOTIFY tells every process (delivered at commit). search_path is this schema's, so each
-- read-model schema moves its own checkpoints.
CREATE FUNCTION move_projection_checkpoint(projection text, from_position text, to_position text, channel text, payload text)
RETURNS void LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  UPDATE projection_checkpoints SET position = to_position, updated_at = now()
   WHERE name = projection AND position = from_position;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'checkpoint of % is no longer at %', projection, from_position USING ERRCODE = 'PC001';
  END IF;
  PERFORM pg_notify(channel, payload);
END
$$;
